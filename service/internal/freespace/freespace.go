// Package freespace tracks the free space of one parent prefix (an aggregate
// or a pool, IPv4 or IPv6) from which child prefixes are carved, and answers
// best-fit sub-prefix allocation: "the smallest free aligned block that can
// hold a /L, lowest address first".
//
// Free space is the canonical buddy decomposition of the parent minus its
// used children: the set of maximal aligned free blocks (CIDR prefixes).
// For example, with 10.0.0.0/24 used in 10.0.0.0/16 the free blocks are
// 10.0.1.0/24, 10.0.2.0/23, 10.0.4.0/22, …, 10.0.128.0/17, and the best fit
// for a /23 is 10.0.2.0/23 while the best fit for a /24 is 10.0.1.0/24.
//
// # Design
//
// A Space is a crit-bit (PATRICIA) tree whose leaves are the free blocks.
// Each inner node has a critical bit: the first address bit at which the
// blocks below its two halves differ; every block below its lower half has
// that bit 0, every block below its upper half has it 1, and all agree on
// the bits before it. The critical bit is kept in the references to the
// node, so a walk reads where to go next and which bit decides it in one
// load. Critical bits grow strictly on the way down, so a path is at most
// as long as the address, and in practice as long as the number of places
// where the free space branches: with 65,000 /24s used from the start of a
// /8, the three free blocks left sit under two inner nodes, however deep
// they are in the address. Used space is what no leaf covers; it is not
// stored.
//
// The tree is kept canonical: no two free blocks are buddies (two free
// halves of one block merge into it). Two buddies would always be the two
// leaves of one node whose critical bit is their last prefix bit, which is
// where Release looks for them.
//
// Every inner node records, for each half, the set of prefix lengths
// (1..128, as a 128-bit mask) of the free blocks below it. BestFit(bits)
// reads the masks of the top node to find the longest length L <= bits that
// has a free block, then walks down, at each node choosing the lower half if
// it holds a free /L, to the lowest free /L. Take and IsFree of p walk down
// by p's bits to the only block that can hold p. Take replaces that block by
// the free blocks it leaves (one per bit by which p is longer, a chain of
// nodes) or removes it; Release walks the same way, inserts p where its
// first bit differing from the block found says, merges it with free
// buddies on the way back up, and refreshes the masks above (stopping as
// soon as a mask does not change). Ascend visits each node once.
//
// This replaces the textbook layout of one ordered set of block addresses
// per prefix length: there, finding the free block that holds p costs a
// membership lookup per candidate length (up to 128 per Take), every split
// or merge touches several sets, and visiting the blocks in address order
// needs a merge across lengths. The tree answers all of these with one walk
// along a single path, hashes nothing, and keeps address order by
// construction. It also replaces a plain binary trie over the address bits,
// whose paths are one node per bit: a best fit, take and release of a /24
// among 65k used /24s walked 13 such nodes three times.
//
// Addresses are handled inside as 128-bit values (two uint64 words) with
// IPv4 addresses in the top 32 bits, so that bit i of an address, counted
// from the most significant end, is found the same way in both families;
// netip values are built only at the API edge. Inner nodes (48 bytes) and
// leaves (24 bytes) live in two arenas with no pointers, so the garbage
// collector does not scan them; freed ones are recycled, so steady
// take/release churn does not allocate. The arenas do not shrink: their
// size follows the largest number of free blocks ever held.
//
// Needed by BenchmarkW2BestFit and BenchmarkW2BestFitChurn (a best-fit
// sub-prefix in at most 1 µs in a fragmented aggregate); the crit-bit
// layout by BenchmarkBestFit/*/ours-core in service/peerbench, whose best
// fit among 65k children must beat a kept netipx IPSet tenfold (the binary
// trie took about 500 ns there, this tree about 100).
//
// A Space is not safe for concurrent use if any goroutine modifies it.
package freespace

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// u128 is an address, left-aligned: IPv4 addresses fill the top 32 bits.
type u128 struct{ hi, lo uint64 }

// bit returns bit i of a, counted from the most significant bit (0..127).
// The branch is taken the same way along most walks (always for IPv4), and
// the masked shifts compile to single instructions.
func (a u128) bit(i int) int {
	if i < 64 {
		return int(a.hi << (uint(i) & 63) >> 63)
	}
	return int(a.lo << (uint(i) & 63) >> 63)
}

// flip returns a with bit i (from the most significant end) inverted.
func (a u128) flip(i int) u128 {
	const msb = 1 << 63
	return u128{a.hi ^ msb>>uint(i), a.lo ^ msb>>uint(i-64)}
}

// hostZero reports whether the bits of a after the first n are all zero.
func (a u128) hostZero(n int) bool {
	if n <= 64 {
		return a.lo == 0 && a.hi<<n == 0
	}
	return a.lo<<(n-64) == 0
}

// top returns a with all but its first n bits cleared.
func (a u128) top(n int) u128 {
	if n <= 64 {
		return u128{a.hi &^ (^uint64(0) >> n), 0}
	}
	return u128{a.hi, a.lo &^ (^uint64(0) >> (n - 64))}
}

// firstDiff returns the index of the first bit at which a and b differ, or
// 128 if they are equal.
func firstDiff(a, b u128) int {
	if x := a.hi ^ b.hi; x != 0 {
		return bits.LeadingZeros64(x)
	}
	return 64 + bits.LeadingZeros64(a.lo^b.lo)
}

// lenset is a set of prefix lengths 1..128: bit l-1 of lo stands for length
// l <= 64, bit l-65 of hi for length l > 64. (A struct, not an array: the
// compiler keeps a struct of two words in registers.)
type lenset struct{ lo, hi uint64 }

// one returns the set holding only length l (1 <= l <= 128).
func one(l int) lenset {
	if l <= 64 {
		return lenset{lo: 1 << (l - 1)}
	}
	return lenset{hi: 1 << (l - 65)}
}

// has reports whether length l is in m.
func (m lenset) has(l int) bool {
	if l <= 64 {
		return m.lo>>(l-1)&1 != 0
	}
	return m.hi>>(l-65)&1 != 0
}

// or returns the union of m and n.
func (m lenset) or(n lenset) lenset { return lenset{m.lo | n.lo, m.hi | n.hi} }

// longest returns the largest length in m that is at most max, or 0.
func (m lenset) longest(max int) int {
	if max > 64 {
		if w := m.hi & (1<<(max-64) - 1); w != 0 {
			return 64 + bits.Len64(w)
		}
		max = 64
	}
	return bits.Len64(m.lo & (1<<max - 1))
}

// ref refers to a subtree: none (no free block), an inner node (its
// index in Space.nodes in the low 32 bits, its critical bit in the next
// 8) or a leaf (leafBit | its index in Space.leaves). A node's critical
// bit travels with the references to it, so a walk learns which half to
// take from the same load that tells it where the node is. Index 0 of
// either arena is never used, so 0 can end the spare lists.
type ref uint64

const (
	none    ref = 0
	leafBit ref = 1 << 63
)

// nodeRef returns the reference to inner node i whose critical bit is c.
func nodeRef(i uint32, c int) ref { return ref(c)<<32 | ref(i) }

// isNode reports whether r is an inner node.
func (r ref) isNode() bool { return int64(r) > 0 }

// isLeaf reports whether r is a leaf.
func (r ref) isLeaf() bool { return r&leafBit != 0 }

// index returns the index of r in its arena.
func (r ref) index() uint32 { return uint32(r) }

// crit returns the critical bit of inner node r, counted from the most
// significant end.
func (r ref) crit() int { return int(r >> 32 & 0xff) }

// node is an inner node: two halves that differ first at the critical bit
// its references carry.
type node struct {
	kid [2]ref    // lower and upper half; the spare list links through kid[0]
	m   [2]lenset // lengths of the free blocks below kid[0] and kid[1]
}

// leaf is a free block.
type leaf struct {
	a    u128   // address, host bits zero
	l    uint8  // prefix length
	next uint32 // the spare list
}

// maxDepth bounds the number of inner nodes on a path from the top: their
// critical bits grow strictly and are below 128.
const maxDepth = 128

// Space is the free space of one root prefix. Create one with New; the zero
// value is not usable.
type Space struct {
	root      netip.Prefix
	base      u128 // root address
	rbits     int  // root prefix length
	width     int  // 32 or 128
	top       ref  // the whole tree
	nodes     []node
	leaves    []leaf
	spareNode uint32 // recycled nodes, linked through kid[0]; 0 ends the list
	spareLeaf uint32 // recycled leaves, linked through next; 0 ends the list
	nfree     u128
	blocks    int
	path      [maxDepth]ref // scratch: the nodes above the block being changed
}

// New returns the free space of root, with all of root free. It panics if
// root is not a valid canonical prefix (root.Masked() == root).
func New(root netip.Prefix) *Space {
	if !root.IsValid() || root.Masked() != root {
		panic("freespace: root " + root.String() + " is not a canonical prefix")
	}
	s := &Space{
		root:   root,
		base:   toU128(root.Addr()),
		rbits:  root.Bits(),
		width:  root.Addr().BitLen(),
		nodes:  make([]node, 1, 16),
		leaves: make([]leaf, 1, 16),
		blocks: 1,
	}
	s.top = s.newLeaf(s.base, s.rbits)
	s.nfree = s.size(s.rbits)
	return s
}

// Root returns the prefix whose free space s tracks.
func (s *Space) Root() netip.Prefix { return s.root }

// Free returns the number of free addresses in s as a 128-bit count. The
// count saturates at 2^128-1, which is reported only when all of ::/0 is
// free.
func (s *Space) Free() (hi, lo uint64) {
	if s.top.isLeaf() && s.width-s.rbits == 128 && s.leaf(s.top).l == 0 {
		return ^uint64(0), ^uint64(0)
	}
	return s.nfree.hi, s.nfree.lo
}

// Blocks returns the number of free blocks: the size of the canonical
// decomposition of the free space.
func (s *Space) Blocks() int { return s.blocks }

// Take marks all of p used. p must be a canonical prefix of the root's
// family inside the root (p may be the root itself). Take reports false, and
// changes nothing, if p is not such a prefix or any part of p is already
// used.
func (s *Space) Take(p netip.Prefix) bool {
	a, l, ok := s.inside(p)
	if !ok {
		return false
	}
	n, g := s.descend(a)
	if !g.isLeaf() {
		return false // nothing is free
	}
	// Free blocks are maximal, so p is wholly free only inside this one.
	fl := int(s.leaf(g).l)
	if fl > l || firstDiff(a, s.leaf(g).a) < fl {
		return false
	}
	s.nfree = s.nfree.sub(s.size(l))
	s.blocks += l - fl - 1
	if fl < l {
		r, m := s.split(a, fl, l, g)
		s.link(s.path[:n], a, r, m)
		return true
	}
	// p is a whole free block: its parent gives way to the other half.
	s.freeLeaf(g)
	if n == 0 {
		s.top = none
		return true
	}
	n--
	up := s.path[n]
	nd := &s.nodes[up.index()]
	b := 1 - a.bit(up.crit())
	other, m := nd.kid[b], nd.m[b]
	s.freeNode(up)
	s.link(s.path[:n], a, other, m)
	return true
}

// Release marks all of p free again. p must be a canonical prefix of the
// root's family inside the root (p may be the root itself) that is wholly
// used, though it need not have been taken as a unit. Release reports false,
// and changes nothing, if p is not such a prefix or any part of p is free.
func (s *Space) Release(p netip.Prefix) bool {
	a, l, ok := s.inside(p)
	if !ok {
		return false
	}
	n, g := s.descend(a)
	if g == none {
		s.top = s.newLeaf(a, l)
		s.blocks = 1
		s.nfree = s.size(l)
		return true
	}
	// Any free block inside p or holding p would be the one found.
	gl := int(s.leaf(g).l)
	c := firstDiff(a, s.leaf(g).a)
	if c >= min(l, gl) {
		return false
	}
	s.nfree = s.nfree.add(s.size(l))
	// p belongs beside the subtree at the first node of the path whose
	// critical bit is after c (no node on the path has critical bit c).
	i := 0
	for i < n && s.path[i].crit() < c {
		i++
	}
	if i == n && c == l-1 && gl == l {
		// g is p's buddy: they merge, and then with each free buddy above.
		l--
		for ; i > 0; i-- {
			up := s.path[i-1]
			if up.crit() != l-1 {
				break
			}
			o := s.nodes[up.index()].kid[1-a.bit(l-1)]
			if !o.isLeaf() || int(s.leaf(o).l) != l {
				break
			}
			s.freeLeaf(o)
			s.freeNode(s.path[i-1])
			s.blocks--
			l--
		}
		*s.leaf(g) = leaf{a: a.top(l), l: uint8(l)}
		var m lenset
		if i > 0 {
			m = one(l) // l > the parent's critical bit >= 0
		}
		s.link(s.path[:i], a, g, m)
		return true
	}
	s.blocks++
	o := g
	if i < n {
		o = s.path[i]
	}
	var om lenset
	if i > 0 {
		up := s.path[i-1]
		om = s.nodes[up.index()].m[a.bit(up.crit())]
	} else {
		om = s.mask(o)
	}
	pm := one(l)
	x := s.newNode(c)
	nd := &s.nodes[x.index()]
	b := a.bit(c)
	nd.kid[b], nd.m[b] = s.newLeaf(a, l), pm
	nd.kid[1-b], nd.m[1-b] = o, om
	s.link(s.path[:i], a, x, om.or(pm))
	return true
}

// IsFree reports whether every address of p is free. It reports false if p
// is not a canonical prefix of the root's family inside the root.
func (s *Space) IsFree(p netip.Prefix) bool {
	a, l, ok := s.inside(p)
	if !ok {
		return false
	}
	r := s.top
	for r.isNode() {
		r = s.nodes[r.index()].kid[a.bit(r.crit())]
	}
	if r == none {
		return false
	}
	lf := s.leaf(r)
	return int(lf.l) <= l && firstDiff(a, lf.a) >= int(lf.l)
}

// BestFit returns the first /bits prefix of the smallest free block that can
// hold a /bits (the block with the longest prefix length not exceeding bits),
// choosing the lowest address among free blocks of that size. It does not
// take the prefix. It reports false if no free block can hold a /bits, or if
// bits is shorter than the root's prefix length or longer than the family's
// address length.
func (s *Space) BestFit(bits int) (netip.Prefix, bool) {
	if bits < s.rbits || bits > s.width {
		return netip.Prefix{}, false
	}
	r := s.top
	if r.isNode() {
		top := &s.nodes[r.index()]
		l := top.m[0].or(top.m[1]).longest(bits)
		if l == 0 {
			return netip.Prefix{}, false
		}
		for r.isNode() {
			nd := &s.nodes[r.index()]
			if nd.m[0].has(l) {
				r = nd.kid[0]
			} else {
				r = nd.kid[1]
			}
		}
	}
	if r == none || int(s.leaf(r).l) > bits {
		return netip.Prefix{}, false
	}
	return s.prefix(s.leaf(r).a, bits), true
}

// Ascend calls fn for each free block in ascending address order until fn
// returns false. fn must not modify s.
func (s *Space) Ascend(fn func(free netip.Prefix) bool) {
	s.walk(s.top, fn)
}

// walk visits the free blocks below r and reports whether fn asked to go
// on.
func (s *Space) walk(r ref, fn func(netip.Prefix) bool) bool {
	switch {
	case r == none:
		return true
	case r.isLeaf():
		lf := s.leaf(r)
		return fn(s.prefix(lf.a, int(lf.l)))
	}
	kid := s.nodes[r.index()].kid
	return s.walk(kid[0], fn) && s.walk(kid[1], fn)
}

// descend walks down from the top by a's bits, records the inner nodes it
// passes in s.path, and returns their number and the leaf (or none) it
// reaches.
func (s *Space) descend(a u128) (int, ref) {
	n, r := 0, s.top
	for r.isNode() {
		s.path[n] = r
		n++
		r = s.nodes[r.index()].kid[a.bit(r.crit())]
	}
	return n, r
}

// split turns the free block of length from at a's address, whose leaf is
// g, into the free blocks left when the block of length l at a is taken:
// the other half at each length from+1..l. It returns the subtree holding
// them (g is reused for the deepest) and its free lengths.
func (s *Space) split(a u128, from, l int, g ref) (ref, lenset) {
	*s.leaf(g) = leaf{a: a.flip(l - 1), l: uint8(l)}
	r, m := g, one(l)
	for k := l - 1; k > from; k-- {
		// The other half at length k differs from the blocks below r
		// first at bit k-1.
		km := one(k)
		o := s.newLeaf(a.top(k).flip(k-1), k)
		x := s.newNode(k - 1)
		nd := &s.nodes[x.index()]
		b := a.bit(k - 1)
		nd.kid[b], nd.m[b] = r, m
		nd.kid[1-b], nd.m[1-b] = o, km
		r, m = x, m.or(km)
	}
	return r, m
}

// link puts r, whose free lengths are m, where the walk by a's bits leaves
// the last node of path (or at the top if path is empty), and refreshes the
// masks above.
func (s *Space) link(path []ref, a u128, r ref, m lenset) {
	if len(path) == 0 {
		s.top = r
		return
	}
	i := len(path) - 1
	nd := &s.nodes[path[i].index()]
	b := a.bit(path[i].crit())
	nd.kid[b], nd.m[b] = r, m
	for ; i > 0; i-- {
		// nd.m[b] is m: only the other half's lengths are read back.
		m = m.or(nd.m[1-b])
		nd = &s.nodes[path[i-1].index()]
		b = a.bit(path[i-1].crit())
		if nd.m[b] == m {
			return
		}
		nd.m[b] = m
	}
}

// mask returns the free lengths below r, which is not the top leaf of a
// wholly free ::/0 or 0.0.0.0/0 (length 0 is not in a lenset).
func (s *Space) mask(r ref) lenset {
	if r.isLeaf() {
		return one(int(s.leaf(r).l))
	}
	nd := &s.nodes[r.index()]
	return nd.m[0].or(nd.m[1])
}

// leaf returns the leaf r refers to.
func (s *Space) leaf(r ref) *leaf { return &s.leaves[r.index()] }

// newNode returns an inner node whose critical bit is c, reusing a
// recycled one if there is one. The caller sets all its fields.
func (s *Space) newNode(c int) ref {
	i := s.spareNode
	if i != 0 {
		s.spareNode = uint32(s.nodes[i].kid[0])
	} else {
		s.nodes = append(s.nodes, node{})
		i = uint32(len(s.nodes) - 1)
	}
	return nodeRef(i, c)
}

// freeNode puts inner node r on the spare list.
func (s *Space) freeNode(r ref) {
	s.nodes[r.index()] = node{kid: [2]ref{ref(s.spareNode)}}
	s.spareNode = r.index()
}

// newLeaf returns a leaf for the block of length l at a, reusing a recycled
// one if there is one.
func (s *Space) newLeaf(a u128, l int) ref {
	i := s.spareLeaf
	if i != 0 {
		s.spareLeaf = s.leaves[i].next
	} else {
		s.leaves = append(s.leaves, leaf{})
		i = uint32(len(s.leaves) - 1)
	}
	s.leaves[i] = leaf{a: a, l: uint8(l)}
	return leafBit | ref(i)
}

// freeLeaf puts leaf r on the spare list.
func (s *Space) freeLeaf(r ref) {
	i := r.index()
	s.leaves[i] = leaf{next: s.spareLeaf}
	s.spareLeaf = i
}

// inside validates p and returns its address and length.
func (s *Space) inside(p netip.Prefix) (u128, int, bool) {
	if !p.IsValid() || p.Addr().Is4() != (s.width == 32) {
		return u128{}, 0, false
	}
	l := p.Bits()
	a := toU128(p.Addr())
	if l < s.rbits || !a.hostZero(l) || a.top(s.rbits) != s.base {
		return u128{}, 0, false
	}
	return a, l, true
}

// size returns the number of addresses in a block of length l, modulo 2^128.
func (s *Space) size(l int) u128 {
	switch e := s.width - l; {
	case e < 64:
		return u128{0, 1 << e}
	case e < 128:
		return u128{1 << (e - 64), 0}
	}
	return u128{}
}

func (a u128) add(b u128) u128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, c)
	return u128{hi, lo}
}

func (a u128) sub(b u128) u128 {
	lo, c := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, c)
	return u128{hi, lo}
}

// toU128 returns a as a left-aligned 128-bit value.
func toU128(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{uint64(binary.BigEndian.Uint32(b[:])) << 32, 0}
	}
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// prefix returns the prefix of length l at address a in the root's family.
func (s *Space) prefix(a u128, l int) netip.Prefix {
	if s.width == 32 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(a.hi>>32))
		return netip.PrefixFrom(netip.AddrFrom4(b), l)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return netip.PrefixFrom(netip.AddrFrom16(b), l)
}
