// Package alloctable is the allocator's hand-written hash table: the
// records of one owner in one network instance, keyed by (namespace,
// name), without one Go object per record.
//
// Records live in fixed pages (growing never copies them), an
// open-addressing index of 4-byte slots finds them, and their names live
// back to back in a name arena. A slot holds the record's index and the
// top bits of the key's hash, so a probe rarely compares names; records
// keep their hash, so growing the index and deleting from it read no
// names; deletion shifts probe runs back, so lookups need no tombstones.
//
// Needed by BenchmarkW6HeapBytesPerAlloc (service/store/file, at most 64
// heap bytes per allocation): a Go map of per-record structs costs
// several times that, and pointers for the garbage collector to scan.
package alloctable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
)

// Record is the constraint on a table's record type R: a pointer to R
// knows the record's namespace (the name is the table's).
type Record[R any] interface {
	*R
	Namespace() string
}

// entry is one record with its name and key hash.
type entry[R any] struct {
	val  R
	name nameRef
	hash uint32
}

// Table holds records keyed by (namespace, name). The zero Table is
// empty and ready. A Table is not safe for concurrent use.
type Table[R any, P Record[R]] struct {
	// The records, in pages of recPage so that growing never copies
	// them; only the first page grows by appending.
	pages [][]entry[R]
	n     int
	slots []uint32 // linear probing; 0 is empty, else tag<<indexBits | record index + 1
	names nameArena
}

const (
	recPageBits = 10
	recPage     = 1 << recPageBits
)

// A slot holds a record index (plus one) in its low indexBits and the top
// bits of the key's hash above them.
const (
	indexBits = 25
	indexMask = 1<<indexBits - 1
	// MaxLen is the most records one table holds.
	MaxLen = indexMask - 1
)

func tagOf(h uint32) uint32 { return h &^ indexMask }

var nameSeed = maphash.MakeSeed()

// Hash hashes a namespace and a name, as the table does.
func Hash(ns, name string) uint32 {
	h := maphash.String(nameSeed, name)
	if ns != "" {
		h ^= maphash.String(nameSeed, ns) * 0x9e3779b97f4a7c15
	}
	return uint32(h ^ h>>32)
}

func (t *Table[R, P]) entry(i int) *entry[R] { return &t.pages[i>>recPageBits][i&(recPage-1)] }

// Len returns the number of records.
func (t *Table[R, P]) Len() int { return t.n }

// At returns record i, 0 <= i < Len(). Deleting a record moves the last
// one into its place.
func (t *Table[R, P]) At(i int) *R { return &t.entry(i).val }

// Name returns the name of record i; the bytes are the table's.
func (t *Table[R, P]) Name(i int) []byte { return t.names.bytes(t.entry(i).name) }

// push appends e.
func (t *Table[R, P]) push(e entry[R]) {
	p := t.n >> recPageBits
	switch {
	case p < len(t.pages):
		t.pages[p] = append(t.pages[p], e)
	case p == 0:
		t.pages = append(t.pages, append(make([]entry[R], 0, 4), e))
	default:
		t.pages = append(t.pages, append(make([]entry[R], 0, recPage), e))
	}
	t.n++
}

// pop removes the last record. One empty page is kept, so that a table
// whose size goes back and forth across a page boundary does not
// allocate a page each time.
func (t *Table[R, P]) pop() {
	t.n--
	p := t.pages[t.n>>recPageBits]
	p[len(p)-1] = entry[R]{}
	t.pages[t.n>>recPageBits] = p[:len(p)-1]
	if keep := t.n>>recPageBits + 2; len(t.pages) > keep {
		t.pages[len(t.pages)-1] = nil
		t.pages = t.pages[:len(t.pages)-1]
	}
}

// Find returns the slot holding (ns, name), whose hash is h, or the empty
// slot where it would go (-1 when the index has no slots).
func (t *Table[R, P]) Find(ns, name string, h uint32) (slot int, found bool) {
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
		e := t.entry(int(x&indexMask - 1))
		if e.hash == h && string(t.names.bytes(e.name)) == name && P(&e.val).Namespace() == ns {
			return s, true
		}
	}
}

// AtSlot returns the record a slot Find found points at.
func (t *Table[R, P]) AtSlot(s int) *R { return &t.entry(int(t.slots[s]&indexMask - 1)).val }

// Get returns the record of (ns, name).
func (t *Table[R, P]) Get(ns, name string) (*R, bool) {
	s, ok := t.Find(ns, name, Hash(ns, name))
	if !ok {
		return nil, false
	}
	return t.AtSlot(s), true
}

// Index returns the index of the record of (ns, name), or -1.
func (t *Table[R, P]) Index(ns, name string) int {
	s, ok := t.Find(ns, name, Hash(ns, name))
	if !ok {
		return -1
	}
	return int(t.slots[s]&indexMask - 1)
}

// Put inserts r under (ns, name), ns being r's namespace, or replaces the
// record there, returning the one it replaced. The caller checks that a
// new record fits (Full).
func (t *Table[R, P]) Put(ns, name string, r R) (prev R, replaced bool) {
	h := Hash(ns, name)
	s, ok := t.Find(ns, name, h)
	if ok {
		old := t.AtSlot(s)
		prev = *old
		*old = r
		return prev, true
	}
	t.InsertAt(s, h, ns, name, r)
	return prev, false
}

// InsertAt adds the new record r under (ns, name), whose hash is h, at the
// slot s that Find returned for it.
func (t *Table[R, P]) InsertAt(s int, h uint32, ns, name string, r R) {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.rehash(tableSize(t.n + 1))
		s, _ = t.Find(ns, name, h)
	}
	t.push(entry[R]{val: r, name: addName(&t.names, name), hash: h})
	t.slots[s] = tagOf(h) | uint32(t.n)
}

// Grow makes room in the index for n more records.
func (t *Table[R, P]) Grow(n int) {
	if size := tableSize(t.n + n); size > len(t.slots) {
		t.rehash(size)
	}
}

// Full reports whether the table cannot take one more record.
func (t *Table[R, P]) Full() bool { return t.n >= MaxLen || len(t.names.chunks) >= maxChunks }

// Delete deletes the record of (ns, name) and returns it.
func (t *Table[R, P]) Delete(ns, name string) (R, bool) {
	s, ok := t.Find(ns, name, Hash(ns, name))
	if !ok {
		var zero R
		return zero, false
	}
	i := int(t.slots[s]&indexMask - 1)
	e := t.entry(i)
	old := e.val
	n := len(t.names.bytes(e.name))
	t.names.dead += uvarintLen(n) + n
	t.deleteSlot(s)
	// Move the last record into the hole.
	if last := t.n - 1; i != last {
		ms := t.slotOf(last)
		t.slots[ms] = t.slots[ms]&^indexMask | uint32(i+1)
		*t.entry(i) = *t.entry(last)
	}
	t.pop()
	if t.n == 0 {
		t.empty()
	} else if t.names.dead > 4096 && t.names.dead > t.liveNameBytes() {
		t.compactNames()
	}
	return old, true
}

// keepSlots is the largest index an emptied table keeps, with its first
// page and name chunk: a table that holds one record at a time (an owner
// that allocates and releases one name) then allocates nothing, while a
// table that once held many records gives their memory back.
const keepSlots = 64

// empty forgets every record of a table whose last record was deleted.
func (t *Table[R, P]) empty() {
	if len(t.slots) > keepSlots || len(t.pages) != 1 || len(t.names.chunks) != 1 {
		*t = Table[R, P]{}
		return
	}
	clear(t.slots)
	t.names.chunks[0] = t.names.chunks[0][:0]
	t.names.dead = 0
}

// homeOf returns the home slot of record i.
func (t *Table[R, P]) homeOf(i int) int { return int(t.entry(i).hash) & (len(t.slots) - 1) }

// slotOf returns the slot that points at record i.
func (t *Table[R, P]) slotOf(i int) int {
	mask := len(t.slots) - 1
	for s := t.homeOf(i); ; s = (s + 1) & mask {
		if int(t.slots[s]&indexMask) == i+1 {
			return s
		}
	}
}

// deleteSlot empties slot s and shifts later entries of its probe run
// back, so lookups need no tombstones.
func (t *Table[R, P]) deleteSlot(s int) {
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

func (t *Table[R, P]) rehash(size int) {
	t.slots = make([]uint32, size)
	mask := size - 1
	for i := range t.n {
		h := t.entry(i).hash
		s := int(h) & mask
		for t.slots[s] != 0 {
			s = (s + 1) & mask
		}
		t.slots[s] = tagOf(h) | uint32(i+1)
	}
}

func (t *Table[R, P]) liveNameBytes() int {
	n := 0
	for _, c := range t.names.chunks {
		n += len(c)
	}
	return n - t.names.dead
}

// NameBytes returns the bytes the name arena holds, live and dead.
func (t *Table[R, P]) NameBytes() int { return t.liveNameBytes() + t.names.dead }

// compactNames copies the live names into a new arena.
func (t *Table[R, P]) compactNames() {
	old := t.names
	t.names = nameArena{}
	for i := range t.n {
		e := t.entry(i)
		e.name = addName(&t.names, old.bytes(e.name))
	}
}

// Check verifies the index: every used slot points at a distinct record
// and every record is found at its index. Tests call it after every step.
func (t *Table[R, P]) Check() error {
	used := 0
	for _, s := range t.slots {
		if s != 0 {
			used++
		}
	}
	if used != t.n {
		return fmt.Errorf("%d slots used for %d records", used, t.n)
	}
	for i := range t.n {
		name := string(t.Name(i))
		if got := t.Index(P(t.At(i)).Namespace(), name); got != i {
			return fmt.Errorf("record %d (%s) found at %d", i, name, got)
		}
	}
	if t.n > 0 && len(t.slots) == 0 {
		return errors.New("records without an index")
	}
	return nil
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
