package ipam

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

func normalizeRange(r IPRange) (IPRange, error) {
	k := r.Key
	if k.Name == "" {
		return r, errf(ErrInvalid, ObjRange, k, "metadata.name", "a name is required")
	}
	if r.NetworkInstance == "" {
		return r, errf(ErrInvalid, ObjRange, k, "spec.networkInstance", "a network instance is required")
	}
	if !r.Start.IsValid() || !r.End.IsValid() {
		return r, errf(ErrInvalid, ObjRange, k, "spec.start", "start and end addresses are required")
	}
	if r.Start.Is4() != r.End.Is4() {
		return r, errf(ErrInvalid, ObjRange, k, "spec.end", "%s and %s are of different families", r.Start, r.End)
	}
	if r.End.Less(r.Start) {
		return r, errf(ErrInvalid, ObjRange, k, "spec.end", "end %s is before start %s", r.End, r.Start)
	}
	if r.PrefixLength != 0 {
		if r.PrefixLength < 1 || r.PrefixLength > hostBits(r.Start) {
			return r, errf(ErrInvalid, ObjRange, k, "spec.prefixLength", "%d is not between 1 and %d", r.PrefixLength, hostBits(r.Start))
		}
		if p := netip.PrefixFrom(r.Start, r.PrefixLength).Masked(); !p.Contains(r.End) {
			return r, errf(ErrInvalid, ObjRange, k, "spec.prefixLength", "%s-%s is not inside one /%d (%s)", r.Start, r.End, r.PrefixLength, p)
		}
	}
	if r.Gateway.IsValid() && r.Gateway.Is4() != r.Start.Is4() {
		return r, errf(ErrInvalid, ObjRange, k, "spec.gateway", "%s is not of the family of %s", r.Gateway, r.Start)
	}
	return r, nil
}

func rangeEqual(a, b IPRange) bool {
	return a.Key == b.Key && a.NetworkInstance == b.NetworkInstance && a.Start == b.Start && a.End == b.End &&
		maps.Equal(a.Labels, b.Labels) && slices.Equal(a.Exclusions, b.Exclusions) && maps.Equal(a.PreAllocations, b.PreAllocations) &&
		a.PrefixLength == b.PrefixLength && a.Gateway == b.Gateway && a.AllocateReserved == b.AllocateReserved
}

// putRange creates or replaces an IP range of its owner.
func (t *tx) putRange(os *ownerState, spec IPRange) error {
	if !t.replay {
		if err := checkRangeText(spec); err != nil {
			return err
		}
	}
	spec, err := normalizeRange(spec)
	if err != nil {
		return err
	}
	spec = *cloneRange(spec)
	old := os.ranges[nsn(spec.Key)]
	if t.authz != nil {
		from := ""
		if old != nil {
			from = old.v.name
		}
		if err := t.authorizeMove(os, from, spec.NetworkInstance, ObjRange, spec.Key); err != nil {
			return err
		}
	}
	if old != nil && rangeEqual(old.spec, spec) {
		return nil
	}
	v, err := t.vrf(spec.NetworkInstance, ObjRange, spec.Key, "spec.networkInstance")
	if err != nil {
		return err
	}
	o := &rangeObj{spec: spec, v: v}
	if old == nil {
		if err := t.addRange(o); err != nil {
			return err
		}
	} else if err := t.replaceRange(old, o); err != nil {
		return err
	}
	t.setRange(os, nsn(spec.Key), o)
	t.record(Record{Op: OpPutRange, Key: spec.Key, Range: &spec})
	return nil
}

// deleteRange deletes an IP range of its owner.
func (t *tx) deleteRange(os *ownerState, key Key) error {
	o := os.ranges[nsn(key)]
	if o == nil {
		return errf(ErrNotFound, ObjRange, key, "", "not found")
	}
	if err := t.authorize(os, o.v.name, ObjRange, key, ""); err != nil {
		return err
	}
	if _, err := t.vrf(o.v.name, ObjRange, key, ""); err != nil {
		return err
	}
	if err := t.removeRange(o); err != nil {
		return err
	}
	t.setRange(os, nsn(key), nil)
	t.record(Record{Op: OpDeleteRange, Key: key})
	return nil
}

func (t *tx) setRange(os *ownerState, k nsName, o *rangeObj) {
	old := os.ranges[k]
	setOwned(os.ranges, k, o)
	t.onUndo(func() { setOwned(os.ranges, k, old) })
}

func (t *tx) addRange(o *rangeObj) error {
	s, v, k := o.spec, o.v, o.spec.Key
	n := v.bitmapNodeFor(s.Start)
	if n == nil || !n.prefix.Contains(s.End) {
		return errf(ErrNotFound, ObjRange, k, "spec.start", "no network or loopback prefix of network instance %s contains %s-%s", v.name, s.Start, s.End)
	}
	lo, hi, err := n.span(s.Start, s.End, ObjRange, k, "spec.start")
	if err != nil {
		return err
	}
	if other := n.firstRangeOverlapping(lo, hi); other != nil {
		return errf(ErrConflict, ObjRange, k, "spec.start", "%s-%s overlaps %s (%s-%s)", s.Start, s.End, objName(ObjRange, other.obj.spec.Key),
			other.obj.spec.Start, other.obj.spec.End)
	}
	labels, bad := mergeLabels(systemLabels(v.name, n.kind, familyOf(s.Start), n.prefix.Bits(), n.network), s.Labels)
	if bad != "" {
		return errf(ErrInvalid, ObjRange, k, "metadata.labels", "label %s=%q contradicts the system label", bad, s.Labels[bad])
	}
	g := &ipRange{obj: o, node: n, lo: lo, hi: hi, pre: make(map[string]*preAlloc)}
	g.entry = &entry{order: orderKey{pfx: netip.PrefixFrom(s.Start, hostBits(s.Start)), rank: 1}, labels: labels, rng: g}
	old := n.ranges
	i, _ := slices.BinarySearchFunc(old, lo, func(r *ipRange, lo uint64) int {
		if r.lo < lo {
			return -1
		}
		return 1
	})
	n.ranges = slices.Insert(slices.Clone(old), i, g)
	t.onUndo(func() { n.ranges = old })
	t.indexEntry(v, g.entry)
	if err := t.syncReserved(n, ObjRange, k, "spec.allocateReserved"); err != nil {
		return err
	}
	for i, x := range s.Exclusions {
		f := fmt.Sprintf("spec.exclusions[%d]", i)
		if x.Start.IsValid() && x.End.IsValid() && (x.Start.Less(s.Start) || s.End.Less(x.End)) {
			return errf(ErrInvalid, ObjRange, k, f, "%s-%s is not inside the range %s-%s", x.Start, x.End, s.Start, s.End)
		}
	}
	excl := s.Exclusions
	if gw := s.Gateway; gw.IsValid() && !gw.Less(s.Start) && !s.End.Less(gw) {
		// The range's own gateway is never allocated: an exclusion of
		// the range, which must find it free (named here, since the
		// exclusion is not one of spec.exclusions).
		if off, _ := offsetOf(n.prefix.Addr(), gw); n.addrs.Has(off) && !n.isReserved(off) {
			return errf(ErrConflict, ObjRange, k, "spec.gateway", "%s is held by %s", gw, n.describeHolder(off))
		}
		excl = append(slices.Clip(excl), AddrRange{Start: gw, End: gw})
	}
	if err := t.addExclusions(n, excl, g, ObjRange, k, "spec.exclusions"); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(s.PreAllocations)) {
		a := s.PreAllocations[name]
		f := "spec.preAllocations." + name
		off, ok := offsetOf(n.prefix.Addr(), a)
		if !a.IsValid() || !ok || off < lo || off > hi || a.Is4() != s.Start.Is4() {
			return errf(ErrInvalid, ObjRange, k, f, "%s is not inside the range %s-%s", a, s.Start, s.End)
		}
		if n.addrs.Has(off) {
			return errf(ErrConflict, ObjRange, k, f, "%s is already held by %s", a, n.describeHolder(off))
		}
		p := &preAlloc{rng: g, name: name, off: off}
		t.hold(n, off, 1, p)
		g.pre[name] = p
	}
	o.rng = g
	return nil
}

// replaceRange changes a range in place while allocations use it: it may
// grow, shrink over free addresses, gain exclusions on free addresses and
// gain or lose pre-allocations nobody claims. Plain allocations of the old
// range must lie inside the new one; a claimed pre-allocation must keep
// its address, and its allocation moves to the new range.
func (t *tx) replaceRange(old, o *rangeObj) error {
	g := old.rng
	plain, claims := rangeUsers(g)
	t.dropRange(old)
	if err := t.addRange(o); err != nil {
		return err
	}
	ng := o.rng
	var dropped []string
	n := 0
	for _, off := range plain {
		if ng.node != g.node || off < ng.lo || off > ng.hi {
			if n++; n <= 3 {
				dropped = append(dropped, addOffset(g.node.prefix.Addr(), off).String()+" ("+g.node.describeHolder(off)+")")
			}
		}
	}
	if n > 0 {
		if n > 3 {
			dropped = append(dropped, fmt.Sprintf("%d more", n-3))
		}
		return errf(ErrInUse, ObjRange, o.spec.Key, "spec.start", "the new range %s-%s drops allocated addresses: %s",
			o.spec.Start, o.spec.End, strings.Join(dropped, ", "))
	}
	for _, p := range claims {
		np := ng.pre[p.name]
		if np == nil || ng.node != g.node || np.off != p.off {
			return errf(ErrInUse, ObjRange, o.spec.Key, "spec.preAllocations."+p.name, "the pre-allocated address %s of %s is allocated to %s; release it first",
				addOffset(g.node.prefix.Addr(), p.off), p.name, objName(ObjAllocation, p.claim.req.Key))
		}
		t.movePreClaim(p, np)
	}
	return nil
}

// movePreClaim hands the allocation that claims p over to np, the same
// pre-allocation of a replaced range.
func (t *tx) movePreClaim(p, np *preAlloc) {
	spec := p.claim
	np.claim, spec.pre = spec, np
	t.onUndo(func() { np.claim, spec.pre = nil, p })
}

// rangeUsers returns the offsets of g held by plain allocations and the
// claimed pre-allocations of g, each in address order.
func rangeUsers(g *ipRange) (plain []uint64, claims []*preAlloc) {
	n := g.node
	n.addrs.Ascend(g.lo, g.hi, func(off uint64) bool {
		switch h := n.holders[off].(type) {
		case *preAlloc:
			if h.claim != nil {
				claims = append(claims, h)
			}
		case nil:
			if !n.isReserved(off) && n.excludedAt(off) == nil {
				plain = append(plain, off)
			}
		}
		return true
	})
	return plain, claims
}

// removeRange removes a range that no allocation uses.
func (t *tx) removeRange(o *rangeObj) error {
	g := o.rng
	n := g.node
	plain, claims := rangeUsers(g)
	switch {
	case len(claims) > 0:
		p := claims[0]
		return errf(ErrInUse, ObjRange, o.spec.Key, "", "address %s of the range is allocated to %s",
			addOffset(n.prefix.Addr(), p.off), objName(ObjAllocation, p.claim.req.Key))
	case len(plain) > 0:
		return errf(ErrInUse, ObjRange, o.spec.Key, "", "address %s of the range is allocated to %s",
			addOffset(n.prefix.Addr(), plain[0]), n.describeHolder(plain[0]))
	}
	t.dropRange(o)
	return t.syncReserved(n, ObjRange, o.spec.Key, "spec.allocateReserved")
}

// dropRange takes a range out of its node, whoever uses its addresses.
func (t *tx) dropRange(o *rangeObj) {
	g := o.rng
	n := g.node
	for _, p := range g.pre {
		t.unhold(n, p.off, 1)
	}
	t.removeExclusions(n, g)
	t.unindexEntry(n.v, g.entry)
	old := n.ranges
	n.ranges = slices.DeleteFunc(slices.Clone(old), func(r *ipRange) bool { return r == g })
	t.onUndo(func() { n.ranges = old })
}
