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
// A Space is a binary trie over the root prefix whose nodes are the blocks
// that are partly free and partly used. Each child of a node is either
// another such node, or a leaf: a block that is wholly free or wholly used.
// Leaves are not stored: a child reference is "used", "free", or the index
// of a node in an arena slice. The trie is kept canonical: no node has two
// free children (they merge into one free block, as buddies do) nor two used
// children (they merge into one used block). The free leaves are therefore
// exactly the maximal aligned free blocks, and the number of nodes is at most
// the number of free blocks times their depth below the root.
//
// Every node records, for each of its two children, the set of prefix
// lengths (1..128, as a 128-bit mask) of the free blocks in that child.
// BestFit(bits) reads the masks of the top node to find the longest length
// L <= bits that has a free block, then walks down, at each level choosing
// the lower half if it holds a free /L, so it reaches the lowest free /L in
// L - Root().Bits() steps. Take and Release walk from the top to p, split a
// leaf into a chain of nodes if p is inside a larger block, or merge p with
// its buddy and further up if they now agree, and refresh the masks on the
// path back up (stopping as soon as a mask does not change). Take, Release
// and IsFree of p take one step down (and at most one back up) per bit by
// which p is longer than the root, and BestFit(bits) one step per bit by
// which bits is longer than the root: never more than 128, however many
// children there are. Ascend visits each node once.
//
// This replaces the textbook layout of one ordered set of block addresses
// per prefix length: there, finding the free block that holds p costs a
// membership lookup per candidate length (up to 128 per Take), every split
// or merge touches several sets, and visiting the blocks in address order
// needs a merge across lengths. The trie answers all of these with one walk
// along a single path, hashes nothing, and keeps address order by
// construction.
//
// Addresses are handled inside as 128-bit values (two uint64 words) with
// IPv4 addresses in the top 32 bits, so that bit i of an address, counted
// from the most significant end, is found the same way in both families;
// netip values are built only at the API edge. Nodes are 40 bytes with no
// pointers, so the garbage collector does not scan them; nodes freed by
// merges are recycled, so steady take/release churn does not allocate. The
// arena does not shrink: its size follows the largest number of nodes ever
// needed.
//
// Needed by BenchmarkW2BestFit and BenchmarkW2BestFitChurn (a best-fit
// sub-prefix in at most 1 µs in a fragmented aggregate).
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
// Shifts by 64 or more give 0, so exactly one word contributes.
func (a u128) bit(i int) int {
	return int((a.hi<<uint(i) | a.lo<<uint(i-64)) >> 63)
}

// set returns a with bit i (from the most significant end) set.
func (a u128) set(i int) u128 {
	const msb = 1 << 63
	return u128{a.hi | msb>>uint(i), a.lo | msb>>uint(i-64)}
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

// lenset is a set of prefix lengths 1..128: bit l-1 stands for length l.
type lenset [2]uint64

// one returns the set holding only length l (1 <= l <= 128).
func one(l int) lenset {
	if l <= 64 {
		return lenset{1 << (l - 1), 0}
	}
	return lenset{0, 1 << (l - 65)}
}

// has reports whether length l is in m.
func (m lenset) has(l int) bool {
	if l <= 64 {
		return m[0]>>(l-1)&1 != 0
	}
	return m[1]>>(l-65)&1 != 0
}

// or returns the union of m and n.
func (m lenset) or(n lenset) lenset { return lenset{m[0] | n[0], m[1] | n[1]} }

// longest returns the largest length in m that is at most max, or 0.
func (m lenset) longest(max int) int {
	if max > 64 {
		if w := m[1] & (1<<(max-64) - 1); w != 0 {
			return 64 + bits.Len64(w)
		}
		max = 64
	}
	return bits.Len64(m[0] & (1<<max - 1))
}

// ref is a child reference: a wholly used block, a wholly free block, or
// (>= firstNode) the index of a node in Space.nodes.
type ref uint32

const (
	used      ref = 0
	free      ref = 1
	firstNode     = 2
)

// node is a block that is partly free and partly used.
type node struct {
	kid [2]ref    // lower and upper half; the spare list links through kid[0]
	m   [2]lenset // lengths of the free blocks inside kid[0] and kid[1]
}

// maxDepth bounds the number of nodes on a path from the top.
const maxDepth = 128

// Space is the free space of one root prefix. Create one with New; the zero
// value is not usable.
type Space struct {
	root   netip.Prefix
	base   u128 // root address
	rbits  int  // root prefix length
	width  int  // 32 or 128
	top    ref  // the root block
	nodes  []node
	spare  ref // recycled nodes, linked through kid[0]; 0 ends the list
	nfree  u128
	blocks int
	path   [maxDepth]ref // scratch: the nodes above the block being changed
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
		top:    free,
		nodes:  make([]node, firstNode, 64),
		blocks: 1,
	}
	s.nfree = s.size(s.rbits)
	return s
}

// Root returns the prefix whose free space s tracks.
func (s *Space) Root() netip.Prefix { return s.root }

// Free returns the number of free addresses in s as a 128-bit count. The
// count saturates at 2^128-1, which is reported only when all of ::/0 is
// free.
func (s *Space) Free() (hi, lo uint64) {
	if s.top == free && s.width-s.rbits == 128 {
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
	path := &s.path
	n, d, cur := 0, s.rbits, s.top
	for ; d < l; d++ {
		if cur == used {
			return false
		}
		if cur == free {
			break
		}
		path[n] = cur
		n++
		cur = s.nodes[cur].kid[a.bit(d)]
	}
	if d < l {
		// p is inside the free block at depth d: replace that block by a
		// chain of nodes down to p, each with a free upper or lower half.
		below, m := s.chain(a, d, l, used, lenset{}, free)
		s.blocks += l - d - 1
		s.link(path[:n], a, d, below, m)
	} else {
		if cur != free {
			return false
		}
		s.blocks--
		// p becomes used; merge it with used buddies upwards.
		for n > 0 && s.nodes[path[n-1]].kid[1-a.bit(d-1)] == used {
			n--
			d--
			s.recycle(path[n])
		}
		s.link(path[:n], a, d, used, lenset{})
	}
	s.nfree = s.nfree.sub(s.size(l))
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
	path := &s.path
	n, d, cur := 0, s.rbits, s.top
	for ; d < l; d++ {
		if cur == free {
			return false
		}
		if cur == used {
			break
		}
		path[n] = cur
		n++
		cur = s.nodes[cur].kid[a.bit(d)]
	}
	if d < l {
		// p is inside the used block at depth d: replace that block by a
		// chain of nodes down to p, each with a used upper or lower half.
		below, m := s.chain(a, d, l, free, one(l), used)
		s.blocks++
		s.link(path[:n], a, d, below, m)
	} else {
		// A node is never wholly used, so p must be a used leaf.
		if cur != used {
			return false
		}
		s.blocks++
		// p becomes free; merge it with free buddies upwards.
		for n > 0 && s.nodes[path[n-1]].kid[1-a.bit(d-1)] == free {
			n--
			d--
			s.recycle(path[n])
			s.blocks--
		}
		var m lenset
		if d > 0 {
			m = one(d)
		}
		s.link(path[:n], a, d, free, m)
	}
	s.nfree = s.nfree.add(s.size(l))
	return true
}

// IsFree reports whether every address of p is free. It reports false if p
// is not a canonical prefix of the root's family inside the root.
func (s *Space) IsFree(p netip.Prefix) bool {
	a, l, ok := s.inside(p)
	if !ok {
		return false
	}
	cur := s.top
	for d := s.rbits; d < l && cur >= firstNode; d++ {
		cur = s.nodes[cur].kid[a.bit(d)]
	}
	return cur == free
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
	switch s.top {
	case free:
		return s.prefix(s.base, bits), true
	case used:
		return netip.Prefix{}, false
	}
	top := &s.nodes[s.top]
	l := top.m[0].or(top.m[1]).longest(bits)
	if l == 0 {
		return netip.Prefix{}, false
	}
	a, cur := s.base, s.top
	for d := s.rbits; ; d++ {
		nd := &s.nodes[cur]
		b := 0
		if !nd.m[0].has(l) {
			b = 1
			a = a.set(d)
		}
		if d+1 == l {
			return s.prefix(a, bits), true // nd.kid[b] is the free /l
		}
		cur = nd.kid[b]
	}
}

// Ascend calls fn for each free block in ascending address order until fn
// returns false. fn must not modify s.
func (s *Space) Ascend(fn func(free netip.Prefix) bool) {
	s.walk(s.top, s.base, s.rbits, fn)
}

// walk visits the free blocks of the block r at address a and depth d, and
// reports whether fn asked to go on.
func (s *Space) walk(r ref, a u128, d int, fn func(netip.Prefix) bool) bool {
	switch r {
	case used:
		return true
	case free:
		return fn(s.prefix(a, d))
	}
	kid := s.nodes[r].kid
	return s.walk(kid[0], a, d+1, fn) && s.walk(kid[1], a.set(d), d+1, fn)
}

// chain builds the nodes for depths d..l-1 along a's path that replace a
// leaf: the block at depth l becomes leaf (whose free lengths are lm) and
// every other half becomes other. It returns the top node and its free
// lengths.
func (s *Space) chain(a u128, d, l int, leaf ref, lm lenset, other ref) (ref, lenset) {
	below, m := leaf, lm
	for k := l - 1; k >= d; k-- {
		var om lenset // free lengths of the other half
		if other == free {
			om = one(k + 1)
		}
		r := s.alloc()
		if a.bit(k) == 0 {
			s.nodes[r] = node{kid: [2]ref{below, other}, m: [2]lenset{m, om}}
		} else {
			s.nodes[r] = node{kid: [2]ref{other, below}, m: [2]lenset{om, m}}
		}
		below, m = r, m.or(om)
	}
	return below, m
}

// link makes r, whose free lengths are m, the block at depth d on a's path,
// where path holds the nodes above it, and refreshes the masks above.
func (s *Space) link(path []ref, a u128, d int, r ref, m lenset) {
	if len(path) == 0 {
		s.top = r
		return
	}
	i := len(path) - 1
	nd := &s.nodes[path[i]]
	b := a.bit(d - 1)
	nd.kid[b], nd.m[b] = r, m
	for ; i > 0; i-- {
		// nd.m[b] is m: only the other half's lengths are read back.
		m = m.or(nd.m[1-b])
		nd = &s.nodes[path[i-1]]
		b = a.bit(s.rbits + i - 1)
		if nd.m[b] == m {
			return
		}
		nd.m[b] = m
	}
}

// alloc returns a node, reusing a recycled one if there is one.
func (s *Space) alloc() ref {
	if r := s.spare; r != 0 {
		s.spare = s.nodes[r].kid[0]
		return r
	}
	s.nodes = append(s.nodes, node{})
	return ref(len(s.nodes) - 1)
}

// recycle puts node r on the spare list.
func (s *Space) recycle(r ref) {
	s.nodes[r] = node{kid: [2]ref{s.spare}}
	s.spare = r
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
