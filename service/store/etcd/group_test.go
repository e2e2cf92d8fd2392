package etcd_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// seedVRFs creates network instances vrf-0 … vrf-(n-1), each with an
// aggregate 10.0.0.0/8 and a network net 10.0.0.0/14 (room for long
// benchmark runs).
func seedVRFs(t testing.TB, c ipamv1.IPAMClient, n int) {
	t.Helper()
	ctx := context.Background()
	for v := range n {
		vrf := fmt.Sprint("vrf-", v)
		k := func(name string) *ipamv1.Key { return &ipamv1.Key{Namespace: "default", Name: name} }
		if _, err := c.Sync(ctx, &ipamv1.SyncRequest{Owner: "infra-" + vrf,
			NetworkInstances: []*ipamv1.NetworkInstance{{Key: k(vrf)}},
			Prefixes: []*ipamv1.Prefix{{Key: k(vrf + "-agg"), NetworkInstance: vrf, Kind: "aggregate", Prefix: "10.0.0.0/8"},
				{Key: k(vrf + "-net"), NetworkInstance: vrf, Kind: "network", Prefix: "10.0.0.0/14", Network: "net"}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// allocateIn allocates name in network instance vrf through conns,
// starting at replica start and moving on while a replica answers
// Unavailable; it returns the address.
func allocateIn(ctx context.Context, conns []ipamv1.IPAMClient, vrf, name string, start int) (string, error) {
	var last error
	for attempt := range 200 {
		c := conns[(start+attempt)%len(conns)]
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := c.Allocate(cctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{
			Key:      &ipamv1.Key{Owner: "load-" + vrf, Namespace: "default", Name: name},
			Selector: map[string]string{"nephio.org/network-instance": vrf, "nephio.org/network-name": "net"}}})
		cancel()
		if err == nil {
			return resp.GetResult().GetPrefix(), nil
		}
		if status.Code(err) != codes.Unavailable {
			return "", fmt.Errorf("%s/%s: %w", vrf, name, err)
		}
		last = err
		time.Sleep(time.Duration(attempt%10) * 5 * time.Millisecond)
	}
	return "", fmt.Errorf("%s/%s: no replica acknowledged it: %w", vrf, name, last)
}

// loadVRFs has clients goroutines make perClient allocations each, client
// g in network instance vrf-(g mod vrfs) through replica g mod replicas,
// named after round; it returns how long they took and every acknowledged
// allocation (VRF/name → address).
func loadVRFs(t testing.TB, conns []ipamv1.IPAMClient, vrfs, clients, perClient int, round string) (time.Duration, map[string]string) {
	var mu sync.Mutex
	acked := map[string]string{}
	var wg sync.WaitGroup
	start := time.Now()
	for g := range clients {
		wg.Go(func() {
			vrf := fmt.Sprint("vrf-", g%vrfs)
			for i := range perClient {
				name := fmt.Sprintf("%s-%d-%d", round, g, i)
				addr, err := allocateIn(context.Background(), conns, vrf, name, g)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[vrf+"/"+name] = addr
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return time.Since(start), acked
}

// TestGroupCommitEightVRFs: 64 clients allocate in 8 network instances
// through 3 replicas at once, so each replica's commits share etcd
// transactions. No address is handed out twice in a network instance,
// and after a full restart a fresh replica holds every acknowledged
// allocation with its address.
func TestGroupCommitEightVRFs(t *testing.T) {
	c := startCluster(t, 3)
	const prefix = "/group/"
	var servers []*servertest.Server
	var conns []ipamv1.IPAMClient
	for range 3 {
		s := servertest.Start(t, server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: prefix}, false)
		servers = append(servers, s)
		conns = append(conns, s.Client(t))
	}
	seedVRFs(t, conns[0], 8)
	_, acked := loadVRFs(t, conns, 8, 64, 20, "g")
	if t.Failed() {
		t.FailNow()
	}
	if len(acked) != 64*20 {
		t.Fatalf("%d acknowledged allocations, want %d", len(acked), 64*20)
	}
	seen := map[string]string{}
	for k, addr := range acked {
		vrf := k[:len("vrf-0")]
		if other, dup := seen[vrf+" "+addr]; dup {
			t.Fatalf("%s handed out twice in %s: %s and %s", addr, vrf, other, k)
		}
		seen[vrf+" "+addr] = k
	}

	// Commits were grouped: some log entry joins the entries of several
	// changes (its first byte is 2, see entry.go).
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(context.Background(), prefix+"log/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	joined := 0
	for _, kv := range resp.Kvs {
		if len(kv.Value) > 0 && kv.Value[0] == 2 {
			joined++
		}
	}
	t.Logf("%d log entries for %d allocations, %d of them joined", len(resp.Kvs), len(acked), joined)
	if joined == 0 || len(resp.Kvs) >= len(acked) {
		t.Errorf("no log entry joins several changes: commits were not grouped")
	}

	// A full restart: every replica stops; a fresh one restores from etcd.
	for _, s := range servers {
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	fresh := servertest.Start(t, server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: prefix}, false).Client(t)
	held := map[string]string{}
	for v := range 8 {
		vrf := fmt.Sprint("vrf-", v)
		for name, addr := range heldIn(t, fresh, vrf) {
			held[vrf+"/"+name] = addr
		}
	}
	for k, addr := range acked {
		if held[k] != addr {
			t.Errorf("after the restart %s holds %q, acknowledged %q", k, held[k], addr)
		}
	}
}

// heldIn returns the address allocations of network instance vrf that
// conn holds, by name.
func heldIn(t testing.TB, conn ipamv1.IPAMClient, vrf string) map[string]string {
	t.Helper()
	held := map[string]string{}
	token := ""
	for {
		resp, err := conn.List(context.Background(), &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION,
			NetworkInstance: vrf, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range resp.GetObjects() {
			a := o.GetAllocation()
			held[a.GetAllocation().GetKey().GetName()] = a.GetResult().GetPrefix()
		}
		if token = resp.GetNextPageToken(); token == "" {
			return held
		}
	}
}

// localCommits is a client whose calls carry the header of a forwarded
// call: the replica makes them itself instead of forwarding them to the
// write lead (as a replica does that cannot reach the leader).
type localCommits struct{ ipamv1.IPAMClient }

func (c localCommits) Allocate(ctx context.Context, in *ipamv1.AllocateRequest, opts ...grpc.CallOption) (*ipamv1.AllocateResponse, error) {
	return c.IPAMClient.Allocate(metadata.AppendToOutgoingContext(ctx, "ipam-forwarded-by", "test"), in, opts...)
}

// TestLeaderRaceWithLocalCommits: one replica holds the write lead while
// another commits its own changes in the same network instance (no
// forwarding), so the leader's transactions keep losing the race for the
// head: a loss of pipelined changes makes it reload its state from etcd
// (after another replica's commit it pipelines only once it has been
// quiet for a while) and its callers run again; the other replica's
// losses answer Unavailable, and its clients retry. 32 clients on each replica make
// 20 allocations each: no address is handed out twice, both replicas
// agree, and a replica started afterwards restores every acknowledged
// allocation.
func TestLeaderRaceWithLocalCommits(t *testing.T) {
	c := startCluster(t, 3)
	cli := etcdClient(t, c.endpoints())
	cfg := server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: "/race/"}
	first := servertest.Start(t, cfg, false)
	deadline := time.Now().Add(20 * time.Second)
	waitLeads(t, cli, "/race/", first.Addr)
	second := servertest.Start(t, cfg, false)
	leader, other := first.Client(t), second.Client(t)
	if leaderAddr(t, cli, "/race/") != first.Addr {
		t.Fatalf("the write lead is at %s, not at the first replica %s", leaderAddr(t, cli, "/race/"), first.Addr)
	}
	seedVRFs(t, leader, 1)
	for { // the other replica follows
		resp, err := other.List(context.Background(), &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetObjects()) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other replica does not see vrf-0")
		}
		time.Sleep(10 * time.Millisecond)
	}

	var mu sync.Mutex
	acked := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		conns := []ipamv1.IPAMClient{leader}
		if g%2 == 1 {
			conns = []ipamv1.IPAMClient{localCommits{other}}
		}
		wg.Go(func() {
			for i := range 20 {
				name := fmt.Sprintf("c%d-%d", g, i)
				addr, err := allocateIn(context.Background(), conns, "vrf-0", name, 0)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acked[name] = addr
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	distinct(t, acked)
	later := servertest.Start(t, cfg, false).Client(t)
	for _, conn := range []ipamv1.IPAMClient{leader, other, later} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := heldIn(t, conn, "vrf-0")
			if maps.Equal(got, acked) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a replica holds %d allocations of load-vrf-0, not the %d acknowledged ones", len(got), len(acked))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
