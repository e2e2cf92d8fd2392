package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
	"github.com/nephio-project/ipam/service/store/etcd"
)

// capacity20 is the number of addresses a /20 network hands out (all but
// the network and broadcast addresses).
const capacity20 = 4094

func key(name string) *ipamv1.Key {
	return &ipamv1.Key{Owner: "test", Namespace: "default", Name: name}
}

var net20 = map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net20"}

// seed20 creates VRF vpc-1 with network net20 10.0.0.0/20 (no gateway).
func seed20(t testing.TB, c ipamv1.IPAMClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{Key: key("vpc-1")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("aggregate"), NetworkInstance: "vpc-1",
		Kind: "aggregate", Prefix: "10.0.0.0/8"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("net20"), NetworkInstance: "vpc-1",
		Prefix: prefix, Network: "net20"}}); err != nil {
		t.Fatal(err)
	}
}

// allocator is a ipam.Allocator following etcd through a Store, as a
// replica does.
func newReplica(t testing.TB, eps []string, prefix string) (*ipam.Allocator, *etcd.Store) {
	t.Helper()
	s, err := etcd.Open(etcd.Options{Endpoints: eps, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a := ipam.New(ipam.WithCommitter(s), ipam.WithJournal(s))
	if err := s.Restore(a); err != nil {
		t.Fatal(err)
	}
	return a, s
}

// TestStoreReplicasConverge: two allocators on one etcd decide in turn;
// each sees the other's changes through the watch, a fresh one restores
// all of it, and a Sync batch is one atomic entry.
func TestStoreReplicasConverge(t *testing.T) {
	c := startCluster(t, 1)
	a, sa := newReplica(t, c.endpoints(), "/t1/")
	b, sb := newReplica(t, c.endpoints(), "/t1/")
	if err := a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: ipam.Key{Owner: "o", Name: "vpc-1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePrefix(context.Background(), ipam.Prefix{Key: ipam.Key{Owner: "o", Name: "agg"}, NetworkInstance: "vpc-1", Kind: ipam.KindAggregate,
		Prefix: netip.MustParsePrefix("10.0.0.0/8")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePrefix(context.Background(), ipam.Prefix{Key: ipam.Key{Owner: "o", Name: "net"}, NetworkInstance: "vpc-1",
		Prefix: netip.MustParsePrefix("10.0.0.0/28"), Network: "net"}); err != nil {
		t.Fatal(err)
	}
	sel := ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "net"}
	// b has not seen the prefix necessarily; its commit is stale until it
	// catches up, so allocate through b only after it has.
	waitApplied(t, sb, sa.Applied())
	seen := map[netip.Prefix]string{}
	for i := range 14 {
		r := a
		if i%2 == 1 {
			r = b
		}
		res, err := r.Allocate(context.Background(), ipam.Allocation{Key: ipam.Key{Owner: "o", Name: fmt.Sprint("x", i)}, Selector: sel})
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if prev, dup := seen[res.Prefix]; dup {
			t.Fatalf("%s handed out twice (x%d and %s)", res.Prefix, i, prev)
		}
		seen[res.Prefix] = fmt.Sprint("x", i)
	}
	if _, err := b.Allocate(context.Background(), ipam.Allocation{Key: ipam.Key{Owner: "o", Name: "full"}, Selector: sel}); !errors.Is(err, ipam.ErrExhausted) {
		t.Fatalf("15th allocation: %v, want exhausted", err)
	}
	// A Sync batch is atomic: a failing one commits nothing.
	_, err := b.Sync(context.Background(), ipam.SyncRequest{Owner: "o2", Allocations: []ipam.Allocation{{Key: ipam.Key{Name: "y1"}, Selector: sel}}})
	if !errors.Is(err, ipam.ErrExhausted) {
		t.Fatalf("sync into a full network: %v", err)
	}
	waitApplied(t, sa, sb.Applied())
	waitApplied(t, sb, sa.Applied())
	fresh, _ := newReplica(t, c.endpoints(), "/t1/")
	want := snapshot(a)
	for name, r := range map[string]*ipam.Allocator{"b": b, "fresh": fresh} {
		if got := snapshot(r); got != want {
			t.Fatalf("replica %s differs:\n%s\nwant\n%s", name, got, want)
		}
	}
}

func snapshot(a *ipam.Allocator) string {
	var out string
	for _, r := range a.Snapshot(nil) {
		out += fmt.Sprintf("%s %s %+v\n", r.Op, r.Key, r.Allocation)
	}
	return out
}

func waitApplied(t testing.TB, s *etcd.Store, rev int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Applied() < rev {
		if time.Now().After(deadline) {
			t.Fatalf("replica stuck at revision %d, want %d", s.Applied(), rev)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// client allocates keys through a set of replicas, retrying a key on the
// next replica after any error but exhaustion, as a real client would.
type client struct {
	conns []ipamv1.IPAMClient
	// alive, when set, says whether replica i may be used.
	alive func(i int) bool
}

// allocate allocates name until a replica acknowledges it; it returns
// the address, or ok false when the network is exhausted.
func (c *client) allocate(ctx context.Context, name string, start int) (addr string, ok bool, err error) {
	var last error
	for attempt := range 2000 {
		i := (start + attempt) % len(c.conns)
		if c.alive != nil && !c.alive(i) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := c.conns[i].Allocate(cctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(name), Selector: net20}})
		cancel()
		if err == nil {
			return resp.GetResult().GetPrefix(), true, nil
		}
		if status.Code(err) == codes.ResourceExhausted {
			return "", false, nil
		}
		last = err
		time.Sleep(time.Duration(attempt%10) * 5 * time.Millisecond)
	}
	return "", false, fmt.Errorf("%s: no replica acknowledged it: %w", name, last)
}

// fill has n clients allocate distinct keys through the replicas until
// the network is exhausted (or each did max keys, when max > 0); it
// returns every acknowledged key with its address.
func fill(t testing.TB, c *client, round string, n, max int, during func(acked int64)) map[string]string {
	t.Helper()
	var mu sync.Mutex
	acked := map[string]string{}
	var count atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range n {
		wg.Go(func() {
			for i := 0; max <= 0 || i < max; i++ {
				name := fmt.Sprintf("%s-c%d-%d", round, g, i)
				addr, ok, err := c.allocate(context.Background(), name, g+i)
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				acked[name] = addr
				mu.Unlock()
				if during != nil {
					during(count.Add(1))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return acked
}

// distinct fails the test if two keys got the same address.
func distinct(t testing.TB, acked map[string]string) {
	t.Helper()
	byAddr := map[string]string{}
	for k, a := range acked {
		if prev, dup := byAddr[a]; dup {
			t.Fatalf("address %s handed out twice: %s and %s", a, prev, k)
		}
		byAddr[a] = k
	}
}

// TestThreeReplicasFillOneNetwork: 64 clients allocate through three
// replicas (in-process servers) on a three-member etcd until a /20 is
// exhausted: every address is handed out exactly once.
func TestThreeReplicasFillOneNetwork(t *testing.T) {
	c := startCluster(t, 3)
	var conns []ipamv1.IPAMClient
	for range 3 {
		s := servertest.Start(t, server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: "/fill/"}, false)
		conns = append(conns, s.Client(t))
	}
	seed20(t, conns[0], "10.0.0.0/20")
	acked := fill(t, &client{conns: conns}, "fill", 64, 0, nil)
	distinct(t, acked)
	if len(acked) != capacity20 {
		t.Fatalf("%d allocations acknowledged, want the capacity %d", len(acked), capacity20)
	}
	agree(t, conns, acked)
}

// agree checks, with 64 clients, that every replica returns the
// acknowledged address of every key when asked again (the same request
// again returns the same result; a replica missing a key would allocate
// it anew elsewhere).
func agree(t testing.TB, conns []ipamv1.IPAMClient, acked map[string]string) {
	t.Helper()
	names := make(chan string)
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for name := range names {
				for i, conn := range conns {
					resp, err := conn.Allocate(context.Background(), &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(name), Selector: net20}})
					if err != nil || resp.GetResult().GetPrefix() != acked[name] {
						errs <- fmt.Errorf("replica %d: %s = %v, %v; want %s", i, name, resp.GetResult().GetPrefix(), err, acked[name])
						return
					}
				}
			}
		})
	}
	for name := range acked {
		names <- name
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestWatchSeesOtherReplicas: a Watch stream on one replica receives the
// allocations made through another.
func TestWatchSeesOtherReplicas(t *testing.T) {
	c := startCluster(t, 1)
	var conns []ipamv1.IPAMClient
	for range 2 {
		s := servertest.Start(t, server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: "/watch/"}, false)
		conns = append(conns, s.Client(t))
	}
	seed20(t, conns[0], "10.0.0.0/20")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := conns[1].Watch(ctx, &ipamv1.WatchRequest{NetworkInstance: "vpc-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Header(); err != nil {
		t.Fatal(err)
	}
	addr, ok, err := (&client{conns: conns[:1]}).allocate(ctx, "remote", 0)
	if err != nil || !ok {
		t.Fatalf("allocate: %v, %v", ok, err)
	}
	for {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("watch on the other replica: %v", err)
		}
		if ev.GetKey().GetName() == "remote" {
			if got := ev.GetObject().GetAllocation().GetResult().GetPrefix(); got != addr {
				t.Fatalf("watched %s, allocated %s", got, addr)
			}
			return
		}
	}
}

// TestOwnerIdentityAcrossReplicas: the binding of an owner to a package
// identity is a stored record: another replica refuses a second package
// (even before it has seen the binding, since its commit is stale until it
// catches up), and a replica restored from etcd knows the binding.
func TestOwnerIdentityAcrossReplicas(t *testing.T) {
	c := startCluster(t, 1)
	a, _ := newReplica(t, c.endpoints(), "/id/")
	b, _ := newReplica(t, c.endpoints(), "/id/")
	ctx := context.Background()
	req := ipam.SyncRequest{Owner: "pkg", Identity: "id-A",
		NetworkInstances: []ipam.NetworkInstance{{Key: ipam.Key{Name: "vpc-1"}, Prefixes: []ipam.VRFPrefix{{Prefix: netip.MustParsePrefix("10.0.0.0/8")}}}}}
	if _, err := a.Sync(ctx, req); err != nil {
		t.Fatal(err)
	}
	req.Identity = "id-B"
	if _, err := b.Sync(ctx, req); !errors.Is(err, ipam.ErrInUse) {
		t.Fatalf("second package on the other replica: %v, want refused", err)
	}
	fresh, _ := newReplica(t, c.endpoints(), "/id/")
	if _, err := fresh.Sync(ctx, req); !errors.Is(err, ipam.ErrInUse) {
		t.Fatalf("second package on a restored replica: %v, want refused", err)
	}
	req.Adopt = true
	res, err := fresh.Sync(ctx, req)
	if err != nil || res.Adopted != "id-A" {
		t.Fatalf("adopt: %+v, %v", res, err)
	}
	// A change from the first package reaches etcd stale, catches up and
	// is refused. (A request that changes nothing in a's view commits
	// nothing, so a may still answer it from before the adoption.)
	req.Identity, req.Adopt = "id-A", false
	req.NetworkInstances = append(req.NetworkInstances, ipam.NetworkInstance{Key: ipam.Key{Name: "vpc-2"}})
	if _, err := a.Sync(ctx, req); !errors.Is(err, ipam.ErrInUse) {
		t.Fatalf("a change from the first package after the adoption: %v, want refused", err)
	}
}

// TestOwnerGenerationAcrossReplicas: the owner generation is a stored
// record: a change from a stale copy of the package reaches etcd stale on
// the replica that had not seen the copy's change, catches up and is
// refused; a replica restored from etcd knows the generation.
func TestOwnerGenerationAcrossReplicas(t *testing.T) {
	c := startCluster(t, 1)
	a, _ := newReplica(t, c.endpoints(), "/gen/")
	b, _ := newReplica(t, c.endpoints(), "/gen/")
	ctx := context.Background()
	req := ipam.SyncRequest{Owner: "pkg", Identity: "id-A", CheckGeneration: true, Prune: true,
		NetworkInstances: []ipam.NetworkInstance{{Key: ipam.Key{Name: "vpc-1"}, Prefixes: []ipam.VRFPrefix{{Prefix: netip.MustParsePrefix("10.0.0.0/8")}}}}}
	if res, err := a.Sync(ctx, req); err != nil || res.Generation != 1 {
		t.Fatalf("first render: %+v, %v", res, err)
	}
	// The copy, at generation 1, adds a network instance through b.
	copyReq := req
	copyReq.Generation = 1
	copyReq.NetworkInstances = append(slices.Clone(req.NetworkInstances), ipam.NetworkInstance{Key: ipam.Key{Name: "vpc-2"}})
	if res, err := b.Sync(ctx, copyReq); err != nil || res.Generation != 2 {
		t.Fatalf("the copy's render: %+v, %v", res, err)
	}
	// The original, also at generation 1, adds another through a, which
	// may not have applied the copy's change yet.
	origReq := req
	origReq.Generation = 1
	origReq.NetworkInstances = append(slices.Clone(req.NetworkInstances), ipam.NetworkInstance{Key: ipam.Key{Name: "vpc-3"}})
	var e *ipam.Error
	if _, err := a.Sync(ctx, origReq); !errors.Is(err, ipam.ErrInUse) || !errors.As(err, &e) || e.Field != "generation" {
		t.Fatalf("the stale original's render: %v, want refused on generation", err)
	}
	fresh, _ := newReplica(t, c.endpoints(), "/gen/")
	if got := fresh.OwnerOf("pkg").Generation; got != 2 {
		t.Fatalf("restored replica: generation %d, want 2", got)
	}
	if _, err := fresh.Sync(ctx, origReq); !errors.Is(err, ipam.ErrInUse) {
		t.Fatalf("the stale original on a restored replica: %v, want refused", err)
	}
}
