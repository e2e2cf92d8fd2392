package peerbench

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"go4.org/netipx"

	"github.com/nephio-project/ipam/service/ipam"
)

// The best-fit workload: a /8 holding the given number of /24 children,
// from its start or scattered (every other /24: a free /24 between each
// two children, what churn leaves); each operation acquires a /24 or a
// /26 (the best fit: the smallest free block that holds it) and releases
// it, so every acquire searches among that many children. With -short
// (the smoke run of make test) the /8 holds 100 children.
func bestFitChildren() []int {
	if testing.Short() {
		return []int{100}
	}
	return []int{10_000, 65_000}
}

var bestFitParent = netip.MustParsePrefix("10.0.0.0/8")

// children is a best-fit layout: how many /24 children, and whether they
// are scattered.
type children struct {
	n         int
	scattered bool
}

// prefixes returns the children's /24s.
func (c children) prefixes() []netip.Prefix {
	step := 1
	if c.scattered {
		step = 2
	}
	base := bestFitParent.Addr().As4()
	out := make([]netip.Prefix, c.n)
	for i := range out {
		j := i * step
		a := base
		a[1], a[2] = byte(j>>8), byte(j)
		out[i] = netip.PrefixFrom(netip.AddrFrom4(a), 24)
	}
	return out
}

func BenchmarkBestFit(b *testing.B) {
	// The filled allocators are kept between the runs of a sub-benchmark
	// only: left live, they would slow every collection of the benchmarks
	// that follow.
	defer clear(bestFitOursFilled)
	for _, n := range bestFitChildren() {
		for _, scattered := range []bool{false, true} {
			if scattered && 2*n > 1<<(24-bestFitParent.Bits()) {
				continue // every other /24 of the /8 holds 32k children at most
			}
			c := children{n, scattered}
			for _, bits := range []int{24, 26} {
				name := fmt.Sprintf("len=%d,children=%dk", bits, n/1000)
				if n < 1000 {
					name = fmt.Sprintf("len=%d,children=%d", bits, n)
				}
				if scattered {
					name += ",scattered"
				}
				b.Run(name+"/ours", func(b *testing.B) { bestFitOurs(b, c, bits) })
				b.Run(name+"/go-ipam", func(b *testing.B) { bestFitGoIPAM(b, c, bits) })
				b.Run(name+"/nephio-rib", func(b *testing.B) { bestFitNephio(b, c, bits) })
				b.Run(name+"/ours-core", func(b *testing.B) { bestFitCore(b, c, bits) })
				b.Run(name+"/netipx", func(b *testing.B) { bestFitNetipx(b, c, bits) })
			}
		}
	}
}

// bestFitOursFilled caches the filled allocator per layout.
var bestFitOursFilled = map[children]*ipam.Allocator{}

func bestFitOurs(b *testing.B, c children, bits int) {
	a, ok := bestFitOursFilled[c]
	if !ok {
		a = oursChildren(b, c)
		bestFitOursFilled[c] = a
	}
	timeAllocateRelease(b, a, bestFitProbe(bits))
}

// oursChildren returns an allocator whose VRF holds the /8 and its
// children as c says.
func oursChildren(tb testing.TB, c children) *ipam.Allocator {
	ctx := context.Background()
	a := ipam.New()
	if _, err := a.Sync(ctx, ipam.SyncRequest{Owner: "bench",
		NetworkInstances: []ipam.NetworkInstance{{Key: ipam.Key{Owner: "bench", Name: "v"}, Prefixes: []ipam.VRFPrefix{{Prefix: bestFitParent}}}},
	}); err != nil {
		tb.Fatal(err)
	}
	req := ipam.SyncRequest{Owner: "fill"}
	for i, p := range c.prefixes() {
		req.Allocations = append(req.Allocations, ipam.Allocation{Key: ipam.Key{Name: fmt.Sprint("c", i)}, Kind: ipam.KindNetwork,
			Prefix: p, Selector: ipam.Labels{ipam.LabelNetworkInstance: "v"}})
	}
	if _, err := a.Sync(ctx, req); err != nil {
		tb.Fatal(err)
	}
	return a
}

// bestFitProbe is the allocation that asks for the best-fit /bits network.
func bestFitProbe(bits int) ipam.Allocation {
	return ipam.Allocation{Key: ipam.Key{Owner: "bench", Name: "probe"}, Kind: ipam.KindNetwork, PrefixLength: bits,
		Selector: ipam.Labels{ipam.LabelNetworkInstance: "v"}}
}

func bestFitGoIPAM(b *testing.B, c children, bits int) {
	ctx := context.Background()
	g := goIPAMChildren(b, c)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p, err := g.AcquireChildPrefix(ctx, bestFitParent.String(), uint8(bits)) //nolint:gosec // 24 or 26
		if err != nil {
			b.Fatal(err)
		}
		if err := g.ReleaseChildPrefix(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}

// bestFitNetipx keeps the free space as an IPSet and takes a free prefix
// of the length with IPSet.RemoveFreePrefix, as Nephio's in-cluster
// backend does.
func bestFitNetipx(b *testing.B, c children, bits int) {
	var free netipx.IPSetBuilder
	free.AddPrefix(bestFitParent)
	for _, p := range c.prefixes() {
		free.RemovePrefix(p)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s, err := free.IPSet()
		if err != nil {
			b.Fatal(err)
		}
		p, _, ok := s.RemoveFreePrefix(uint8(bits)) //nolint:gosec // 24 or 26
		if !ok {
			b.Fatal("full")
		}
		free.RemovePrefix(p)
		free.AddPrefix(p)
	}
}
