package ipam

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/nephio-project/ipam/service/ipam/internal/alloctable"
)

// Snapshot returns records that rebuild the whole current state when
// given to Apply on an empty allocator. at, when not nil, is called while
// the state is frozen (no mutation runs and no record is being journaled),
// so a store can note the log position the snapshot stands for. The state
// is frozen only while it is copied; sorting and building the records
// happen after mutations resume.
func (a *Allocator) Snapshot(at func()) []Record {
	c := a.capture(at)
	slices.SortFunc(c.nis, func(x, y NetworkInstance) int { return cmp.Compare(x.Key.Name, y.Key.Name) })
	slices.SortFunc(c.ranges, func(x, y IPRange) int { return compareKey(x.Key, y.Key) })
	// Prefixes and sub-prefix allocations, parents first: by length, and at
	// equal length allocations first (an IPPrefix may add static addresses
	// to a network that an allocation carved); addresses last.
	slices.SortFunc(c.prefixes, func(x, y Prefix) int {
		if d := cmp.Compare(x.Prefix.Bits(), y.Prefix.Bits()); d != 0 {
			return d
		}
		return compareKey(x.Key, y.Key)
	})
	slices.SortFunc(c.allocs, func(x, y snapAlloc) int {
		if d := cmp.Compare(x.bits, y.bits); d != 0 {
			return d
		}
		return compareKey(x.rec.Allocation.Key, y.rec.Allocation.Key)
	})
	recs := make([]Record, 0, len(c.owners)+len(c.nis)+len(c.prefixes)+len(c.ranges)+len(c.allocs))
	recs = append(recs, c.owners...)
	for i := range c.nis {
		recs = append(recs, Record{Op: OpPutNetworkInstance, Key: c.nis[i].Key, NetworkInstance: &c.nis[i]})
	}
	// Merge prefixes into the sub-prefix allocations (bits > 0) by length;
	// address allocations (bits 0) sort first and are emitted last.
	addrs, _ := slices.BinarySearchFunc(c.allocs, 1, func(x snapAlloc, bits int) int { return cmp.Compare(x.bits, bits) })
	ai := addrs
	for i := range c.prefixes {
		for ; ai < len(c.allocs) && c.allocs[ai].bits > 0 && c.allocs[ai].bits <= c.prefixes[i].Prefix.Bits(); ai++ {
			recs = append(recs, c.allocs[ai].record())
		}
		recs = append(recs, Record{Op: OpPutPrefix, Key: c.prefixes[i].Key, Prefix: &c.prefixes[i]})
	}
	for ; ai < len(c.allocs) && c.allocs[ai].bits > 0; ai++ {
		recs = append(recs, c.allocs[ai].record())
	}
	for i := range c.ranges {
		recs = append(recs, Record{Op: OpPutRange, Key: c.ranges[i].Key, Range: &c.ranges[i]})
	}
	for i := range addrs {
		recs = append(recs, c.allocs[i].record())
	}
	return recs
}

// snapAlloc is an allocation copied by capture; bits is the length of its
// sub-prefix, 0 for addresses.
type snapAlloc struct {
	rec  AllocationRecord
	bits int
}

func (s *snapAlloc) record() Record {
	return Record{Op: OpPutAllocation, Key: s.rec.Allocation.Key, Allocation: &s.rec}
}

// captured is a copy of the state's objects, in no particular order but
// for owners (by name).
type captured struct {
	owners   []Record
	nis      []NetworkInstance
	prefixes []Prefix
	ranges   []IPRange
	allocs   []snapAlloc
}

// capture copies every object while the state is frozen. Stored objects
// never mutate the maps and slices they hold, so copying the structs is
// enough.
func (a *Allocator) capture(at func()) captured {
	a.mu.Lock()
	defer a.mu.Unlock()
	if at != nil {
		at()
	}
	var c captured
	for _, v := range a.vrfs {
		c.nis = append(c.nis, v.ni.spec)
	}
	owners := a.ownerList()
	n := 0
	for _, os := range owners {
		n += os.allocCount()
	}
	c.allocs = make([]snapAlloc, 0, n)
	for _, os := range owners {
		// An owner without objects accepts any identity (see bind):
		// forgetting its binding loses nothing. Its generation stays, or
		// a stale copy of its package could take it again.
		info := os.info
		if os.empty() {
			info = OwnerInfo{Generation: info.Generation}
		}
		if info != (OwnerInfo{}) {
			c.owners = append(c.owners, Record{Op: OpPutOwner, Key: Key{Owner: os.name}, Owner: &info})
		}
		for _, o := range os.prefixes {
			c.prefixes = append(c.prefixes, o.spec)
		}
		for _, o := range os.ranges {
			c.ranges = append(c.ranges, o.spec)
		}
		for _, t := range os.tables {
			for i := range t.Len() {
				o := t.at(i)
				bits := 0
				if o.spec.sub != nil {
					bits = o.spec.sub.prefix.Bits()
				}
				c.allocs = append(c.allocs, snapAlloc{rec: AllocationRecord{Allocation: o.request(), Result: o.result()}, bits: bits})
			}
		}
	}
	return c
}

func compareKey(x, y Key) int {
	if d := cmp.Compare(x.Owner, y.Owner); d != 0 {
		return d
	}
	if d := cmp.Compare(x.Namespace, y.Namespace); d != 0 {
		return d
	}
	return cmp.Compare(x.Name, y.Name)
}

// Apply replays records (a snapshot, then a log) in order, as a store does
// to restore the state. Put records replace the object of their key;
// allocations are placed at their recorded result without deciding
// anything again. Apply journals nothing and keeps no undo log: on error
// the allocator is left part-way and must be discarded (restore into a
// fresh one). Apply takes ownership of the maps, slices and strings of the
// records, but keeps no pointer to a Record or to the objects it points
// to, so a caller may reuse those between calls.
func (a *Allocator) Apply(recs []Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &tx{a: a, replay: true, global: true, expect: expectedAllocs(recs)}
	for i, r := range recs {
		if err := t.apply(r); err != nil {
			return fmt.Errorf("record %d (%s %s): %w", i, r.Op, r.Key, err)
		}
	}
	return nil
}

func (t *tx) apply(r Record) error {
	os := t.owner
	if os == nil || os.name != r.Key.Owner {
		os = t.a.owner(r.Key.Owner)
		t.owner = os
	}
	switch r.Op {
	case OpPutNetworkInstance:
		if r.NetworkInstance == nil {
			break
		}
		return t.putNIOf(os, *r.NetworkInstance)
	case OpDeleteNetworkInstance:
		return t.deleteNIOf(os, r.Key)
	case OpPutPrefix:
		if r.Prefix == nil {
			break
		}
		_, err := t.putPrefix(os, *r.Prefix)
		return err
	case OpDeletePrefix:
		return t.deletePrefix(os, r.Key)
	case OpPutRange:
		if r.Range == nil {
			break
		}
		return t.putRange(os, *r.Range)
	case OpDeleteRange:
		return t.deleteRange(os, r.Key)
	case OpPutAllocation:
		if r.Allocation == nil {
			break
		}
		return t.putRecordedAllocation(os, *r.Allocation)
	case OpDeleteAllocation:
		return t.deleteAllocation(os, r.Key)
	case OpPutOwner:
		if r.Owner == nil {
			break
		}
		os.info = *r.Owner
		return nil
	case OpDeleteOwner:
		os.info = OwnerInfo{}
		return nil
	}
	return fmt.Errorf("%w: malformed record", ErrInvalid)
}

// expectedAllocs counts the allocations recs put per owner and VRF, when
// they are many, so Apply grows their tables once (see tx.expect).
func expectedAllocs(recs []Record) map[ownerVRF]int {
	const many = 1024
	if len(recs) < many {
		return nil
	}
	var counts map[ownerVRF]int
	// Records of one table come in runs (a snapshot lists them together):
	// count runs, not records, in the map.
	var run ownerVRF
	n := 0
	flush := func() {
		if n > 0 {
			if counts == nil {
				counts = make(map[ownerVRF]int)
			}
			counts[run] += n
		}
	}
	for i := range recs {
		r := &recs[i]
		if r.Op != OpPutAllocation || r.Allocation == nil {
			continue
		}
		if k := (ownerVRF{r.Key.Owner, r.Allocation.Result.NetworkInstance}); n == 0 || k != run {
			flush()
			run, n = k, 0
		}
		n++
	}
	flush()
	for k, c := range counts {
		if c < many {
			delete(counts, k)
		}
	}
	return counts
}

// putRecordedAllocation replaces an allocation with a recorded one.
func (t *tx) putRecordedAllocation(os *ownerState, rec AllocationRecord) error {
	r := rec.Allocation
	if err := normalizeAlloc(&r); err != nil {
		return err
	}
	v, err := t.vrf(rec.Result.NetworkInstance, ObjAllocation, r.Key, "status")
	if err != nil {
		return err
	}
	// One lookup in v's table finds the old allocation or the slot of the
	// new one; replay keeps no undo log, so the table is written directly.
	ns, name := r.Key.Namespace, r.Key.Name
	tb := t.tableFor(os, v)
	h := alloctable.Hash(ns, name)
	slot, found := tb.Find(ns, name, h)
	oldTable, old := tb, (*allocRec)(nil)
	if found {
		old = tb.AtSlot(slot)
	} else if len(os.tables) > 1 {
		oldTable, old = os.findAlloc(ns, name)
	}
	if old != nil {
		if err := t.releaseAlloc(*old, r.Key); err != nil {
			return err
		}
		if oldTable != tb {
			dropAlloc(oldTable, ns, name)
		}
	}
	if !found && tb.Full() {
		return checkRoom(os, v, r.Key)
	}
	spec := v.sharedSpec(&r, true)
	placed, err := t.placeRecorded(spec, &r, rec.Result)
	if err != nil {
		return err
	}
	if found {
		tb.put(name, placed)
		return nil
	}
	if !placed.spec.own {
		v.ref(placed.spec)
	}
	tb.insertAt(slot, h, name, placed)
	return nil
}
