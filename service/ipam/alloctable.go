package ipam

import "github.com/nephio-project/ipam/service/ipam/internal/alloctable"

// Allocations are the bulk of the state (millions of addresses), so they
// are not stored one Go object each. An owner's allocations in one VRF
// live in an allocTable (package alloctable): 32-byte records in fixed
// pages, an open-addressing index keyed by (namespace, name), and a name
// arena. What a record asked for is an allocSpec that the
// allocations of one package share (interned per VRF); only a claimed
// static address, a pre-allocation or a sub-prefix gets a spec of its own,
// which also says where it is. Who holds an address of a network is not
// indexed: the bitmap says that it is held, and the rare question of who
// holds it (error messages) is answered by a scan of the VRF's tables.

// allocSpec is an allocation request without its name. A shared spec
// (own false) has an empty Key.Name and serves every plain address
// allocation that asked exactly this; the spec of one allocation (own
// true) carries its whole key and its placement.
type allocSpec struct {
	req Allocation
	v   *vrf
	own bool
	// A shared spec counts the allocations using it (refs); key is its
	// key in v.specs, empty when it is never interned.
	refs int
	key  string
	// The pairs of req.Selector and req.Labels, to compare requests.
	selector, labels []labelPair
	// Placement of an own spec: exactly one is set.
	host *hostEntry // a static address declared by an IPPrefix
	pre  *preAlloc  // a pre-allocated address of a range
	sub  *node      // a sub-prefix
}

// allocRec is one allocation in its table (which keeps its name).
type allocRec struct {
	spec *allocSpec
	// A plain placement: offsets [off, off+count-1] of the network or
	// loopback node; nil for an own spec.
	node *node
	off  uint64
}

// Namespace is the namespace of the allocation, for its table's index.
func (r *allocRec) Namespace() string { return r.spec.req.Key.Namespace }

// alloc is an allocation as read from its table.
type alloc struct {
	allocRec
	name string
}

// key returns the allocation's key.
func (o *alloc) key() Key {
	k := o.spec.req.Key
	k.Name = o.name
	return k
}

// request returns the allocation's request.
func (o *alloc) request() Allocation {
	r := o.spec.req
	r.Key.Name = o.name
	return r
}

// count is the number of addresses of a plain placement.
func (r *allocRec) count() uint64 { return uint64(max(r.spec.req.Count, 1)) }

// result is what the allocation resolved to (the gateway is its network's
// current one).
func (r *allocRec) result() Result {
	s := r.spec
	switch {
	case r.node != nil:
		return addrResult(r.node, r.off, r.count())
	case s.sub != nil:
		return Result{NetworkInstance: s.v.name, Prefix: s.sub.prefix}
	case s.host != nil:
		return addrResult(s.host.node, s.host.off, 1)
	default:
		return addrResult(s.pre.rng.node, s.pre.off, 1)
	}
}

// allocTable holds the allocations of one owner in one VRF and counts
// the users of their shared specs. The VRF's lock guards it (and the
// allocator-wide lock during Apply and Snapshot).
type allocTable struct {
	alloctable.Table[allocRec, *allocRec]
	os *ownerState
	v  *vrf
}

// MaxTableAllocs is the most allocations one owner holds in one network
// instance.
const MaxTableAllocs = alloctable.MaxLen

// at returns record i with its name.
func (t *allocTable) at(i int) alloc {
	return alloc{allocRec: *t.At(i), name: string(t.Name(i))}
}

// put inserts or replaces the allocation name of r.spec's namespace and
// returns the record it replaced, counting the users of shared specs.
// The caller checks that a new allocation fits (Full).
func (t *allocTable) put(name string, r allocRec) (prev allocRec, replaced bool) {
	if !r.spec.own {
		t.v.ref(r.spec)
	}
	prev, replaced = t.Put(r.spec.req.Key.Namespace, name, r)
	if replaced && !prev.spec.own {
		t.v.unref(prev.spec)
	}
	return prev, replaced
}

// insertAt adds the new allocation name, whose hash is h, at the slot s
// that Find returned for it; r's spec is already counted.
func (t *allocTable) insertAt(s int, h uint32, name string, r allocRec) {
	t.InsertAt(s, h, r.spec.req.Key.Namespace, name, r)
}

// del deletes (ns, name) and reports whether it was there.
func (t *allocTable) del(ns, name string) bool {
	r, ok := t.Delete(ns, name)
	if ok && !r.spec.own {
		t.v.unref(r.spec)
	}
	return ok
}

// plainHolder returns the plain allocation of v that holds offset off of
// n, by a scan of v's tables.
func (v *vrf) plainHolder(n *node, off uint64) (alloc, bool) {
	for _, t := range v.tables {
		for i := range t.Len() {
			r := t.At(i)
			if r.node == n && r.off <= off && off-r.off < r.count() {
				return t.at(i), true
			}
		}
	}
	return alloc{}, false
}
