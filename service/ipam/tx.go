package ipam

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/nephio-project/ipam/service/internal/addrset"
	"github.com/nephio-project/ipam/service/internal/freespace"
)

// tx collects the change records of a mutation and the undo steps that
// revert it; a failed item or batch runs the undo steps in reverse, which
// leaves the core exactly as before.
type tx struct {
	a       *Allocator
	locked  []*vrf // the VRFs locked for it; nil with global: all (allocator-wide lock)
	global  bool
	recs    []Record
	undo    []undoStep
	undoFns []func() // the undoFunc steps' functions
	// replay marks Apply: it journals nothing and keeps no undo log.
	replay bool
	// norec: the allocator has neither a Journal nor a Committer, so no
	// one reads the change records and none are built. Needed by the
	// peer benchmarks (service/peerbench): an in-memory Allocate builds
	// its record for nothing otherwise.
	norec bool
	// expect says how many allocations Apply will put into the table of
	// an owner and VRF; the table grows to hold them at its first put.
	expect map[ownerVRF]int
	// owner is the owner of the last record Apply applied.
	owner *ownerState
	// bitmap caches the last network or loopback node an address was
	// found in; such nodes have no children, so one that contains an
	// address is the node of that address. Needed by
	// BenchmarkW6RestartSeconds: replay takes twice as long without it.
	bitmap *node
	// slab backs the allocation records of a Sync.
	slab []AllocationRecord
	// authz is the Authorizer of the mutation's context (nil: none);
	// allowed lists the network instances it allowed.
	authz   Authorizer
	allowed []string
	// changed: the mutation made a change that has a record (built or
	// not, see norec). A Sync that changes nothing has none.
	changed bool
}

// txPool recycles the transactions of mutations with their undo logs.
// Needed by BenchmarkAllocateRelease: 1.2 µs and 4 allocations per call,
// 1.6 µs and 10 without it.
var txPool = sync.Pool{New: func() any { return new(tx) }}

func newTx(a *Allocator, global bool) *tx {
	t := txPool.Get().(*tx)
	t.a, t.global = a, global
	t.norec = a.journal == nil && a.committer == nil
	return t
}

// maxPooledUndo bounds the undo log a pooled transaction keeps (2 MiB of
// steps: the log of a Sync of tens of thousands of items is reused by the
// next, not left to the collector; a bigger one is).
const maxPooledUndo = 1 << 15

// maxPooledFns bounds the closures of undo steps a pooled transaction
// keeps room for.
const maxPooledFns = 64

// free returns t to txPool once its mutation is over; its records now
// belong to the journal and the committer.
func (t *tx) free() {
	undo := t.undo[:0]
	if cap(undo) > maxPooledUndo {
		undo = nil
	}
	clear(t.undo)
	clear(t.locked)
	clear(t.undoFns)
	fns := t.undoFns[:0]
	if cap(fns) > maxPooledFns {
		fns = nil
	}
	*t = tx{undo: undo, undoFns: fns, locked: t.locked[:0]}
	txPool.Put(t)
}

// ownerVRF names the allocation table of an owner in a VRF.
type ownerVRF struct{ owner, vrf string }

// selCache is the last address selection of a VRF; it is valid while the
// VRF's index has not changed (gen).
type selCache struct {
	gen      uint64
	spec     *allocSpec // the last spec that hit: its selector is selector
	selector Labels
	kind     Kind
	family   Family
	single   bool
	cands    []*entry
}

// newAllocRecord returns a record for a journal entry, from the slab when
// one is reserved.
func (t *tx) newAllocRecord(r *Allocation, res Result) *AllocationRecord {
	if len(t.slab) < cap(t.slab) {
		t.slab = append(t.slab, AllocationRecord{Allocation: *r, Result: res})
		return &t.slab[len(t.slab)-1]
	}
	return &AllocationRecord{Allocation: *r, Result: res}
}

// undoStep reverts one change. The frequent changes of allocations are
// typed, so undoing them needs no closure; the rest run a function of
// tx.undoFns.
type undoStep struct {
	op   undoOp
	flag bool   // undoPutAlloc: rec was replaced; undoDelAlloc: tb was forgotten
	cnt  uint32 // plain holds: the number of offsets; undoFunc: the index in undoFns
	tb   *allocTable
	name string
	// undoPutAlloc: the replaced record, or one whose spec names the
	// namespace; undoDelAlloc: the deleted record; plain holds: node and
	// first offset; undoNewPlain and undoDelPlain: both.
	rec allocRec
}

type undoOp uint8

const (
	undoFunc      undoOp = iota
	undoHoldPlain        // free offsets [rec.off, rec.off+cnt-1] of rec.node
	undoFreePlain        // hold them again
	undoPutAlloc         // put rec back into tb, or delete name
	undoDelAlloc         // put rec back into tb (and link tb again when it was unlinked)
	undoNewPlain         // undoPutAlloc of a new record, then undoHoldPlain
	undoDelPlain         // undoDelAlloc, then undoFreePlain
)

func (t *tx) run(u *undoStep) {
	switch u.op {
	case undoFunc:
		// Steps are undone last first, so this is the last function.
		t.undoFns[u.cnt]()
		t.undoFns[u.cnt] = nil
		t.undoFns = t.undoFns[:u.cnt]
	case undoHoldPlain:
		freePlain(u.rec.node, u.rec.off, uint64(u.cnt))
	case undoFreePlain:
		holdPlain(u.rec.node, u.rec.off, uint64(u.cnt))
	case undoPutAlloc:
		if u.flag {
			u.tb.put(u.name, u.rec)
		} else {
			dropAlloc(u.tb, u.rec.spec.req.Key.Namespace, u.name)
		}
	case undoDelAlloc:
		if u.flag {
			link(u.tb)
		}
		u.tb.put(u.name, u.rec)
	case undoNewPlain:
		dropAlloc(u.tb, u.rec.spec.req.Key.Namespace, u.name)
		freePlain(u.rec.node, u.rec.off, uint64(u.cnt))
	case undoDelPlain:
		if u.flag {
			link(u.tb)
		}
		u.tb.put(u.name, u.rec)
		holdPlain(u.rec.node, u.rec.off, uint64(u.cnt))
	}
}

func (t *tx) onUndo(f func()) {
	if !t.replay {
		t.undo = append(t.undo, undoStep{op: undoFunc, cnt: uint32(len(t.undoFns))})
		t.undoFns = append(t.undoFns, f)
	}
}

func (t *tx) pushUndo(u undoStep) {
	if !t.replay {
		t.undo = append(t.undo, u)
	}
}

func (t *tx) record(r Record) {
	t.changed = true
	if !t.replay && !t.norec {
		t.recs = append(t.recs, r)
	}
}

// bitmapNodeFor returns the network or loopback node holding a.
func (t *tx) bitmapNodeFor(v *vrf, a netip.Addr) *node {
	if n := t.bitmap; n != nil && n.v == v && !n.removed && n.prefix.Contains(a) {
		return n
	}
	n := v.bitmapNodeFor(a)
	if n != nil {
		t.bitmap = n
	}
	return n
}

// mark returns a savepoint for rollbackTo.
func (t *tx) mark() (int, int) { return len(t.undo), len(t.recs) }

// rollbackTo undoes everything after the savepoint.
func (t *tx) rollbackTo(u, r int) {
	for i := len(t.undo) - 1; i >= u; i-- {
		t.run(&t.undo[i])
		t.undo[i] = undoStep{}
	}
	t.undo = t.undo[:u]
	t.recs = t.recs[:r]
}

func (t *tx) rollback() { t.rollbackTo(0, 0) }

// errf builds an *Error for one object.
func errf(sentinel error, obj string, key Key, field, format string, args ...any) error {
	return &Error{Object: obj, Key: key, Field: field, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

// --- index -----------------------------------------------------------------

func (t *tx) indexEntry(v *vrf, e *entry) {
	v.index.add(e)
	t.onUndo(func() { v.index.remove(e) })
}

func (t *tx) unindexEntry(v *vrf, e *entry) {
	v.index.remove(e)
	t.onUndo(func() { v.index.add(e) })
}

// relabel replaces an entry's labels.
func (t *tx) relabel(v *vrf, e *entry, labels Labels) {
	old := e.labels
	v.index.remove(e)
	e.labels = labels
	v.index.add(e)
	t.onUndo(func() {
		v.index.remove(e)
		e.labels = old
		v.index.add(e)
	})
}

// --- nodes -----------------------------------------------------------------

// insertNode places canonical prefix p of kind under its deepest containing
// node, checking nesting (rule 2) and overlap (rule 1).
func (t *tx) insertNode(v *vrf, p netip.Prefix, kind Kind, network string, user Labels, obj string, key Key) (*node, error) {
	if n := v.nodes[p]; n != nil {
		return nil, errf(ErrConflict, obj, key, "spec.prefix", "%s already exists in network instance %s (%s %s)", p, v.name, n.kind, n.describe())
	}
	return t.insertUnder(v.deepest(p), p, kind, network, user, obj, key)
}

// insertUnder is insertNode below parent, the deepest node of its VRF
// that contains p (which is not a node): a best fit, whose parent is the
// node whose free space it came from, skips the search for it.
func (t *tx) insertUnder(parent *node, p netip.Prefix, kind Kind, network string, user Labels, obj string, key Key) (*node, error) {
	v := parent.v
	if !allowedParent(kind, parent.kind) {
		switch {
		case parent.kind == kindRoot:
			return nil, errf(ErrNotFound, obj, key, "spec.prefix", "no aggregate contains %s in network instance %s (rule 1: every prefix lies inside an aggregate)", p, v.name)
		case parent.isBitmap():
			return nil, errf(ErrInvalid, obj, key, "spec.prefix", "%s lies inside %s %s, which holds addresses only (rule 2: a %s holds no %s)", p, parent.kind, parent.prefix, parent.kind, kind)
		default:
			return nil, errf(ErrInvalid, obj, key, "spec.kind", "a %s cannot hold a %s (rule 2: %s lies inside %s %s)", parent.kind, kind, p, parent.kind, parent.prefix)
		}
	}
	if !parent.space.Take(p) {
		o := v.overlapping(p)
		if o == nil {
			return nil, errf(ErrConflict, obj, key, "spec.prefix", "%s overlaps another prefix of network instance %s", p, v.name)
		}
		return nil, errf(ErrConflict, obj, key, "spec.prefix", "%s overlaps %s %s (%s)", p, o.kind, o.prefix, o.describe())
	}
	n := &node{v: v, prefix: p, kind: kind, parent: parent, network: network}
	switch kind {
	case KindAggregate, KindPool:
		n.space = freespace.New(p)
	case KindNetwork, KindLoopback:
		n.addrs = addrset.New(lastOffset(p)) // holders: made at the first hold
		if kind == KindNetwork {
			n.reserved = ruleThreeOffsets(p)
			for _, off := range n.reserved {
				n.addrs.Add(off)
			}
		}
	}
	labels, bad := mergeLabels(v.systemLabels(kind, familyOf(p.Addr()), p.Bits(), network), user)
	if bad != "" {
		parent.space.Release(p)
		return nil, errf(ErrInvalid, obj, key, "labels", "label %s=%q contradicts the system label %q", bad, user[bad], systemValue(v.name, kind, p, network, bad))
	}
	n.userLabels = user
	n.entry = &entry{order: orderKey{pfx: p}, labels: labels, node: n}
	v.nodes[p] = n
	parent.children++
	v.index.add(n.entry)
	t.onUndo(func() {
		v.index.remove(n.entry)
		parent.children--
		delete(v.nodes, p)
		n.removed = true
		parent.space.Release(p)
	})
	return n, nil
}

func systemValue(vrfName string, kind Kind, p netip.Prefix, network, key string) string {
	return systemLabels(vrfName, kind, familyOf(p.Addr()), p.Bits(), network)[key]
}

// removeNode deletes an empty node.
func (t *tx) removeNode(n *node, obj string, key Key) error {
	if n.busy() {
		return errf(ErrInUse, obj, key, "", "%s %s still holds %s", n.kind, n.prefix, n.contents())
	}
	v, parent, p := n.v, n.parent, n.prefix
	v.index.remove(n.entry)
	parent.children--
	delete(v.nodes, p)
	n.removed = true
	parent.space.Release(p)
	t.onUndo(func() {
		if !parent.space.Take(p) {
			panic("ipam: undo of removeNode could not retake " + p.String())
		}
		v.nodes[p] = n
		n.removed = false
		parent.children++
		v.index.add(n.entry)
	})
	return nil
}

// contents describes what keeps a node busy, for ErrInUse messages.
func (n *node) contents() string {
	switch {
	case n.children > 0:
		var kids []string
		for q, c := range n.v.nodes {
			if c.parent == n {
				kids = append(kids, q.String())
			}
		}
		slices.Sort(kids)
		if len(kids) > 3 {
			kids = append(kids[:3], "…")
		}
		return fmt.Sprintf("%d child prefix(es): %v", n.children, kids)
	case len(n.holders) > 0 || n.plain > 0:
		var held, first uint64
		n.addrs.Ascend(0, n.addrs.Last(), func(off uint64) bool {
			if _, ok := n.holders[off]; ok || !n.isReserved(off) && n.excludedAt(off) == nil {
				if held == 0 {
					first = off
				}
				held++
			}
			return true
		})
		return fmt.Sprintf("%d address(es), e.g. %s held by %s", held, addOffset(n.prefix.Addr(), first), n.describeHolder(first))
	case len(n.ranges) > 0:
		return fmt.Sprintf("%d IP range(s), e.g. %s", len(n.ranges), n.ranges[0].obj.spec.Key)
	}
	return "nothing"
}

// --- addresses -------------------------------------------------------------

// hold marks offsets [off, off+cnt-1] of n as held by h.
func (t *tx) hold(n *node, off, cnt uint64, h any) {
	if n.holders == nil {
		n.holders = make(map[uint64]any)
	}
	for i := range cnt {
		n.addrs.Add(off + i)
		n.holders[off+i] = h
	}
	t.onUndo(func() {
		for i := range cnt {
			n.addrs.Remove(off + i)
			delete(n.holders, off+i)
		}
	})
}

// unhold frees offsets [off, off+cnt-1] of n.
func (t *tx) unhold(n *node, off, cnt uint64) {
	old := make([]any, cnt)
	for i := range cnt {
		old[i] = n.holders[off+i]
		n.addrs.Remove(off + i)
		delete(n.holders, off+i)
	}
	t.onUndo(func() {
		for i := range cnt {
			n.addrs.Add(off + i)
			n.holders[off+i] = old[i] // unhold found n.holders made
		}
	})
}

// holdPlain marks offsets [off, off+cnt-1] of n as held by one plain
// allocation.
func (t *tx) holdPlain(n *node, off, cnt uint64) {
	holdPlain(n, off, cnt)
	t.pushUndo(undoStep{op: undoHoldPlain, rec: allocRec{node: n, off: off}, cnt: uint32(cnt)})
}

// unholdPlain frees the offsets of a plain allocation.
func (t *tx) unholdPlain(n *node, off, cnt uint64) {
	freePlain(n, off, cnt)
	t.pushUndo(undoStep{op: undoFreePlain, rec: allocRec{node: n, off: off}, cnt: uint32(cnt)})
}

func holdPlain(n *node, off, cnt uint64) {
	g, skip := n.blockGateway(cnt)
	for i := range cnt {
		if !skip || off+i != g {
			n.addrs.Add(off + i)
		}
	}
	n.plain++
}

func freePlain(n *node, off, cnt uint64) {
	g, skip := n.blockGateway(cnt)
	for i := range cnt {
		if !skip || off+i != g {
			n.addrs.Remove(off + i)
		}
	}
	n.plain--
}

// runAroundGateway returns the lowest start of a run of cnt offsets in
// [lo, hi] that contains the gateway offset g and is free but for it.
func (n *node) runAroundGateway(lo, hi, cnt, g uint64) (uint64, bool) {
	if g < lo || g > hi {
		return 0, false
	}
	left := uint64(0)
	for left < cnt-1 && g-left > lo && !n.addrs.Has(g-left-1) {
		left++
	}
	right := uint64(0)
	for left+right < cnt-1 && g+right < hi && !n.addrs.Has(g+right+1) {
		right++
	}
	if left+right < cnt-1 {
		return 0, false
	}
	return g - left, true
}

// ruleThreeOffsets are the offsets rule 3 reserves in network p: the first
// and last address, none for /31, /32, /127 and /128, and no last one when
// the prefix exceeds 2^64 addresses (it is beyond reach).
func ruleThreeOffsets(p netip.Prefix) []uint64 {
	free := hostBits(p.Addr()) - p.Bits()
	switch {
	case free <= 1:
		return nil
	case free <= 64:
		return []uint64{0, lastOffset(p)}
	}
	return []uint64{0}
}

// nextFree returns the lowest free offset of n in [lo, hi] outside every
// range of n (ranges serve only the requests that select them); with
// inRange set, ranges are not skipped.
func (n *node) nextFree(lo, hi, cnt uint64, inRange bool) (uint64, bool) {
	for lo <= hi {
		var off uint64
		var ok bool
		if cnt <= 1 {
			off, ok = n.addrs.NextFree(lo, hi)
		} else {
			off, ok = n.addrs.NextFreeRun(lo, hi, cnt)
			if g, span := n.blockGateway(cnt); span {
				if s, found := n.runAroundGateway(lo, hi, cnt, g); found && (!ok || s < off) {
					off, ok = s, true
				}
			}
		}
		if !ok {
			return 0, false
		}
		if inRange || len(n.ranges) == 0 {
			return off, true
		}
		end := off + max(cnt, 1) - 1
		r := n.firstRangeOverlapping(off, end)
		if r == nil {
			return off, true
		}
		if r.hi == ^uint64(0) {
			return 0, false
		}
		lo = r.hi + 1
	}
	return 0, false
}

func (n *node) firstRangeOverlapping(lo, hi uint64) *ipRange {
	for _, r := range n.ranges {
		if r.lo <= hi && lo <= r.hi {
			return r
		}
	}
	return nil
}

// addExclusions marks spans of n excluded; every excluded address must be
// free or reserved.
func (t *tx) addExclusions(n *node, spans []AddrRange, by any, obj string, key Key, field string) error {
	type span struct {
		lo, hi uint64
		i      int // the first of spans it covers, for messages
	}
	ss := make([]span, 0, len(spans))
	for i, s := range spans {
		lo, hi, err := n.span(s.Start, s.End, obj, key, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return err
		}
		ss = append(ss, span{lo, hi, i})
	}
	// Overlapping and adjacent exclusions of one object are merged, as
	// whereabouts merges .0/30, .4/30 and .6/31.
	slices.SortFunc(ss, func(a, b span) int { return cmp.Or(cmp.Compare(a.lo, b.lo), cmp.Compare(a.i, b.i)) })
	merged := ss[:0]
	for _, s := range ss {
		if m := len(merged) - 1; m >= 0 && s.lo <= merged[m].hi+1 && merged[m].hi+1 != 0 {
			merged[m].hi = max(merged[m].hi, s.hi)
			merged[m].i = min(merged[m].i, s.i)
			continue
		}
		merged = append(merged, s)
	}
	for _, s := range merged {
		lo, hi := s.lo, s.hi
		var clash uint64
		found := false
		n.addrs.Ascend(lo, hi, func(off uint64) bool {
			if n.isReserved(off) {
				return true
			}
			clash, found = off, true
			return false
		})
		if found {
			return errf(ErrConflict, obj, key, fmt.Sprintf("%s[%d]", field, s.i), "%s is held by %s", addOffset(n.prefix.Addr(), clash), n.describeHolder(clash))
		}
		n.addrs.AddRange(lo, hi)
		n.excl = append(n.excl, exclusion{lo: lo, hi: hi, by: by})
		t.onUndo(func() {
			n.excl = n.excl[:len(n.excl)-1]
			n.addrs.RemoveRange(lo, hi)
			for _, off := range n.reserved {
				if lo <= off && off <= hi {
					n.addrs.Add(off)
				}
			}
		})
	}
	return nil
}

// removeExclusions drops the exclusions of n made by by.
func (t *tx) removeExclusions(n *node, by any) {
	kept := n.excl[:0:0]
	var dropped []exclusion
	for _, e := range n.excl {
		if e.by == by {
			dropped = append(dropped, e)
		} else {
			kept = append(kept, e)
		}
	}
	if len(dropped) == 0 {
		return
	}
	old := n.excl
	n.excl = kept
	for _, e := range dropped {
		n.addrs.RemoveRange(e.lo, e.hi)
		for _, off := range n.reserved {
			if e.lo <= off && off <= e.hi {
				n.addrs.Add(off)
			}
		}
	}
	t.onUndo(func() {
		n.excl = old
		for _, e := range dropped {
			n.addrs.AddRange(e.lo, e.hi)
		}
	})
}

// span converts an inclusive address range inside n to offsets.
func (n *node) span(start, end netip.Addr, obj string, key Key, field string) (uint64, uint64, error) {
	if !start.IsValid() || !end.IsValid() {
		return 0, 0, errf(ErrInvalid, obj, key, field, "start and end addresses are required")
	}
	if !n.prefix.Contains(start) || !n.prefix.Contains(end) {
		return 0, 0, errf(ErrInvalid, obj, key, field, "%s-%s is not inside %s %s", start, end, n.kind, n.prefix)
	}
	if end.Less(start) {
		return 0, 0, errf(ErrInvalid, obj, key, field, "end %s is before start %s", end, start)
	}
	lo, ok1 := offsetOf(n.prefix.Addr(), start)
	hi, ok2 := offsetOf(n.prefix.Addr(), end)
	if !ok1 || !ok2 || hi > n.addrs.Last() {
		return 0, 0, errf(ErrInvalid, obj, key, field, "%s-%s lies beyond the first 2^64 addresses of %s", start, end, n.prefix)
	}
	return lo, hi, nil
}
