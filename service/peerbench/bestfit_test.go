package peerbench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"

	goipam "github.com/metal-stack/go-ipam"
	"go4.org/netipx"

	"github.com/nephio-project/ipam/service/ipam"
)

// The best-fit workload: a /8 holding the given number of /24 children,
// handed out from its start; each operation acquires a /24 or a /26 (the
// best fit: the smallest free block that holds it) and releases it, so
// every acquire searches among that many children. With -short (the smoke
// run of make test) the /8 holds 100 children.
func bestFitChildren() []int {
	if testing.Short() {
		return []int{100}
	}
	return []int{10_000, 65_000}
}

var bestFitParent = netip.MustParsePrefix("10.0.0.0/8")

func BenchmarkBestFit(b *testing.B) {
	for _, n := range bestFitChildren() {
		for _, bits := range []int{24, 26} {
			name := fmt.Sprintf("len=%d,children=%dk", bits, n/1000)
			if n < 1000 {
				name = fmt.Sprintf("len=%d,children=%d", bits, n)
			}
			b.Run(name+"/ours", func(b *testing.B) { bestFitOurs(b, n, bits) })
			b.Run(name+"/go-ipam", func(b *testing.B) { bestFitGoIPAM(b, n, bits) })
			b.Run(name+"/netipx", func(b *testing.B) { bestFitNetipx(b, n, bits) })
		}
	}
}

// bestFitOursFilled caches the filled allocator per child count.
var bestFitOursFilled = map[int]*ipam.Allocator{}

func bestFitOurs(b *testing.B, n, bits int) {
	ctx := context.Background()
	a, ok := bestFitOursFilled[n]
	if !ok {
		a = ipam.New()
		key := func(name string) ipam.Key { return ipam.Key{Owner: "bench", Name: name} }
		if _, err := a.Sync(ctx, ipam.SyncRequest{Owner: "bench",
			NetworkInstances: []ipam.NetworkInstance{{Key: key("v"), Prefixes: []ipam.VRFPrefix{{Prefix: bestFitParent}}}},
		}); err != nil {
			b.Fatal(err)
		}
		req := ipam.SyncRequest{Owner: "fill"}
		for i := range n {
			req.Allocations = append(req.Allocations, ipam.Allocation{Key: ipam.Key{Name: fmt.Sprint("c", i)}, Kind: ipam.KindNetwork,
				PrefixLength: 24, Selector: ipam.Labels{ipam.LabelNetworkInstance: "v"}})
		}
		if _, err := a.Sync(ctx, req); err != nil {
			b.Fatal(err)
		}
		bestFitOursFilled[n] = a
	}
	probe := ipam.Allocation{Key: ipam.Key{Owner: "bench", Name: "probe"}, Kind: ipam.KindNetwork, PrefixLength: bits,
		Selector: ipam.Labels{ipam.LabelNetworkInstance: "v"}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := a.Allocate(ctx, probe); err != nil {
			b.Fatal(err)
		}
		if err := a.Release(ctx, probe.Key); err != nil {
			b.Fatal(err)
		}
	}
}

// bestFitGoIPAMFilled caches a filled go-ipam per child count: each of its
// acquires rebuilds an IPSet of every child, so filling 65k children takes
// it longer than this run may.
var bestFitGoIPAMFilled = map[int]goipam.Ipamer{}

func bestFitGoIPAM(b *testing.B, n, bits int) {
	ctx := context.Background()
	g, ok := bestFitGoIPAMFilled[n]
	if !ok && n > 10_000 && os.Getenv("PEERBENCH_FULL") == "" {
		b.Skip("go-ipam rebuilds an IPSet of every child on each acquire: filling 65k children takes it too long; PEERBENCH_FULL=1 runs it")
	}
	if !ok {
		g = goipam.New(ctx)
		if _, err := g.NewPrefix(ctx, bestFitParent.String()); err != nil {
			b.Fatal(err)
		}
		for range n {
			if _, err := g.AcquireChildPrefix(ctx, bestFitParent.String(), 24); err != nil {
				b.Fatal(err)
			}
		}
		bestFitGoIPAMFilled[n] = g
	}
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
func bestFitNetipx(b *testing.B, n, bits int) {
	var free netipx.IPSetBuilder
	free.AddPrefix(bestFitParent)
	c := bestFitParent.Addr()
	for range n {
		p := netip.PrefixFrom(c, 24)
		free.RemovePrefix(p)
		c = netipx.PrefixLastIP(p).Next()
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
