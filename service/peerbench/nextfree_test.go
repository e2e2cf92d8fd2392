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

// The next-free workload: a /16 network filled from its lowest address to
// fill percent; each operation acquires the next free address and
// releases it, so the fill stays and every acquire pays the search at
// that fill (acquire-then-release on an empty prefix hides O(N) costs).
// With -short (the smoke run of make test) the network is a /24: go-ipam
// copies its address map on every acquire, so filling a /16 takes it
// minutes.
func nextFreeNet() netip.Prefix {
	if testing.Short() {
		return netip.MustParsePrefix("10.0.0.0/24")
	}
	return netip.MustParsePrefix("10.0.0.0/16")
}

var fills = []int{0, 50, 99}

// filled is how many addresses of the network a fill percent takes.
func filled(fill int) int { return (1 << (32 - nextFreeNet().Bits())) * fill / 100 }

func BenchmarkNextFree(b *testing.B) {
	for _, fill := range fills {
		b.Run(fmt.Sprintf("fill=%d/ours", fill), func(b *testing.B) { nextFreeOurs(b, fill) })
		b.Run(fmt.Sprintf("fill=%d/go-ipam", fill), func(b *testing.B) { nextFreeGoIPAM(b, fill) })
		b.Run(fmt.Sprintf("fill=%d/netipx", fill), func(b *testing.B) { nextFreeNetipx(b, fill) })
	}
}

func nextFreeOurs(b *testing.B, fill int) {
	ctx := context.Background()
	a := ipam.New()
	key := func(name string) ipam.Key { return ipam.Key{Owner: "bench", Name: name} }
	if _, err := a.Sync(ctx, ipam.SyncRequest{Owner: "bench",
		NetworkInstances: []ipam.NetworkInstance{{Key: key("v"), Prefixes: []ipam.VRFPrefix{{Prefix: netip.MustParsePrefix("10.0.0.0/8")}}}},
		Prefixes:         []ipam.Prefix{{Key: key("net"), NetworkInstance: "v", Prefix: nextFreeNet(), Network: "net"}},
	}); err != nil {
		b.Fatal(err)
	}
	sel := ipam.Labels{ipam.LabelNetworkInstance: "v", ipam.LabelNetworkName: "net"}
	// The network and broadcast addresses are reserved: fill what is left.
	req := ipam.SyncRequest{Owner: "fill"}
	for i := range max(filled(fill)-2, 0) {
		req.Allocations = append(req.Allocations, ipam.Allocation{Key: ipam.Key{Name: fmt.Sprint("f", i)}, Selector: sel})
	}
	if _, err := a.Sync(ctx, req); err != nil {
		b.Fatal(err)
	}
	probe := ipam.Allocation{Key: key("probe"), Selector: sel}
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

// goIPAMFilled caches a filled go-ipam per fill: the benchmark function
// runs several times with a growing b.N, and go-ipam copies its address
// map on every acquire, so filling a /16 takes it minutes. The timed loop
// leaves the fill as it found it.
var goIPAMFilled = map[int]struct {
	ipam goipam.Ipamer
	cidr string
}{}

func nextFreeGoIPAM(b *testing.B, fill int) {
	ctx := context.Background()
	st, ok := goIPAMFilled[fill]
	if !ok && fill > 50 && !testing.Short() && os.Getenv("PEERBENCH_FULL") == "" {
		b.Skip("filling go-ipam's /16 beyond half takes it over 15 minutes on 2 cores (its acquire copies the address map); PEERBENCH_FULL=1 runs it")
	}
	if !ok {
		g := goipam.New(ctx)
		p, err := g.NewPrefix(ctx, nextFreeNet().String())
		if err != nil {
			b.Fatal(err)
		}
		// go-ipam hands out neither the network nor the broadcast address.
		for range max(filled(fill)-2, 0) {
			if _, err := g.AcquireIP(ctx, p.Cidr); err != nil {
				b.Fatal(err)
			}
		}
		st.ipam, st.cidr = g, p.Cidr
		goIPAMFilled[fill] = st
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ip, err := st.ipam.AcquireIP(ctx, st.cidr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.ipam.ReleaseIP(ctx, ip); err != nil {
			b.Fatal(err)
		}
	}
}

// nextFreeNetipx keeps the free space as an IPSet and takes the first
// address of its first range, as a free-space search over netipx does.
func nextFreeNetipx(b *testing.B, fill int) {
	pfx := nextFreeNet()
	var free netipx.IPSetBuilder
	free.AddPrefix(pfx)
	free.Remove(pfx.Addr())
	free.Remove(netipx.PrefixLastIP(pfx))
	a := pfx.Addr().Next()
	for range max(filled(fill)-2, 0) {
		free.Remove(a)
		a = a.Next()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s, err := free.IPSet()
		if err != nil {
			b.Fatal(err)
		}
		rs := s.Ranges()
		if len(rs) == 0 {
			b.Fatal("full")
		}
		got := rs[0].From()
		free.Remove(got)
		free.Add(got)
	}
}
