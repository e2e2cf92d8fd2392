package peerbench

import (
	"context"
	"net/netip"
	"testing"

	"github.com/nephio-project/ipam/service/internal/addrset"
	"github.com/nephio-project/ipam/service/internal/freespace"
)

// The ours-core column: the data structures under the allocation core,
// timed alone, the like-for-like opponent of the two bare structures
// (netipx's kept IPSet and Kubernetes' bitmap). A network's taken
// addresses are an addrset.Set of offsets from the network address; the
// free space of a prefix is a freespace.Space. The allocator does exactly
// these steps inside an Allocate and a Release, besides its names, owners,
// labels, validation, locks and undo log.

// nextFreeCore takes the lowest free address of the filled network as the
// allocator finds it (NextFree over the set of taken offsets, then Add) and
// releases it (Remove).
func nextFreeCore(b *testing.B, f fill) {
	s := coreFilled(nextFreeNet(), f)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		off, ok := s.NextFree(0, s.Last())
		if !ok {
			b.Fatal("full")
		}
		s.Add(off)
		s.Remove(off)
	}
}

// coreFilled returns the set of taken offsets of the IPv4 network pfx
// filled as f says. The network and broadcast addresses are taken, as for
// every implementation.
func coreFilled(pfx netip.Prefix, f fill) *addrset.Set {
	last := uint64(1)<<(32-pfx.Bits()) - 1
	s := addrset.New(last)
	s.Add(0)
	s.Add(last)
	for _, a := range f.heldIn(pfx) {
		s.Add(offsetIn(pfx, a))
	}
	return s
}

// bestFitCore takes the best-fit /bits of the /8 as the allocator finds it
// (BestFit over the parent's free space, then Take) and releases it.
func bestFitCore(b *testing.B, c children, bits int) {
	s := coreChildren(b, c)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p, ok := s.BestFit(bits)
		if !ok || !s.Take(p) {
			b.Fatal("full")
		}
		if !s.Release(p) {
			b.Fatal("release", p)
		}
	}
}

// coreChildren returns the free space of the /8 holding the children c
// says.
func coreChildren(tb testing.TB, c children) *freespace.Space {
	s := freespace.New(bestFitParent)
	for _, p := range c.prefixes() {
		if !s.Take(p) {
			tb.Fatal("take", p)
		}
	}
	return s
}

// TestCoreFindsWhatOursFinds checks that the ours-core steps answer what
// the allocator answers on the same fills: the next free address of every
// fill and the best fit of every layout.
func TestCoreFindsWhatOursFinds(t *testing.T) {
	ctx := context.Background()
	pfx := netip.MustParsePrefix("10.0.4.0/22")
	for _, f := range fills {
		a, probe := oursFilled(t, pfx, f)
		want, err := a.Allocate(ctx, probe)
		if err != nil {
			t.Fatal(f, err)
		}
		off, ok := coreFilled(pfx, f).NextFree(0, 1<<10-1)
		got := addrIn(pfx, off)
		if !ok || got != want.Prefix.Addr() {
			t.Errorf("%v: core's next free %v (%v), ours %v", f, got, ok, want.Prefix)
		}
	}
	for _, c := range []children{{100, false}, {100, true}, {1000, false}} {
		a := oursChildren(t, c)
		s := coreChildren(t, c)
		for _, bits := range []int{24, 26} {
			want, err := a.Allocate(ctx, bestFitProbe(bits))
			if err != nil {
				t.Fatal(c, err)
			}
			if err := a.Release(ctx, bestFitProbe(bits).Key); err != nil {
				t.Fatal(err)
			}
			if got, ok := s.BestFit(bits); !ok || got != want.Prefix {
				t.Errorf("%+v: core's best fit /%d %v (%v), ours %v", c, bits, got, ok, want.Prefix)
			}
		}
	}
}
