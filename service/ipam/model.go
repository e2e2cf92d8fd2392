package ipam

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"

	"github.com/nephio-project/ipam/service/internal/addrset"
	"github.com/nephio-project/ipam/service/internal/freespace"
)

// vrf is one network instance: its prefix tree per family, its selectable
// entries and their label index. Its mutex serializes every mutation of
// the VRF (one writer per VRF).
type vrf struct {
	mu    sync.RWMutex
	name  string
	ni    *niObj
	roots [2]*node // 0.0.0.0/0 and ::/0: hold the top-level aggregates
	nodes map[netip.Prefix]*node
	index labelIndex
	// tables holds the allocations of each owner in this VRF.
	tables map[*ownerState]*allocTable
	// specs holds the shared specs of plain allocations (see spec.go).
	specs    map[string]*allocSpec
	lastSpec *allocSpec
	sel      selCache // the last address selection
	lastSys  sysLabels
}

// sysLabels are the system labels of a kind of prefix, kept by a VRF for
// the next prefix of that kind: label maps are never mutated, so the
// networks carved from one pool share one (needed by BenchmarkBestFit in
// service/peerbench, whose every allocation makes such a network).
type sysLabels struct {
	kind    Kind
	family  Family
	bits    int
	network string
	labels  Labels
}

// systemLabels returns systemLabels(v.name, kind, f, bits, network),
// shared with the last prefix that asked the same.
func (v *vrf) systemLabels(kind Kind, f Family, bits int, network string) Labels {
	c := &v.lastSys
	if c.labels == nil || c.kind != kind || c.family != f || c.bits != bits || c.network != network {
		*c = sysLabels{kind: kind, family: f, bits: bits, network: network, labels: systemLabels(v.name, kind, f, bits, network)}
	}
	return c.labels
}

func newVRF(name string) *vrf {
	v := &vrf{name: name, nodes: make(map[netip.Prefix]*node), index: newLabelIndex(), tables: make(map[*ownerState]*allocTable)}
	for i, p := range []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")} {
		v.roots[i] = &node{v: v, prefix: p, kind: kindRoot, space: freespace.New(p)}
	}
	return v
}

func (v *vrf) root(a netip.Addr) *node {
	if a.Is4() {
		return v.roots[0]
	}
	return v.roots[1]
}

// kindRoot is the kind of a VRF's per-family root, which only aggregates
// may sit under.
const kindRoot Kind = "root"

// node is a prefix of the tree. Aggregates and pools carve child prefixes
// out of space; networks and loopbacks hand out addresses from addrs.
type node struct {
	v        *vrf
	prefix   netip.Prefix // canonical
	kind     Kind
	parent   *node
	children int
	removed  bool             // not in v.nodes: removed, or its insertion undone
	space    *freespace.Space // aggregate, pool, root
	addrs    *addrset.Set     // network, loopback

	network string
	gateway netip.Addr

	// holders says who holds each set offset of addrs that is a static
	// address or a pre-allocation. The other set offsets are reserved,
	// excluded or held by plain allocations (allocTable records).
	holders  map[uint64]any // *hostEntry, *preAlloc
	plain    int            // plain allocations placed in addrs
	reserved []uint64       // offsets reserved by rule 3 (network and broadcast)
	optIn    int            // prefixes opting in to allocating the reserved offsets
	gwBlocks int            // prefixes letting blocks contain the gateway
	excl     []exclusion
	ranges   []*ipRange // sorted by lo

	// Who keeps the node alive: the object that declared it, network
	// IPPrefixes with a host part that refer to it, or the allocation
	// that created it.
	decl  *prefixObj
	refs  map[*prefixObj]struct{}
	alloc *allocSpec

	userLabels Labels
	entry      *entry
}

// exclusion is a span of a node's offsets that is never handed out.
type exclusion struct {
	lo, hi uint64
	by     any // *prefixObj or *ipRange
}

// hostEntry is a static address declared by a network IPPrefix with a host
// part (10.0.1.10/24), or a /32 (/128) loopback IPPrefix.
type hostEntry struct {
	obj   *prefixObj
	node  *node
	off   uint64
	addr  netip.Addr
	claim *allocSpec
	entry *entry
}

// preAlloc is an address of a range reserved for the allocation of a name.
type preAlloc struct {
	rng   *ipRange
	name  string
	off   uint64
	claim *allocSpec
}

// ipRange is an IPRange placed in its node.
type ipRange struct {
	obj   *rangeObj
	node  *node
	lo    uint64
	hi    uint64
	pre   map[string]*preAlloc
	entry *entry
}

// niObj, prefixObj and rangeObj are the stored objects; allocations are
// stored in allocTables.
type niObj struct {
	spec NetworkInstance
	v    *vrf
	aggs []*prefixObj
}

type prefixObj struct {
	spec Prefix
	v    *vrf
	node *node      // the node it declared or, with a host part, the subnet
	host *hostEntry // its static address, if any
	ni   *niObj     // set for the aggregates of a NetworkInstance
}

type rangeObj struct {
	spec IPRange
	v    *vrf
	rng  *ipRange
}

func (n *node) isBitmap() bool { return n.addrs != nil }

// excludedAt returns the exclusion of n that holds off, if any.
func (n *node) excludedAt(off uint64) *exclusion {
	for i := range n.excl {
		if n.excl[i].lo <= off && off <= n.excl[i].hi {
			return &n.excl[i]
		}
	}
	return nil
}

func (n *node) isReserved(off uint64) bool { return slices.Contains(n.reserved, off) }

// blockGateway returns the gateway's offset when a plain hold of cnt
// addresses (a block) of n may contain it; the hold then skips that
// offset, which the gateway's static address holds.
func (n *node) blockGateway(cnt uint64) (uint64, bool) {
	if cnt <= 1 || n.gwBlocks == 0 || !n.gateway.IsValid() {
		return 0, false
	}
	return offsetOf(n.prefix.Addr(), n.gateway)
}

// rangeAt returns the range of n that holds offset off, or nil.
func (n *node) rangeAt(off uint64) *ipRange {
	if len(n.ranges) == 0 {
		return nil
	}
	// n.ranges are sorted by lo and do not overlap.
	i, _ := slices.BinarySearchFunc(n.ranges, off, func(g *ipRange, off uint64) int { return cmp.Compare(g.lo, off) })
	if i < len(n.ranges) && n.ranges[i].lo == off {
		return n.ranges[i]
	}
	if i > 0 && n.ranges[i-1].hi >= off {
		return n.ranges[i-1]
	}
	return nil
}

// addrBits is the length an address at offset off of n is written with:
// its range's, a loopback's host length, or n's.
func (n *node) addrBits(off uint64) int {
	if n.kind == KindLoopback {
		return hostBits(n.prefix.Addr())
	}
	if g := n.rangeAt(off); g != nil && g.obj.spec.PrefixLength != 0 {
		return g.obj.spec.PrefixLength
	}
	return n.prefix.Bits()
}

// busy reports whether n holds anything beyond its reservations and
// exclusions: child prefixes, held addresses or ranges.
func (n *node) busy() bool {
	return n.children > 0 || len(n.holders) > 0 || n.plain > 0 || len(n.ranges) > 0
}

// ancestorMatches reports whether a prefix above n carries every term.
func (n *node) ancestorMatches(tm []labelPair) bool {
	for p := n.parent; p != nil && p.kind != kindRoot; p = p.parent {
		if p.entry.matches(tm) {
			return true
		}
	}
	return false
}

// allowedParent encodes rule 2 of the allocation rules.
func allowedParent(child, parent Kind) bool {
	switch child {
	case KindAggregate:
		return parent == kindRoot || parent == KindAggregate
	case KindNetwork, KindPool, KindLoopback:
		return parent == KindAggregate || parent == KindPool
	}
	return false
}

// deepest returns the deepest node of v that contains p strictly (a node
// equal to p is not returned), or the family root.
func (v *vrf) deepest(p netip.Prefix) *node {
	for l := p.Bits() - 1; l >= 0; l-- {
		q, _ := p.Addr().Prefix(l)
		if n := v.nodes[q]; n != nil {
			return n
		}
	}
	return v.root(p.Addr())
}

// bitmapNodeFor returns the network or loopback node holding address a.
func (v *vrf) bitmapNodeFor(a netip.Addr) *node {
	p := netip.PrefixFrom(a, hostBits(a))
	if n := v.nodes[p]; n != nil && n.isBitmap() {
		return n
	}
	n := v.deepest(p)
	if n.isBitmap() {
		return n
	}
	return nil
}

// overlapping names a node of v that overlaps p, for error messages.
func (v *vrf) overlapping(p netip.Prefix) *node {
	var best *node
	for q, n := range v.nodes {
		if q.Overlaps(p) && (best == nil || comparePrefix(q, best.prefix) < 0) {
			best = n
		}
	}
	return best
}

// describe names who declared n, for messages.
func (n *node) describe() string {
	switch {
	case n.decl != nil && n.decl.ni != nil:
		return objName(ObjNetworkInstance, n.decl.ni.spec.Key)
	case n.decl != nil:
		return objName(ObjPrefix, n.decl.spec.Key)
	case n.alloc != nil:
		return objName(ObjAllocation, n.alloc.req.Key)
	}
	for r := range n.refs {
		return objName(ObjPrefix, r.spec.Key)
	}
	return "the network instance"
}

// objName names an object in a message about another one: its kind, key
// and owner, so that a conflict with another owner's object of the same
// name does not read as a conflict with itself.
func objName(obj string, k Key) string {
	if k.Owner == "" {
		return obj + " " + k.String()
	}
	return obj + " " + k.String() + " of owner " + Quote(k.Owner)
}

// describeHolder names who holds offset off of n.
func (n *node) describeHolder(off uint64) string {
	switch h := n.holders[off].(type) {
	case *hostEntry:
		if h.claim != nil {
			return objName(ObjAllocation, h.claim.req.Key)
		}
		return objName(ObjPrefix, h.obj.spec.Key)
	case *preAlloc:
		return "the pre-allocation of " + h.name + " in " + objName(ObjRange, h.rng.obj.spec.Key)
	}
	if n.isReserved(off) {
		return "a reserved address of " + n.prefix.String()
	}
	if n.excludedAt(off) != nil {
		return "an exclusion of " + n.prefix.String()
	}
	if o, ok := n.v.plainHolder(n, off); ok {
		return objName(ObjAllocation, o.key())
	}
	return "another object"
}
