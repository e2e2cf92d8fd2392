package ipam

import (
	"maps"
	"net/netip"
	"strconv"
)

// MaxBlock is the largest Count of one block allocation.
const MaxBlock = 1 << 16

// normalizeAlloc validates an allocation request and fills defaults.
func normalizeAlloc(r Allocation) (Allocation, error) {
	k := r.Key
	if k.Name == "" {
		return r, errf(ErrInvalid, ObjAllocation, k, "metadata.name", "a name is required")
	}
	if r.Kind == "" {
		r.Kind = KindNetwork
	}
	switch r.Kind {
	case KindNetwork, KindPool, KindLoopback:
	case KindAggregate:
		return r, errf(ErrInvalid, ObjAllocation, k, "spec.kind", "aggregates are declared with an IPPrefix, not allocated")
	default:
		return r, errf(ErrInvalid, ObjAllocation, k, "spec.kind", "unknown kind %q (one of network, pool, loopback)", r.Kind)
	}
	if sel := r.Selector[LabelNetworkInstance]; sel != "" {
		if r.NetworkInstance != "" && r.NetworkInstance != sel {
			return r, errf(ErrInvalid, ObjAllocation, k, "spec.selector", "%s=%s contradicts spec.networkInstance %s", LabelNetworkInstance, sel, r.NetworkInstance)
		}
		r.NetworkInstance = sel
	}
	if r.NetworkInstance == "" {
		return r, errf(ErrInvalid, ObjAllocation, k, "spec.networkInstance", "a network instance is required (or the selector label %s)", LabelNetworkInstance)
	}
	switch r.AddressFamily {
	case "", IPv4, IPv6:
	default:
		return r, errf(ErrInvalid, ObjAllocation, k, "spec.addressFamily", "unknown address family %q (ipv4 or ipv6)", r.AddressFamily)
	}
	if r.Prefix.IsValid() {
		if err := checkPrefixValue(r.Prefix, ObjAllocation, k, "spec.prefix"); err != nil {
			return r, err
		}
		f := familyOf(r.Prefix.Addr())
		if r.AddressFamily != "" && r.AddressFamily != f {
			return r, errf(ErrInvalid, ObjAllocation, k, "spec.addressFamily", "%s contradicts spec.prefix %s", r.AddressFamily, r.Prefix)
		}
		r.AddressFamily = f
		if r.PrefixLength != 0 && r.PrefixLength != r.Prefix.Bits() {
			return r, errf(ErrInvalid, ObjAllocation, k, "spec.prefixLength", "%d contradicts spec.prefix %s", r.PrefixLength, r.Prefix)
		}
		r.PrefixLength = 0
		if r.Kind != KindNetwork && r.Prefix.Masked() != r.Prefix {
			return r, errf(ErrInvalid, ObjAllocation, k, "spec.prefix", "%s has host bits set; a %s is written %s", r.Prefix, r.Kind, r.Prefix.Masked())
		}
	}
	maxLen := 128
	if r.AddressFamily == IPv4 {
		maxLen = 32
	}
	if r.PrefixLength < 0 || r.PrefixLength > maxLen {
		return r, errf(ErrInvalid, ObjAllocation, k, "spec.prefixLength", "%d exceeds /%d", r.PrefixLength, maxLen)
	}
	if r.Kind == KindLoopback && (r.PrefixLength == 32 && r.AddressFamily != IPv6 || r.PrefixLength == 128) {
		// A loopback address is a host prefix: the address mode of loopbacks.
		r.AddressFamily = IPv4
		if r.PrefixLength == 128 {
			r.AddressFamily = IPv6
		}
		r.PrefixLength = 0
	}
	if r.Kind == KindPool && r.PrefixLength == 0 && !r.Prefix.IsValid() {
		return r, errf(ErrInvalid, ObjAllocation, k, "spec.prefixLength", "required for kind pool")
	}
	if r.Count < 0 || r.Count > MaxBlock {
		return r, errf(ErrInvalid, ObjAllocation, k, "spec.count", "%d is outside 0..%d", r.Count, MaxBlock)
	}
	if r.Count > 1 && !addressMode(r) {
		return r, errf(ErrInvalid, ObjAllocation, k, "spec.count", "blocks are made of addresses; drop spec.prefixLength or use kind network")
	}
	if r.Count == 1 {
		r.Count = 0
	}
	return r, nil
}

// addressMode reports whether r asks for addresses (from a network or
// loopback) rather than a sub-prefix.
func addressMode(r Allocation) bool {
	if r.Prefix.IsValid() {
		return r.Kind != KindPool && (r.Prefix.Masked() != r.Prefix || r.Prefix.Bits() == hostBits(r.Prefix.Addr()))
	}
	return r.Kind != KindPool && r.PrefixLength == 0
}

func sameAllocPlacement(a, b Allocation) bool {
	return a.Key == b.Key && a.NetworkInstance == b.NetworkInstance && a.Kind == b.Kind && a.PrefixLength == b.PrefixLength &&
		a.Prefix == b.Prefix && a.AddressFamily == b.AddressFamily && a.Count == b.Count && maps.Equal(a.Selector, b.Selector) &&
		a.Labels[LabelNetworkName] == b.Labels[LabelNetworkName]
}

// putAllocation allocates, keeps or re-allocates (rule 8) one request.
func (t *tx) putAllocation(os *ownerState, r Allocation) (Result, error) {
	r, err := normalizeAlloc(r)
	if err != nil {
		return Result{}, err
	}
	r.Labels = maps.Clone(r.Labels)
	old := os.allocs[nsn(r.Key)]
	if old != nil && sameAllocPlacement(old.req, r) {
		if !maps.Equal(old.req.Labels, r.Labels) {
			if err := t.relabelAlloc(old, r); err != nil {
				return Result{}, err
			}
			t.record(Record{Op: OpPutAllocation, Key: r.Key, Allocation: t.newAllocRecord(r, old.result())})
		}
		return old.result(), nil
	}
	v, err := t.vrf(r.NetworkInstance, ObjAllocation, r.Key, "spec.networkInstance")
	if err != nil {
		return Result{}, err
	}
	r.Selector = v.intern(r.Selector, true)
	o := &allocObj{req: r, v: v}
	if addressMode(r) {
		err = t.placeAddress(o)
	} else {
		err = t.placePrefix(o)
	}
	if err != nil {
		return Result{}, err
	}
	if old != nil {
		// Rule 8: the new result is in place; now the old one goes.
		if err := t.releaseAlloc(old); err != nil {
			return Result{}, err
		}
	}
	t.setAlloc(os, nsn(r.Key), o)
	res := o.result()
	t.record(Record{Op: OpPutAllocation, Key: r.Key, Allocation: t.newAllocRecord(r, res)})
	return res, nil
}

func (t *tx) setAlloc(os *ownerState, k nsName, o *allocObj) {
	old := os.allocs[k]
	setOwned(os.allocs, k, o)
	t.onUndo(func() { setOwned(os.allocs, k, old) })
}

// deleteAllocation releases an allocation of its owner (rule 9).
func (t *tx) deleteAllocation(os *ownerState, key Key) error {
	o := os.allocs[nsn(key)]
	if o == nil {
		return errf(ErrNotFound, ObjAllocation, key, "", "not found")
	}
	if _, err := t.vrf(o.v.name, ObjAllocation, key, ""); err != nil {
		return err
	}
	if err := t.releaseAlloc(o); err != nil {
		return err
	}
	t.setAlloc(os, nsn(key), nil)
	t.record(Record{Op: OpDeleteAllocation, Key: key})
	return nil
}

func (t *tx) relabelAlloc(o *allocObj, r Allocation) error {
	if o.sub != nil {
		n := o.sub
		labels, bad := mergeLabels(systemLabels(n.v.name, n.kind, familyOf(n.prefix.Addr()), n.prefix.Bits(), n.network), r.Labels)
		if bad != "" {
			return errf(ErrInvalid, ObjAllocation, r.Key, "spec.labels", "label %s=%q contradicts the system label", bad, r.Labels[bad])
		}
		t.relabel(n.v, n.entry, labels)
		oldUser := n.userLabels
		n.userLabels = r.Labels
		t.onUndo(func() { n.userLabels = oldUser })
	}
	old := o.req
	o.req = r
	t.onUndo(func() { o.req = old })
	return nil
}

// releaseAlloc frees what an allocation holds.
func (t *tx) releaseAlloc(o *allocObj) error {
	switch {
	case o.sub != nil:
		if err := t.removeNode(o.sub, ObjAllocation, o.req.Key); err != nil {
			return err
		}
		n := o.sub
		n.alloc = nil
		t.onUndo(func() { n.alloc = o })
	case o.host != nil:
		t.setClaim(&o.host.claim, nil)
	case o.pre != nil:
		t.setClaim(&o.pre.claim, nil)
	default:
		t.unhold(o.node, o.off, o.n)
	}
	return nil
}

func (t *tx) setClaim(p **allocObj, o *allocObj) {
	old := *p
	*p = o
	t.onUndo(func() { *p = old })
}

// addrResult builds the result of addresses [off, off+cnt-1] of n (rule 4).
func addrResult(n *node, off, cnt uint64) Result {
	a := addOffset(n.prefix.Addr(), off)
	bits := n.prefix.Bits()
	if n.kind == KindLoopback {
		bits = hostBits(a)
	}
	r := Result{NetworkInstance: n.v.name, Prefix: netip.PrefixFrom(a, bits), Gateway: n.gateway}
	if cnt > 1 {
		r.Last = addOffset(a, cnt-1)
	}
	return r
}

func (t *tx) takeAddr(o *allocObj, n *node, off, cnt uint64) {
	t.hold(n, off, cnt, o)
	o.node, o.off, o.n = n, off, cnt
}

func (t *tx) claimHost(o *allocObj, h *hostEntry) {
	t.setClaim(&h.claim, o)
	o.node, o.off, o.n, o.host = h.node, h.off, 1, h
}

func (t *tx) claimPre(o *allocObj, p *preAlloc) {
	t.setClaim(&p.claim, o)
	o.node, o.off, o.n, o.pre = p.rng.node, p.off, 1, p
}

// placeAddress decides the address(es) of an address-mode request: an
// explicit address, a static host entry or pre-allocation its selector
// picks, or the lowest free address(es) of the first matching network or
// range (rules 5-7).
func (t *tx) placeAddress(o *allocObj) error {
	r, v := o.req, o.v
	cnt := uint64(max(r.Count, 1))
	if r.Prefix.IsValid() {
		return t.placeExactAddress(o, cnt)
	}
	cands := t.addressCandidates(v, r, cnt == 1)
	if len(cands) == 0 {
		return errf(ErrNotFound, ObjAllocation, r.Key, "spec.selector", "selector %s matches no %s prefix in network instance %s", formatSelector(r.Selector), r.Kind, v.name)
	}
	var conflict error
	for _, e := range cands {
		switch {
		case e.host != nil:
			h := e.host
			if h.claim == nil || h.claim.req.Key == r.Key {
				t.claimHost(o, h)
				return nil
			}
			if conflict == nil {
				conflict = errf(ErrConflict, ObjAllocation, r.Key, "spec.selector", "static address %s (%s %s) is already allocated to %s %s",
					netip.PrefixFrom(h.addr, h.node.prefix.Bits()), ObjPrefix, h.obj.spec.Key, ObjAllocation, h.claim.req.Key)
			}
		case e.rng != nil:
			g := e.rng
			if p := g.pre[r.Key.Name]; p != nil && cnt == 1 {
				if p.claim != nil && p.claim.req.Key != r.Key {
					if conflict == nil {
						conflict = errf(ErrConflict, ObjAllocation, r.Key, "metadata.name", "the pre-allocated address %s of %s %s is already allocated to %s %s",
							addOffset(g.node.prefix.Addr(), p.off), ObjRange, g.obj.spec.Key, ObjAllocation, p.claim.req.Key)
					}
					continue
				}
				t.claimPre(o, p)
				return nil
			}
			if off, ok := g.node.nextFree(g.lo, g.hi, cnt, true); ok {
				t.takeAddr(o, g.node, off, cnt)
				return nil
			}
		default:
			n := e.node
			if off, ok := n.nextFree(0, n.addrs.Last(), cnt, false); ok {
				t.takeAddr(o, n, off, cnt)
				return nil
			}
		}
	}
	if conflict != nil {
		return conflict
	}
	what := "address"
	if cnt > 1 {
		what = "block of " + strconv.FormatUint(cnt, 10) + " consecutive addresses"
	}
	if len(cands) == 1 && cands[0].node != nil {
		return errf(ErrExhausted, ObjAllocation, r.Key, "spec.selector", "no free %s left in %s %s", what, cands[0].node.kind, cands[0].node.prefix)
	}
	return errf(ErrExhausted, ObjAllocation, r.Key, "spec.selector", "no free %s left in the %d prefixes and ranges matching %s", what, len(cands), formatSelector(r.Selector))
}

// addressCandidates returns the networks, static addresses and ranges an
// address request may take from, in prefix order.
func (t *tx) addressCandidates(v *vrf, r Allocation, single bool) []*entry {
	c := &t.sel
	if c.v == v && c.gen == v.index.gen && c.kind == r.Kind && c.family == r.AddressFamily && c.single == single &&
		maps.Equal(c.selector, r.Selector) {
		return c.cands
	}
	var buf [8]labelPair
	tm := terms(buf[:0], r.Selector, labelPair{LabelNetworkInstance, v.name}, labelPair{LabelPrefixKind, string(r.Kind)},
		labelPair{LabelAddressFamily, string(r.AddressFamily)})
	cands := v.index.match(tm, func(e *entry) bool {
		switch {
		case e.node != nil:
			return e.node.isBitmap()
		case e.host != nil:
			// A static address is picked only by a selector more specific
			// than its network's labels, and only for a single address.
			return single && !e.host.node.entry.matches(tm)
		default:
			return !e.rng.node.entry.matches(tm)
		}
	})
	*c = selCache{v: v, gen: v.index.gen, selector: r.Selector, kind: r.Kind, family: r.AddressFamily, single: single, cands: cands}
	return cands
}

func (t *tx) placeExactAddress(o *allocObj, cnt uint64) error {
	r, v := o.req, o.v
	a := r.Prefix.Addr()
	n := t.bitmapNodeFor(v, a)
	if n == nil || n.kind != r.Kind {
		return errf(ErrNotFound, ObjAllocation, r.Key, "spec.prefix", "no %s prefix contains %s in network instance %s", r.Kind, a, v.name)
	}
	if b := r.Prefix.Bits(); b != n.prefix.Bits() && b != hostBits(a) {
		return errf(ErrInvalid, ObjAllocation, r.Key, "spec.prefix", "%s does not match %s %s; write %s", r.Prefix, n.kind, n.prefix, netip.PrefixFrom(a, n.prefix.Bits()))
	}
	off, ok := offsetOf(n.prefix.Addr(), a)
	if !ok || off > n.addrs.Last() || cnt-1 > n.addrs.Last()-off {
		return errf(ErrInvalid, ObjAllocation, r.Key, "spec.prefix", "%s (count %d) does not fit in %s", a, cnt, n.prefix)
	}
	if cnt == 1 && n.addrs.Has(off) {
		switch h := n.holders[off].(type) {
		case *hostEntry:
			if h.claim == nil || h.claim.req.Key == r.Key {
				t.claimHost(o, h)
				return nil
			}
		case *preAlloc:
			if h.name == r.Key.Name && (h.claim == nil || h.claim.req.Key == r.Key) {
				t.claimPre(o, h)
				return nil
			}
		}
	}
	for i := range cnt {
		if n.addrs.Has(off + i) {
			x := off + i
			if n.isReserved(x) {
				return errf(ErrInvalid, ObjAllocation, r.Key, "spec.prefix", "%s is a reserved address of %s (rule 3)", addOffset(n.prefix.Addr(), x), n.prefix)
			}
			return errf(ErrConflict, ObjAllocation, r.Key, "spec.prefix", "%s is already held by %s", addOffset(n.prefix.Addr(), x), n.describeHolder(x))
		}
	}
	t.takeAddr(o, n, off, cnt)
	return nil
}

// placePrefix carves a sub-prefix: exactly spec.prefix, or the best fit of
// spec.prefixLength in the first matching aggregate or pool (rule 5).
func (t *tx) placePrefix(o *allocObj) error {
	r, v := o.req, o.v
	network := r.Labels[LabelNetworkName]
	if r.Prefix.IsValid() {
		n, err := t.insertNode(v, r.Prefix, r.Kind, network, r.Labels, ObjAllocation, r.Key)
		if err != nil {
			return err
		}
		t.bindSub(o, n)
		return nil
	}
	var buf [8]labelPair
	tm := terms(buf[:0], r.Selector, labelPair{LabelNetworkInstance, v.name}, labelPair{LabelAddressFamily, string(r.AddressFamily)})
	cands := v.index.match(tm, func(e *entry) bool {
		// The outermost matching prefixes are the parents: a pool nested in
		// a matching aggregate is used only by a selector naming its own
		// labels, so carving never lands inside another allocation by chance.
		return e.node != nil && e.node.space != nil && allowedParent(r.Kind, e.node.kind) && !e.node.ancestorMatches(tm)
	})
	if len(cands) == 0 {
		return errf(ErrNotFound, ObjAllocation, r.Key, "spec.selector", "selector %s matches no aggregate or pool in network instance %s", formatSelector(r.Selector), v.name)
	}
	pl := r.PrefixLength
	fit := 0
	for _, e := range cands {
		n := e.node
		if n.prefix.Bits() >= pl || pl > hostBits(n.prefix.Addr()) {
			continue
		}
		fit++
		p, ok := n.space.BestFit(pl)
		if !ok {
			continue
		}
		sub, err := t.insertNode(v, p, r.Kind, network, r.Labels, ObjAllocation, r.Key)
		if err != nil {
			return withField(err, "spec.labels")
		}
		t.bindSub(o, sub)
		return nil
	}
	if fit == 0 {
		return errf(ErrInvalid, ObjAllocation, r.Key, "spec.prefixLength", "/%d does not fit in %s, the largest matching prefix", pl, cands[0].node.prefix)
	}
	return errf(ErrExhausted, ObjAllocation, r.Key, "spec.prefixLength", "no free /%d left in the %d prefix(es) matching %s", pl, fit, formatSelector(r.Selector))
}

func (t *tx) bindSub(o *allocObj, n *node) {
	n.alloc = o
	t.onUndo(func() { n.alloc = nil })
	o.sub = n
}

// placeRecorded re-places a recorded allocation at its recorded result,
// without deciding anything (replay and restore).
func (t *tx) placeRecorded(o *allocObj, res Result) error {
	r, v := o.req, o.v
	if !addressMode(r) {
		n, err := t.insertNode(v, res.Prefix, r.Kind, r.Labels[LabelNetworkName], r.Labels, ObjAllocation, r.Key)
		if err != nil {
			return err
		}
		t.bindSub(o, n)
		return nil
	}
	a := res.Prefix.Addr()
	n := t.bitmapNodeFor(v, a)
	if n == nil {
		return errf(ErrNotFound, ObjAllocation, r.Key, "status.prefix", "no network or loopback holds %s", a)
	}
	off, _ := offsetOf(n.prefix.Addr(), a)
	cnt := uint64(max(r.Count, 1))
	if cnt == 1 && n.addrs.Has(off) {
		switch h := n.holders[off].(type) {
		case *hostEntry:
			if h.claim == nil {
				t.claimHost(o, h)
				return nil
			}
		case *preAlloc:
			if h.claim == nil {
				t.claimPre(o, h)
				return nil
			}
		}
		return errf(ErrConflict, ObjAllocation, r.Key, "status.prefix", "%s is already held by %s", a, n.describeHolder(off))
	}
	for i := range cnt {
		if n.addrs.Has(off + i) {
			return errf(ErrConflict, ObjAllocation, r.Key, "status.prefix", "%s is already held by %s", addOffset(n.prefix.Addr(), off+i), n.describeHolder(off+i))
		}
	}
	t.takeAddr(o, n, off, cnt)
	return nil
}
