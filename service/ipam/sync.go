package ipam

import (
	"cmp"
	"context"
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
func (a *Allocator) Sync(ctx context.Context, req SyncRequest) (SyncResult, error) {
	req = withOwner(req)
	byKey, err := checkSyncRequest(req)
	if err != nil {
		return SyncResult{}, err
	}
	var res SyncResult
	m := mutation{owner: req.Owner}
	// Network instances change the VRF set: take the allocator-wide lock.
	os := a.owner(req.Owner)
	os.mu.Lock()
	m.global = len(req.NetworkInstances) > 0 || (req.Prune && len(os.nis) > 0)
	os.mu.Unlock()
	err = a.mutate(ctx, m, &funcs{vrfsOf: func(os *ownerState) []string { return syncVRFs(os, req) }, do: func(t *tx, os *ownerState) error {
		if !m.global && len(os.nis) > 0 && req.Prune {
			// The owner gained a network instance since the check above.
			return errf(ErrConflict, ObjNetworkInstance, Key{Owner: req.Owner}, "", "concurrent change of the owner's network instances; retry")
		}
		var err error
		res, err = t.sync(os, req, byKey)
		return err
	}})
	if err != nil {
		return SyncResult{}, err
	}
	return res, nil
}

// bind checks the identity of req against the one os is bound to, binds
// os to it and records req's source in os.info (the caller journals
// os.info once). It returns the identity an adopting request took the
// owner from.
func (t *tx) bind(os *ownerState, req SyncRequest) (adopted string, err error) {
	info := os.info
	if req.Identity != "" && req.Identity != info.Identity {
		if info.Identity != "" && !os.empty() {
			if !req.Adopt {
				return "", errf(ErrInUse, ObjSync, Key{Name: req.Owner}, "identity",
					"owner %s holds the objects of the package with identity %s, not of this one (%s); "+
						"a copy needs an owner of its own, or the request must adopt the owner",
					Quote(req.Owner), Quote(info.Identity), Quote(req.Identity))
			}
			// Adopting takes over every object of the owner.
			if err := t.authorizeOwner(os); err != nil {
				return "", err
			}
			adopted = info.Identity
		}
		info.Identity = req.Identity
	}
	if req.Source != "" {
		info.Source = req.Source
	}
	t.setInfo(os, info)
	return adopted, nil
}

// advance moves the owner's generation past a Sync that changed its
// objects, after checking that req was built from the owner's current
// generation (see SyncRequest.Generation).
func (t *tx) advance(os *ownerState, req SyncRequest) error {
	info := os.info
	if !req.CheckGeneration {
		if info.Generation == 0 {
			return nil // not counted: no checking Sync changed the owner yet
		}
		req.Generation = 0
	} else if req.Generation < info.Generation && !req.Adopt {
		return errf(ErrInUse, ObjSync, Key{Name: req.Owner}, "generation",
			"owner %s is at generation %d, and this package at %d: another copy of the package changed the owner's objects "+
				"since this one was rendered; a request from the current copy, or one that adopts the owner, is accepted",
			Quote(req.Owner), info.Generation, req.Generation)
	}
	// A package ahead of the owner (the server lost it, and the render
	// restores it) keeps its generation, so its render writes nothing.
	info.Generation = max(info.Generation+1, req.Generation)
	t.setInfo(os, info)
	return nil
}

// setInfo sets what the allocator keeps about os, undoably.
func (t *tx) setInfo(os *ownerState, info OwnerInfo) {
	if info == os.info {
		return
	}
	old := os.info
	os.info = info
	t.onUndo(func() { os.info = old })
}

// withOwner sets the owner of every object's key but the allocations'.
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
	// Allocations, the bulk, are not copied: putAllocation sets the owner.
	return req
}

// checkSyncRequest rejects oversized requests and duplicate keys. It
// returns the allocations' indices in key order.
func checkSyncRequest(req SyncRequest) ([]int, error) {
	if err := CheckNewName(ObjSync, Key{}, "owner", req.Owner); err != nil {
		return nil, err
	}
	if err := CheckNewName(ObjSync, Key{Name: req.Owner}, "identity", req.Identity); err != nil {
		return nil, err
	}
	if err := checkText(ObjSync, Key{Name: req.Owner}, "source", req.Source, MaxSourceLength); err != nil {
		return nil, err
	}
	if req.Generation > MaxGeneration {
		return nil, errf(ErrInvalid, ObjSync, Key{Name: req.Owner}, "generation", "%d exceeds the limit of %d", req.Generation, uint64(MaxGeneration))
	}
	n := len(req.NetworkInstances) + len(req.Prefixes) + len(req.Ranges) + len(req.Allocations)
	if n > MaxSyncItems {
		return nil, errf(ErrInvalid, ObjSync, Key{Name: req.Owner}, "", "%d objects exceed the limit of %d per request", n, MaxSyncItems)
	}
	var errs []error
	dup := func(obj string, seen map[nsName]bool, k Key) {
		if seen[nsn(k)] {
			errs = append(errs, errf(ErrInvalid, obj, k, "metadata.name", "appears twice in one request"))
		}
		seen[nsn(k)] = true
	}
	seen := map[nsName]bool{}
	for _, x := range req.NetworkInstances {
		dup(ObjNetworkInstance, seen, Key{Owner: x.Key.Owner, Name: x.Key.Name})
	}
	seen = map[nsName]bool{}
	for _, x := range req.Prefixes {
		dup(ObjPrefix, seen, x.Key)
	}
	seen = map[nsName]bool{}
	for _, x := range req.Ranges {
		dup(ObjRange, seen, x.Key)
	}
	// Allocations, the bulk, are sorted by key instead: equal keys end
	// up side by side.
	byKey := keyOrder(req.Allocations)
	for j := 1; j < len(byKey); j++ {
		if a, b := req.Allocations[byKey[j-1]].Key, req.Allocations[byKey[j]].Key; a.Namespace == b.Namespace && a.Name == b.Name {
			errs = append(errs, errf(ErrInvalid, ObjAllocation, Key{Owner: req.Owner, Namespace: b.Namespace, Name: b.Name}, "metadata.name", "appears twice in one request"))
		}
	}
	if len(errs) > 0 {
		return nil, &SyncError{Errs: errs}
	}
	return byKey, nil
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
		// Consecutive allocations mostly name the same VRF.
		for _, name := range [2]string{r.NetworkInstance, r.Selector[LabelNetworkInstance]} {
			if name != "" && (len(names) == 0 || names[len(names)-1] != name) {
				names = append(names, name)
			}
		}
	}
	return appendHeldVRFs(names, os)
}

// appendHeldVRFs appends to names the VRFs that hold the owner's
// prefixes, ranges and allocations (with repeats).
func appendHeldVRFs(names []string, os *ownerState) []string {
	for _, o := range os.prefixes {
		names = append(names, o.v.name)
	}
	for _, o := range os.ranges {
		names = append(names, o.v.name)
	}
	for _, t := range os.tables {
		names = append(names, t.v.name)
	}
	return names
}

// sync runs a checked request; byKey lists its allocations in key order.
func (t *tx) sync(os *ownerState, req SyncRequest, byKey []int) (SyncResult, error) {
	res := SyncResult{Prefixes: make([]Result, len(req.Prefixes)), Allocations: make([]Result, len(req.Allocations))}
	n := len(req.NetworkInstances) + len(req.Prefixes) + len(req.Ranges) + len(req.Allocations)
	if !t.norec {
		t.recs = make([]Record, 0, n)
		t.slab = make([]AllocationRecord, 0, len(req.Allocations))
	}
	t.undo = slices.Grow(t.undo[:0], n)
	info := os.info
	var err error
	if res.Adopted, err = t.bind(os, req); err != nil {
		return SyncResult{}, err
	}
	var errs []error
	// Each item runs on its own: a failed item is undone at once so the
	// next items see a consistent state, and its error is collected.
	fail := func(u, r int, err error) {
		t.rollbackTo(u, r)
		errs = append(errs, err)
	}
	if req.Prune {
		t.prune(os, req, &res, fail)
	}
	for _, ni := range req.NetworkInstances {
		u, r := t.mark()
		if err := t.putNIOf(os, ni); err != nil {
			fail(u, r, err)
		}
	}
	for _, i := range prefixOrder(req.Prefixes) {
		u, r := t.mark()
		var err error
		if res.Prefixes[i], err = t.putPrefix(os, req.Prefixes[i]); err != nil {
			fail(u, r, err)
		}
	}
	for _, rg := range sortedBy(req.Ranges, func(r IPRange) Key { return r.Key }) {
		u, r := t.mark()
		if err := t.putRange(os, rg); err != nil {
			fail(u, r, err)
		}
	}
	for _, i := range allocOrder(req.Allocations, byKey) {
		u, r := t.mark()
		var err error
		if res.Allocations[i], err = t.putAllocation(os, req.Allocations[i]); err != nil {
			fail(u, r, err)
		}
	}
	if len(errs) > 0 {
		return SyncResult{}, &SyncError{Errs: errs}
	}
	if t.changed { // an object changed: bind records nothing
		if err := t.advance(os, req); err != nil {
			return SyncResult{}, err
		}
	}
	if os.info != info {
		info := os.info
		t.record(Record{Op: OpPutOwner, Key: Key{Owner: os.name}, Owner: &info})
	}
	res.Generation = os.info.Generation
	return res, nil
}

// prune deletes the owner's objects that the request no longer lists:
// allocations, then ranges, then prefixes deepest first, then network
// instances.
func (t *tx) prune(os *ownerState, req SyncRequest, res *SyncResult, fail func(u, r int, err error)) {
	release := func(op Op, key Key, del func(*ownerState, Key) error) {
		u, r := t.mark()
		if err := del(os, key); err != nil {
			fail(u, r, err)
		}
		res.Released = append(res.Released, Released{Op: op, Key: key})
	}
	gone := undesiredAllocs(os, req.Allocations)
	if !t.norec {
		t.recs = slices.Grow(t.recs, len(gone))
	}
	t.undo = slices.Grow(t.undo, len(gone))
	res.Released = slices.Grow(res.Released, len(gone))
	for _, k := range gone {
		release(OpDeleteAllocation, k, t.deleteAllocation)
	}
	for _, k := range undesired(os.ranges, req.Ranges, func(r IPRange) Key { return r.Key }) {
		release(OpDeleteRange, os.ranges[k].spec.Key, t.deleteRange)
	}
	// Prefixes deepest first, so children go before their parents.
	prefixes := undesired(os.prefixes, req.Prefixes, func(p Prefix) Key { return p.Key })
	slices.SortStableFunc(prefixes, func(a, b nsName) int {
		return cmp.Compare(os.prefixes[b].spec.Prefix.Bits(), os.prefixes[a].spec.Prefix.Bits())
	})
	for _, k := range prefixes {
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

// undesiredAllocs lists, in key order, the keys of the allocations of os
// that no item of desired carries.
func undesiredAllocs(os *ownerState, desired []Allocation) []Key {
	if len(os.tables) == 0 {
		return nil
	}
	marks := make([][]bool, len(os.tables))
	total := 0
	for i, tb := range os.tables {
		marks[i] = make([]bool, tb.Len())
		total += tb.Len()
	}
	for i := range desired {
		k := &desired[i].Key
		for t, tb := range os.tables {
			if j := tb.Index(k.Namespace, k.Name); j >= 0 {
				if !marks[t][j] {
					marks[t][j] = true
					total--
				}
				break
			}
		}
	}
	out := make([]Key, 0, total)
	for t, m := range marks {
		for j, want := range m {
			if !want {
				o := os.tables[t].at(j)
				out = append(out, o.key())
			}
		}
	}
	slices.SortFunc(out, func(a, b Key) int { return compareNsName(nsn(a), nsn(b)) })
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

// keyOrder lists allocation indices in key order. It is linear for a
// request already in key order; equal keys sort side by side in no
// particular order.
func keyOrder(rs []Allocation) []int {
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(i, j int) int {
		if c := cmp.Compare(rs[i].Key.Namespace, rs[j].Key.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(rs[i].Key.Name, rs[j].Key.Name)
	})
	return idx
}

// allocOrder lists allocation indices: explicit prefixes first, then
// sub-prefixes largest first, then addresses; ties in key order (byKey,
// the indices in key order, whose keys are distinct).
func allocOrder(rs []Allocation, byKey []int) []int {
	// A stable counting sort by group: 0 explicit, 1..128 a sub-prefix of
	// that length, 129 addresses.
	const groups = 130
	group := func(r *Allocation) int {
		switch {
		case r.Prefix.IsValid():
			return 0
		case r.PrefixLength > 0 && r.PrefixLength <= 128 && !(r.Kind == KindLoopback && (r.PrefixLength == 32 || r.PrefixLength == 128)):
			return r.PrefixLength
		}
		return groups - 1
	}
	var start [groups + 1]int
	for _, i := range byKey {
		start[group(&rs[i])+1]++
	}
	if start[groups] == len(byKey) {
		return byKey // addresses only
	}
	for g := 1; g <= groups; g++ {
		start[g] += start[g-1]
	}
	out := make([]int, len(byKey))
	for _, i := range byKey {
		g := group(&rs[i])
		out[start[g]] = i
		start[g]++
	}
	return out
}
