package ipam

import (
	"bytes"
	"cmp"
	"container/heap"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// The queries of this file serve people browsing the address space (the
// web view): each returns one bounded page, whatever the size of the
// state, and copies only what it returns.

// OwnerOf returns what the allocator keeps about owner: the identity it is
// bound to and the source its package was last synced from.
func (a *Allocator) OwnerOf(owner string) OwnerInfo {
	a.ownersMu.Lock()
	os := a.owners[owner]
	a.ownersMu.Unlock()
	if os == nil {
		return OwnerInfo{}
	}
	os.mu.Lock()
	defer os.mu.Unlock()
	return os.info
}

// readVRF calls fn with network instance name read-locked.
func (a *Allocator) readVRF(name string, fn func(v *vrf) error) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	v := a.vrfs[name]
	if v == nil {
		return errf(ErrNotFound, ObjNetworkInstance, Key{Name: name}, "", "not found")
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	return fn(v)
}

// readNode calls fn with prefix p of network instance name read-locked.
func (a *Allocator) readNode(name string, p netip.Prefix, fn func(v *vrf, n *node)) error {
	return a.readVRF(name, func(v *vrf) error {
		n := v.nodes[p.Masked()]
		if n == nil {
			return errf(ErrNotFound, ObjPrefix, Key{Name: p.String()}, "", "no prefix %s in network instance %s", p, Quote(name))
		}
		fn(v, n)
		return nil
	})
}

// Summary is a network instance at a glance: its number of prefixes and
// the utilization of its top-level prefixes per address family.
type Summary struct {
	Prefixes int
	// Used and Total of IPv4 ([0]) and IPv6 ([1]), saturating at 2^64-1.
	Used, Total [2]uint64
}

// Summarize returns the summary of network instance name without
// building its tree.
func (a *Allocator) Summarize(name string) (Summary, error) {
	var sum Summary
	err := a.readVRF(name, func(v *vrf) error {
		sum.Prefixes = len(v.nodes)
		for _, n := range v.nodes {
			if n.parent == nil || n.parent.kind != kindRoot {
				continue
			}
			f := 0
			if n.prefix.Addr().Is6() {
				f = 1
			}
			tn := v.treeNode(n)
			sum.Used[f] = satAdd(sum.Used[f], tn.Used)
			sum.Total[f] = satAdd(sum.Total[f], tn.Total)
		}
		return nil
	})
	return sum, err
}

// satAdd adds, saturating at the largest uint64.
func satAdd(x, y uint64) uint64 {
	if s := x + y; s >= x {
		return s
	}
	return ^uint64(0)
}

// Node returns prefix p of network instance name as a node of its tree.
func (a *Allocator) Node(name string, p netip.Prefix) (TreeNode, error) {
	var tn TreeNode
	err := a.readNode(name, p, func(v *vrf, n *node) { tn = v.treeNode(n) })
	return tn, err
}

// FreeBlocks returns the first limit free blocks of prefix p of network
// instance name, in address order, and whether more follow. A block of an
// aggregate or pool is a free CIDR; one of a network or loopback is a span
// of free addresses (reserved and excluded ones count as held).
func (a *Allocator) FreeBlocks(name string, p netip.Prefix, limit int) ([]AddrRange, bool, error) {
	var out []AddrRange
	more := false
	err := a.readNode(name, p, func(_ *vrf, n *node) { out, more = n.freeBlocks(limit) })
	return out, more, err
}

// freeBlocks returns the first limit free blocks of n and whether more
// follow (see FreeBlocks).
func (n *node) freeBlocks(limit int) ([]AddrRange, bool) {
	var out []AddrRange
	more := false
	add := func(r AddrRange) bool {
		if len(out) == limit {
			more = true
			return false
		}
		out = append(out, r)
		return true
	}
	if !n.isBitmap() {
		n.space.Ascend(func(free netip.Prefix) bool { return add(AddrRange{Start: free.Addr(), End: lastAddr(free)}) })
		return out, more
	}
	base, last := n.prefix.Addr(), n.addrs.Last()
	from := uint64(0)
	emit := func(lo, hi uint64) bool {
		return lo > hi || add(AddrRange{Start: addOffset(base, lo), End: addOffset(base, hi)})
	}
	stopped, atEnd := false, false
	n.addrs.Ascend(0, last, func(off uint64) bool {
		if off > from && !emit(from, off-1) {
			stopped = true
			return false
		}
		if off == last {
			atEnd = true
			return false
		}
		from = off + 1
		return true
	})
	if !stopped && !atEnd {
		emit(from, last)
	}
	return out, more
}

// Cursor is where a page of PrefixAllocations ended: the first address and
// the key of its last allocation. Allocations are ordered by first
// address, then key, so a page boundary between allocations that start at
// one address (a pool sub-prefix and a network carved from its start)
// loses none of them.
type Cursor struct {
	Addr netip.Addr
	Key  Key
}

// PrefixAllocations returns, in address order, up to limit allocations of
// network instance name whose address or prefix lies in p and that come
// after after (nil: from the first), and whether more follow. It scans the
// network instance's allocations but keeps only a page.
func (a *Allocator) PrefixAllocations(name string, p netip.Prefix, after *Cursor, limit int) ([]AllocationRecord, bool, error) {
	var out []AllocationRecord
	more := false
	err := a.readVRF(name, func(v *vrf) error {
		out, more = v.prefixAllocations(p.Masked(), after, limit)
		return nil
	})
	return out, more, err
}

// prefixAllocations is PrefixAllocations in v.
func (v *vrf) prefixAllocations(p netip.Prefix, after *Cursor, limit int) ([]AllocationRecord, bool) {
	var from addrRef
	if after != nil {
		from = addrRef{addr: after.Addr, owner: after.Key.Owner, ns: after.Key.Namespace, name: []byte(after.Key.Name)}
	}
	page := &addrPage{limit: limit + 1}
	for _, t := range v.tables {
		for i := range t.Len() {
			r := t.At(i)
			x := addrRef{addr: r.start(), owner: t.os.name, ns: r.Namespace(), name: t.Name(i), t: t, i: i}
			if !p.Contains(x.addr) || after != nil && compareRef(x, from) <= 0 {
				continue
			}
			page.offer(x)
		}
	}
	refs := page.sorted()
	more := len(refs) > limit
	if more {
		refs = refs[:limit]
	}
	out := make([]AllocationRecord, 0, len(refs))
	for _, x := range refs {
		o := x.t.at(x.i)
		out = append(out, AllocationRecord{Allocation: cloneAlloc(o.request()), Result: o.result()})
	}
	return out, more
}

// start is the first address an allocation holds (a sub-prefix's address).
func (r *allocRec) start() netip.Addr {
	s := r.spec
	switch {
	case r.node != nil:
		return addOffset(r.node.prefix.Addr(), r.off)
	case s.sub != nil:
		return s.sub.prefix.Addr()
	case s.host != nil:
		return s.host.addr
	default:
		return addOffset(s.pre.rng.node.prefix.Addr(), s.pre.off)
	}
}

// addrRef is an allocation of a page: its first address and key (name
// is a view of its table's name arena, valid under the VRF's lock), and
// where it is.
type addrRef struct {
	addr      netip.Addr
	owner, ns string
	name      []byte
	t         *allocTable
	i         int
}

// compareRef orders refs by address, then by key (see Cursor).
func compareRef(x, y addrRef) int {
	if c := x.addr.Compare(y.addr); c != 0 {
		return c
	}
	if c := cmp.Compare(x.owner, y.owner); c != 0 {
		return c
	}
	if c := cmp.Compare(x.ns, y.ns); c != 0 {
		return c
	}
	return bytes.Compare(x.name, y.name)
}

// addrPage keeps the limit smallest refs offered: a max-heap on address.
type addrPage struct {
	limit int
	refs  []addrRef
}

func (p *addrPage) Len() int           { return len(p.refs) }
func (p *addrPage) Less(i, j int) bool { return compareRef(p.refs[i], p.refs[j]) > 0 }
func (p *addrPage) Swap(i, j int)      { p.refs[i], p.refs[j] = p.refs[j], p.refs[i] }
func (p *addrPage) Push(x any)         { p.refs = append(p.refs, x.(addrRef)) }
func (p *addrPage) Pop() any {
	x := p.refs[len(p.refs)-1]
	p.refs = p.refs[:len(p.refs)-1]
	return x
}

func (p *addrPage) offer(r addrRef) {
	switch {
	case p.limit <= 0:
	case len(p.refs) < p.limit:
		heap.Push(p, r)
	case compareRef(r, p.refs[0]) < 0:
		p.refs[0] = r
		heap.Fix(p, 0)
	}
}

func (p *addrPage) sorted() []addrRef {
	slices.SortFunc(p.refs, compareRef)
	return p.refs
}

// Holding is what holds an address in one network instance: the deepest
// prefix of the tree that contains it and, if the address is held, the
// allocation that holds it (Allocation.Key.Name empty: held by a static
// address, a reservation or an exclusion, named in Holder).
type Holding struct {
	NetworkInstance string
	Node            TreeNode
	Allocation      *AllocationRecord
	// Holder names what holds the address when no allocation does.
	Holder string
}

// Lookup returns, for every network instance whose tree contains addr,
// the deepest prefix that contains it and what holds it there, by network
// instance name.
func (a *Allocator) Lookup(addr netip.Addr) []Holding {
	a.mu.RLock()
	defer a.mu.RUnlock()
	names := make([]string, 0, len(a.vrfs))
	for name := range a.vrfs {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []Holding
	for _, name := range names {
		v := a.vrfs[name]
		v.mu.RLock()
		if h, ok := v.lookup(addr.Unmap()); ok {
			out = append(out, h)
		}
		v.mu.RUnlock()
	}
	return out
}

// lookup finds the deepest node of v that holds addr and what holds addr.
func (v *vrf) lookup(addr netip.Addr) (Holding, bool) {
	var n *node
	for bits := hostBits(addr); bits >= 0 && n == nil; bits-- {
		p, _ := addr.Prefix(bits)
		n = v.nodes[p]
	}
	if n == nil {
		return Holding{}, false
	}
	h := Holding{NetworkInstance: v.name, Node: v.treeNode(n)}
	if n.alloc != nil { // a sub-prefix allocation holds the node it created
		h.Allocation = v.ownAlloc(n.alloc)
		return h, true
	}
	if !n.isBitmap() {
		return h, true
	}
	off, _ := offsetOf(n.prefix.Addr(), addr)
	if !n.addrs.Has(off) {
		return h, true
	}
	switch x := n.holders[off].(type) {
	case *hostEntry:
		h.Holder = "static address of " + x.obj.spec.Key.String() + " (owner " + x.obj.spec.Key.Owner + ")"
		h.Allocation = v.ownAlloc(x.claim)
	case *preAlloc:
		h.Holder = "pre-allocation " + Quote(x.name) + " of " + x.rng.obj.spec.Key.String() + " (owner " + x.rng.obj.spec.Key.Owner + ")"
		h.Allocation = v.ownAlloc(x.claim)
	default:
		if o, ok := v.plainHolder(n, off); ok {
			h.Allocation = &AllocationRecord{Allocation: cloneAlloc(o.request()), Result: o.result()}
		} else if n.isReserved(off) {
			h.Holder = "reserved (network or broadcast address)"
		} else if n.excludedAt(off) != nil {
			h.Holder = "excluded"
		}
	}
	return h, true
}

// ownAlloc returns the allocation of own spec s (nil: none).
func (v *vrf) ownAlloc(s *allocSpec) *AllocationRecord {
	if s == nil {
		return nil
	}
	for os, t := range v.tables {
		if os.name != s.req.Key.Owner {
			continue
		}
		if i := t.Index(s.req.Key.Namespace, s.req.Key.Name); i >= 0 {
			o := t.at(i)
			return &AllocationRecord{Allocation: cloneAlloc(o.request()), Result: o.result()}
		}
	}
	return nil
}

// SearchNames returns up to limit allocations and prefixes whose name or
// owner contains sub, by owner then key, and whether more matched.
func (a *Allocator) SearchNames(sub string, limit int) ([]AllocationRecord, []PrefixRecord, bool) {
	var allocs []AllocationRecord
	var prefixes []PrefixRecord
	more := false
	full := func() bool {
		more = more || len(allocs)+len(prefixes) >= limit
		return more
	}
	needle := []byte(sub)
	a.readOwners("", func(os *ownerState) {
		ownerMatches := strings.Contains(os.name, sub)
		for _, k := range slices.SortedFunc(maps.Keys(os.prefixes), compareNsName) {
			if o := os.prefixes[k]; ownerMatches || strings.Contains(k.name, sub) {
				if full() {
					return
				}
				o.v.mu.RLock()
				prefixes = append(prefixes, PrefixRecord{Prefix: *clonePrefix(o.spec), Result: o.result()})
				o.v.mu.RUnlock()
			}
		}
		for _, t := range os.tables {
			t.v.mu.RLock()
			for i := range t.Len() {
				if !ownerMatches && !bytes.Contains(t.Name(i), needle) {
					continue
				}
				if full() {
					break
				}
				o := t.at(i)
				allocs = append(allocs, AllocationRecord{Allocation: cloneAlloc(o.request()), Result: o.result()})
			}
			t.v.mu.RUnlock()
		}
	})
	return allocs, prefixes, more
}
