package ipam_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nephio-project/ipam/service/ipam"
)

// viewFixture is vpc-1: aggregate 10.0.0.0/8 with network net1
// 10.0.1.0/24 (gateway .1, a static address .10 of static-a) and a pool
// 10.8.0.0/16, holding the addresses of n allocations of owner pkg-a and
// a /24 sub-prefix of pkg-b from the pool.
func viewFixture(t testing.TB, n int) *ipam.Allocator {
	t.Helper()
	a := ipam.New()
	ctx := context.Background()
	key := func(name string) ipam.Key { return ipam.Key{Namespace: "default", Name: name} }
	infra := ipam.SyncRequest{Owner: "infra", Source: "https://git.example.com/org/infra/tree/main/vpc-1",
		NetworkInstances: []ipam.NetworkInstance{{Key: key("vpc-1")}},
		Prefixes: []ipam.Prefix{
			{Key: key("agg"), NetworkInstance: "vpc-1", Kind: ipam.KindAggregate, Prefix: netip.MustParsePrefix("10.0.0.0/8")},
			{Key: key("net1"), NetworkInstance: "vpc-1", Prefix: netip.MustParsePrefix("10.0.1.1/24"), Network: "net1",
				Labels: ipam.Labels{ipam.LabelGateway: "true"}},
			{Key: key("static-a"), NetworkInstance: "vpc-1", Prefix: netip.MustParsePrefix("10.0.1.10/24"), Network: "net1"},
			{Key: key("pool"), NetworkInstance: "vpc-1", Kind: ipam.KindPool, Prefix: netip.MustParsePrefix("10.8.0.0/16"),
				Labels: ipam.Labels{"role": "pods"}},
			{Key: key("lo"), NetworkInstance: "vpc-1", Kind: ipam.KindLoopback, Prefix: netip.MustParsePrefix("10.255.0.0/30")},
		}}
	if _, err := a.Sync(ctx, infra); err != nil {
		t.Fatal(err)
	}
	pkgA := ipam.SyncRequest{Owner: "pkg-a"}
	for i := range n {
		pkgA.Allocations = append(pkgA.Allocations, ipam.Allocation{Key: key(fmt.Sprintf("a%06d", i)),
			Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "net1"}})
	}
	if _, err := a.Sync(ctx, pkgA); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(ctx, ipam.Allocation{Key: ipam.Key{Owner: "pkg-b", Namespace: "default", Name: "block"},
		NetworkInstance: "vpc-1", Kind: ipam.KindNetwork, PrefixLength: 24, Selector: ipam.Labels{"role": "pods"}}); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestOwnerSourceSurvivesSnapshot(t *testing.T) {
	a := viewFixture(t, 1)
	want := ipam.OwnerInfo{Source: "https://git.example.com/org/infra/tree/main/vpc-1"}
	if got := a.OwnerOf("infra"); got != want {
		t.Fatalf("OwnerOf(infra) = %+v, want %+v", got, want)
	}
	// A Sync without a source keeps the one the owner has.
	if _, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "infra",
		NetworkInstances: []ipam.NetworkInstance{{Key: ipam.Key{Namespace: "default", Name: "vpc-1"}}}}); err == nil {
		if got := a.OwnerOf("infra"); got != want {
			t.Fatalf("after a Sync without source: %+v, want %+v", got, want)
		}
	}
	b := ipam.New()
	if err := b.Apply(a.Snapshot(nil)); err != nil {
		t.Fatal(err)
	}
	if got := b.OwnerOf("infra"); got != want {
		t.Fatalf("restored OwnerOf(infra) = %+v, want %+v", got, want)
	}
	if got := b.OwnerOf("nobody"); got != (ipam.OwnerInfo{}) {
		t.Fatalf("OwnerOf(nobody) = %+v", got)
	}
	long := strings.Repeat("x", ipam.MaxSourceLength+1)
	if _, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "infra", Source: long}); err == nil || !strings.Contains(err.Error(), "source") {
		t.Fatalf("an oversized source: %v, want an error naming source", err)
	}
}

func TestFreeBlocks(t *testing.T) {
	a := viewFixture(t, 3) // .2 .3 .4 held, .10 static, .1 gateway, .0 and .255 reserved
	for _, tc := range []struct {
		prefix string
		limit  int
		want   []string
		more   bool
	}{
		{"10.0.0.0/8", 3, []string{"10.0.0.0-10.0.0.255", "10.0.2.0-10.0.3.255", "10.0.4.0-10.0.7.255"}, true},
		{"10.0.1.0/24", 10, []string{"10.0.1.5-10.0.1.9", "10.0.1.11-10.0.1.254"}, false},
		{"10.0.1.0/24", 1, []string{"10.0.1.5-10.0.1.9"}, true},
		{"10.8.0.0/16", 2, []string{"10.8.1.0-10.8.1.255", "10.8.2.0-10.8.3.255"}, true},
		{"10.255.0.0/30", 2, []string{"10.255.0.0-10.255.0.3"}, false}, // nothing held
	} {
		got, more, err := a.FreeBlocks("vpc-1", netip.MustParsePrefix(tc.prefix), tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, r := range got {
			s = append(s, r.Start.String()+"-"+r.End.String())
		}
		if !slices.Equal(s, tc.want) || more != tc.more {
			t.Errorf("FreeBlocks(%s, %d) = %v more=%v, want %v more=%v", tc.prefix, tc.limit, s, more, tc.want, tc.more)
		}
	}
	if _, _, err := a.FreeBlocks("vpc-1", netip.MustParsePrefix("10.0.9.0/24"), 1); err == nil {
		t.Error("FreeBlocks of a prefix the tree lacks: no error")
	}
}

func TestPrefixAllocationsPages(t *testing.T) {
	a := viewFixture(t, 250)
	net1 := netip.MustParsePrefix("10.0.1.0/24")
	var got []string
	var after *ipam.Cursor
	for pages := 0; ; pages++ {
		recs, more, err := a.PrefixAllocations("vpc-1", net1, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, r.Result.Prefix.Addr().String())
		}
		if !more {
			if pages != 2 || len(recs) != 250-200 {
				t.Fatalf("last page %d has %d allocations", pages, len(recs))
			}
			break
		}
		last := recs[len(recs)-1]
		after = &ipam.Cursor{Addr: last.Result.Prefix.Addr(), Key: last.Allocation.Key}
	}
	if len(got) != 250 || !slices.IsSortedFunc(got, func(x, y string) int {
		return netip.MustParseAddr(x).Compare(netip.MustParseAddr(y))
	}) {
		t.Fatalf("%d allocations, sorted=%v", len(got), got)
	}
	if got[0] != "10.0.1.2" || slices.Contains(got, "10.0.1.10") {
		t.Fatalf("first %s; the static address is not an allocation: %v", got[0], slices.Contains(got, "10.0.1.10"))
	}
	// The aggregate's page holds the network's addresses and the pool's block.
	recs, _, err := a.PrefixAllocations("vpc-1", netip.MustParsePrefix("10.8.0.0/16"), nil, 10)
	if err != nil || len(recs) != 1 || recs[0].Result.Prefix.String() != "10.8.0.0/24" || recs[0].Allocation.Key.Owner != "pkg-b" {
		t.Fatalf("the pool's page: %v %+v", err, recs)
	}
}

// TestPrefixAllocationsSameStart: a pool sub-prefix and a network carved
// from its start begin at one address; pages of one allocation each still
// hand out both, in key order.
func TestPrefixAllocationsSameStart(t *testing.T) {
	a := viewFixture(t, 0)
	ctx := context.Background()
	for _, r := range []ipam.Allocation{
		{Key: ipam.Key{Owner: "pkg-c", Namespace: "default", Name: "pool-20"}, NetworkInstance: "vpc-1", Kind: ipam.KindPool,
			PrefixLength: 20, Selector: ipam.Labels{"role": "pods"}, Labels: ipam.Labels{"role": "nodes"}},
		{Key: ipam.Key{Owner: "pkg-c", Namespace: "default", Name: "net-24"}, NetworkInstance: "vpc-1", Kind: ipam.KindNetwork,
			PrefixLength: 24, Selector: ipam.Labels{"role": "nodes"}},
	} {
		if _, err := a.Allocate(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	var after *ipam.Cursor
	for range 10 {
		recs, more, err := a.PrefixAllocations("vpc-1", netip.MustParsePrefix("10.8.0.0/16"), after, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, r.Allocation.Key.Name+" "+r.Result.Prefix.String())
			after = &ipam.Cursor{Addr: r.Result.Prefix.Addr(), Key: r.Allocation.Key}
		}
		if !more {
			break
		}
	}
	// pkg-b's block took 10.8.0.0/24, so the /20 starts at 10.8.16.0.
	want := []string{"block 10.8.0.0/24", "net-24 10.8.16.0/24", "pool-20 10.8.16.0/20"}
	if !slices.Equal(got, want) {
		t.Fatalf("pages of one: %v, want %v", got, want)
	}
}

func TestLookup(t *testing.T) {
	a := viewFixture(t, 3)
	for _, tc := range []struct {
		addr, node, alloc, holder string
	}{
		{"10.0.1.3", "10.0.1.0/24", "pkg-a/default/a000001", ""},
		{"10.0.1.10", "10.0.1.0/24", "", "static address of default/static-a (owner infra)"},
		{"10.0.1.0", "10.0.1.0/24", "", "reserved (network or broadcast address)"},
		{"10.0.1.77", "10.0.1.0/24", "", ""},
		{"10.8.0.9", "10.8.0.0/24", "pkg-b/default/block", ""},
		{"10.200.0.1", "10.0.0.0/8", "", ""},
	} {
		hs := a.Lookup(netip.MustParseAddr(tc.addr))
		if len(hs) != 1 {
			t.Fatalf("Lookup(%s): %d holdings", tc.addr, len(hs))
		}
		h := hs[0]
		alloc := ""
		if h.Allocation != nil {
			alloc = h.Allocation.Allocation.Key.Owner + "/" + h.Allocation.Allocation.Key.String()
		}
		if h.Node.Prefix.String() != tc.node || alloc != tc.alloc || h.Holder != tc.holder {
			t.Errorf("Lookup(%s) = node %s alloc %q holder %q, want %s %q %q", tc.addr, h.Node.Prefix, alloc, h.Holder, tc.node, tc.alloc, tc.holder)
		}
	}
	if hs := a.Lookup(netip.MustParseAddr("192.168.0.1")); len(hs) != 0 {
		t.Errorf("an address outside every tree: %+v", hs)
	}
}

func TestSearchNames(t *testing.T) {
	a := viewFixture(t, 30)
	allocs, prefixes, more := a.SearchNames("a00002", 100)
	if len(allocs) != 10 || len(prefixes) != 0 || more {
		t.Fatalf("a00002: %d allocations, %d prefixes, more=%v", len(allocs), len(prefixes), more)
	}
	allocs, prefixes, more = a.SearchNames("static", 100)
	if len(allocs) != 0 || len(prefixes) != 1 || prefixes[0].Prefix.Key.Name != "static-a" || more {
		t.Fatalf("static: %d allocations, %+v, more=%v", len(allocs), prefixes, more)
	}
	allocs, _, more = a.SearchNames("a0", 5)
	if len(allocs) != 5 || !more {
		t.Fatalf("a0 limited to 5: %d, more=%v", len(allocs), more)
	}
	// An owner's name finds all its objects.
	if allocs, _, _ = a.SearchNames("pkg-b", 10); len(allocs) != 1 {
		t.Fatalf("pkg-b: %d allocations", len(allocs))
	}
}

// BenchmarkPrefixAllocationsPage: one page of the web view's prefix page
// among 100,000 allocations (four /16 networks).
func BenchmarkPrefixAllocationsPage(b *testing.B) {
	a := ipam.New()
	ctx := context.Background()
	key := func(name string) ipam.Key { return ipam.Key{Namespace: "default", Name: name} }
	req := ipam.SyncRequest{Owner: "infra", NetworkInstances: []ipam.NetworkInstance{{Key: key("vpc-1")}},
		Prefixes: []ipam.Prefix{{Key: key("agg"), NetworkInstance: "vpc-1", Kind: ipam.KindAggregate, Prefix: netip.MustParsePrefix("10.0.0.0/8")}}}
	for i := range 4 {
		req.Prefixes = append(req.Prefixes, ipam.Prefix{Key: key(fmt.Sprint("net", i)), NetworkInstance: "vpc-1",
			Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 1}), 16), Network: fmt.Sprint("net", i), Labels: ipam.Labels{ipam.LabelGateway: "true"}})
	}
	if _, err := a.Sync(ctx, req); err != nil {
		b.Fatal(err)
	}
	for i := range 4 {
		pkg := ipam.SyncRequest{Owner: fmt.Sprint("pkg-", i)}
		for j := range 25_000 {
			pkg.Allocations = append(pkg.Allocations, ipam.Allocation{Key: key(fmt.Sprint("a", j)),
				Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: fmt.Sprint("net", i)}})
		}
		if _, err := a.Sync(ctx, pkg); err != nil {
			b.Fatal(err)
		}
	}
	p := netip.MustParsePrefix("10.2.0.0/16")
	after := &ipam.Cursor{Addr: netip.MustParseAddr("10.2.40.0")}
	b.ReportAllocs()
	for b.Loop() {
		recs, more, err := a.PrefixAllocations("vpc-1", p, after, 100)
		if err != nil || len(recs) != 100 || !more {
			b.Fatal(err, len(recs), more)
		}
	}
}

func TestSummarize(t *testing.T) {
	a := viewFixture(t, 3)
	sum, err := a.Summarize("vpc-1")
	if err != nil {
		t.Fatal(err)
	}
	// agg, net1, pool, the block of pkg-b, lo; under the aggregate: net1,
	// the pool and the loopback.
	want := ipam.Summary{Prefixes: 5, Used: [2]uint64{256 + 65536 + 4, 0}, Total: [2]uint64{1 << 24, 0}}
	if sum != want {
		t.Fatalf("Summarize = %+v, want %+v", sum, want)
	}
	if _, err := a.Summarize("nope"); err == nil {
		t.Fatal("Summarize of an unknown network instance: no error")
	}
}

// TestViewIPv6: the browsing queries on an IPv6 tree, where sizes
// saturate at 2^64-1.
func TestViewIPv6(t *testing.T) {
	a := ipam.New()
	ctx := context.Background()
	key := func(name string) ipam.Key { return ipam.Key{Namespace: "default", Name: name} }
	if _, err := a.Sync(ctx, ipam.SyncRequest{Owner: "infra",
		NetworkInstances: []ipam.NetworkInstance{{Key: key("v6")}},
		Prefixes: []ipam.Prefix{
			{Key: key("agg"), NetworkInstance: "v6", Kind: ipam.KindAggregate, Prefix: netip.MustParsePrefix("2001:db8::/32")},
			{Key: key("net"), NetworkInstance: "v6", Prefix: netip.MustParsePrefix("2001:db8:0:1::1/64"), Network: "net",
				Labels: ipam.Labels{ipam.LabelGateway: "true"}},
		},
		Allocations: []ipam.Allocation{{Key: key("host"), Selector: ipam.Labels{ipam.LabelNetworkInstance: "v6", ipam.LabelNetworkName: "net"}}},
	}); err != nil {
		t.Fatal(err)
	}
	hs := a.Lookup(netip.MustParseAddr("2001:db8:0:1::2"))
	if len(hs) != 1 || hs[0].Allocation == nil || hs[0].Allocation.Allocation.Key.Name != "host" || hs[0].Node.Prefix.String() != "2001:db8:0:1::/64" {
		t.Fatalf("Lookup 2001:db8:0:1::2: %+v", hs)
	}
	free, more, err := a.FreeBlocks("v6", netip.MustParsePrefix("2001:db8:0:1::/64"), 1)
	if err != nil || more || len(free) != 1 || free[0].Start.String() != "2001:db8:0:1::3" || free[0].End.String() != "2001:db8:0:1:ffff:ffff:ffff:fffe" {
		t.Fatalf("FreeBlocks of the /64: %v %v %v", free, more, err)
	}
	recs, more, err := a.PrefixAllocations("v6", netip.MustParsePrefix("2001:db8::/32"), nil, 10)
	if err != nil || more || len(recs) != 1 || recs[0].Result.Prefix.String() != "2001:db8:0:1::2/64" {
		t.Fatalf("PrefixAllocations of the aggregate: %+v %v %v", recs, more, err)
	}
	sum, err := a.Summarize("v6")
	if err != nil || sum.Prefixes != 2 || sum.Total[1] != 1<<64-1 || sum.Total[0] != 0 {
		t.Fatalf("Summarize: %+v %v", sum, err)
	}
}
