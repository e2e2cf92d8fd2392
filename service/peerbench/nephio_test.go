package peerbench

import (
	"net/netip"
	"testing"

	"github.com/hansthienpondt/nipam/pkg/table"
	"go4.org/netipx"
)

// The nephio-rib peer is the allocation path of Nephio's IPAM backend
// (nokia/k8s-ipam): its prefixes and claims are routes of a routing table,
// hansthienpondt/nipam's table.RIB, and a dynamic claim asks the table for
// the first free prefix of the length in its parent
// (RIB.GetAvailablePrefixByBitLen: an IPSet built from the parent less
// every child, on each call), then adds the claimed route (RIB.Add);
// releasing deletes the route (RIB.Delete). The table is filled with
// RIB.Set, which, unlike Add, does not scan the table for an existing
// route first, so that the fills of a /16 take seconds, not hours.

// nephioLabels are the labels a claimed route carries.
var nephioLabels = map[string]string{"nephio.org/prefix-kind": "network", "nephio.org/claim-name": "probe"}

// nephioRIB returns a routing table holding parent and the given
// children.
func nephioRIB(b *testing.B, parent netip.Prefix, children []netip.Prefix) *table.RIB {
	rib := table.NewRIB()
	if err := rib.Set(table.NewRoute(parent, map[string]string{"nephio.org/prefix-kind": "aggregate"}, nil)); err != nil {
		b.Fatal(err)
	}
	for _, c := range children {
		if err := rib.Set(table.NewRoute(c, nil, nil)); err != nil {
			b.Fatal(err)
		}
	}
	return rib
}

// claimNephio times b.N claims of a free /bits in parent, each released
// again, as Nephio's backend makes and deletes them.
func claimNephio(b *testing.B, rib *table.RIB, parent netip.Prefix, bits uint8) {
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p := rib.GetAvailablePrefixByBitLen(parent, bits)
		if !p.IsValid() {
			b.Fatal("full")
		}
		r := table.NewRoute(p, nephioLabels, nil)
		if err := rib.Add(r); err != nil {
			b.Fatal(err)
		}
		if err := rib.Delete(r); err != nil {
			b.Fatal(err)
		}
	}
}

// nextFreeNephio claims the next free address of the filled network; the
// network and broadcast addresses are routes too, so that it hands out
// neither.
func nextFreeNephio(b *testing.B, f fill) {
	pfx := nextFreeNet()
	held := f.held()
	children := make([]netip.Prefix, 0, len(held)+2)
	children = append(children, netip.PrefixFrom(pfx.Addr(), 32), netip.PrefixFrom(netipx.PrefixLastIP(pfx), 32))
	for _, a := range held {
		children = append(children, netip.PrefixFrom(a, 32))
	}
	claimNephio(b, nephioRIB(b, pfx, children), pfx, 32)
}

// bestFitNephio claims a free /bits of the /8 among its children.
func bestFitNephio(b *testing.B, c children, bits int) {
	claimNephio(b, nephioRIB(b, bestFitParent, c.prefixes()), bestFitParent, uint8(bits)) //nolint:gosec // 24 or 26
}
