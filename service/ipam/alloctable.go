package ipam

import (
	"encoding/binary"
	"hash/maphash"
)

// Allocations are the bulk of the state (millions of addresses), so they
// are not stored one Go object each. An owner's allocations in one VRF
// live in an allocTable: 32-byte records in fixed pages, an
// open-addressing index of 4-byte slots keyed by (namespace, name), and a
// name arena. What a record asked for is an allocSpec that the
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

// allocRec is one allocation in its table.
type allocRec struct {
	spec *allocSpec
	// A plain placement: offsets [off, off+count-1] of the network or
	// loopback node; nil for an own spec.
	node *node
	off  uint64
	name nameRef
	hash uint32 // of its namespace and name (hashKey)
}

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

// nameRef locates a name in a nameArena: its chunk and the offset of its
// length (a uvarint) there.
type nameRef struct {
	chunk uint16
	off   uint16
}

// nameArena stores names, each after its length, back to back in chunks
// that grow up to maxChunk bytes (a longer name gets a chunk of its own).
type nameArena struct {
	chunks [][]byte
	dead   int // bytes of deleted names
}

const (
	maxChunk = 1 << 16
	// maxChunks bounds the chunks of an arena (their index is a uint16).
	maxChunks = 1<<16 - 1
)

func addName[S ~string | ~[]byte](a *nameArena, name S) nameRef {
	need := uvarintLen(len(name)) + len(name)
	last := len(a.chunks) - 1
	if last < 0 || len(a.chunks[last])+need > cap(a.chunks[last]) {
		size := 256
		if last >= 0 {
			size = min(2*cap(a.chunks[last]), maxChunk)
		}
		a.chunks = append(a.chunks, make([]byte, 0, max(size, need)))
		last++
	}
	c := a.chunks[last]
	ref := nameRef{chunk: uint16(last), off: uint16(len(c))}
	c = binary.AppendUvarint(c, uint64(len(name)))
	a.chunks[last] = append(c, name...)
	return ref
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// bytes returns the name r locates.
func (a *nameArena) bytes(r nameRef) []byte {
	c := a.chunks[r.chunk][r.off:]
	n, k := binary.Uvarint(c)
	return c[k : k+int(n)]
}

// allocTable holds the allocations of one owner in one VRF. The VRF's lock
// guards it (and the allocator-wide lock during Apply and Snapshot).
type allocTable struct {
	os *ownerState
	v  *vrf
	// The records, in pages of recPage so that growing never copies
	// them; only the first page grows by appending.
	pages [][]allocRec
	n     int
	slots []uint32 // linear probing; 0 is empty, else tag<<indexBits | record index + 1
	names nameArena
}

const (
	recPageBits = 10
	recPage     = 1 << recPageBits
)

// rec returns record i.
func (t *allocTable) rec(i int) *allocRec { return &t.pages[i>>recPageBits][i&(recPage-1)] }

// push appends r.
func (t *allocTable) push(r allocRec) {
	p := t.n >> recPageBits
	switch {
	case p < len(t.pages):
		t.pages[p] = append(t.pages[p], r)
	case p == 0:
		t.pages = append(t.pages, append(make([]allocRec, 0, 4), r))
	default:
		t.pages = append(t.pages, append(make([]allocRec, 0, recPage), r))
	}
	t.n++
}

// pop removes the last record. One empty page is kept, so that a table
// whose size goes back and forth across a page boundary does not
// allocate a page each time.
func (t *allocTable) pop() {
	t.n--
	p := t.pages[t.n>>recPageBits]
	p[len(p)-1] = allocRec{}
	t.pages[t.n>>recPageBits] = p[:len(p)-1]
	if keep := t.n>>recPageBits + 2; len(t.pages) > keep {
		t.pages[len(t.pages)-1] = nil
		t.pages = t.pages[:len(t.pages)-1]
	}
}

// A slot holds a record index (plus one) in its low indexBits and the top
// bits of the key's hash above them, so a probe rarely compares names. A
// key's home slot is its hash modulo the number of slots; records keep
// their hash, so growing the index and deleting from it read no names.
const (
	indexBits = 25
	indexMask = 1<<indexBits - 1
	// MaxTableAllocs is the most allocations one owner holds in one
	// network instance.
	MaxTableAllocs = indexMask - 1
)

func tagOf(h uint32) uint32 { return h &^ indexMask }

var nameSeed = maphash.MakeSeed()

// hashKey hashes a namespace and a name.
func hashKey(ns, name string) uint32 {
	h := maphash.String(nameSeed, name)
	if ns != "" {
		h ^= maphash.String(nameSeed, ns) * 0x9e3779b97f4a7c15
	}
	return uint32(h ^ h>>32)
}

// len returns the number of allocations.
func (t *allocTable) len() int { return t.n }

// find returns the slot holding (ns, name) whose hash is h, or the empty
// slot where it would go (-1 when there are no slots).
func (t *allocTable) find(ns, name string, h uint32) (slot int, found bool) {
	if len(t.slots) == 0 {
		return -1, false
	}
	mask := len(t.slots) - 1
	tag := tagOf(h)
	for s := int(h) & mask; ; s = (s + 1) & mask {
		x := t.slots[s]
		if x == 0 {
			return s, false
		}
		if x&^indexMask != tag {
			continue
		}
		r := t.rec(int(x&indexMask - 1))
		if r.hash == h && string(t.names.bytes(r.name)) == name && r.spec.req.Key.Namespace == ns {
			return s, true
		}
	}
}

// recAt returns the record slot s points at.
func (t *allocTable) recAt(s int) *allocRec { return t.rec(int(t.slots[s]&indexMask - 1)) }

// get returns the record of (ns, name).
func (t *allocTable) get(ns, name string) (*allocRec, bool) {
	s, ok := t.find(ns, name, hashKey(ns, name))
	if !ok {
		return nil, false
	}
	return t.recAt(s), true
}

// index returns the record index of (ns, name), or -1.
func (t *allocTable) index(ns, name string) int {
	s, ok := t.find(ns, name, hashKey(ns, name))
	if !ok {
		return -1
	}
	return int(t.slots[s]&indexMask - 1)
}

// at returns record i with its name.
func (t *allocTable) at(i int) alloc {
	r := t.rec(i)
	return alloc{allocRec: *r, name: string(t.names.bytes(r.name))}
}

// put inserts or replaces the allocation name of r.spec's namespace and
// returns the record it replaced. The caller checks that a new
// allocation fits (full).
func (t *allocTable) put(name string, r allocRec) (prev allocRec, replaced bool) {
	ns := r.spec.req.Key.Namespace
	if !r.spec.own {
		t.v.ref(r.spec)
	}
	h := hashKey(ns, name)
	s, ok := t.find(ns, name, h)
	if ok {
		old := t.recAt(s)
		if !old.spec.own {
			t.v.unref(old.spec)
		}
		prev = *old
		r.name, r.hash = old.name, old.hash
		*old = r
		return prev, true
	}
	t.insertAt(s, h, name, r)
	return allocRec{}, false
}

// insertAt adds the new allocation name, whose hash is h, at slot s that
// find returned for it; r's spec is already counted.
func (t *allocTable) insertAt(s int, h uint32, name string, r allocRec) {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.rehash(tableSize(t.n + 1))
		s, _ = t.find(r.spec.req.Key.Namespace, name, h)
	}
	r.name, r.hash = addName(&t.names, name), h
	t.push(r)
	t.slots[s] = tagOf(h) | uint32(t.n)
}

// grow makes room in the index for n more allocations.
func (t *allocTable) grow(n int) {
	if size := tableSize(t.n + n); size > len(t.slots) {
		t.rehash(size)
	}
}

// full reports whether the table cannot take one more allocation.
func (t *allocTable) full() bool { return t.n >= MaxTableAllocs || len(t.names.chunks) >= maxChunks }

// del deletes (ns, name) and reports whether it was there.
func (t *allocTable) del(ns, name string) bool {
	s, ok := t.find(ns, name, hashKey(ns, name))
	if !ok {
		return false
	}
	i := int(t.slots[s]&indexMask - 1)
	if sp := t.rec(i).spec; !sp.own {
		t.v.unref(sp)
	}
	n := len(t.names.bytes(t.rec(i).name))
	t.names.dead += uvarintLen(n) + n
	t.deleteSlot(s)
	// Move the last record into the hole.
	last := t.n - 1
	if i != last {
		ms := t.slotOf(last)
		t.slots[ms] = t.slots[ms]&^indexMask | uint32(i+1)
		*t.rec(i) = *t.rec(last)
	}
	t.pop()
	if t.n == 0 {
		*t = allocTable{os: t.os, v: t.v}
	} else if t.names.dead > 4096 && t.names.dead > t.liveNameBytes() {
		t.compactNames()
	}
	return true
}

// homeOf returns the home slot of record i.
func (t *allocTable) homeOf(i int) int { return int(t.rec(i).hash) & (len(t.slots) - 1) }

// slotOf returns the slot that points at record i.
func (t *allocTable) slotOf(i int) int {
	mask := len(t.slots) - 1
	for s := t.homeOf(i); ; s = (s + 1) & mask {
		if int(t.slots[s]&indexMask) == i+1 {
			return s
		}
	}
}

// deleteSlot empties slot s and shifts later entries of its probe run
// back, so lookups need no tombstones.
func (t *allocTable) deleteSlot(s int) {
	mask := len(t.slots) - 1
	hole := s
	for j := (s + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		home := t.homeOf(int(t.slots[j]&indexMask - 1))
		// Move j into the hole when its home is not in (hole, j].
		if (j-home)&mask >= (j-hole)&mask {
			t.slots[hole] = t.slots[j]
			hole = j
		}
	}
	t.slots[hole] = 0
}

// tableSize is the number of slots for n records: a power of two at most
// three quarters full.
func tableSize(n int) int {
	size := 8
	for 4*n > 3*size {
		size *= 2
	}
	return size
}

func (t *allocTable) rehash(size int) {
	t.slots = make([]uint32, size)
	mask := size - 1
	for i := range t.n {
		h := t.rec(i).hash
		s := int(h) & mask
		for t.slots[s] != 0 {
			s = (s + 1) & mask
		}
		t.slots[s] = tagOf(h) | uint32(i+1)
	}
}

func (t *allocTable) liveNameBytes() int {
	n := 0
	for _, c := range t.names.chunks {
		n += len(c)
	}
	return n - t.names.dead
}

// compactNames copies the live names into a new arena.
func (t *allocTable) compactNames() {
	old := t.names
	t.names = nameArena{}
	for i := range t.n {
		r := t.rec(i)
		r.name = addName(&t.names, old.bytes(r.name))
	}
}

// plainHolder returns the plain allocation of v that holds offset off of
// n, by a scan of v's tables.
func (v *vrf) plainHolder(n *node, off uint64) (alloc, bool) {
	for _, t := range v.tables {
		for i := range t.n {
			r := t.rec(i)
			if r.node == n && r.off <= off && off-r.off < r.count() {
				return t.at(i), true
			}
		}
	}
	return alloc{}, false
}
