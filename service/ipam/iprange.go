package ipam

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
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
	return r, nil
}

func rangeEqual(a, b IPRange) bool {
	return a.Key == b.Key && a.NetworkInstance == b.NetworkInstance && a.Start == b.Start && a.End == b.End &&
		maps.Equal(a.Labels, b.Labels) && slices.Equal(a.Exclusions, b.Exclusions) && maps.Equal(a.PreAllocations, b.PreAllocations)
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
	if old != nil && rangeEqual(old.spec, spec) {
		return nil
	}
	v, err := t.vrf(spec.NetworkInstance, ObjRange, spec.Key, "spec.networkInstance")
	if err != nil {
		return err
	}
	if old != nil {
		if err := t.removeRange(old); err != nil {
			return err
		}
	}
	o := &rangeObj{spec: spec, v: v}
	if err := t.addRange(o); err != nil {
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
		return errf(ErrConflict, ObjRange, k, "spec.start", "%s-%s overlaps %s %s (%s-%s)", s.Start, s.End, ObjRange, other.obj.spec.Key,
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
	for i, x := range s.Exclusions {
		f := fmt.Sprintf("spec.exclusions[%d]", i)
		if x.Start.IsValid() && x.End.IsValid() && (x.Start.Less(s.Start) || s.End.Less(x.End)) {
			return errf(ErrInvalid, ObjRange, k, f, "%s-%s is not inside the range %s-%s", x.Start, x.End, s.Start, s.End)
		}
	}
	if err := t.addExclusions(n, s.Exclusions, g, ObjRange, k, "spec.exclusions"); err != nil {
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

// removeRange removes a range that no allocation uses.
func (t *tx) removeRange(o *rangeObj) error {
	g := o.rng
	n := g.node
	var user string
	n.addrs.Ascend(g.lo, g.hi, func(off uint64) bool {
		addr := addOffset(n.prefix.Addr(), off)
		switch h := n.holders[off].(type) {
		case *preAlloc:
			if h.claim != nil {
				user = fmt.Sprintf("address %s of the range is allocated to %s %s", addr, ObjAllocation, h.claim.req.Key)
			}
		case nil:
			if n.isReserved(off) || n.excludedAt(off) != nil {
				break
			}
			if o, ok := n.v.plainHolder(n, off); ok {
				user = fmt.Sprintf("address %s of the range is allocated to %s %s", o.result().Prefix.Addr(), ObjAllocation, o.key())
			}
		}
		return user == ""
	})
	if user != "" {
		return errf(ErrInUse, ObjRange, o.spec.Key, "", "%s", user)
	}
	for _, p := range g.pre {
		t.unhold(n, p.off, 1)
	}
	t.removeExclusions(n, g)
	t.unindexEntry(n.v, g.entry)
	old := n.ranges
	n.ranges = slices.DeleteFunc(slices.Clone(old), func(r *ipRange) bool { return r == g })
	t.onUndo(func() { n.ranges = old })
	return nil
}
