package ipam

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

// fixture builds vpc-1 with aggregate 10.0.0.0/8 and 1000::/16, network
// net1 10.0.1.1/24 (gateway) and 1000:0:0:1::1/64, pool 10.2.0.0/16 and
// loopback 10.255.0.0/24.
func fixture(t testing.TB) *Allocator {
	t.Helper()
	a := New()
	_, err := a.Sync(context.Background(), SyncRequest{Owner: "infra", NetworkInstances: []NetworkInstance{{Key: Key{Name: "vpc-1"}}},
		Prefixes: []Prefix{
			{Key: Key{Name: "agg4"}, NetworkInstance: "vpc-1", Kind: KindAggregate, Prefix: mustPrefix("10.0.0.0/8")},
			{Key: Key{Name: "agg6"}, NetworkInstance: "vpc-1", Kind: KindAggregate, Prefix: mustPrefix("1000::/16")},
			{Key: Key{Name: "net1"}, NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.1/24"), Network: "net1", Labels: Labels{LabelGateway: "true"}},
			{Key: Key{Name: "net1-v6"}, NetworkInstance: "vpc-1", Prefix: mustPrefix("1000:0:0:1::1/64"), Network: "net1", Labels: Labels{LabelGateway: "true"}},
			{Key: Key{Name: "pool"}, NetworkInstance: "vpc-1", Kind: KindPool, Prefix: mustPrefix("10.2.0.0/16"), Labels: Labels{"purpose": "nat"}},
			{Key: Key{Name: "lo"}, NetworkInstance: "vpc-1", Kind: KindLoopback, Prefix: mustPrefix("10.255.0.0/24")},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var net1 = Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}

func key(name string) Key { return Key{Owner: "app", Namespace: "ns", Name: name} }

// TestBadInputLeavesStateUnchanged: every rejected call returns the right
// sentinel, names the object and field, and changes nothing.
func TestBadInputLeavesStateUnchanged(t *testing.T) {
	cases := []struct {
		name  string
		call  func(a *Allocator) error
		want  error
		field string
	}{
		{"malformed prefix (invalid)", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("p"), NetworkInstance: "vpc-1"})
			return err
		}, ErrInvalid, "spec.prefix"},
		{"pool with host bits", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("p"), NetworkInstance: "vpc-1", Kind: KindPool, Prefix: mustPrefix("10.3.0.1/16")})
			return err
		}, ErrInvalid, "spec.prefix"},
		{"unknown kind", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("p"), NetworkInstance: "vpc-1", Kind: "vlan", Prefix: mustPrefix("10.3.0.0/16")})
			return err
		}, ErrInvalid, "spec.kind"},
		{"pool inside network (nesting)", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("p"), NetworkInstance: "vpc-1", Kind: KindPool, Prefix: mustPrefix("10.0.1.0/28")})
			return err
		}, ErrInvalid, "spec.prefix"},
		{"aggregate inside pool (nesting)", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("p"), NetworkInstance: "vpc-1", Kind: KindAggregate, Prefix: mustPrefix("10.2.1.0/24")})
			return err
		}, ErrInvalid, "spec.kind"},
		{"overlapping sibling", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("p"), NetworkInstance: "vpc-1", Kind: KindPool, Prefix: mustPrefix("10.0.0.0/16")})
			return err
		}, ErrConflict, "spec.prefix"},
		{"network outside every aggregate", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("p"), NetworkInstance: "vpc-1", Prefix: mustPrefix("192.168.0.1/24")})
			return err
		}, ErrNotFound, "spec.prefix"},
		{"unknown VRF prefix", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("p"), NetworkInstance: "vpc-9", Prefix: mustPrefix("10.0.9.1/24")})
			return err
		}, ErrNotFound, "spec.networkInstance"},
		{"unknown VRF allocation", func(a *Allocator) error {
			_, err := a.Allocate(context.Background(), Allocation{Key: key("x"), Selector: Labels{LabelNetworkInstance: "vpc-9"}})
			return err
		}, ErrNotFound, "spec.networkInstance"},
		{"no VRF at all", func(a *Allocator) error {
			_, err := a.Allocate(context.Background(), Allocation{Key: key("x"), Selector: Labels{LabelNetworkName: "net1"}})
			return err
		}, ErrInvalid, "spec.networkInstance"},
		{"selector matches nothing", func(a *Allocator) error {
			_, err := a.Allocate(context.Background(), Allocation{Key: key("x"), Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net7"}})
			return err
		}, ErrNotFound, "spec.selector"},
		{"prefixLength beyond the family", func(a *Allocator) error {
			_, err := a.Allocate(context.Background(), Allocation{Key: key("x"), Kind: KindPool, PrefixLength: 33, AddressFamily: IPv4, Selector: Labels{LabelNetworkInstance: "vpc-1"}})
			return err
		}, ErrInvalid, "spec.prefixLength"},
		{"prefixLength larger than the parent", func(a *Allocator) error {
			_, err := a.Allocate(context.Background(), Allocation{Key: key("x"), Kind: KindPool, PrefixLength: 4, AddressFamily: IPv4, Selector: Labels{LabelNetworkInstance: "vpc-1"}})
			return err
		}, ErrInvalid, "spec.prefixLength"},
		{"pool without prefixLength", func(a *Allocator) error {
			_, err := a.Allocate(context.Background(), Allocation{Key: key("x"), Kind: KindPool, Selector: Labels{LabelNetworkInstance: "vpc-1"}})
			return err
		}, ErrInvalid, "spec.prefixLength"},
		{"kind aggregate allocation", func(a *Allocator) error {
			_, err := a.Allocate(context.Background(), Allocation{Key: key("x"), Kind: KindAggregate, PrefixLength: 16, Selector: Labels{LabelNetworkInstance: "vpc-1"}})
			return err
		}, ErrInvalid, "spec.kind"},
		{"duplicate static address", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("dup"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.1/24"), Network: "net1"})
			return err
		}, ErrConflict, "spec.prefix"},
		{"static on the network address", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("dup"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.255/24"), Network: "net1"})
			return err
		}, ErrInvalid, "spec.prefix"},
		{"second gateway", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("gw2"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.254/24"), Network: "net1", Labels: Labels{LabelGateway: "true"}})
			return err
		}, ErrConflict, "metadata.labels"},
		{"other network name for the same subnet", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("n2"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.7/24"), Network: "net2"})
			return err
		}, ErrConflict, "spec.network"},
		{"system label contradicted", func(a *Allocator) error {
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: key("p"), NetworkInstance: "vpc-1", Kind: KindPool, Prefix: mustPrefix("10.3.0.0/16"), Labels: Labels{LabelPrefixKind: "network"}})
			return err
		}, ErrInvalid, "labels"},
		{"explicit address taken", func(a *Allocator) error {
			_, err := a.Allocate(context.Background(), Allocation{Key: key("x"), Prefix: mustPrefix("10.0.1.2/24"), NetworkInstance: "vpc-1"})
			return err
		}, ErrConflict, "spec.prefix"},
		{"delete prefix with children", func(a *Allocator) error {
			return a.DeletePrefix(context.Background(), Key{Owner: "infra", Name: "agg4"})
		}, ErrInUse, ""},
		{"delete missing prefix", func(a *Allocator) error {
			return a.DeletePrefix(context.Background(), Key{Owner: "infra", Name: "nope"})
		}, ErrNotFound, ""},
		{"delete VRF with prefixes", func(a *Allocator) error {
			return a.DeleteNetworkInstance(context.Background(), Key{Owner: "infra", Name: "vpc-1"})
		}, ErrInUse, ""},
		{"VRF of another owner", func(a *Allocator) error {
			return a.CreateNetworkInstance(context.Background(), NetworkInstance{Key: Key{Owner: "other", Name: "vpc-1"}})
		}, ErrConflict, "metadata.name"},
		{"range outside networks", func(a *Allocator) error {
			return a.CreateRange(context.Background(), IPRange{Key: key("r"), NetworkInstance: "vpc-1", Start: mustAddr("10.9.0.1"), End: mustAddr("10.9.0.9")})
		}, ErrNotFound, "spec.start"},
		{"sync with one bad item", func(a *Allocator) error {
			_, err := a.Sync(context.Background(), SyncRequest{Owner: "app", Prune: true,
				Prefixes: []Prefix{{Key: key("good"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.2.1/24"), Network: "net2"}},
				Allocations: []Allocation{
					{Key: key("ok"), Selector: net1},
					{Key: key("bad"), Kind: KindPool, PrefixLength: 40, AddressFamily: IPv4, Selector: Labels{LabelNetworkInstance: "vpc-1"}},
				}})
			return err
		}, ErrInvalid, "spec.prefixLength"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := fixture(t)
			// Something of the app owner to prove Sync's prune is undone too.
			if _, err := a.Allocate(context.Background(), Allocation{Key: key("existing"), Selector: net1}); err != nil {
				t.Fatal(err)
			}
			before := dump(a)
			err := c.call(a)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Field != c.field || e.Key.Name == "" {
				t.Fatalf("error %q does not name the object and field %q (%+v)", err, c.field, e)
			}
			if after := dump(a); after != before {
				t.Fatalf("state changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			checkInvariants(t, a)
		})
	}
}

func TestAllocationRules(t *testing.T) {
	a := fixture(t)
	alloc := func(r Allocation) Result {
		t.Helper()
		res, err := a.Allocate(context.Background(), r)
		if err != nil {
			t.Fatalf("%s: %v", r.Key.Name, err)
		}
		return res
	}
	// Rule 4/5: lowest free, written addr/parentLen with the gateway.
	if r := alloc(Allocation{Key: key("a"), Selector: net1}); r.Prefix != mustPrefix("10.0.1.2/24") || r.Gateway != mustAddr("10.0.1.1") {
		t.Fatalf("a = %+v", r)
	}
	// Dual stack: the family filter picks the IPv6 network of net1.
	if r := alloc(Allocation{Key: key("a6"), Selector: net1, AddressFamily: IPv6}); r.Prefix != mustPrefix("1000:0:0:1::2/64") || r.Gateway != mustAddr("1000:0:0:1::1") {
		t.Fatalf("a6 = %+v", r)
	}
	// A loopback address is a host prefix.
	if r := alloc(Allocation{Key: key("lo1"), Kind: KindLoopback, Selector: Labels{LabelNetworkInstance: "vpc-1"}}); r.Prefix != mustPrefix("10.255.0.0/32") {
		t.Fatalf("lo1 = %+v", r)
	}
	// A pool sub-prefix by user label, best fit inside the labelled pool.
	if r := alloc(Allocation{Key: key("nat1"), Kind: KindPool, PrefixLength: 24, Selector: Labels{LabelNetworkInstance: "vpc-1", "purpose": "nat"}}); r.Prefix != mustPrefix("10.2.0.0/24") {
		t.Fatalf("nat1 = %+v", r)
	}
	// A network sub-prefix, then an address from it through its labels.
	if r := alloc(Allocation{Key: key("net9"), Kind: KindNetwork, PrefixLength: 24, Labels: Labels{LabelNetworkName: "net9"},
		Selector: Labels{LabelNetworkInstance: "vpc-1", LabelPrefixKind: string(KindAggregate)}}); r.Prefix != mustPrefix("10.0.0.0/24") {
		t.Fatalf("net9 = %+v", r)
	}
	if r := alloc(Allocation{Key: key("in-net9"), Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net9"}}); r.Prefix != mustPrefix("10.0.0.1/24") || r.Gateway.IsValid() {
		t.Fatalf("in-net9 = %+v", r)
	}
	// Explicit address.
	if r := alloc(Allocation{Key: key("fixed"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.77/24")}); r.Prefix != mustPrefix("10.0.1.77/24") {
		t.Fatalf("fixed = %+v", r)
	}
	// Block of 4 consecutive addresses: .3-.6.
	if r := alloc(Allocation{Key: key("block"), Selector: net1, Count: 4, AddressFamily: IPv4}); r.Prefix != mustPrefix("10.0.1.3/24") || r.Last != mustAddr("10.0.1.6") {
		t.Fatalf("block = %+v", r)
	}
	// Rule 8: a changed request re-allocates: new first, then old released.
	if r := alloc(Allocation{Key: key("a"), Selector: net1, Labels: Labels{"x": "y"}}); r.Prefix != mustPrefix("10.0.1.2/24") {
		t.Fatalf("relabelled a moved: %+v", r)
	}
	if r := alloc(Allocation{Key: key("a"), Selector: net1, AddressFamily: IPv4}); r.Prefix != mustPrefix("10.0.1.7/24") {
		t.Fatalf("changed a = %+v, want the next free 10.0.1.7/24", r)
	}
	if r := alloc(Allocation{Key: key("b"), Selector: net1, AddressFamily: IPv4}); r.Prefix != mustPrefix("10.0.1.2/24") {
		t.Fatalf("b = %+v, want the released 10.0.1.2/24", r)
	}
	// Rule 9: the network sub-prefix with an address in it cannot go.
	if err := a.Release(context.Background(), key("net9")); !errors.Is(err, ErrInUse) {
		t.Fatalf("release net9 with an address: %v", err)
	}
	for _, n := range []string{"in-net9", "net9"} {
		if err := a.Release(context.Background(), key(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Release(context.Background(), key("net9")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second release: %v", err)
	}
	checkInvariants(t, a)
}

func TestExhaustedAndReleaseRestores(t *testing.T) {
	a := New()
	_, err := a.Sync(context.Background(), SyncRequest{Owner: "infra", NetworkInstances: []NetworkInstance{{Key: Key{Name: "v"}, Prefixes: []VRFPrefix{{Prefix: mustPrefix("192.168.0.0/24")}}}},
		Prefixes: []Prefix{{Key: Key{Name: "small"}, NetworkInstance: "v", Prefix: mustPrefix("192.168.0.0/29"), Network: "small"}}})
	if err != nil {
		t.Fatal(err)
	}
	sel := Labels{LabelNetworkInstance: "v", LabelNetworkName: "small"}
	var got []netip.Prefix
	for i := range 6 { // a /29 has 8 addresses, 2 reserved
		r, err := a.Allocate(context.Background(), Allocation{Key: key(string(rune('a' + i))), Selector: sel})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Prefix)
	}
	if got[0] != mustPrefix("192.168.0.1/29") || got[5] != mustPrefix("192.168.0.6/29") {
		t.Fatalf("got %v", got)
	}
	_, err = a.Allocate(context.Background(), Allocation{Key: key("z"), Selector: sel})
	if !errors.Is(err, ErrExhausted) || err.Error() != "IPAllocation ns/z: spec.selector: no free address left in network 192.168.0.0/29" {
		t.Fatalf("exhausted: %v", err)
	}
	if err := a.Release(context.Background(), key("c")); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Allocate(context.Background(), Allocation{Key: key("z"), Selector: sel}); err != nil || r.Prefix != mustPrefix("192.168.0.3/29") {
		t.Fatalf("after release: %v %v", r, err)
	}
	checkInvariants(t, a)
}

func TestPointToPointReservesNothing(t *testing.T) {
	a := New()
	_, err := a.Sync(context.Background(), SyncRequest{Owner: "infra", NetworkInstances: []NetworkInstance{{Key: Key{Name: "v"}, Prefixes: []VRFPrefix{{Prefix: mustPrefix("192.168.0.0/24")}, {Prefix: mustPrefix("2001:db8::/32")}}}},
		Prefixes: []Prefix{
			{Key: Key{Name: "p2p"}, NetworkInstance: "v", Prefix: mustPrefix("192.168.0.0/31"), Network: "p2p"},
			{Key: Key{Name: "p2p6"}, NetworkInstance: "v", Prefix: mustPrefix("2001:db8::/127"), Network: "p2p"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	sel := Labels{LabelNetworkInstance: "v", LabelNetworkName: "p2p"}
	for _, want := range []string{"192.168.0.0/31", "192.168.0.1/31", "2001:db8::/127", "2001:db8::1/127"} {
		r, err := a.Allocate(context.Background(), Allocation{Key: key(want), Selector: sel})
		if err != nil || r.Prefix != mustPrefix(want) {
			t.Fatalf("got %v %v, want %s", r.Prefix, err, want)
		}
	}
}

func TestStaticAllocationRules(t *testing.T) {
	a := fixture(t)
	if _, err := a.CreatePrefix(context.Background(), Prefix{Key: Key{Owner: "infra", Name: "n3"}, NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.10/24"),
		Network: "net1", Labels: Labels{"nephio.org/interface": "n3"}}); err != nil {
		t.Fatal(err)
	}
	n3 := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1", "nephio.org/interface": "n3"}
	r, err := a.Allocate(context.Background(), Allocation{Key: key("upf-n3"), Selector: n3})
	if err != nil || r.Prefix != mustPrefix("10.0.1.10/24") || r.Gateway != mustAddr("10.0.1.1") {
		t.Fatalf("upf-n3 = %+v %v", r, err)
	}
	// The same request again is the same; another claimant conflicts (rule 7).
	if r2, err := a.Allocate(context.Background(), Allocation{Key: key("upf-n3"), Selector: n3}); err != nil || r2 != r {
		t.Fatalf("again: %+v %v", r2, err)
	}
	if _, err := a.Allocate(context.Background(), Allocation{Key: key("smf-n3"), Selector: n3}); !errors.Is(err, ErrConflict) {
		t.Fatalf("second claimant: %v", err)
	}
	// The gateway address is selectable by its label.
	gw := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1", LabelGateway: "true"}
	if r, err := a.Allocate(context.Background(), Allocation{Key: key("router"), Selector: gw}); err != nil || r.Prefix != mustPrefix("10.0.1.1/24") {
		t.Fatalf("router = %+v %v", r, err)
	}
	// A claimed static address cannot be deleted; released, it can.
	if err := a.DeletePrefix(context.Background(), Key{Owner: "infra", Name: "n3"}); !errors.Is(err, ErrInUse) {
		t.Fatalf("delete claimed static: %v", err)
	}
	if err := a.Release(context.Background(), key("upf-n3")); err != nil {
		t.Fatal(err)
	}
	if err := a.DeletePrefix(context.Background(), Key{Owner: "infra", Name: "n3"}); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, a)
}

func TestRangesExclusionsPreAllocations(t *testing.T) {
	a := fixture(t)
	err := a.CreateRange(context.Background(), IPRange{Key: key("pool1"), NetworkInstance: "vpc-1", Start: mustAddr("10.0.1.100"), End: mustAddr("10.0.1.110"),
		Labels:         Labels{"metal3.io/pool": "pool1"},
		Exclusions:     []AddrRange{{Start: mustAddr("10.0.1.100"), End: mustAddr("10.0.1.101")}},
		PreAllocations: map[string]netip.Addr{"claim1": mustAddr("10.0.1.105")}})
	if err != nil {
		t.Fatal(err)
	}
	sel := Labels{LabelNetworkInstance: "vpc-1", "metal3.io/pool": "pool1"}
	r, err := a.Allocate(context.Background(), Allocation{Key: key("m1"), Selector: sel})
	if err != nil || r.Prefix != mustPrefix("10.0.1.102/24") || r.Gateway != mustAddr("10.0.1.1") {
		t.Fatalf("m1 = %+v %v (exclusions .100-.101 skipped)", r, err)
	}
	r, err = a.Allocate(context.Background(), Allocation{Key: key("claim1"), Selector: sel})
	if err != nil || r.Prefix != mustPrefix("10.0.1.105/24") {
		t.Fatalf("claim1 = %+v %v (pre-allocated)", r, err)
	}
	// Subnet-wide dynamic allocation never enters the range.
	for i := 2; i < 100; i++ {
		if _, err := a.Allocate(context.Background(), Allocation{Key: key("d" + netip.AddrFrom4([4]byte{0, 0, 0, byte(i)}).String()), Selector: net1, AddressFamily: IPv4}); err != nil {
			t.Fatal(err)
		}
	}
	r, err = a.Allocate(context.Background(), Allocation{Key: key("after"), Selector: net1, AddressFamily: IPv4})
	if err != nil || r.Prefix != mustPrefix("10.0.1.111/24") {
		t.Fatalf("after = %+v %v; want 10.0.1.111/24 past the range", r, err)
	}
	// Block inside the range: .106-.108 is the first run of 3 (.105 is taken).
	r, err = a.Allocate(context.Background(), Allocation{Key: key("blk"), Selector: sel, Count: 3})
	if err != nil || r.Prefix != mustPrefix("10.0.1.106/24") || r.Last != mustAddr("10.0.1.108") {
		t.Fatalf("blk = %+v %v", r, err)
	}
	if err := a.DeleteRange(context.Background(), key("pool1")); !errors.Is(err, ErrInUse) {
		t.Fatalf("delete used range: %v", err)
	}
	for _, n := range []string{"m1", "claim1", "blk"} {
		if err := a.Release(context.Background(), key(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.DeleteRange(context.Background(), key("pool1")); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, a)
}

func TestSyncPruneAndIdempotence(t *testing.T) {
	a := fixture(t)
	req := SyncRequest{Owner: "pkg", Prune: true, Allocations: []Allocation{
		{Key: Key{Namespace: "ns", Name: "b"}, Selector: net1, AddressFamily: IPv4},
		{Key: Key{Namespace: "ns", Name: "a"}, Selector: net1, AddressFamily: IPv4},
		{Key: Key{Namespace: "ns", Name: "p"}, Kind: KindPool, PrefixLength: 20, Selector: Labels{LabelNetworkInstance: "vpc-1"}, AddressFamily: IPv4},
	}}
	res, err := a.Sync(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// Key order decides, not request order: a gets .2, b gets .3.
	if res.Allocations[1].Prefix != mustPrefix("10.0.1.2/24") || res.Allocations[0].Prefix != mustPrefix("10.0.1.3/24") {
		t.Fatalf("results %+v", res.Allocations)
	}
	before := dump(a)
	res2, err := a.Sync(context.Background(), req)
	if err != nil || dump(a) != before {
		t.Fatalf("second sync changed state: %v", err)
	}
	for i := range res.Allocations {
		if res.Allocations[i] != res2.Allocations[i] {
			t.Fatalf("second sync result %d differs", i)
		}
	}
	req.Allocations = req.Allocations[1:]
	res, err = a.Sync(context.Background(), req)
	if err != nil || len(res.Released) != 1 || res.Released[0].Key.Name != "b" {
		t.Fatalf("prune: %+v %v", res.Released, err)
	}
	if _, err := a.GetAllocation(Key{Owner: "pkg", Namespace: "ns", Name: "b"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b still there: %v", err)
	}
	checkInvariants(t, a)
}

// TestApplyIntoAReplacedNetwork replays, in one Apply, an allocation in a
// network, its release, the network's removal, a new network of the same
// prefix and an allocation of the same address in it: the second
// allocation must land in the new network, not in the removed one the
// replay placed the first in.
func TestApplyIntoAReplacedNetwork(t *testing.T) {
	ctx := context.Background()
	withNet := func(name, alloc string) (*Allocator, []Record) {
		a := fixture(t)
		if _, err := a.CreatePrefix(ctx, Prefix{Key: Key{Owner: "infra", Name: name}, NetworkInstance: "vpc-1",
			Prefix: mustPrefix("10.0.9.0/24"), Network: "net9"}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Allocate(ctx, Allocation{Key: key(alloc), Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net9"}}); err != nil {
			t.Fatal(err)
		}
		return a, a.Snapshot(nil)
	}
	_, first := withNet("old", "x")
	want, second := withNet("new", "y")
	recs := append(first,
		Record{Op: OpDeleteAllocation, Key: key("x")},
		Record{Op: OpDeletePrefix, Key: Key{Owner: "infra", Name: "old"}})
	for _, r := range second {
		if r.Key.Name == "new" || r.Key.Name == "y" {
			recs = append(recs, r)
		}
	}
	b := New()
	if err := b.Apply(recs); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, b)
	if dump(b) != dump(want) {
		t.Fatalf("replayed state differs:\n%s\n---\n%s", dump(b), dump(want))
	}
	y, err := b.GetAllocation(key("y"))
	if err != nil {
		t.Fatal(err)
	}
	again := Allocation{Key: key("z"), NetworkInstance: "vpc-1", Prefix: y.Result.Prefix}
	if _, err := b.Allocate(ctx, again); !errors.Is(err, ErrConflict) {
		t.Fatalf("allocating %v, held by y, again: %v, want %v", y.Result.Prefix, err, ErrConflict)
	}
}

func TestSnapshotApplyRoundTrip(t *testing.T) {
	a := fixture(t)
	for i := range 20 {
		if _, err := a.Allocate(context.Background(), Allocation{Key: key("x" + string(rune('a'+i))), Selector: net1, AddressFamily: IPv4}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Allocate(context.Background(), Allocation{Key: key("net9"), Kind: KindNetwork, PrefixLength: 24, Labels: Labels{LabelNetworkName: "net9"}, Selector: Labels{LabelNetworkInstance: "vpc-1", LabelPrefixKind: "aggregate"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePrefix(context.Background(), Prefix{Key: key("gw9"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.0.1/24"), Network: "net9", Labels: Labels{LabelGateway: "true"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(context.Background(), Allocation{Key: key("in9"), Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net9"}}); err != nil {
		t.Fatal(err)
	}
	b := New()
	if err := b.Apply(a.Snapshot(nil)); err != nil {
		t.Fatal(err)
	}
	if dump(a) != dump(b) {
		t.Fatalf("restored state differs:\n%s\n---\n%s", dump(a), dump(b))
	}
	checkInvariants(t, b)
}
