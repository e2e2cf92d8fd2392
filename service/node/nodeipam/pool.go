package nodeipam

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/service/ipam"
)

// PoolType is the kind of a pool: an IPPool and a CIDRPool may share a
// name.
type PoolType string

// The pool types.
const (
	IPPool   PoolType = "ippool"
	CIDRPool PoolType = "cidrpool"
)

// Kind is the Kubernetes kind of the pool type.
func (t PoolType) Kind() string {
	if t == CIDRPool {
		return v1alpha1.KindCIDRPool
	}
	return v1alpha1.KindIPPool
}

// PoolKey names a pool: its type and name (the pools of one namespace are
// watched).
type PoolKey struct {
	Type PoolType `json:"type"`
	Name string   `json:"name"`
}

// String renders the key as "IPPool pool1".
func (k PoolKey) String() string { return k.Type.Kind() + " " + ipam.Quote(k.Name) }

// Block is what the node holds of a pool: the network its addresses are
// written in, the node's first and last address, the gateway, the
// exclusions and the routes handed out with the addresses.
type Block struct {
	// Network is the subnet (IPPool) or the node's prefix (CIDRPool),
	// masked: addresses are written with its length.
	Network netip.Prefix `json:"network"`
	// Start and End are the node's first and last address (inclusive).
	Start netip.Addr `json:"start"`
	End   netip.Addr `json:"end"`
	// Gateway is the gateway handed out with every address; invalid:
	// none. It is never handed out dynamically.
	Gateway netip.Addr `json:"gateway,omitzero"`
	// Exclusions are addresses of the block never handed out.
	Exclusions []ipam.AddrRange `json:"exclusions,omitempty"`
	// Routes are the pool's routes, given with a gateway only.
	Routes []netip.Prefix `json:"routes,omitempty"`
	// DefaultGateway adds the default route through the gateway.
	DefaultGateway bool `json:"defaultGateway,omitempty"`
}

// Contains reports whether a is an address of the block the node hands
// out: between Start and End, not excluded, not the gateway.
func (b *Block) Contains(a netip.Addr) bool {
	if a.Less(b.Start) || b.End.Less(a) || a == b.Gateway || a.Is4() != b.Start.Is4() {
		return false
	}
	for _, x := range b.Exclusions {
		if !a.Less(x.Start) && !x.End.Less(a) {
			return false
		}
	}
	return true
}

// Equal reports whether two blocks are the same.
func (b *Block) Equal(o *Block) bool {
	if b == nil || o == nil {
		return b == o
	}
	return b.Network == o.Network && b.Start == o.Start && b.End == o.End && b.Gateway == o.Gateway &&
		slices.Equal(b.Exclusions, o.Exclusions) && slices.Equal(b.Routes, o.Routes) && b.DefaultGateway == o.DefaultGateway
}

// check verifies the invariants the engine relies on.
func (b *Block) check() error {
	n := b.Network
	switch {
	case !n.IsValid() || n != n.Masked():
		return fmt.Errorf("network %s is not a masked prefix", n)
	case !n.Contains(b.Start) || !n.Contains(b.End) || b.End.Less(b.Start):
		return fmt.Errorf("block %s-%s is not a range of %s", b.Start, b.End, n)
	case b.Gateway.IsValid() && b.Gateway.Is4() != n.Addr().Is4():
		return fmt.Errorf("gateway %s is not of the family of %s", b.Gateway, n)
	}
	for _, x := range b.Exclusions {
		if !x.Start.IsValid() || !x.End.IsValid() || x.End.Less(x.Start) || x.Start.Is4() != n.Addr().Is4() {
			return fmt.Errorf("exclusion %s-%s is not a range of %s", x.Start, x.End, n)
		}
	}
	return nil
}

// BlockOfIPPool returns node's block of an IPPool: its status allocation
// for the node, in the pool's subnet, with the pool's gateway, exclusions
// and routes. It returns nil, nil when the pool gives the node no block,
// and an error naming the field when the pool does not parse.
func BlockOfIPPool(p *v1alpha1.IPPool, node string) (*Block, error) {
	if _, err := translate.ParseNVIDIAPool(p.Namespace, p.Name, &p.Spec); err != nil {
		return nil, err
	}
	subnet := netip.MustParsePrefix(p.Spec.Subnet).Masked() // parsed above
	b := &Block{Network: subnet, DefaultGateway: p.Spec.DefaultGateway}
	if p.Spec.Gateway != "" {
		b.Gateway = netip.MustParseAddr(p.Spec.Gateway).Unmap()
	}
	for _, x := range p.Spec.Exclusions {
		b.Exclusions = append(b.Exclusions, ipam.AddrRange{Start: netip.MustParseAddr(x.StartIP).Unmap(), End: netip.MustParseAddr(x.EndIP).Unmap()})
	}
	var err error
	if b.Routes, err = parseRoutes(v1alpha1.KindIPPool, p.Name, p.Spec.Routes); err != nil {
		return nil, err
	}
	for i, a := range p.Status.Allocations {
		if a.NodeName != node {
			continue
		}
		field := fmt.Sprintf("status.allocations[%d]", i)
		start, err1 := netip.ParseAddr(a.StartIP)
		end, err2 := netip.ParseAddr(a.EndIP)
		if err1 != nil || err2 != nil || !subnet.Contains(start.Unmap()) || !subnet.Contains(end.Unmap()) || end.Less(start) {
			return nil, &translate.FieldError{Kind: v1alpha1.KindIPPool, Namespace: p.Namespace, Name: p.Name, Field: field,
				Msg: fmt.Sprintf("%s-%s is not a range of %s", ipam.Quote(a.StartIP), ipam.Quote(a.EndIP), subnet)}
		}
		b.Start, b.End = start.Unmap(), end.Unmap()
		b.Exclusions = clipExclusions(b.Exclusions, b.Start, b.End)
		return b, b.check()
	}
	return nil, nil
}

// BlockOfCIDRPool returns node's prefix of a CIDRPool as a block: its
// status allocation for the node, the addresses of the prefix as NVIDIA's
// node daemon counts them (from the second address to the last, the
// last but one for IPv4; every address of a /31, /32, /127 or /128), with
// the allocation's gateway and the pool's exclusions inside the prefix.
func BlockOfCIDRPool(p *v1alpha1.CIDRPool, node string) (*Block, error) {
	if _, err := translate.ParseNVIDIACIDRPool(p.Namespace, p.Name, &p.Spec); err != nil {
		return nil, err
	}
	fieldErr := func(field, format string, args ...any) error {
		return &translate.FieldError{Kind: v1alpha1.KindCIDRPool, Namespace: p.Namespace, Name: p.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	var excl []ipam.AddrRange
	for i, x := range p.Spec.Exclusions {
		s, err1 := netip.ParseAddr(x.StartIP)
		e, err2 := netip.ParseAddr(x.EndIP)
		if err1 != nil || err2 != nil || e.Less(s) {
			return nil, fieldErr(fmt.Sprintf("spec.exclusions[%d]", i), "%s-%s is not a range", ipam.Quote(x.StartIP), ipam.Quote(x.EndIP))
		}
		excl = append(excl, ipam.AddrRange{Start: s.Unmap(), End: e.Unmap()})
	}
	routes, err := parseRoutes(v1alpha1.KindCIDRPool, p.Name, p.Spec.Routes)
	if err != nil {
		return nil, err
	}
	for i, a := range p.Status.Allocations {
		if a.NodeName != node {
			continue
		}
		field := fmt.Sprintf("status.allocations[%d]", i)
		pfx, err := netip.ParsePrefix(a.Prefix)
		if err != nil || pfx != pfx.Masked() || int32(pfx.Bits()) != p.Spec.PerNodeNetworkPrefix {
			return nil, fieldErr(field+".prefix", "%s is not a /%d prefix", ipam.Quote(a.Prefix), p.Spec.PerNodeNetworkPrefix)
		}
		b := &Block{Network: pfx, Routes: routes, DefaultGateway: p.Spec.DefaultGateway}
		b.Start, b.End = hostsOf(pfx)
		if a.Gateway != "" {
			gw, err := netip.ParseAddr(a.Gateway)
			if err != nil || !pfx.Contains(gw.Unmap()) {
				return nil, fieldErr(field+".gateway", "%s is not an address of %s", ipam.Quote(a.Gateway), pfx)
			}
			b.Gateway = gw.Unmap()
		}
		b.Exclusions = clipExclusions(excl, b.Start, b.End)
		return b, b.check()
	}
	return nil, nil
}

// hostsOf returns the addresses NVIDIA's node daemon hands out of a
// node's prefix.
func hostsOf(p netip.Prefix) (first, last netip.Addr) {
	first, last = p.Addr(), lastAddr(p)
	host := p.Addr().BitLen() - p.Bits()
	if host <= 1 {
		return first, last
	}
	first = first.Next()
	if p.Addr().Is4() {
		last = last.Prev()
	}
	return first, last
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// clipExclusions keeps the parts of xs between start and end, sorted.
func clipExclusions(xs []ipam.AddrRange, start, end netip.Addr) []ipam.AddrRange {
	var out []ipam.AddrRange
	for _, x := range xs {
		if x.Start.Is4() != start.Is4() || x.End.Less(start) || end.Less(x.Start) {
			continue
		}
		if x.Start.Less(start) {
			x.Start = start
		}
		if end.Less(x.End) {
			x.End = end
		}
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b ipam.AddrRange) int { return cmp.Or(a.Start.Compare(b.Start), a.End.Compare(b.End)) })
	return slices.Compact(out)
}

func parseRoutes(kind, name string, rs []v1alpha1.Route) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, r := range rs {
		p, err := netip.ParsePrefix(r.Dst)
		if err != nil {
			return nil, &translate.FieldError{Kind: kind, Name: name, Field: fmt.Sprintf("spec.routes[%d].dst", i), Msg: ipam.Quote(r.Dst) + " is not in CIDR notation"}
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
