package peerbench

import (
	"context"
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"

	goipam "github.com/metal-stack/go-ipam"
	"go4.org/netipx"
)

// go-ipam copies a prefix's address map (or rebuilds an IPSet of its
// children) on every acquire, so filling a /16 one acquire at a time takes
// it minutes at half and hours at 99 %. The filled states are loaded
// instead with its own Load, from a dump in its own format (what Dump
// writes: one JSON object per prefix), which takes it well under a second.

// goIPAMPrefix is one prefix of a go-ipam dump.
type goIPAMPrefix struct {
	Cidr                   string
	ParentCidr             string
	Namespace              string
	AvailableChildPrefixes map[string]bool
	ChildPrefixLength      int
	IsParent               bool
	IPs                    map[string]bool
	Version                int64
}

// newGoIPAMPrefix returns p as go-ipam holds a new prefix: its network
// and broadcast addresses taken.
func newGoIPAMPrefix(p, parent netip.Prefix) goIPAMPrefix {
	gp := goIPAMPrefix{Cidr: p.String(), AvailableChildPrefixes: map[string]bool{}, Version: 1,
		IPs: map[string]bool{p.Addr().String(): true, netipx.PrefixLastIP(p).String(): true}}
	if parent.IsValid() {
		gp.ParentCidr = parent.String()
	}
	return gp
}

// loadGoIPAM returns a go-ipam memory backend holding prefixes, loaded
// from their dump.
func loadGoIPAM(tb testing.TB, prefixes ...goIPAMPrefix) goipam.Ipamer {
	dump, err := json.Marshal(prefixes)
	if err != nil {
		tb.Fatal(err)
	}
	g := goipam.New(context.Background())
	if err := g.Load(context.Background(), string(dump)); err != nil {
		tb.Fatal(err)
	}
	return g
}

// goIPAMFillOf returns a go-ipam holding the network pfx with the
// addresses of f taken.
func goIPAMFillOf(tb testing.TB, pfx netip.Prefix, f fill) goipam.Ipamer {
	p := newGoIPAMPrefix(pfx, netip.Prefix{})
	for _, a := range f.heldIn(pfx) {
		p.IPs[a.String()] = true
	}
	return loadGoIPAM(tb, p)
}

// goIPAMChildren returns a go-ipam holding the /8 of the best-fit
// workload with the children of c acquired.
func goIPAMChildren(tb testing.TB, c children) goipam.Ipamer {
	parent := newGoIPAMPrefix(bestFitParent, netip.Prefix{})
	parent.IsParent = true
	prefixes := []goIPAMPrefix{parent}
	for _, p := range c.prefixes() {
		parent.AvailableChildPrefixes[p.String()] = false // taken
		child := newGoIPAMPrefix(p, bestFitParent)
		child.Version = 0
		prefixes = append(prefixes, child)
	}
	return loadGoIPAM(tb, prefixes...)
}

// TestGoIPAMLoadedFills: the loaded states are those go-ipam reaches by
// acquiring the addresses and children one at a time (on the small
// networks of -short), versions aside.
func TestGoIPAMLoadedFills(t *testing.T) {
	ctx := context.Background()
	smallNet := netip.MustParsePrefix("10.0.0.0/24")
	for _, f := range fills {
		g := goipam.New(ctx)
		p, err := g.NewPrefix(ctx, smallNet.String())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range f.heldIn(smallNet) {
			if _, err := g.AcquireSpecificIP(ctx, p.Cidr, a.String()); err != nil {
				t.Fatal(err)
			}
		}
		want := goIPAMDump(t, g)
		got := goIPAMDump(t, goIPAMFillOf(t, smallNet, f))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: loaded %v, acquired %v", f, got, want)
		}
	}
	for _, c := range []children{{100, false}, {100, true}} {
		g := goipam.New(ctx)
		if _, err := g.NewPrefix(ctx, bestFitParent.String()); err != nil {
			t.Fatal(err)
		}
		for _, p := range c.prefixes() {
			if _, err := g.AcquireSpecificChildPrefix(ctx, bestFitParent.String(), p.String()); err != nil {
				t.Fatal(err)
			}
		}
		want := goIPAMDump(t, g)
		got := goIPAMDump(t, goIPAMChildren(t, c))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d children: loaded %v, acquired %v", c.n, got, want)
		}
	}
}

// goIPAMDump returns g's prefixes by CIDR, without their versions.
func goIPAMDump(t *testing.T, g goipam.Ipamer) map[string]goIPAMPrefix {
	t.Helper()
	d, err := g.Dump(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ps []goIPAMPrefix
	if err := json.Unmarshal([]byte(d), &ps); err != nil {
		t.Fatal(err)
	}
	out := map[string]goIPAMPrefix{}
	for _, p := range ps {
		p.Version = 0
		out[p.Cidr] = p
	}
	return out
}
