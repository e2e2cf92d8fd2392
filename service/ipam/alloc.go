package ipam

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// MaxBlock is the largest Count of one block allocation.
const MaxBlock = 1 << 16

// normalizeAlloc validates an allocation request and fills defaults in
// place.
func normalizeAlloc(r *Allocation) error {
	if sel, ok := plainSelector(r); ok {
		if r.Kind == "" {
			r.Kind = KindNetwork
		}
		if sel != "" {
			r.NetworkInstance = sel
		}
		return nil
	}
	return checkAlloc(r)
}

// plainSelector reports whether r is a valid request of the common shape,
// an address by selector, that needs no more than defaults, and returns
// the network instance its selector names; checkAlloc decides every other
// request.
func plainSelector(r *Allocation) (string, bool) {
	switch r.Kind {
	case "", KindNetwork, KindLoopback:
	default:
		return "", false
	}
	switch r.AddressFamily {
	case "", IPv4, IPv6:
	default:
		return "", false
	}
	sel := r.Selector[LabelNetworkInstance]
	return sel, r.Key.Name != "" && !r.Prefix.IsValid() && r.PrefixLength == 0 && r.Count == 0 &&
		(r.NetworkInstance != "" || sel != "") && (sel == "" || r.NetworkInstance == "" || r.NetworkInstance == sel)
}

// checkAllocText checks the strings of an allocation request against the
// limits: its key, network instance, selector and labels. Requests are
// checked; recorded allocations are restored as they were stored.
func checkAllocText(r *Allocation) error {
	if err := checkKey(ObjAllocation, r.Key); err != nil {
		return err
	}
	if err := checkText(ObjAllocation, r.Key, "spec.networkInstance", r.NetworkInstance, MaxNameLength); err != nil {
		return err
	}
	if err := checkSelector(ObjAllocation, r.Key, "spec.selector", r.Selector); err != nil {
		return err
	}
	return checkLabels(ObjAllocation, r.Key, "spec.labels", r.Labels)
}

// checkAlloc validates any allocation request and fills defaults in
// place; its errors name the field at fault.
func checkAlloc(r *Allocation) error {
	k := r.Key
	if k.Name == "" {
		return errf(ErrInvalid, ObjAllocation, k, "metadata.name", "a name is required")
	}
	if r.Kind == "" {
		r.Kind = KindNetwork
	}
	switch r.Kind {
	case KindNetwork, KindPool, KindLoopback:
	case KindAggregate:
		return errf(ErrInvalid, ObjAllocation, k, "spec.kind", "aggregates are declared with an IPPrefix, not allocated")
	default:
		return errf(ErrInvalid, ObjAllocation, k, "spec.kind", "unknown kind %s (one of network, pool, loopback)", Quote(string(r.Kind)))
	}
	if sel := r.Selector[LabelNetworkInstance]; sel != "" {
		if r.NetworkInstance != "" && r.NetworkInstance != sel {
			return errf(ErrInvalid, ObjAllocation, k, "spec.selector", "%s=%s contradicts spec.networkInstance %s", LabelNetworkInstance, sel, r.NetworkInstance)
		}
		r.NetworkInstance = sel
	}
	if r.NetworkInstance == "" {
		return errf(ErrInvalid, ObjAllocation, k, "spec.networkInstance", "a network instance is required (or the selector label %s)", LabelNetworkInstance)
	}
	switch r.AddressFamily {
	case "", IPv4, IPv6:
	default:
		return errf(ErrInvalid, ObjAllocation, k, "spec.addressFamily", "unknown address family %s (ipv4 or ipv6)", Quote(string(r.AddressFamily)))
	}
	if r.Prefix.IsValid() {
		if err := checkPrefixValue(r.Prefix, ObjAllocation, k, "spec.prefix"); err != nil {
			return err
		}
		f := familyOf(r.Prefix.Addr())
		if r.AddressFamily != "" && r.AddressFamily != f {
			return errf(ErrInvalid, ObjAllocation, k, "spec.addressFamily", "%s contradicts spec.prefix %s", r.AddressFamily, r.Prefix)
		}
		r.AddressFamily = f
		if r.PrefixLength != 0 && r.PrefixLength != r.Prefix.Bits() {
			return errf(ErrInvalid, ObjAllocation, k, "spec.prefixLength", "%d contradicts spec.prefix %s", r.PrefixLength, r.Prefix)
		}
		r.PrefixLength = 0
		if r.Kind != KindNetwork && r.Prefix.Masked() != r.Prefix {
			return errf(ErrInvalid, ObjAllocation, k, "spec.prefix", "%s has host bits set; a %s is written %s", r.Prefix, r.Kind, r.Prefix.Masked())
		}
	}
	maxLen := 128
	if r.AddressFamily == IPv4 {
		maxLen = 32
	}
	if r.PrefixLength < 0 || r.PrefixLength > maxLen {
		return errf(ErrInvalid, ObjAllocation, k, "spec.prefixLength", "%d exceeds /%d", r.PrefixLength, maxLen)
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
		return errf(ErrInvalid, ObjAllocation, k, "spec.prefixLength", "required for kind pool")
	}
	if r.Count < 0 || r.Count > MaxBlock {
		return errf(ErrInvalid, ObjAllocation, k, "spec.count", "%d is outside 0..%d", r.Count, MaxBlock)
	}
	if r.Count > 1 && !addressMode(*r) {
		return errf(ErrInvalid, ObjAllocation, k, "spec.count", "blocks are made of addresses; drop spec.prefixLength or use kind network")
	}
	if r.Count == 1 {
		r.Count = 0
	}
	return nil
}

// addressMode reports whether r asks for addresses (from a network or
// loopback) rather than a sub-prefix.
func addressMode(r Allocation) bool {
	if r.Prefix.IsValid() {
		return r.Kind != KindPool && (r.Prefix.Masked() != r.Prefix || r.Prefix.Bits() == hostBits(r.Prefix.Addr()))
	}
	return r.Kind != KindPool && r.PrefixLength == 0
}

// sameAllocPlacement reports whether two normalized requests of one key
// place the same way (only their labels may differ).
func sameAllocPlacement(a, b *Allocation) bool {
	return a.NetworkInstance == b.NetworkInstance && a.Kind == b.Kind && a.PrefixLength == b.PrefixLength &&
		a.Prefix == b.Prefix && a.AddressFamily == b.AddressFamily && a.Count == b.Count && maps.Equal(a.Selector, b.Selector) &&
		a.Labels[LabelNetworkName] == b.Labels[LabelNetworkName]
}

// putAllocation allocates, keeps or re-allocates (rule 8) one request.
func (t *tx) putAllocation(os *ownerState, r Allocation) (Result, error) {
	r.Key.Owner = os.name
	if err := checkAllocText(&r); err != nil {
		return Result{}, err
	}
	if err := normalizeAlloc(&r); err != nil {
		return Result{}, err
	}
	ns, name := r.Key.Namespace, r.Key.Name
	oldTable, oldRec := os.findAlloc(ns, name)
	if t.authz != nil {
		from := ""
		if oldRec != nil {
			from = oldTable.v.name
		}
		if err := t.authorizeMove(os, from, r.NetworkInstance, ObjAllocation, r.Key); err != nil {
			return Result{}, err
		}
	}
	var old allocRec
	if oldRec != nil {
		old = *oldRec
		if sameAllocPlacement(&old.spec.req, &r) {
			return t.keepAllocation(os, old, &r)
		}
	}
	v, err := t.vrf(r.NetworkInstance, ObjAllocation, r.Key, "spec.networkInstance")
	if err != nil {
		return Result{}, err
	}
	if oldRec == nil || oldTable.v != v {
		if err := checkRoom(os, v, r.Key); err != nil {
			return Result{}, err
		}
	}
	spec := v.sharedSpec(&r, false)
	r.Selector, r.Labels = spec.req.Selector, spec.req.Labels
	var rec allocRec
	if addressMode(r) {
		rec, err = t.placeAddress(spec, &r)
	} else {
		rec, err = t.placePrefix(spec, &r)
	}
	if err != nil {
		return Result{}, err
	}
	if oldRec != nil {
		// Rule 8: the new result is in place; now the old one goes.
		if err := t.releaseAlloc(old, r.Key); err != nil {
			return Result{}, err
		}
		if oldTable.v != v {
			t.delAlloc(oldTable, name, old)
		}
	}
	t.putAlloc(os, name, rec)
	res := rec.result()
	t.recordAlloc(&r, res)
	return res, nil
}

// keepAllocation answers a request that places like the allocation rec
// it repeats: the same result, with new labels if they changed.
func (t *tx) keepAllocation(os *ownerState, rec allocRec, r *Allocation) (Result, error) {
	if !maps.Equal(rec.spec.req.Labels, r.Labels) {
		if err := t.relabelAlloc(os, rec, r); err != nil {
			return Result{}, err
		}
		t.recordAlloc(r, rec.result())
	}
	return rec.result(), nil
}

// recordAlloc records the put of allocation r with result res. It is not
// inlined: its record temporaries would grow the frames of the hot paths
// that call it (and with them the goroutine stacks that run them).
//
//go:noinline
func (t *tx) recordAlloc(r *Allocation, res Result) {
	t.changed = true
	if t.replay || t.norec {
		return
	}
	if cap(t.recs) == 0 && cap(t.slab) == 0 && !t.replay {
		// The only record of a mutation (an Allocate): the record, its
		// slice and its allocation in one object.
		one := &oneAllocRecord{ar: AllocationRecord{Allocation: *r, Result: res}}
		one.recs[0] = Record{Op: OpPutAllocation, Key: r.Key, Allocation: &one.ar}
		t.recs = one.recs[:]
		return
	}
	t.record(Record{Op: OpPutAllocation, Key: r.Key, Allocation: t.newAllocRecord(r, res)})
}

// oneAllocRecord backs the records of a mutation that puts one
// allocation.
type oneAllocRecord struct {
	recs [1]Record
	ar   AllocationRecord
}

// putAlloc stores rec as the allocation name of os in rec's VRF.
func (t *tx) putAlloc(os *ownerState, name string, rec allocRec) {
	tb := t.tableFor(os, rec.spec.v)
	prev, replaced := tb.put(name, rec)
	if !replaced {
		prev = allocRec{spec: rec.spec} // to delete it again: the namespace
		if u := t.lastPlainStep(undoHoldPlain, rec); u != nil {
			// A new plain allocation: one step undoes its hold and its record.
			u.op, u.tb, u.name, u.rec.spec = undoNewPlain, tb, name, rec.spec
			return
		}
	}
	t.pushUndo(undoStep{op: undoPutAlloc, tb: tb, name: name, rec: prev, flag: replaced})
}

// tableFor returns the allocation table of os in v, making it if needed.
func (t *tx) tableFor(os *ownerState, v *vrf) *allocTable {
	tb := os.table(v)
	if tb == nil {
		if tb = os.spare; tb == nil || tb.v != v {
			tb = &allocTable{os: os, v: v}
		}
		link(tb)
	}
	if len(t.expect) == 0 {
		return tb
	}
	if n := t.expect[ownerVRF{os.name, v.name}]; n > 0 {
		delete(t.expect, ownerVRF{os.name, v.name})
		tb.Grow(n)
	}
	return tb
}

// checkRoom refuses a new allocation of os in v when its table is full.
func checkRoom(os *ownerState, v *vrf, key Key) error {
	if tb := os.table(v); tb != nil && tb.Full() {
		return errf(ErrExhausted, ObjAllocation, key, "", "owner %q holds the most allocations one owner may hold in network instance %s (%d)", os.name, v.name, MaxTableAllocs)
	}
	return nil
}

// lastPlainStep returns the last undo step if it is op (a plain hold or
// free) of rec's placement, which the step of rec's record then absorbs.
func (t *tx) lastPlainStep(op undoOp, rec allocRec) *undoStep {
	n := len(t.undo) - 1
	if n < 0 || rec.node == nil {
		return nil
	}
	if u := &t.undo[n]; u.op == op && u.rec.node == rec.node && u.rec.off == rec.off {
		return u
	}
	return nil
}

// delAlloc deletes the allocation name, whose record is rec, from tb.
func (t *tx) delAlloc(tb *allocTable, name string, rec allocRec) {
	removed := dropAlloc(tb, rec.spec.req.Key.Namespace, name)
	if u := t.lastPlainStep(undoFreePlain, rec); u != nil {
		// A plain allocation released: one step restores its record and
		// its hold.
		u.op, u.tb, u.name, u.rec, u.flag = undoDelPlain, tb, name, rec, removed
		return
	}
	t.pushUndo(undoStep{op: undoDelAlloc, tb: tb, name: name, rec: rec, flag: removed})
}

// dropAlloc deletes ns/name from tb and forgets tb once it is empty, which
// it reports.
func dropAlloc(tb *allocTable, ns, name string) bool {
	tb.del(ns, name)
	if tb.Len() > 0 {
		return false
	}
	unlink(tb)
	return true
}

// deleteAllocation releases an allocation of its owner (rule 9).
func (t *tx) deleteAllocation(os *ownerState, key Key) error {
	tb, rec := os.findAlloc(key.Namespace, key.Name)
	if rec == nil {
		return errf(ErrNotFound, ObjAllocation, key, "", "not found")
	}
	if err := t.authorize(os, tb.v.name, ObjAllocation, key, ""); err != nil {
		return err
	}
	if _, err := t.vrf(tb.v.name, ObjAllocation, key, ""); err != nil {
		return err
	}
	if err := t.releaseAlloc(*rec, key); err != nil {
		return err
	}
	t.delAlloc(tb, key.Name, *rec)
	t.record(Record{Op: OpDeleteAllocation, Key: key})
	return nil
}

// relabelAlloc changes only the labels of a placed allocation.
// r's maps become the stored ones.
func (t *tx) relabelAlloc(os *ownerState, rec allocRec, r *Allocation) error {
	s := rec.spec
	if !s.own {
		next := rec
		next.spec = s.v.sharedSpec(r, false)
		t.putAlloc(os, r.Key.Name, next)
		r.Selector, r.Labels = next.spec.req.Selector, next.spec.req.Labels
		return nil
	}
	labels := cloneLabels(r.Labels)
	if n := s.sub; n != nil {
		sys, bad := mergeLabels(systemLabels(n.v.name, n.kind, familyOf(n.prefix.Addr()), n.prefix.Bits(), n.network), labels)
		if bad != "" {
			return errf(ErrInvalid, ObjAllocation, r.Key, "spec.labels", "label %s=%q contradicts the system label", bad, r.Labels[bad])
		}
		t.relabel(n.v, n.entry, sys)
		oldUser := n.userLabels
		n.userLabels = labels
		t.onUndo(func() { n.userLabels = oldUser })
	}
	old := s.req.Labels
	s.req.Labels = labels
	t.onUndo(func() { s.req.Labels = old })
	r.Selector, r.Labels = s.req.Selector, labels
	return nil
}

// releaseAlloc frees what an allocation holds.
func (t *tx) releaseAlloc(rec allocRec, key Key) error {
	s := rec.spec
	switch {
	case rec.node != nil:
		t.unholdPlain(rec.node, rec.off, rec.count())
	case s.sub != nil:
		if err := t.removeNode(s.sub, ObjAllocation, key); err != nil {
			return err
		}
		n := s.sub
		n.alloc = nil
		t.onUndo(func() { n.alloc = s })
	case s.host != nil:
		t.setClaim(&s.host.claim, nil)
	case s.pre != nil:
		t.setClaim(&s.pre.claim, nil)
	}
	return nil
}

func (t *tx) setClaim(p **allocSpec, s *allocSpec) {
	old := *p
	*p = s
	t.onUndo(func() { *p = old })
}

// addrResult builds the result of addresses [off, off+cnt-1] of n (rule 4).
func addrResult(n *node, off, cnt uint64) Result {
	a := addOffset(n.prefix.Addr(), off)
	bits, gw := n.addrBits(off), n.gateway
	if g := n.rangeAt(off); g != nil && g.obj.spec.Gateway.IsValid() {
		gw = g.obj.spec.Gateway
	}
	r := Result{NetworkInstance: n.v.name, Prefix: netip.PrefixFrom(a, bits), Gateway: gw}
	if cnt > 1 {
		r.Last = addOffset(a, cnt-1)
	}
	return r
}

// takeAddr holds addresses [off, off+cnt-1] of n for a plain allocation.
func (t *tx) takeAddr(spec *allocSpec, n *node, off, cnt uint64) allocRec {
	t.holdPlain(n, off, cnt)
	return allocRec{spec: spec, node: n, off: off}
}

func (t *tx) claimHost(spec *allocSpec, name string, h *hostEntry) allocRec {
	own := ownSpec(spec, name)
	own.host = h
	t.setClaim(&h.claim, own)
	return allocRec{spec: own}
}

func (t *tx) claimPre(spec *allocSpec, name string, p *preAlloc) allocRec {
	own := ownSpec(spec, name)
	own.pre = p
	t.setClaim(&p.claim, own)
	return allocRec{spec: own}
}

// placeAddress decides the address(es) of an address-mode request: an
// explicit address, a static host entry or pre-allocation its selector
// picks, or the lowest free address(es) of the first matching network or
// range (rules 5-7).
func (t *tx) placeAddress(spec *allocSpec, r *Allocation) (allocRec, error) {
	v := spec.v
	cnt := uint64(max(r.Count, 1))
	if r.Prefix.IsValid() {
		return t.placeExactAddress(spec, r, cnt)
	}
	cands := t.addressCandidates(spec, r, cnt == 1)
	if len(cands) == 0 {
		return allocRec{}, noCandidate(r, v)
	}
	// A pre-allocation holds for the whole pool the selector picks: the
	// name gets its address even when an earlier range has free ones.
	if p := preAllocOf(cands, r.Key.Name, cnt); p != nil {
		if p.claim != nil && p.claim.req.Key != r.Key {
			return allocRec{}, preClaimed(r, p)
		}
		return t.claimPre(spec, r.Key.Name, p), nil
	}
	conflicts := false
	for _, e := range cands {
		switch {
		case e.host != nil:
			h := e.host
			if h.claim == nil || h.claim.req.Key == r.Key {
				return t.claimHost(spec, r.Key.Name, h), nil
			}
			conflicts = true
		case e.rng != nil:
			g := e.rng
			if off, ok := g.node.nextFree(g.lo, g.hi, cnt, true); ok {
				return t.takeAddr(spec, g.node, off, cnt), nil
			}
		default:
			n := e.node
			if off, ok := n.nextFree(0, n.addrs.Last(), cnt, false); ok {
				return t.takeAddr(spec, n, off, cnt), nil
			}
		}
	}
	return allocRec{}, noFreeAddress(r, cands, cnt, conflicts)
}

// preAllocOf returns the pre-allocation of name in the first range of
// cands that has one; blocks (cnt > 1) have none.
func preAllocOf(cands []*entry, name string, cnt uint64) *preAlloc {
	if cnt != 1 {
		return nil
	}
	for _, e := range cands {
		if e.rng != nil {
			if p := e.rng.pre[name]; p != nil {
				return p
			}
		}
	}
	return nil
}

// preClaimed is the error of r, whose name's pre-allocation p another
// allocation (of the same name in another namespace or owner) holds.
func preClaimed(r *Allocation, p *preAlloc) error {
	return errf(ErrConflict, ObjAllocation, r.Key, "metadata.name", "the pre-allocated address %s of %s is already allocated to %s",
		addOffset(p.rng.node.prefix.Addr(), p.off), objName(ObjRange, p.rng.obj.spec.Key), objName(ObjAllocation, p.claim.req.Key))
}

// noCandidate is the error of an address request whose selector matches
// nothing in v.
func noCandidate(r *Allocation, v *vrf) error {
	return errf(ErrNotFound, ObjAllocation, r.Key, "spec.selector", "selector %s matches no %s prefix in network instance %s", formatSelector(r.Selector), r.Kind, v.name)
}

// noFreeAddress is the error of an address request none of whose
// candidates could serve it: the first conflict with a static address held
// by another allocation, or exhaustion.
func noFreeAddress(r *Allocation, cands []*entry, cnt uint64, conflicts bool) error {
	if conflicts {
		for _, e := range cands {
			if h := e.host; h != nil && h.claim != nil && h.claim.req.Key != r.Key {
				return errf(ErrConflict, ObjAllocation, r.Key, "spec.selector", "static address %s (%s) is already allocated to %s",
					netip.PrefixFrom(h.addr, h.node.prefix.Bits()), objName(ObjPrefix, h.obj.spec.Key), objName(ObjAllocation, h.claim.req.Key))
			}
		}
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
// address request may take from, in prefix order. The VRF remembers the
// last answer: the allocations of a package, or a controller's requests,
// mostly share a selector.
func (t *tx) addressCandidates(spec *allocSpec, r *Allocation, single bool) []*entry {
	v := spec.v
	c := &v.sel
	if c.cands != nil && c.gen == v.index.gen && c.kind == r.Kind && c.family == r.AddressFamily && c.single == single &&
		(c.spec == spec || maps.Equal(c.selector, r.Selector)) {
		c.spec = spec
		return c.cands
	}
	cands := matchAddressCandidates(v, r, single)
	*c = selCache{gen: v.index.gen, spec: spec, selector: r.Selector, kind: r.Kind, family: r.AddressFamily, single: single, cands: cands}
	return cands
}

// matchAddressCandidates asks v's label index for the candidates of an
// address request.
func matchAddressCandidates(v *vrf, r *Allocation, single bool) []*entry {
	var buf [8]labelPair
	tm := terms(buf[:0], r.Selector, labelPair{LabelNetworkInstance, v.name}, labelPair{LabelPrefixKind, string(r.Kind)},
		labelPair{LabelAddressFamily, string(r.AddressFamily)})
	return v.index.match(tm, func(e *entry) bool {
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
}

func (t *tx) placeExactAddress(spec *allocSpec, r *Allocation, cnt uint64) (allocRec, error) {
	v := spec.v
	a := r.Prefix.Addr()
	n := t.bitmapNodeFor(v, a)
	if n == nil || n.kind != r.Kind {
		return allocRec{}, errf(ErrNotFound, ObjAllocation, r.Key, "spec.prefix", "no %s prefix contains %s in network instance %s", r.Kind, a, v.name)
	}
	off, ok := offsetOf(n.prefix.Addr(), a)
	if b, want := r.Prefix.Bits(), n.addrBits(off); b != want && b != n.prefix.Bits() && b != hostBits(a) {
		return allocRec{}, errf(ErrInvalid, ObjAllocation, r.Key, "spec.prefix", "%s does not match %s %s; write %s", r.Prefix, n.kind, n.prefix, netip.PrefixFrom(a, want))
	}
	if !ok || off > n.addrs.Last() || cnt-1 > n.addrs.Last()-off {
		return allocRec{}, errf(ErrInvalid, ObjAllocation, r.Key, "spec.prefix", "%s (count %d) does not fit in %s", a, cnt, n.prefix)
	}
	// The ranges the request may take from: those its selector picks,
	// else those of n.
	var ranges []*ipRange
	if len(r.Selector) > 0 {
		cands := matchAddressCandidates(v, r, cnt == 1)
		if !containsSpan(cands, n, off, cnt) {
			return allocRec{}, errf(ErrInvalid, ObjAllocation, r.Key, "spec.prefix", "%s is not in what selector %s matches: %s",
				a, formatSelector(r.Selector), describeCandidates(cands))
		}
		for _, e := range cands {
			if e.rng != nil {
				ranges = append(ranges, e.rng)
			}
		}
	} else {
		ranges = n.ranges
	}
	if cnt == 1 {
		for _, g := range ranges {
			if p := g.pre[r.Key.Name]; p != nil && (g.node != n || p.off != off) {
				return allocRec{}, errf(ErrConflict, ObjAllocation, r.Key, "spec.prefix", "%s differs from %s, the address %s pre-allocates to %s",
					a, addOffset(g.node.prefix.Addr(), p.off), objName(ObjRange, g.obj.spec.Key), r.Key.Name)
			}
		}
	}
	if cnt == 1 && n.addrs.Has(off) {
		switch h := n.holders[off].(type) {
		case *hostEntry:
			if h.obj.spec.Key.Owner != r.Key.Owner {
				return allocRec{}, errf(ErrConflict, ObjAllocation, r.Key, "spec.prefix", "%s is the static address of %s", a, objName(ObjPrefix, h.obj.spec.Key))
			}
			if h.claim == nil || h.claim.req.Key == r.Key {
				return t.claimHost(spec, r.Key.Name, h), nil
			}
		case *preAlloc:
			if h.name == r.Key.Name && (h.claim == nil || h.claim.req.Key == r.Key) {
				return t.claimPre(spec, r.Key.Name, h), nil
			}
		}
	}
	g, spanGW := n.blockGateway(cnt)
	for i := range cnt {
		if n.addrs.Has(off+i) && (!spanGW || off+i != g) {
			x := off + i
			if n.isReserved(x) {
				return allocRec{}, errf(ErrInvalid, ObjAllocation, r.Key, "spec.prefix", "%s is a reserved address of %s (rule 3)", addOffset(n.prefix.Addr(), x), n.prefix)
			}
			return allocRec{}, errf(ErrConflict, ObjAllocation, r.Key, "spec.prefix", "%s is already held by %s", addOffset(n.prefix.Addr(), x), n.describeHolder(x))
		}
	}
	return t.takeAddr(spec, n, off, cnt), nil
}

// containsSpan reports whether one candidate holds offsets [off,
// off+cnt-1] of n: n itself, a range of n around them, or the static
// address at off.
func containsSpan(cands []*entry, n *node, off, cnt uint64) bool {
	for _, e := range cands {
		switch {
		case e.node != nil:
			if e.node == n {
				return true
			}
		case e.rng != nil:
			if g := e.rng; g.node == n && g.lo <= off && off+cnt-1 <= g.hi {
				return true
			}
		case e.host != nil:
			if e.host.node == n && e.host.off == off && cnt == 1 {
				return true
			}
		}
	}
	return false
}

// describeCandidates names the first candidates of an address request
// for an error message.
func describeCandidates(cands []*entry) string {
	if len(cands) == 0 {
		return "nothing"
	}
	const shown = 3
	var parts []string
	for _, e := range cands[:min(len(cands), shown)] {
		switch {
		case e.node != nil:
			parts = append(parts, string(e.node.kind)+" "+e.node.prefix.String())
		case e.rng != nil:
			s := e.rng.obj.spec
			parts = append(parts, objName(ObjRange, s.Key)+" ("+s.Start.String()+"-"+s.End.String()+")")
		case e.host != nil:
			parts = append(parts, "static address "+e.host.addr.String()+" of "+objName(ObjPrefix, e.host.obj.spec.Key))
		}
	}
	if len(cands) > shown {
		parts = append(parts, fmt.Sprintf("%d more", len(cands)-shown))
	}
	return strings.Join(parts, ", ")
}

// placePrefix carves a sub-prefix: exactly spec.prefix, or the best fit of
// spec.prefixLength in the first matching aggregate or pool (rule 5).
func (t *tx) placePrefix(spec *allocSpec, r *Allocation) (allocRec, error) {
	v := spec.v
	network := r.Labels[LabelNetworkName]
	if r.Prefix.IsValid() {
		n, err := t.insertNode(v, r.Prefix, r.Kind, network, r.Labels, ObjAllocation, r.Key)
		if err != nil {
			return allocRec{}, err
		}
		return t.bindSub(spec, r.Key.Name, n), nil
	}
	var buf [8]labelPair
	tm := terms(buf[:0], r.Selector, labelPair{LabelNetworkInstance, v.name}, labelPair{LabelAddressFamily, string(r.AddressFamily)})
	keep := func(e *entry) bool {
		// The outermost matching prefixes are the parents: a pool nested in
		// a matching aggregate is used only by a selector naming its own
		// labels, so carving never lands inside another allocation by chance.
		return e.node != nil && e.node.space != nil && allowedParent(r.Kind, e.node.kind) && !e.node.ancestorMatches(tm)
	}
	var cands []*entry
	if _, named := r.Selector[LabelPrefixKind]; named {
		cands = v.index.match(tm, keep)
	} else {
		// Only aggregates and pools can be parents: ask the index for each
		// kind, so that the search starts from those few entries and not
		// from every prefix the selector matches (thousands of networks
		// carved from the same aggregate).
		for _, k := range []Kind{KindAggregate, KindPool} {
			if allowedParent(r.Kind, k) {
				cands = append(cands, v.index.match(append(tm, labelPair{LabelPrefixKind, string(k)}), keep)...)
			}
		}
		slices.SortFunc(cands, func(a, b *entry) int { return compareOrder(a.order, b.order) })
	}
	if len(cands) == 0 {
		return allocRec{}, errf(ErrNotFound, ObjAllocation, r.Key, "spec.selector", "selector %s matches no aggregate or pool in network instance %s", formatSelector(r.Selector), v.name)
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
		sub, err := t.insertUnder(n, p, r.Kind, network, r.Labels, ObjAllocation, r.Key)
		if err != nil {
			return allocRec{}, withField(err, "spec.labels")
		}
		return t.bindSub(spec, r.Key.Name, sub), nil
	}
	if fit == 0 {
		return allocRec{}, errf(ErrInvalid, ObjAllocation, r.Key, "spec.prefixLength", "/%d does not fit in %s, the largest matching prefix", pl, cands[0].node.prefix)
	}
	return allocRec{}, errf(ErrExhausted, ObjAllocation, r.Key, "spec.prefixLength", "no free /%d left in the %d prefix(es) matching %s", pl, fit, formatSelector(r.Selector))
}

// bindSub makes the sub-prefix node n the allocation name's.
func (t *tx) bindSub(spec *allocSpec, name string, n *node) allocRec {
	own := ownSpec(spec, name)
	own.sub = n
	n.alloc = own
	t.onUndo(func() { n.alloc = nil })
	return allocRec{spec: own}
}

// placeRecorded re-places a recorded allocation at its recorded result,
// without deciding anything (replay and restore).
func (t *tx) placeRecorded(spec *allocSpec, r *Allocation, res Result) (allocRec, error) {
	v := spec.v
	if !addressMode(*r) {
		n, err := t.insertNode(v, res.Prefix, r.Kind, r.Labels[LabelNetworkName], r.Labels, ObjAllocation, r.Key)
		if err != nil {
			return allocRec{}, err
		}
		return t.bindSub(spec, r.Key.Name, n), nil
	}
	a := res.Prefix.Addr()
	n := t.bitmapNodeFor(v, a)
	if n == nil {
		return allocRec{}, errf(ErrNotFound, ObjAllocation, r.Key, "status.prefix", "no network or loopback holds %s", a)
	}
	off, _ := offsetOf(n.prefix.Addr(), a)
	cnt := uint64(max(r.Count, 1))
	if cnt == 1 && n.addrs.Has(off) {
		switch h := n.holders[off].(type) {
		case *hostEntry:
			if h.claim == nil {
				return t.claimHost(spec, r.Key.Name, h), nil
			}
		case *preAlloc:
			if h.claim == nil {
				return t.claimPre(spec, r.Key.Name, h), nil
			}
		}
		return allocRec{}, errf(ErrConflict, ObjAllocation, r.Key, "status.prefix", "%s is already held by %s", a, n.describeHolder(off))
	}
	if off > n.addrs.Last() || cnt-1 > n.addrs.Last()-off {
		return allocRec{}, errf(ErrInvalid, ObjAllocation, r.Key, "status.prefix", "%s (count %d) does not fit in %s", a, cnt, n.prefix)
	}
	g, spanGW := n.blockGateway(cnt)
	for i := range cnt {
		if n.addrs.Has(off+i) && (!spanGW || off+i != g) {
			return allocRec{}, errf(ErrConflict, ObjAllocation, r.Key, "status.prefix", "%s is already held by %s", addOffset(n.prefix.Addr(), off+i), n.describeHolder(off+i))
		}
	}
	return t.takeAddr(spec, n, off, cnt), nil
}
