package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// poolFixture is a VRF with network 10.0.1.0/24 (net1) and a pool of two
// ranges labelled pool=p: 10.0.1.10-19 and 10.0.1.20-29, the second
// pre-allocating 10.0.1.25 to the name m5.
func poolFixture(t *testing.T) *Allocator {
	t.Helper()
	a := New()
	ctx := context.Background()
	infra := func(n string) Key { return Key{Owner: "infra", Name: n} }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.CreateNetworkInstance(ctx, NetworkInstance{Key: infra("vpc-1"), Prefixes: []VRFPrefix{{Prefix: mustPrefix("10.0.0.0/8")}}}))
	_, err := a.CreatePrefix(ctx, Prefix{Key: infra("net1"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.0/24"), Network: "net1"})
	must(err)
	_, err = a.CreatePrefix(ctx, Prefix{Key: infra("net2"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.50.1.0/24"), Network: "net2"})
	must(err)
	must(a.CreateRange(ctx, IPRange{Key: infra("r1"), NetworkInstance: "vpc-1", Start: mustAddr("10.0.1.10"), End: mustAddr("10.0.1.19"),
		Labels: Labels{"pool": "p"}}))
	must(a.CreateRange(ctx, IPRange{Key: infra("r2"), NetworkInstance: "vpc-1", Start: mustAddr("10.0.1.20"), End: mustAddr("10.0.1.29"),
		Labels: Labels{"pool": "p"}, PreAllocations: map[string]netip.Addr{"m5": mustAddr("10.0.1.25")}}))
	return a
}

var poolSel = Labels{LabelNetworkInstance: "vpc-1", "pool": "p"}

func appKey(ns, name string) Key { return Key{Owner: "app", Namespace: ns, Name: name} }

// wantErr checks that err wraps sentinel, is about field and says every
// one of msgs.
func wantErr(t *testing.T, what string, err, sentinel error, field string, msgs ...string) {
	t.Helper()
	var e *Error
	if !errors.Is(err, sentinel) || !errors.As(err, &e) || e.Field != field {
		t.Fatalf("%s: err = %v, want %v on %s", what, err, sentinel, field)
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), m) {
			t.Fatalf("%s: %q does not say %q", what, err, m)
		}
	}
}

// TestPreAllocationIsPoolWide: the name of a pre-allocation in the second
// range of a pool gets it although the first range has free addresses;
// nobody else ever gets it; the same name elsewhere is a conflict naming
// the holder and its owner.
func TestPreAllocationIsPoolWide(t *testing.T) {
	a := poolFixture(t)
	ctx := context.Background()
	res, err := a.Allocate(ctx, Allocation{Key: appKey("default", "m5"), Selector: poolSel})
	if err != nil || res.Prefix != mustPrefix("10.0.1.25/24") {
		t.Fatalf("m5 = %v, %v; want 10.0.1.25/24", res.Prefix, err)
	}
	seen := map[netip.Prefix]bool{}
	for i := range 19 {
		res, err := a.Allocate(ctx, Allocation{Key: appKey("default", fmt.Sprint("h", i)), Selector: poolSel})
		if err != nil || res.Prefix == mustPrefix("10.0.1.25/24") || seen[res.Prefix] {
			t.Fatalf("h%d = %v, %v", i, res.Prefix, err)
		}
		seen[res.Prefix] = true
	}
	_, err = a.Allocate(ctx, Allocation{Key: appKey("default", "h19"), Selector: poolSel})
	wantErr(t, "a full pool", err, ErrExhausted, "spec.selector")
	_, err = a.Allocate(ctx, Allocation{Key: appKey("other", "m5"), Selector: poolSel})
	wantErr(t, "m5 of another namespace", err, ErrConflict, "metadata.name", "10.0.1.25", `IPAllocation default/m5 of owner "app"`)
	checkInvariants(t, a)
}

// TestExplicitAddressRules: an explicit address agrees with its name's
// pre-allocation, lies in what the selector picks, and does not take
// another owner's static address.
func TestExplicitAddressRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     Allocation
		want    string // the result, or
		err     error  // the error on field, saying msgs
		field   string
		msgs    []string
		prepare func(*testing.T, *Allocator)
	}{
		{name: "the pre-allocated address itself", req: Allocation{Key: appKey("", "m5"), Prefix: mustPrefix("10.0.1.25/24"), Selector: poolSel},
			want: "10.0.1.25/24"},
		{name: "another address than the pre-allocation", req: Allocation{Key: appKey("", "m5"), Prefix: mustPrefix("10.0.1.26/24"), Selector: poolSel},
			err: ErrConflict, field: "spec.prefix", msgs: []string{"10.0.1.26 differs from 10.0.1.25", `IPRange r2 of owner "infra"`}},
		{name: "another address than the pre-allocation, no selector",
			req: Allocation{Key: appKey("", "m5"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.5/24")},
			err: ErrConflict, field: "spec.prefix", msgs: []string{"10.0.1.5 differs from 10.0.1.25"}},
		{name: "inside the selected range", req: Allocation{Key: appKey("", "x"), Prefix: mustPrefix("10.0.1.15/24"), Selector: poolSel},
			want: "10.0.1.15/24"},
		{name: "outside the selected ranges", req: Allocation{Key: appKey("", "x"), Prefix: mustPrefix("10.0.1.5/24"), Selector: poolSel},
			err: ErrInvalid, field: "spec.prefix", msgs: []string{"10.0.1.5 is not in what selector", `IPRange r1 of owner "infra" (10.0.1.10-10.0.1.19)`}},
		{name: "in another network than the selected one", req: Allocation{Key: appKey("", "x"), Prefix: mustPrefix("10.50.1.50/24"),
			Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}},
			err: ErrInvalid, field: "spec.prefix", msgs: []string{"10.50.1.50 is not in what selector", "network 10.0.1.0/24"}},
		{name: "a block across the end of the range", req: Allocation{Key: appKey("", "x"), Prefix: mustPrefix("10.0.1.18/24"), Count: 4, Selector: poolSel},
			err: ErrInvalid, field: "spec.prefix"},
		{name: "another owner's static address",
			prepare: func(t *testing.T, a *Allocator) {
				if _, err := a.CreatePrefix(context.Background(), Prefix{Key: Key{Owner: "infra", Name: "router"}, NetworkInstance: "vpc-1",
					Prefix: mustPrefix("10.0.1.100/24"), Network: "net1"}); err != nil {
					t.Fatal(err)
				}
			},
			req: Allocation{Key: appKey("", "x"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.100/24")},
			err: ErrConflict, field: "spec.prefix", msgs: []string{`static address of IPPrefix router of owner "infra"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := poolFixture(t)
			if tc.prepare != nil {
				tc.prepare(t, a)
			}
			before := dump(a)
			res, err := a.Allocate(context.Background(), tc.req)
			if tc.err != nil {
				wantErr(t, tc.name, err, tc.err, tc.field, tc.msgs...)
				if dump(a) != before {
					t.Fatal("a refused allocation changed the state")
				}
				return
			}
			if err != nil || res.Prefix.String() != tc.want {
				t.Fatalf("got %v, %v; want %s", res.Prefix, err, tc.want)
			}
			checkInvariants(t, a)
		})
	}
}

// TestExclusionsMerge: overlapping and adjacent exclusions of one object
// are merged, as whereabouts does; an exclusion over another object's
// exclusion is still a conflict.
func TestExclusionsMerge(t *testing.T) {
	a := poolFixture(t)
	ctx := context.Background()
	_, err := a.CreatePrefix(ctx, Prefix{Key: Key{Owner: "infra", Name: "net3"}, NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.3.0/24"),
		Network: "net3", Exclusions: []AddrRange{
			{mustAddr("10.0.3.4"), mustAddr("10.0.3.7")}, {mustAddr("10.0.3.0"), mustAddr("10.0.3.3")}, {mustAddr("10.0.3.6"), mustAddr("10.0.3.7")},
		}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Allocate(ctx, Allocation{Key: appKey("", "x"), Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net3"}})
	if err != nil || res.Prefix != mustPrefix("10.0.3.8/24") {
		t.Fatalf("first address after .0/30, .4/30 and .6/31: %v, %v", res.Prefix, err)
	}
	err = a.CreateRange(ctx, IPRange{Key: Key{Owner: "infra", Name: "r3"}, NetworkInstance: "vpc-1", Start: mustAddr("10.0.3.0"), End: mustAddr("10.0.3.20"),
		Exclusions: []AddrRange{{mustAddr("10.0.3.6"), mustAddr("10.0.3.6")}}})
	wantErr(t, "over the prefix's exclusion", err, ErrConflict, "spec.exclusions[0]", "an exclusion of 10.0.3.0/24")
	checkInvariants(t, a)
}

// TestRangesChangeInPlace: a range in use grows, shrinks over free
// addresses, gains exclusions and pre-allocations on free addresses;
// dropping an allocated address, or a claimed pre-allocation, is refused
// naming the holder. A network prefix gains exclusions in place too.
func TestRangesChangeInPlace(t *testing.T) {
	a := poolFixture(t)
	ctx := context.Background()
	r1 := IPRange{Key: Key{Owner: "infra", Name: "r1"}, NetworkInstance: "vpc-1", Start: mustAddr("10.0.1.10"), End: mustAddr("10.0.1.16"),
		Labels: Labels{"pool": "p"}, PreAllocations: map[string]netip.Addr{"m": mustAddr("10.0.1.15")}}
	if err := a.CreateRange(ctx, r1); err != nil {
		t.Fatal(err)
	}
	sel := Labels{LabelNetworkInstance: "vpc-1", "pool": "p"}
	for _, x := range [][2]string{{"a", "10.0.1.10/24"}, {"b", "10.0.1.11/24"}, {"m", "10.0.1.15/24"}} {
		if res, err := a.Allocate(ctx, Allocation{Key: appKey("", x[0]), Selector: sel}); err != nil || res.Prefix.String() != x[1] {
			t.Fatalf("%s = %v, %v; want %s", x[0], res.Prefix, err, x[1])
		}
	}
	edit := func(f func(r *IPRange)) IPRange {
		r := r1
		r.PreAllocations = map[string]netip.Addr{"m": mustAddr("10.0.1.15")}
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name  string
		r     IPRange
		err   error
		field string
		msgs  []string
	}{
		{name: "grow", r: edit(func(r *IPRange) { r.End = mustAddr("10.0.1.19") })},
		{name: "shrink over free addresses", r: edit(func(r *IPRange) { r.End = mustAddr("10.0.1.16") })},
		{name: "exclude a free address", r: edit(func(r *IPRange) {
			r.End = mustAddr("10.0.1.16")
			r.Exclusions = []AddrRange{{mustAddr("10.0.1.13"), mustAddr("10.0.1.14")}}
		})},
		{name: "pre-allocate a free address", r: edit(func(r *IPRange) {
			r.End = mustAddr("10.0.1.16")
			r.Exclusions = []AddrRange{{mustAddr("10.0.1.13"), mustAddr("10.0.1.14")}}
			r.PreAllocations["n"] = mustAddr("10.0.1.16")
		})},
		{name: "drop an allocated address", r: edit(func(r *IPRange) { r.Start = mustAddr("10.0.1.11") }),
			err: ErrInUse, field: "spec.start", msgs: []string{"drops allocated addresses: 10.0.1.10 (IPAllocation a of owner \"app\")"}},
		{name: "drop several allocated addresses", r: edit(func(r *IPRange) { r.Start = mustAddr("10.0.1.12") }),
			err: ErrInUse, field: "spec.start", msgs: []string{"10.0.1.10 (IPAllocation a", "10.0.1.11 (IPAllocation b"}},
		{name: "exclude an allocated address", r: edit(func(r *IPRange) { r.Exclusions = []AddrRange{{mustAddr("10.0.1.11"), mustAddr("10.0.1.11")}} }),
			err: ErrConflict, field: "spec.exclusions[0]", msgs: []string{`IPAllocation b of owner "app"`}},
		{name: "drop a claimed pre-allocation", r: edit(func(r *IPRange) { delete(r.PreAllocations, "m") }),
			err: ErrInUse, field: "spec.preAllocations.m", msgs: []string{`IPAllocation m of owner "app"`}},
		{name: "move a claimed pre-allocation", r: edit(func(r *IPRange) { r.PreAllocations["m"] = mustAddr("10.0.1.12") }),
			err: ErrInUse, field: "spec.preAllocations.m"},
	} {
		before := dump(a)
		err := a.CreateRange(ctx, tc.r)
		if tc.err != nil {
			wantErr(t, tc.name, err, tc.err, tc.field, tc.msgs...)
			if dump(a) != before {
				t.Fatalf("%s: a refused change changed the state", tc.name)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		checkInvariants(t, a)
	}
	// The pre-allocation added in place serves its name; the moved claim
	// of m is released with m and serves m again.
	if res, err := a.Allocate(ctx, Allocation{Key: appKey("", "n"), Selector: sel}); err != nil || res.Prefix != mustPrefix("10.0.1.16/24") {
		t.Fatalf("n = %v, %v", res.Prefix, err)
	}
	if err := a.Release(ctx, appKey("", "m")); err != nil {
		t.Fatal(err)
	}
	if res, err := a.Allocate(ctx, Allocation{Key: appKey("", "m"), Selector: sel}); err != nil || res.Prefix != mustPrefix("10.0.1.15/24") {
		t.Fatalf("m again = %v, %v", res.Prefix, err)
	}
	// A network prefix with allocations gains an exclusion on a free
	// address, not on an allocated one.
	net1 := Prefix{Key: Key{Owner: "infra", Name: "net1"}, NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.0/24"), Network: "net1"}
	net1.Exclusions = []AddrRange{{mustAddr("10.0.1.200"), mustAddr("10.0.1.210")}}
	if _, err := a.CreatePrefix(ctx, net1); err != nil {
		t.Fatal(err)
	}
	net1.Exclusions = []AddrRange{{mustAddr("10.0.1.10"), mustAddr("10.0.1.10")}}
	_, err := a.CreatePrefix(ctx, net1)
	wantErr(t, "exclude an allocated address of a network", err, ErrConflict, "spec.exclusions[0]", `IPAllocation a of owner "app"`)
	checkInvariants(t, a)
	restored := New()
	if err := restored.Apply(a.Snapshot(nil)); err != nil || dump(restored) != dump(a) {
		t.Fatalf("restore: %v", err)
	}
}

// TestRangePrefixLengthAndGateway: a range with its own prefix length and
// gateway (Metal3 pools[].prefix and gateway) returns them with its
// addresses, never hands out its gateway, accepts explicit addresses
// written with its length, keeps them across a restore, and does not count
// as a user of the network's gateway.
func TestRangePrefixLengthAndGateway(t *testing.T) {
	a := poolFixture(t)
	ctx := context.Background()
	rk := Key{Owner: "infra", Name: "r3"}
	r3 := IPRange{Key: rk, NetworkInstance: "vpc-1", Start: mustAddr("10.0.1.120"), End: mustAddr("10.0.1.126"),
		Labels: Labels{"pool": "b"}, PrefixLength: 25, Gateway: mustAddr("10.0.1.121")}
	if err := a.CreateRange(ctx, r3); err != nil {
		t.Fatal(err)
	}
	sel := Labels{LabelNetworkInstance: "vpc-1", "pool": "b"}
	for _, want := range []string{"10.0.1.120/25", "10.0.1.122/25"} {
		res, err := a.Allocate(ctx, Allocation{Key: appKey("", want), Selector: sel})
		if err != nil || res.Prefix.String() != want || res.Gateway != mustAddr("10.0.1.121") {
			t.Fatalf("got %v gw %v, %v; want %s gw 10.0.1.121", res.Prefix, res.Gateway, err, want)
		}
	}
	res, err := a.Allocate(ctx, Allocation{Key: appKey("", "exact"), Prefix: mustPrefix("10.0.1.125/25"), Selector: sel})
	if err != nil || res.Prefix != mustPrefix("10.0.1.125/25") {
		t.Fatalf("explicit /25: %v, %v", res.Prefix, err)
	}
	_, err = a.Allocate(ctx, Allocation{Key: appKey("", "gw"), Prefix: mustPrefix("10.0.1.121/25"), Selector: sel})
	wantErr(t, "the range's gateway", err, ErrConflict, "spec.prefix", "10.0.1.121")
	// The network's own addresses keep the network's length.
	res, err = a.Allocate(ctx, Allocation{Key: appKey("", "plain"), Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}})
	if err != nil || res.Prefix.Bits() != 24 {
		t.Fatalf("network address: %v, %v", res.Prefix, err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(r *IPRange)
		field string
	}{
		{"length too long", func(r *IPRange) { r.PrefixLength = 33 }, "spec.prefixLength"},
		{"range across its /30", func(r *IPRange) { r.PrefixLength = 30 }, "spec.prefixLength"},
		{"gateway of another family", func(r *IPRange) { r.Gateway = mustAddr("2001:db8::1") }, "spec.gateway"},
	} {
		r := r3
		tc.edit(&r)
		wantErr(t, tc.name, a.CreateRange(ctx, r), ErrInvalid, tc.field)
	}
	// A gateway moved onto an allocated address of the range is refused
	// on spec.gateway, naming the holder.
	r := r3
	r.Gateway = mustAddr("10.0.1.122")
	wantErr(t, "gateway on an allocation", a.CreateRange(ctx, r), ErrConflict, "spec.gateway", `IPAllocation 10.0.1.122/25 of owner "app"`)
	restored := New()
	if err := restored.Apply(a.Snapshot(nil)); err != nil || dump(restored) != dump(a) {
		t.Fatalf("restore: %v", err)
	}
	if got, err := restored.GetAllocation(appKey("", "10.0.1.120/25")); err != nil || got.Result.Gateway != mustAddr("10.0.1.121") {
		t.Fatalf("restored: %+v, %v", got.Result, err)
	}
	checkInvariants(t, a)
}

// TestAllocateReserved: a network that opts in hands out its first and
// last addresses (Cluster API allocateReservedIPAddresses) but not its
// gateway; it reserves them again when the last prefix that opted in
// goes, which is refused while they are allocated.
func TestAllocateReserved(t *testing.T) {
	a := poolFixture(t)
	ctx := context.Background()
	net := Prefix{Key: Key{Owner: "infra", Name: "net4"}, NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.4.1/29"), Network: "net4",
		Labels: Labels{LabelGateway: "true"}, AllocateReserved: true}
	if _, err := a.CreatePrefix(ctx, net); err != nil {
		t.Fatal(err)
	}
	sel := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net4"}
	var got []string
	for i := range 7 {
		res, err := a.Allocate(ctx, Allocation{Key: appKey("", fmt.Sprint("n", i)), Selector: sel})
		if err != nil {
			t.Fatalf("n%d: %v", i, err)
		}
		got = append(got, res.Prefix.Addr().String())
	}
	if want := "10.0.4.0 10.0.4.2 10.0.4.3 10.0.4.4 10.0.4.5 10.0.4.6 10.0.4.7"; strings.Join(got, " ") != want {
		t.Fatalf("got %s, want %s (all but the gateway)", strings.Join(got, " "), want)
	}
	checkInvariants(t, a)
	// Opting out while .0 and .7 are allocated is refused.
	net.AllocateReserved = false
	_, err := a.CreatePrefix(ctx, net)
	wantErr(t, "opt out while allocated", err, ErrInUse, "spec.allocateReserved", "10.0.4.0", `IPAllocation n0 of owner "app"`)
	for _, n := range []string{"n0", "n6"} {
		if err := a.Release(ctx, appKey("", n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.CreatePrefix(ctx, net); err != nil {
		t.Fatalf("opt out once free: %v", err)
	}
	_, err = a.Allocate(ctx, Allocation{Key: appKey("", "n7"), Selector: sel})
	wantErr(t, "reserved again", err, ErrExhausted, "spec.selector")
	checkInvariants(t, a)
	_, err = a.CreatePrefix(ctx, Prefix{Key: Key{Owner: "infra", Name: "pool"}, NetworkInstance: "vpc-1", Kind: KindPool,
		Prefix: mustPrefix("10.9.0.0/16"), AllocateReserved: true})
	wantErr(t, "a pool", err, ErrInvalid, "spec.allocateReserved")
	restored := New()
	if err := restored.Apply(a.Snapshot(nil)); err != nil || dump(restored) != dump(a) {
		t.Fatalf("restore: %v", err)
	}
}

// TestBlocksBoundToHolder: a block of N consecutive addresses is keyed by
// its holder (the allocation's name, e.g. a node): the same holder gets
// the same block again, its release frees exactly the block, and the next
// holder gets the lowest run of N free addresses (first fit, no alignment).
func TestBlocksBoundToHolder(t *testing.T) {
	a := poolFixture(t)
	ctx := context.Background()
	sel := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net2"}
	block := func(node string, n int) string {
		t.Helper()
		res, err := a.Allocate(ctx, Allocation{Key: Key{Owner: "nvidia", Name: "pool-a/" + node}, Selector: sel, Count: n})
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		return res.Prefix.Addr().String() + "-" + res.Last.String()
	}
	for _, tc := range []struct{ node, want string }{
		{"node-a", "10.50.1.1-10.50.1.15"},
		{"node-b", "10.50.1.16-10.50.1.30"},
		{"node-a", "10.50.1.1-10.50.1.15"}, // the same holder, the same block
	} {
		if got := block(tc.node, 15); got != tc.want {
			t.Fatalf("%s: %s, want %s", tc.node, got, tc.want)
		}
	}
	if err := a.Release(ctx, Key{Owner: "nvidia", Name: "pool-a/node-a"}); err != nil {
		t.Fatal(err)
	}
	if got := block("node-c", 10); got != "10.50.1.1-10.50.1.10" {
		t.Fatalf("node-c: %s, want node-a's freed run", got)
	}
	if got := block("node-d", 8); got != "10.50.1.31-10.50.1.38" {
		t.Fatalf("node-d: %s, want the lowest run of 8 (.11-.15 is too short)", got)
	}
	checkInvariants(t, a)
}

// TestTreeShowsSubnetKeptByStaticAddresses: when the gateway prefix that
// declared a subnet is deleted while another owner's static address
// remains, the tree shows the subnet as kept by that static address.
func TestTreeShowsSubnetKeptByStaticAddresses(t *testing.T) {
	a := poolFixture(t)
	ctx := context.Background()
	gw := Key{Owner: "site", Name: "net7-gw"}
	for _, p := range []Prefix{
		{Key: gw, NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.7.1/24"), Network: "net7", Labels: Labels{LabelGateway: "true"}},
		{Key: Key{Owner: "router", Name: "net7-r1"}, NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.7.10/24"), Network: "net7"},
	} {
		if _, err := a.CreatePrefix(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	node := func() TreeNode {
		tree, err := a.Tree("vpc-1")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range tree {
			if n.Prefix == mustPrefix("10.0.7.0/24") {
				return n
			}
		}
		t.Fatal("10.0.7.0/24 is not in the tree")
		return TreeNode{}
	}
	if n := node(); n.StaticOnly || n.Name != "net7-gw" || n.Owner != "site" {
		t.Fatalf("with its gateway prefix: %+v", n)
	}
	if err := a.DeletePrefix(ctx, gw); err != nil {
		t.Fatal(err)
	}
	if n := node(); !n.StaticOnly || n.Name != "net7-r1" || n.Owner != "router" {
		t.Fatalf("after the gateway prefix went: %+v", n)
	}
}

// TestGatewayInBlocks: a network whose prefix lets blocks contain the
// gateway gives the first node of a /24 with gateway .1 the block
// .1-.15 (NVIDIA's per-node blocks), while a single address still skips
// the gateway; by default a block skips it. Opting out while a block
// contains the gateway is refused naming it; releasing the block leaves
// the gateway held.
func TestGatewayInBlocks(t *testing.T) {
	a := poolFixture(t)
	ctx := context.Background()
	net := Prefix{Key: Key{Owner: "infra", Name: "net5"}, NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.5.1/24"), Network: "net5",
		Labels: Labels{LabelGateway: "true"}}
	if _, err := a.CreatePrefix(ctx, net); err != nil {
		t.Fatal(err)
	}
	sel := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net5"}
	block := func(name string, n int) (Result, error) {
		return a.Allocate(ctx, Allocation{Key: Key{Owner: "nvidia", Name: name}, Selector: sel, Count: n})
	}
	if res, err := block("default-block", 15); err != nil || res.Prefix.Addr() != mustAddr("10.0.5.2") {
		t.Fatalf("by default: %v, %v; want the block from .2", res.Prefix, err)
	}
	if err := a.Release(ctx, Key{Owner: "nvidia", Name: "default-block"}); err != nil {
		t.Fatal(err)
	}
	net.GatewayInBlocks = true
	if _, err := a.CreatePrefix(ctx, net); err != nil {
		t.Fatal(err)
	}
	res, err := block("node-a", 15)
	if err != nil || res.Prefix != mustPrefix("10.0.5.1/24") || res.Last != mustAddr("10.0.5.15") || res.Gateway != mustAddr("10.0.5.1") {
		t.Fatalf("node-a: %+v, %v; want 10.0.5.1-10.0.5.15 with gateway 10.0.5.1", res, err)
	}
	if res, err := block("node-b", 15); err != nil || res.Prefix.Addr() != mustAddr("10.0.5.16") {
		t.Fatalf("node-b: %v, %v", res.Prefix, err)
	}
	if restored := New(); restored.Apply(a.Snapshot(nil)) != nil || dump(restored) != dump(a) {
		t.Fatal("a block around the gateway does not restore")
	}
	single, err := a.Allocate(ctx, Allocation{Key: Key{Owner: "nvidia", Name: "single"}, Selector: sel})
	if err != nil || single.Prefix.Addr() != mustAddr("10.0.5.31") {
		t.Fatalf("a single address: %v, %v", single.Prefix, err)
	}
	checkInvariants(t, a)
	net.GatewayInBlocks = false
	_, err = a.CreatePrefix(ctx, net)
	wantErr(t, "opt out", err, ErrInUse, "spec.gatewayInBlocks", "10.0.5.1-10.0.5.15", `IPAllocation node-a of owner "nvidia"`)
	if err := a.Release(ctx, Key{Owner: "nvidia", Name: "node-a"}); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, a)
	_, err = a.Allocate(ctx, Allocation{Key: Key{Owner: "nvidia", Name: "gw"}, NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.5.1/24")})
	wantErr(t, "the gateway after the block went", err, ErrConflict, "spec.prefix", "IPPrefix net5")
	restored := New()
	if err := restored.Apply(a.Snapshot(nil)); err != nil || dump(restored) != dump(a) {
		t.Fatalf("restore: %v", err)
	}
	if _, err := a.CreatePrefix(ctx, net); err != nil {
		t.Fatalf("opt out once no block holds the gateway: %v", err)
	}
	checkInvariants(t, a)
}

// TestRangeAllocateReserved: a range that opts in hands out the reserved
// addresses of its network that it holds, to its own requests only; the
// network's own requests never get them; reserving them again (the range
// opts out, shrinks or goes) needs them free.
func TestRangeAllocateReserved(t *testing.T) {
	a := poolFixture(t)
	ctx := context.Background()
	if _, err := a.CreatePrefix(ctx, Prefix{Key: Key{Owner: "infra", Name: "net6"}, NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.6.0/29"),
		Network: "net6"}); err != nil {
		t.Fatal(err)
	}
	rg := IPRange{Key: Key{Owner: "infra", Name: "r6"}, NetworkInstance: "vpc-1", Start: mustAddr("10.0.6.0"), End: mustAddr("10.0.6.3"),
		Labels: Labels{"pool": "six"}, AllocateReserved: true}
	if err := a.CreateRange(ctx, rg); err != nil {
		t.Fatal(err)
	}
	pick := func(name string, sel Labels) (Result, error) {
		return a.Allocate(ctx, Allocation{Key: appKey("", name), Selector: sel})
	}
	inRange := Labels{LabelNetworkInstance: "vpc-1", "pool": "six"}
	if res, err := pick("first", inRange); err != nil || res.Prefix != mustPrefix("10.0.6.0/29") {
		t.Fatalf("the network address, first of the range: %v, %v", res.Prefix, err)
	}
	// The network's own requests skip the range and the broadcast address.
	netSel := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net6"}
	for _, want := range []string{"10.0.6.4/29", "10.0.6.5/29", "10.0.6.6/29"} {
		if res, err := pick(want, netSel); err != nil || res.Prefix.String() != want {
			t.Fatalf("network: %v, %v; want %s", res.Prefix, err, want)
		}
	}
	_, err := pick("more", netSel)
	wantErr(t, "the broadcast address stays reserved", err, ErrExhausted, "spec.selector")
	rg.AllocateReserved = false
	wantErr(t, "opt out while .0 is allocated", a.CreateRange(ctx, rg), ErrInUse, "spec.allocateReserved", "10.0.6.0", `IPAllocation first of owner "app"`)
	if err := a.Release(ctx, appKey("", "first")); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateRange(ctx, rg); err != nil {
		t.Fatalf("opt out once free: %v", err)
	}
	_, err = a.Allocate(ctx, Allocation{Key: appKey("", "exact"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.6.0/32")})
	wantErr(t, "reserved again", err, ErrInvalid, "spec.prefix", "reserved")
	checkInvariants(t, a)
	restored := New()
	if err := restored.Apply(a.Snapshot(nil)); err != nil || dump(restored) != dump(a) {
		t.Fatalf("restore: %v", err)
	}
}
