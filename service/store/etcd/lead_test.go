package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
	"github.com/nephio-project/ipam/service/store/etcd"
)

// leadKey returns the election key of the replica holding the write lead
// under prefix (nil when none does).
func leadKey(t testing.TB, cli *clientv3.Client, prefix string) *clientv3.GetResponse {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix+"lead/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestDeposeDeadLeader: the write lead advertises an address that a
// proxy forwards to it, and a follower forwards its changes there; then
// the proxy fails in one way while the follower keeps writing. When new
// connections are refused (the leader's process is gone: the kernel
// answers at once), the follower revokes the leader's lease and leads,
// although the leader (alive behind the proxy) keeps renewing it, so
// that the lease would never expire. When the connections break but new
// ones are accepted, or nothing answers (a slow leader), the leader
// keeps the lead: same key, same lease.
func TestDeposeDeadLeader(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	const watch = 2 * time.Second // how long a live leader must keep the lead
	for i, tc := range []struct {
		name     string
		fault    func(*proxy)
		deposed  bool
		fellBack bool // the follower committed changes itself
	}{
		{"gone: connections refused", (*proxy).stop, true, true},
		{"connections cut, new ones accepted", (*proxy).partition, false, true},
		{"stalled: nothing answers", (*proxy).stall, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := fmt.Sprintf("/depose%d/", i)
			p := startProxy(t, "127.0.0.1:1") // retargeted once the leader listens
			cfg := server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: prefix}
			lcfg := cfg
			lcfg.AdvertiseAddr = p.addr()
			leader := servertest.Start(t, lcfg, false)
			p.retarget(leader.Addr)
			waitLeads(t, cli, prefix, p.addr())
			follower := servertest.Start(t, cfg, true)
			seedVRFs(t, leader.Client(t), 1)
			fc := follower.Client(t)
			allocate := func(name string, timeout time.Duration) error {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				_, err := fc.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{
					Key:      &ipamv1.Key{Owner: "load-vrf-0", Namespace: "default", Name: name},
					Selector: map[string]string{"nephio.org/network-instance": "vrf-0", "nephio.org/network-name": "net"}}})
				return err
			}
			for n := 0; forwards(t, follower.MetricsAddr, "forwarded") == 0; n++ {
				if err := allocate(fmt.Sprint("before-", n), 10*time.Second); err != nil {
					t.Fatal(err)
				}
				if n == 100 {
					t.Fatal("the follower forwards nothing to the write lead")
				}
			}
			before := leadKey(t, cli, prefix).Kvs[0]

			tc.fault(p)
			defer p.heal() // lets the replicas stop at once
			until := time.Now().Add(watch)
			if tc.deposed {
				until = time.Now().Add(20 * time.Second)
			}
			for n := 0; time.Now().Before(until); n++ {
				_ = allocate(fmt.Sprint("after-", n), 500*time.Millisecond) // the leader may not answer
				if tc.deposed && leaderAddr(t, cli, prefix) == follower.Addr {
					break
				}
			}
			if fellBack := forwards(t, follower.MetricsAddr, "committed_here") > 0; fellBack != tc.fellBack {
				t.Errorf("the follower committed changes itself: %v, want %v", fellBack, tc.fellBack)
			}
			now := leadKey(t, cli, prefix)
			switch {
			case tc.deposed && leaderAddr(t, cli, prefix) != follower.Addr:
				t.Fatalf("the write lead is at %q, not at the follower %s: the leader whose address refuses connections was not deposed", leaderAddr(t, cli, prefix), follower.Addr)
			case !tc.deposed && (len(now.Kvs) == 0 || now.Kvs[0].CreateRevision != before.CreateRevision || now.Kvs[0].Lease != before.Lease):
				t.Fatalf("the write lead moved (key %s lease %x before, %v now): a live leader was deposed", before.Key, before.Lease, now.Kvs)
			}
		})
	}
}

// TestDeposeOnlyTheLeader: Depose revokes the lease of the replica it
// names only if that replica holds the write lead and is not the caller;
// the next candidate then leads, and the deposed one campaigns again.
func TestDeposeOnlyTheLeader(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	opts := etcd.Options{Endpoints: c.endpoints(), Prefix: "/depose-store/"}
	a, b := openReplica(t, opts, nil).s, openReplica(t, opts, nil).s
	a.Lead("a:1")
	waitLeads(t, cli, "/depose-store/", "a:1")
	b.Lead("b:1")
	for _, tc := range []struct {
		store *etcd.Store
		addr  string
		want  bool
	}{
		{b, "x:1", false}, // not the leader
		{a, "a:1", false}, // itself
		{b, "b:1", false}, // itself, not the leader
		{b, "a:1", true},
	} {
		deposed, err := tc.store.Depose(tc.addr)
		if err != nil || deposed != tc.want {
			t.Fatalf("Depose(%s) = %v, %v; want %v", tc.addr, deposed, err, tc.want)
		}
	}
	waitLeads(t, cli, "/depose-store/", "b:1")
	// The deposed replica campaigns again: it leads once b resigns.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitLeads(t, cli, "/depose-store/", "a:1")
}
