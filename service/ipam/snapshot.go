package ipam

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// Snapshot returns records that rebuild the whole current state when
// given to Apply on an empty allocator. at, when not nil, is called while
// the state is frozen (no mutation runs and no record is being journaled),
// so a store can note the log position the snapshot stands for.
func (a *Allocator) Snapshot(at func()) []Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	if at != nil {
		at()
	}
	var recs []Record
	for _, name := range slices.Sorted(maps.Keys(a.vrfs)) {
		ni := a.vrfs[name].ni.spec
		recs = append(recs, Record{Op: OpPutNetworkInstance, Key: ni.Key, NetworkInstance: &ni})
	}
	// Prefixes and sub-prefix allocations, parents first: by length, and at
	// equal length allocations first (an IPPrefix may add static addresses
	// to a network that an allocation carved).
	type placed struct {
		bits, rank int
		rec        Record
	}
	var tree []placed
	var ranges, addrs []Record
	for _, os := range a.ownerList() {
		for _, k := range slices.SortedFunc(maps.Keys(os.prefixes), compareNsName) {
			o := os.prefixes[k]
			tree = append(tree, placed{o.spec.Prefix.Bits(), 1, Record{Op: OpPutPrefix, Key: o.spec.Key, Prefix: &o.spec}})
		}
		for _, k := range slices.SortedFunc(maps.Keys(os.ranges), compareNsName) {
			o := os.ranges[k]
			ranges = append(ranges, Record{Op: OpPutRange, Key: o.spec.Key, Range: &o.spec})
		}
		for _, k := range slices.SortedFunc(maps.Keys(os.allocs), compareNsName) {
			o := os.allocs[k]
			rec := Record{Op: OpPutAllocation, Key: o.req.Key, Allocation: &AllocationRecord{Allocation: o.req, Result: o.result()}}
			if o.sub != nil {
				tree = append(tree, placed{o.sub.prefix.Bits(), 0, rec})
			} else {
				addrs = append(addrs, rec)
			}
		}
	}
	slices.SortStableFunc(tree, func(x, y placed) int {
		if c := cmp.Compare(x.bits, y.bits); c != 0 {
			return c
		}
		return cmp.Compare(x.rank, y.rank)
	})
	for _, p := range tree {
		recs = append(recs, p.rec)
	}
	recs = append(recs, ranges...)
	return append(recs, addrs...)
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
	a.presize(recs)
	t := &tx{a: a, replay: true, global: true}
	for i, r := range recs {
		if err := t.apply(r); err != nil {
			return fmt.Errorf("record %d (%s %s): %w", i, r.Op, r.Key, err)
		}
	}
	return nil
}

func (t *tx) apply(r Record) error {
	os := t.a.owner(r.Key.Owner)
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
	}
	return fmt.Errorf("%w: malformed record", ErrInvalid)
}

// presize grows the allocation maps of owners that are about to receive
// many allocations, so a restore does not rehash them over and over.
func (a *Allocator) presize(recs []Record) {
	counts := map[string]int{}
	for i := range recs {
		if recs[i].Op == OpPutAllocation {
			counts[recs[i].Key.Owner]++
		}
	}
	for owner, n := range counts {
		if n < 1024 {
			continue
		}
		os := a.owner(owner)
		if len(os.allocs) == 0 {
			os.allocs = make(map[nsName]*allocObj, n)
		}
	}
}

// putRecordedAllocation replaces an allocation with a recorded one.
func (t *tx) putRecordedAllocation(os *ownerState, rec AllocationRecord) error {
	r, err := normalizeAlloc(rec.Allocation)
	if err != nil {
		return err
	}
	v, err := t.vrf(rec.Result.NetworkInstance, ObjAllocation, r.Key, "status")
	if err != nil {
		return err
	}
	r.Selector = v.intern(r.Selector, false)
	if old := os.allocs[nsn(r.Key)]; old != nil {
		if err := t.releaseAlloc(old); err != nil {
			return err
		}
	}
	o := &allocObj{req: r, v: v}
	if err := t.placeRecorded(o, rec.Result); err != nil {
		return err
	}
	t.setAlloc(os, nsn(r.Key), o)
	t.record(Record{Op: OpPutAllocation, Key: r.Key, Allocation: &AllocationRecord{Allocation: r, Result: o.result()}})
	return nil
}
