package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/etcd"
)

// seedBig creates VRF big with the network big, a /12.
func seedBig(t testing.TB, a *ipam.Allocator) {
	t.Helper()
	_, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "infra",
		NetworkInstances: []ipam.NetworkInstance{{Key: ipam.Key{Name: "big"}, Prefixes: []ipam.VRFPrefix{{Prefix: netip.MustParsePrefix("10.0.0.0/8")}}}},
		Prefixes:         []ipam.Prefix{{Key: ipam.Key{Name: "big"}, NetworkInstance: "big", Prefix: netip.MustParsePrefix("10.16.0.0/12"), Network: "big"}}})
	if err != nil {
		t.Fatal(err)
	}
}

// bigSync is a package of n address allocations in network big.
func bigSync(n int, name func(int) string) ipam.SyncRequest {
	req := ipam.SyncRequest{Owner: "pkg", Prune: true}
	sel := ipam.Labels{ipam.LabelNetworkInstance: "big", ipam.LabelNetworkName: "big"}
	for i := range n {
		req.Allocations = append(req.Allocations, ipam.Allocation{Key: ipam.Key{Namespace: "default", Name: name(i)}, Selector: sel})
	}
	return req
}

// TestLargeSyncIsOneEntry: a Sync of 8,000 addresses, whose records take
// about 4 MB of JSON (over etcd's 1.5 MiB request limit), commits as one
// compressed log entry, and another replica applies it through its watch.
func TestLargeSyncIsOneEntry(t *testing.T) {
	c := startCluster(t, 1)
	opts := etcd.Options{Endpoints: c.endpoints(), Prefix: "/large/"}
	a, b := openReplica(t, opts, nil), openReplica(t, opts, nil)
	seedBig(t, a.a)
	const n = 8000
	res, err := a.a.Sync(context.Background(), bigSync(n, func(i int) string { return fmt.Sprintf("alloc-%05d", i) }))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Allocations) != n {
		t.Fatalf("%d results, want %d", len(res.Allocations), n)
	}
	waitApplied(t, b.s, a.s.Applied())
	got := b.a.ListAllocations(ipam.Filter{Owner: "pkg"})
	if len(got) != n {
		t.Fatalf("the other replica holds %d allocations, want %d", len(got), n)
	}
	same(t, a.a, map[string]*ipam.Allocator{"b": b.a})

	cli := etcdClient(t, c.endpoints())
	resp, err := cli.Get(context.Background(), "/large/log/", clientv3.WithLastKey()...)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the last log entry: %v (%d keys)", err, len(resp.Kvs))
	}
	size := len(resp.Kvs[0].Value)
	t.Logf("a Sync of %d addresses is one log entry of %d bytes", n, size)
	if size > 1<<20 {
		t.Fatalf("the entry has %d bytes", size)
	}
}

// TestSyncOverRequestLimit: a change over etcd's request limit is refused
// at once with ipam.ErrInvalid (InvalidArgument) saying what to do (not
// retried as if stale),
// and changes nothing.
func TestSyncOverRequestLimit(t *testing.T) {
	c := startCluster(t, 1, "--max-request-bytes", "16384")
	a := openReplica(t, etcd.Options{Endpoints: c.endpoints(), Prefix: "/limit/"}, nil)
	seedBig(t, a.a)
	before := a.s.Applied()
	_, err := a.a.Sync(context.Background(), bigSync(3000, func(i int) string { return fmt.Sprintf("alloc-%05d-%x", i, i*2654435761) }))
	if !errors.Is(err, ipam.ErrInvalid) || errors.Is(err, ipam.ErrStale) || !strings.Contains(err.Error(), "--max-request-bytes") {
		t.Fatalf("Sync over the limit: %v, want ipam.ErrInvalid naming --max-request-bytes", err)
	}
	if got := a.a.ListAllocations(ipam.Filter{Owner: "pkg"}); len(got) != 0 || a.s.Applied() != before {
		t.Fatalf("the refused Sync left %d allocations (applied %d, was %d)", len(got), a.s.Applied(), before)
	}
	if _, err := a.a.Sync(context.Background(), bigSync(10, func(i int) string { return fmt.Sprint("small-", i) })); err != nil {
		t.Fatalf("a small Sync after the refused one: %v", err)
	}
}
