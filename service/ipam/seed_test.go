package ipam

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func mustAddr(s string) netip.Addr     { return netip.MustParseAddr(s) }

const owner = "seed"

func k(name string) Key { return Key{Owner: owner, Namespace: "default", Name: name} }

// seedPrefixes are the seed README's objects, the network prefix listed
// before its aggregate.
func seedRequest() SyncRequest {
	return SyncRequest{
		Owner:            owner,
		NetworkInstances: []NetworkInstance{{Key: k("vpc-1")}},
		Prefixes: []Prefix{
			{Key: k("net1-prefix1"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.1/24"), Network: "net1",
				Labels: Labels{LabelGateway: "true"}},
			{Key: k("aggregate0"), NetworkInstance: "vpc-1", Kind: KindAggregate, Prefix: mustPrefix("10.0.0.0/8")},
		},
		Prune: true,
	}
}

// TestSeedExample walks the seed README: network prefix before its
// aggregate in one batch, a dynamic address with its gateway, a static
// address by label and a /16 pool.
func TestSeedExample(t *testing.T) {
	a := New()
	req := seedRequest()
	res, err := a.Sync(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Prefixes[0]; got.Prefix != mustPrefix("10.0.1.1/24") || got.Gateway != mustAddr("10.0.1.1") {
		t.Fatalf("net1-prefix1 resolved to %+v", got)
	}

	alloc1 := Allocation{Key: k("alloc1"), Kind: KindNetwork,
		Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}}
	got, err := a.Allocate(context.Background(), alloc1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Prefix != mustPrefix("10.0.1.2/24") || got.Gateway != mustAddr("10.0.1.1") {
		t.Fatalf("alloc1 = %s gw %s, want 10.0.1.2/24 gw 10.0.1.1", got.Prefix, got.Gateway)
	}
	t.Logf("alloc1       -> %s gateway %s", got.Prefix, got.Gateway)

	if _, err := a.CreatePrefix(context.Background(), Prefix{Key: k("net1-prefix10"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.1.10/24"),
		Network: "net1", Labels: Labels{"nephio.org/interface": "n3"}}); err != nil {
		t.Fatal(err)
	}
	got, err = a.Allocate(context.Background(), Allocation{Key: k("alloc2-n3"), Kind: KindNetwork,
		Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1", "nephio.org/interface": "n3"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Prefix != mustPrefix("10.0.1.10/24") || got.Gateway != mustAddr("10.0.1.1") {
		t.Fatalf("alloc2-n3 = %s gw %s, want 10.0.1.10/24 gw 10.0.1.1", got.Prefix, got.Gateway)
	}
	t.Logf("alloc2-n3    -> %s gateway %s", got.Prefix, got.Gateway)

	got, err = a.Allocate(context.Background(), Allocation{Key: k("alloc-pool1"), Kind: KindPool, PrefixLength: 16,
		Selector: Labels{LabelNetworkInstance: "vpc-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Prefix != mustPrefix("10.1.0.0/16") {
		t.Fatalf("alloc-pool1 = %s, want 10.1.0.0/16", got.Prefix)
	}
	t.Logf("alloc-pool1  -> %s", got.Prefix)

	// Idempotence: the same request returns the same address.
	again, err := a.Allocate(context.Background(), alloc1)
	if err != nil || again.Prefix != mustPrefix("10.0.1.2/24") {
		t.Fatalf("alloc1 again = %v, %v", again, err)
	}
	// The next dynamic address skips the static .10 once .2-.9 are used.
	for i := 3; i <= 9; i++ {
		if _, err := a.Allocate(context.Background(), Allocation{Key: k("fill" + string(rune('0'+i))), Selector: alloc1.Selector}); err != nil {
			t.Fatal(err)
		}
	}
	got, err = a.Allocate(context.Background(), Allocation{Key: k("after-static"), Selector: alloc1.Selector})
	if err != nil || got.Prefix != mustPrefix("10.0.1.11/24") {
		t.Fatalf("after-static = %v, %v; want 10.0.1.11/24", got.Prefix, err)
	}
	t.Logf("after .2-.9  -> %s (the static .10 is skipped)", got.Prefix)
	tree, _ := a.Tree("vpc-1")
	for _, n := range tree {
		t.Logf("tree: %*s%-12s %-9s %-14s used %d/%d", n.Depth*2, "", n.Prefix, n.Kind, n.Name, n.Used, n.Total)
	}
}

// TestSeedSeparateCalls: as separate calls, the network prefix without its
// aggregate fails naming the missing parent, and succeeds once it exists.
func TestSeedSeparateCalls(t *testing.T) {
	a := New()
	if err := a.CreateNetworkInstance(context.Background(), NetworkInstance{Key: k("vpc-1")}); err != nil {
		t.Fatal(err)
	}
	net1 := seedRequest().Prefixes[0]
	_, err := a.CreatePrefix(context.Background(), net1)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("net1-prefix1 before its aggregate: %v, want ErrNotFound", err)
	}
	want := "IPPrefix default/net1-prefix1: spec.prefix: no aggregate contains 10.0.1.0/24 in network instance vpc-1 (rule 1: every prefix lies inside an aggregate)"
	if err.Error() != want {
		t.Fatalf("message:\n got %s\nwant %s", err, want)
	}
	if _, err := a.CreatePrefix(context.Background(), seedRequest().Prefixes[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePrefix(context.Background(), net1); err != nil {
		t.Fatal(err)
	}
}

func TestBestFit(t *testing.T) {
	a := New()
	if err := a.CreateNetworkInstance(context.Background(), NetworkInstance{Key: k("vpc-1"), Prefixes: []VRFPrefix{{Prefix: mustPrefix("10.0.0.0/16")}}}); err != nil {
		t.Fatal(err)
	}
	sel := Labels{LabelNetworkInstance: "vpc-1"}
	for _, c := range []struct {
		name string
		pl   int
		want string
	}{{"used", 24, "10.0.0.0/24"}, {"p23", 23, "10.0.2.0/23"}, {"p24", 24, "10.0.1.0/24"}} {
		got, err := a.Allocate(context.Background(), Allocation{Key: k(c.name), Kind: KindPool, PrefixLength: c.pl, Selector: sel})
		if err != nil || got.Prefix != mustPrefix(c.want) {
			t.Fatalf("%s /%d = %v, %v; want %s", c.name, c.pl, got.Prefix, err, c.want)
		}
	}
}

func TestIPv6Network(t *testing.T) {
	a := New()
	_, err := a.Sync(context.Background(), SyncRequest{Owner: owner, NetworkInstances: []NetworkInstance{{Key: k("vpc-1")}},
		Prefixes: []Prefix{
			{Key: k("agg6"), NetworkInstance: "vpc-1", Kind: KindAggregate, Prefix: mustPrefix("1000::/32")},
			{Key: k("net6"), NetworkInstance: "vpc-1", Prefix: mustPrefix("1000::1/64"), Network: "net1", Labels: Labels{LabelGateway: "true"}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Allocate(context.Background(), Allocation{Key: k("a6"), Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}})
	if err != nil || got.Prefix != mustPrefix("1000::2/64") || got.Gateway != mustAddr("1000::1") {
		t.Fatalf("a6 = %v gw %v, %v; want 1000::2/64 gw 1000::1", got.Prefix, got.Gateway, err)
	}
}
