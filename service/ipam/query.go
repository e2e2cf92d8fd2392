package ipam

import (
	"bytes"
	"cmp"
	"maps"
	"slices"
)

func (f Filter) matches(owner, vrf string, labels Labels) bool {
	if f.Owner != "" && f.Owner != owner {
		return false
	}
	if f.NetworkInstance != "" && f.NetworkInstance != vrf {
		return false
	}
	for k, v := range f.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// readOwners calls fn for each owner (or just owner), in owner name order,
// with that owner's lock and the allocator's read lock held.
func (a *Allocator) readOwners(owner string, fn func(os *ownerState)) {
	var list []*ownerState
	if owner != "" {
		a.ownersMu.Lock()
		if os := a.owners[owner]; os != nil {
			list = append(list, os)
		}
		a.ownersMu.Unlock()
	} else {
		list = a.ownerList()
	}
	for _, os := range list {
		os.mu.Lock()
		a.mu.RLock()
		fn(os)
		a.mu.RUnlock()
		os.mu.Unlock()
	}
}

// GetNetworkInstance returns the network instance of that name.
func (a *Allocator) GetNetworkInstance(name string) (NetworkInstance, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	v := a.vrfs[name]
	if v == nil {
		return NetworkInstance{}, errf(ErrNotFound, ObjNetworkInstance, Key{Name: name}, "", "not found")
	}
	return cloneNI(v.ni.spec), nil
}

// ListNetworkInstances returns the matching network instances by name.
func (a *Allocator) ListNetworkInstances(f Filter) []NetworkInstance {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []NetworkInstance
	for _, name := range slices.Sorted(maps.Keys(a.vrfs)) {
		ni := a.vrfs[name].ni.spec
		if f.matches(ni.Key.Owner, name, ni.Labels) {
			out = append(out, cloneNI(ni))
		}
	}
	return out
}

// GetPrefix returns an IPPrefix and what it resolved to. With an empty
// key.Owner, the first owner (in name order) holding namespace/name wins;
// the Get calls below do the same.
func (a *Allocator) GetPrefix(key Key) (PrefixRecord, error) {
	var rec PrefixRecord
	found := false
	a.readOwners(key.Owner, func(os *ownerState) {
		if o := os.prefixes[nsn(key)]; o != nil && !found {
			o.v.mu.RLock()
			rec, found = PrefixRecord{Prefix: *clonePrefix(o.spec), Result: o.result()}, true
			o.v.mu.RUnlock()
		}
	})
	if !found {
		return rec, errf(ErrNotFound, ObjPrefix, key, "", "not found")
	}
	return rec, nil
}

// ListPrefixes returns the matching IPPrefixes, by owner then key.
func (a *Allocator) ListPrefixes(f Filter) []PrefixRecord {
	var out []PrefixRecord
	a.readOwners(f.Owner, func(os *ownerState) {
		for _, k := range slices.SortedFunc(maps.Keys(os.prefixes), compareNsName) {
			o := os.prefixes[k]
			if f.matches(os.name, o.v.name, o.spec.Labels) {
				o.v.mu.RLock()
				out = append(out, PrefixRecord{Prefix: *clonePrefix(o.spec), Result: o.result()})
				o.v.mu.RUnlock()
			}
		}
	})
	return out
}

// GetRange returns an IP range.
func (a *Allocator) GetRange(key Key) (IPRange, error) {
	var out IPRange
	found := false
	a.readOwners(key.Owner, func(os *ownerState) {
		if o := os.ranges[nsn(key)]; o != nil && !found {
			out, found = *cloneRange(o.spec), true
		}
	})
	if !found {
		return out, errf(ErrNotFound, ObjRange, key, "", "not found")
	}
	return out, nil
}

// ListRanges returns the matching IP ranges, by owner then key.
func (a *Allocator) ListRanges(f Filter) []IPRange {
	var out []IPRange
	a.readOwners(f.Owner, func(os *ownerState) {
		for _, k := range slices.SortedFunc(maps.Keys(os.ranges), compareNsName) {
			if o := os.ranges[k]; f.matches(os.name, o.v.name, o.spec.Labels) {
				out = append(out, *cloneRange(o.spec))
			}
		}
	})
	return out
}

// GetAllocation returns an allocation and its result.
func (a *Allocator) GetAllocation(key Key) (AllocationRecord, error) {
	var rec AllocationRecord
	found := false
	a.readOwners(key.Owner, func(os *ownerState) {
		if found {
			return
		}
		for _, t := range os.tables {
			t.v.mu.RLock()
			if r, ok := t.Get(key.Namespace, key.Name); ok {
				o := alloc{allocRec: *r, name: key.Name}
				rec, found = AllocationRecord{Allocation: cloneAlloc(o.request()), Result: o.result()}, true
			}
			t.v.mu.RUnlock()
			if found {
				return
			}
		}
	})
	if !found {
		return rec, errf(ErrNotFound, ObjAllocation, key, "", "not found")
	}
	return rec, nil
}

// ListAllocations returns the matching allocations, by owner then key.
func (a *Allocator) ListAllocations(f Filter) []AllocationRecord {
	out, _ := a.ListAllocationsPage(f, nil, -1)
	return out
}

// ListAllocationsPage returns up to limit matching allocations (all with
// a negative limit) whose key comes after after (nil: from the first),
// by owner then key, and whether more follow. Only the page is copied:
// the scan under the locks looks at keys and labels, so listing a page
// of a large owner costs the page, not the owner.
func (a *Allocator) ListAllocationsPage(f Filter, after *Key, limit int) ([]AllocationRecord, bool) {
	// ref is a matching record; name is a view of the table's name arena,
	// valid while the owner's lock is held.
	type ref struct {
		ns   string
		name []byte
		t    *allocTable
		i    int
	}
	compare := func(ns string, name []byte, x ref) int {
		if c := cmp.Compare(ns, x.ns); c != 0 {
			return c
		}
		return bytes.Compare(name, x.name)
	}
	var afterRef ref
	if after != nil {
		afterRef = ref{ns: after.Namespace, name: []byte(after.Name)}
	}
	var out []AllocationRecord
	more := false
	var refs []ref
	a.readOwners(f.Owner, func(os *ownerState) {
		if more || after != nil && os.name < after.Owner {
			return
		}
		n := 0
		for _, t := range os.tables {
			n += t.Len()
		}
		refs = slices.Grow(refs[:0], n)
		skip := after != nil && os.name == after.Owner
		for _, t := range os.tables {
			t.v.mu.RLock()
			for i := range t.Len() {
				r := t.At(i)
				if !f.matches(os.name, t.v.name, r.spec.req.Labels) {
					continue
				}
				x := ref{r.spec.req.Key.Namespace, t.Name(i), t, i}
				if skip && compare(x.ns, x.name, afterRef) <= 0 {
					continue
				}
				refs = append(refs, x)
			}
			t.v.mu.RUnlock()
		}
		slices.SortFunc(refs, func(x, y ref) int { return compare(x.ns, x.name, y) })
		if limit >= 0 && len(out)+len(refs) > limit {
			refs, more = refs[:limit-len(out)], true
		}
		// The owner's lock is held throughout: its tables have not changed.
		out = slices.Grow(out, len(refs))
		for _, r := range refs {
			r.t.v.mu.RLock()
			o := r.t.at(r.i)
			out = append(out, AllocationRecord{Allocation: cloneAlloc(o.request()), Result: o.result()})
			r.t.v.mu.RUnlock()
		}
	})
	return out, more
}

// Tree returns the prefix hierarchy of a network instance in prefix order
// (IPv4 first), each node with its depth and utilization.
func (a *Allocator) Tree(name string) ([]TreeNode, error) {
	var out []TreeNode
	err := a.readVRF(name, func(v *vrf) error {
		nodes := make([]*node, 0, len(v.nodes))
		for _, n := range v.nodes {
			nodes = append(nodes, n)
		}
		slices.SortFunc(nodes, func(x, y *node) int { return comparePrefix(x.prefix, y.prefix) })
		out = make([]TreeNode, 0, len(nodes))
		for _, n := range nodes {
			out = append(out, v.treeNode(n))
		}
		return nil
	})
	return out, err
}

// treeNode is n as a node of the tree: its depth, declarer and
// utilization.
func (v *vrf) treeNode(n *node) TreeNode {
	depth := 0
	for p := n.parent; p != nil && p.kind != kindRoot; p = p.parent {
		depth++
	}
	tn := TreeNode{Depth: depth, Prefix: n.prefix, Kind: n.kind, Total: sizeOf(n.prefix)}
	switch {
	case n.decl != nil && n.decl.ni != nil:
		tn.Name, tn.Owner = n.decl.ni.spec.Key.String(), n.decl.ni.spec.Key.Owner
	case n.decl != nil:
		tn.Name, tn.Owner = n.decl.spec.Key.String(), n.decl.spec.Key.Owner
	case n.alloc != nil:
		tn.Name, tn.Owner = n.alloc.req.Key.String(), n.alloc.req.Key.Owner
	case len(n.refs) > 0:
		first := slices.MinFunc(slices.Collect(maps.Keys(n.refs)), func(x, y *prefixObj) int {
			return compareNsName(nsn(x.spec.Key), nsn(y.spec.Key))
		})
		tn.Name, tn.Owner = first.spec.Key.String(), first.spec.Key.Owner
		// Without a gateway no prefix declares the subnet any more:
		// it stays for static addresses, maybe of other owners.
		tn.StaticOnly = !n.gateway.IsValid()
	}
	tn.Network = n.network
	if n.isBitmap() {
		tn.Used = n.addrs.Len()
	} else {
		// With 2^64 or more free addresses, Used stays 0 (saturated counts).
		if hi, lo := n.space.Free(); hi == 0 {
			tn.Used = tn.Total - min(lo, tn.Total)
		}
	}
	return tn
}
