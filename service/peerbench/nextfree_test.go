package peerbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"go4.org/netipx"
	"k8s.io/kubernetes/pkg/registry/core/service/allocator"

	"github.com/nephio-project/ipam/service/ipam"
)

// The next-free workload: a /16 network filled to a percentage, from its
// lowest address or scattered; each operation acquires the next free
// address and releases it, so the fill stays and every acquire pays the
// search at that fill (acquire-then-release on an empty prefix hides O(N)
// costs).
// With -short (the smoke run of make test) the network is a /24, so that
// every workload runs in milliseconds (a go-ipam acquire at 99 % of a /16
// copies 65,000 map entries, a nephio-rib claim rebuilds an IPSet of as
// many routes).
func nextFreeNet() netip.Prefix {
	if testing.Short() {
		return netip.MustParsePrefix("10.0.0.0/24")
	}
	return netip.MustParsePrefix("10.0.0.0/16")
}

// fill is a next-free layout: the percentage of the network taken, and
// whether the taken addresses are its lowest ones or scattered (what
// churn leaves: a pseudo-random set, the same for every implementation).
type fill struct {
	pct       int
	scattered bool
}

func (f fill) String() string {
	if f.scattered {
		return fmt.Sprintf("fill=%d,scattered", f.pct)
	}
	return fmt.Sprintf("fill=%d", f.pct)
}

var fills = []fill{{0, false}, {50, false}, {99, false}, {50, true}, {99, true}}

// held returns the addresses a fill takes: besides the network and
// broadcast addresses, which every implementation reserves, its share of
// the network, from the lowest address or scattered.
func (f fill) held() []netip.Addr { return f.heldIn(nextFreeNet()) }

// heldIn is held for the IPv4 network pfx, a /24 to a /16.
func (f fill) heldIn(pfx netip.Prefix) []netip.Addr {
	size := 1 << (32 - pfx.Bits())
	n := max(size*f.pct/100-2, 0)
	offs := make([]int, size-2)
	for i := range offs {
		offs[i] = i + 1
	}
	if f.scattered {
		r := rand.New(rand.NewPCG(1, 2))
		r.Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
		offs = offs[:n]
		slices.Sort(offs)
	} else {
		offs = offs[:n]
	}
	out := make([]netip.Addr, len(offs))
	for i, o := range offs {
		out[i] = addrIn(pfx, uint64(o))
	}
	return out
}

func BenchmarkNextFree(b *testing.B) {
	for _, f := range fills {
		b.Run(f.String()+"/ours", func(b *testing.B) { nextFreeOurs(b, f) })
		b.Run(f.String()+"/go-ipam", func(b *testing.B) { nextFreeGoIPAM(b, f) })
		b.Run(f.String()+"/nephio-rib", func(b *testing.B) { nextFreeNephio(b, f) })
		b.Run(f.String()+"/ours-core", func(b *testing.B) { nextFreeCore(b, f) })
		b.Run(f.String()+"/netipx", func(b *testing.B) { nextFreeNetipx(b, f) })
		b.Run(f.String()+"/k8s-bitmap", func(b *testing.B) { nextFreeK8s(b, f) })
	}
}

func nextFreeOurs(b *testing.B, f fill) {
	a, probe := oursFilled(b, nextFreeNet(), f)
	timeAllocateRelease(b, a, probe)
}

// timeAllocateRelease times b.N rounds of allocating probe from a and
// releasing it.
func timeAllocateRelease(b *testing.B, a *ipam.Allocator, probe ipam.Allocation) {
	ctx := context.Background()
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

// oursFilled returns an allocator whose network pfx is filled as f says,
// and the allocation that asks it for the next free address.
func oursFilled(tb testing.TB, pfx netip.Prefix, f fill) (*ipam.Allocator, ipam.Allocation) {
	ctx := context.Background()
	a := ipam.New()
	key := func(name string) ipam.Key { return ipam.Key{Owner: "bench", Name: name} }
	if _, err := a.Sync(ctx, ipam.SyncRequest{Owner: "bench",
		NetworkInstances: []ipam.NetworkInstance{{Key: key("v"), Prefixes: []ipam.VRFPrefix{{Prefix: netip.MustParsePrefix("10.0.0.0/8")}}}},
		Prefixes:         []ipam.Prefix{{Key: key("net"), NetworkInstance: "v", Prefix: pfx, Network: "net"}},
	}); err != nil {
		tb.Fatal(err)
	}
	sel := ipam.Labels{ipam.LabelNetworkInstance: "v", ipam.LabelNetworkName: "net"}
	// Each taken address is asked for by its address (a static request).
	req := ipam.SyncRequest{Owner: "fill"}
	for i, a := range f.heldIn(pfx) {
		req.Allocations = append(req.Allocations, ipam.Allocation{Key: ipam.Key{Name: fmt.Sprint("f", i)}, Selector: sel,
			Prefix: netip.PrefixFrom(a, pfx.Bits())})
	}
	if _, err := a.Sync(ctx, req); err != nil {
		tb.Fatal(err)
	}
	return a, ipam.Allocation{Key: key("probe"), Selector: sel}
}

func nextFreeGoIPAM(b *testing.B, f fill) {
	ctx := context.Background()
	g := goIPAMFillOf(b, nextFreeNet(), f)
	cidr := nextFreeNet().String()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ip, err := g.AcquireIP(ctx, cidr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := g.ReleaseIP(ctx, ip); err != nil {
			b.Fatal(err)
		}
	}
}

// nextFreeNetipx keeps the free space as an IPSet and takes the first
// address of its first range, as a free-space search over netipx does.
func nextFreeNetipx(b *testing.B, f fill) {
	pfx := nextFreeNet()
	var free netipx.IPSetBuilder
	free.AddPrefix(pfx)
	free.Remove(pfx.Addr())
	free.Remove(netipx.PrefixLastIP(pfx))
	for _, a := range f.held() {
		free.Remove(a)
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

// k8sBitmap is Kubernetes' service-IP allocator over a network: the bitmap
// of pkg/registry/core/service/allocator that ipallocator.Range wraps,
// offset i being the address after the network address plus i, so that
// neither the network nor the broadcast address is handed out.
func k8sBitmap() *allocator.AllocationBitmap {
	pfx := nextFreeNet()
	return allocator.NewAllocationMap(1<<(32-pfx.Bits())-2, pfx.String())
}

// k8sOffset is the bitmap offset of a.
func k8sOffset(a netip.Addr) int { return int(offsetIn(nextFreeNet(), a)) - 1 }

// offsetIn is the offset of a from the first address of pfx, an IPv4 /16
// to /24 holding it.
func offsetIn(pfx netip.Prefix, a netip.Addr) uint64 {
	b, base := a.As4(), pfx.Addr().As4()
	return (uint64(b[2])<<8 | uint64(b[3])) - (uint64(base[2])<<8 | uint64(base[3]))
}

// addrIn is the address at offset off from the first address of pfx, an
// IPv4 /16 to /24 holding it (the inverse of offsetIn).
func addrIn(pfx netip.Prefix, off uint64) netip.Addr {
	b := pfx.Addr().As4()
	n := uint64(b[2])<<8 | uint64(b[3]) + off
	b[2], b[3] = byte(n>>8), byte(n)
	return netip.AddrFrom4(b)
}

// nextFreeK8s takes the next free address as Kubernetes' service-IP
// allocator does (AllocateNext: a random start, then the next clear bit)
// and releases it.
func nextFreeK8s(b *testing.B, f fill) {
	m := k8sBitmap()
	for _, a := range f.held() {
		if ok, err := m.Allocate(k8sOffset(a)); !ok || err != nil {
			b.Fatal(a, ok, err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		off, ok, err := m.AllocateNext()
		if !ok || err != nil {
			b.Fatal("full", err)
		}
		if err := m.Release(off); err != nil {
			b.Fatal(err)
		}
	}
}
