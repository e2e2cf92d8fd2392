package ipam

import (
	"cmp"
	"maps"
	"slices"
)

// MaxSyncItems bounds the number of objects of one Sync request.
const MaxSyncItems = 100_000

// Sync applies the whole desired set of one owner atomically: every item
// succeeds and the state moves to the desired set, or a *SyncError lists
// every failed item and nothing changes. Order inside the request does not
// matter: network instances come first, prefixes parents first, then ranges,
// then allocations (explicit ones, then sub-prefixes largest first, then
// addresses, each in key order so a package always gets the same result).
func (a *Allocator) Sync(req SyncRequest) (SyncResult, error) {
	req = withOwner(req)
	if err := checkSyncRequest(req); err != nil {
		return SyncResult{}, err
	}
	var res SyncResult
	m := mutation{owner: req.Owner, vrfs: func(os *ownerState) []string { return syncVRFs(os, req) }}
	// Network instances change the VRF set: take the allocator-wide lock.
	os := a.owner(req.Owner)
	os.mu.Lock()
	m.global = len(req.NetworkInstances) > 0 || (req.Prune && len(os.nis) > 0)
	os.mu.Unlock()
	err := a.mutate(m, func(t *tx, os *ownerState) error {
		if !m.global && len(os.nis) > 0 && req.Prune {
			// The owner gained a network instance since the check above.
			return errf(ErrConflict, ObjNetworkInstance, Key{Owner: req.Owner}, "", "concurrent change of the owner's network instances; retry")
		}
		var err error
		res, err = t.sync(os, req)
		return err
	})
	if err != nil {
		return SyncResult{}, err
	}
	return res, nil
}

func withOwner(req SyncRequest) SyncRequest {
	req.NetworkInstances = slices.Clone(req.NetworkInstances)
	for i := range req.NetworkInstances {
		req.NetworkInstances[i].Key.Owner = req.Owner
	}
	req.Prefixes = slices.Clone(req.Prefixes)
	for i := range req.Prefixes {
		req.Prefixes[i].Key.Owner = req.Owner
	}
	req.Ranges = slices.Clone(req.Ranges)
	for i := range req.Ranges {
		req.Ranges[i].Key.Owner = req.Owner
	}
	req.Allocations = slices.Clone(req.Allocations)
	for i := range req.Allocations {
		req.Allocations[i].Key.Owner = req.Owner
	}
	return req
}

// checkSyncRequest rejects oversized requests and duplicate keys.
func checkSyncRequest(req SyncRequest) error {
	n := len(req.NetworkInstances) + len(req.Prefixes) + len(req.Ranges) + len(req.Allocations)
	if n > MaxSyncItems {
		return errf(ErrInvalid, "Sync", Key{Name: req.Owner}, "", "%d objects exceed the limit of %d per request", n, MaxSyncItems)
	}
	var errs []error
	dup := func(obj string, seen map[Key]bool, k Key) {
		if seen[k] {
			errs = append(errs, errf(ErrInvalid, obj, k, "metadata.name", "appears twice in one request"))
		}
		seen[k] = true
	}
	seen := map[Key]bool{}
	for _, x := range req.NetworkInstances {
		dup(ObjNetworkInstance, seen, Key{Owner: x.Key.Owner, Name: x.Key.Name})
	}
	seen = map[Key]bool{}
	for _, x := range req.Prefixes {
		dup(ObjPrefix, seen, x.Key)
	}
	seen = map[Key]bool{}
	for _, x := range req.Ranges {
		dup(ObjRange, seen, x.Key)
	}
	seen = map[Key]bool{}
	for _, x := range req.Allocations {
		dup(ObjAllocation, seen, x.Key)
	}
	if len(errs) > 0 {
		return &SyncError{Errs: errs}
	}
	return nil
}

// syncVRFs lists the VRFs a Sync may touch: the ones it names and the ones
// holding the owner's current objects.
func syncVRFs(os *ownerState, req SyncRequest) []string {
	var names []string
	for _, p := range req.Prefixes {
		names = append(names, p.NetworkInstance)
	}
	for _, r := range req.Ranges {
		names = append(names, r.NetworkInstance)
	}
	for _, r := range req.Allocations {
		names = append(names, r.NetworkInstance, r.Selector[LabelNetworkInstance])
	}
	for _, o := range os.prefixes {
		names = append(names, o.v.name)
	}
	for _, o := range os.ranges {
		names = append(names, o.v.name)
	}
	for _, o := range os.allocs {
		names = append(names, o.v.name)
	}
	return names
}

func (t *tx) sync(os *ownerState, req SyncRequest) (SyncResult, error) {
	res := SyncResult{Prefixes: make([]Result, len(req.Prefixes)), Allocations: make([]Result, len(req.Allocations))}
	n := len(req.NetworkInstances) + len(req.Prefixes) + len(req.Ranges) + len(req.Allocations)
	t.recs = make([]Record, 0, n)
	t.undo = make([]func(), 0, 4*n)
	t.slab = make([]AllocationRecord, 0, len(req.Allocations))
	var errs []error
	// item runs one step; a failed step is undone on its own so the next
	// steps see a consistent state, and its error is collected.
	item := func(f func() error) {
		u, r := t.mark()
		if err := f(); err != nil {
			t.rollbackTo(u, r)
			errs = append(errs, err)
		}
	}
	if req.Prune {
		t.prune(os, req, &res, item)
	}
	for _, ni := range req.NetworkInstances {
		item(func() error { return t.putNIOf(os, ni) })
	}
	for _, i := range prefixOrder(req.Prefixes) {
		item(func() (err error) {
			res.Prefixes[i], err = t.putPrefix(os, req.Prefixes[i])
			return err
		})
	}
	for _, r := range sortedBy(req.Ranges, func(r IPRange) Key { return r.Key }) {
		item(func() error { return t.putRange(os, r) })
	}
	for _, i := range allocOrder(req.Allocations) {
		item(func() (err error) {
			res.Allocations[i], err = t.putAllocation(os, req.Allocations[i])
			return err
		})
	}
	if len(errs) > 0 {
		return SyncResult{}, &SyncError{Errs: errs}
	}
	return res, nil
}

// prune deletes the owner's objects that the request no longer lists:
// allocations, then ranges, then prefixes deepest first, then network
// instances.
func (t *tx) prune(os *ownerState, req SyncRequest, res *SyncResult, item func(func() error)) {
	release := func(op Op, key Key, del func(*ownerState, Key) error) {
		item(func() error { return del(os, key) })
		res.Released = append(res.Released, Released{Op: op, Key: key})
	}
	for _, k := range undesired(os.allocs, req.Allocations, func(r Allocation) Key { return r.Key }) {
		release(OpDeleteAllocation, os.allocs[k].req.Key, t.deleteAllocation)
	}
	for _, k := range undesired(os.ranges, req.Ranges, func(r IPRange) Key { return r.Key }) {
		release(OpDeleteRange, os.ranges[k].spec.Key, t.deleteRange)
	}
	// Prefixes deepest first, so children go before their parents.
	gone := undesired(os.prefixes, req.Prefixes, func(p Prefix) Key { return p.Key })
	slices.SortStableFunc(gone, func(a, b nsName) int {
		return cmp.Compare(os.prefixes[b].spec.Prefix.Bits(), os.prefixes[a].spec.Prefix.Bits())
	})
	for _, k := range gone {
		release(OpDeletePrefix, os.prefixes[k].spec.Key, t.deletePrefix)
	}
	wantNI := map[string]bool{}
	for _, ni := range req.NetworkInstances {
		wantNI[ni.Key.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(os.nis)) {
		if !wantNI[name] {
			release(OpDeleteNetworkInstance, os.nis[name].spec.Key, t.deleteNIOf)
		}
	}
	if len(res.Released) > 0 {
		slices.SortStableFunc(res.Released, func(a, b Released) int { return cmp.Compare(a.Op, b.Op) })
	}
}

// undesired lists, in key order, the keys of have that no item of desired
// carries.
func undesired[V, T any](have map[nsName]V, desired []T, key func(T) Key) []nsName {
	want := make(map[nsName]bool, len(desired))
	for _, d := range desired {
		want[nsn(key(d))] = true
	}
	var out []nsName
	for k := range have {
		if !want[k] {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, compareNsName)
	return out
}

func compareNsName(a, b nsName) int {
	if c := cmp.Compare(a.ns, b.ns); c != 0 {
		return c
	}
	return cmp.Compare(a.name, b.name)
}

func sortedBy[T any](xs []T, key func(T) Key) []T {
	out := slices.Clone(xs)
	slices.SortStableFunc(out, func(a, b T) int { return compareNsName(nsn(key(a)), nsn(key(b))) })
	return out
}

var kindRank = map[Kind]int{KindAggregate: 0, KindPool: 1, KindLoopback: 2, KindNetwork: 3, "": 3}

// prefixOrder lists prefix indices parents first: by length, aggregates
// before the rest, canonical prefixes before host addresses, then by key.
func prefixOrder(ps []Prefix) []int {
	idx := make([]int, len(ps))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		a, b := ps[i], ps[j]
		if c := cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()); c != 0 {
			return c
		}
		if c := cmp.Compare(kindRank[a.Kind], kindRank[b.Kind]); c != 0 {
			return c
		}
		ah, bh := a.Prefix.Masked() != a.Prefix, b.Prefix.Masked() != b.Prefix
		if ah != bh {
			if ah {
				return 1
			}
			return -1
		}
		return compareNsName(nsn(a.Key), nsn(b.Key))
	})
	return idx
}

// allocOrder lists allocation indices: explicit prefixes first, then
// sub-prefixes largest first, then addresses; ties in key order.
func allocOrder(rs []Allocation) []int {
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	rank := func(r Allocation) (int, int) {
		switch {
		case r.Prefix.IsValid():
			return 0, 0
		case r.PrefixLength > 0 && !(r.Kind == KindLoopback && (r.PrefixLength == 32 || r.PrefixLength == 128)):
			return 1, r.PrefixLength
		}
		return 2, 0
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		ri, li := rank(rs[i])
		rj, lj := rank(rs[j])
		if c := cmp.Compare(ri, rj); c != 0 {
			return c
		}
		if c := cmp.Compare(li, lj); c != 0 {
			return c
		}
		return compareNsName(nsn(rs[i].Key), nsn(rs[j].Key))
	})
	return idx
}
