// Package addrset provides a set of address offsets that answers "which is
// the lowest free offset?" quickly.
//
// An offset counts addresses of one network prefix from its first address, so
// a set covers [0, last] where last+1 is the size of the prefix (capped at
// 2^64 addresses). The same type serves a dense IPv4 /16, in which nearly
// every offset is set, and an IPv6 /64, in which a few thousand of 2^64
// offsets are set, some of them far apart.
//
// # Design
//
// The set is a radix tree of bitmaps that is allocated lazily:
//
//   - A leaf holds 4096 offsets as 64 words of 64 bits, a count, and a
//     summary word whose bit i says that word i is full.
//   - An inner node has 64 children and a summary word whose bit i says
//     that child i is full. A child that is absent and not marked full
//     holds no offset; a child that is absent but marked full holds every
//     offset of its span. Ranges therefore cost memory only at their two
//     ends, whatever their length.
//   - The tree is just tall enough to cover [0, last]: a single leaf (no
//     inner level, height 0) for up to 4096 offsets, one inner level for up
//     to 2^18, nine for 2^64. Offsets of the root's span past last are
//     marked full once, at construction, so every search stops at last by
//     itself and never computes an offset past 2^64-1.
//
// Finding the lowest free offset at or after lo descends from the root,
// picking at each level the first child that is not full (one
// bits.TrailingZeros64 on the inverted summary word), then the first word
// of the leaf that is not full, then the first zero bit in it; it takes
// O(height) steps however full the set is. Adding or removing an offset
// changes one leaf, and its ancestors' summaries only when the leaf
// becomes full or stops being full.
//
// The set remembers the leaf last reached by Add or Remove and the path to
// it (a finger). Allocation is local: the next Add, Remove or NextFree
// usually lands in the same leaf and then skips the walk down, which in a
// /64 is nine levels deep.
//
// Nodes that become empty are released (a few are kept for reuse, so that
// churn does not allocate), so memory follows the offsets held rather than
// those ever held.
//
// A run of n free offsets is found by scanning the tree in order while
// carrying the length of the free run so far: full children and full words
// are skipped through the summaries, empty children extend the run by their
// whole span, and inside a word runs are found with shifts. Its cost grows
// with the number of leaves scanned, not with n.
//
// Needed by BenchmarkW1Fill and BenchmarkW1Churn (the next free address of
// a /16 in at most 50 and 100 ns, no allocation); the finger by
// BenchmarkV6Churn, whose walks are nine levels deep without it.
//
// # Concurrency
//
// A Set is not safe for concurrent use if any goroutine modifies it. The
// methods that do not modify it (Has, NextFree, NextFreeRun, Ascend, Len and
// Last) do not write to it either, so they may run concurrently with each
// other.
package addrset

import (
	"math"
	"math/bits"
)

const (
	leafShift = 12 // a leaf holds 1<<leafShift offsets
	fanShift  = 6  // an inner node has 1<<fanShift children
	maxHeight = 9  // inner levels needed for 2^64 offsets: 12+6*9 >= 64

	all = ^uint64(0)
)

// leaf is a bitmap of 4096 consecutive offsets.
type leaf struct {
	full  uint64 // bit i: words[i] is full
	count uint64 // number of bits set in words
	words [64]uint64
}

// inner is a node at level >= 1; level 1 nodes have leaves as children.
type inner struct {
	full  uint64 // bit i: child i is full (present or not)
	nkids int    // number of children present
	kids  [64]*inner
	leafs [64]*leaf
}

// empty reports whether no offset is set below n.
func (n *inner) empty() bool { return n.nkids == 0 && n.full == 0 }

func (n *inner) setKid(i uint, k *inner) {
	n.kids[i] = k
	n.nkids++
}

func (n *inner) setLeaf(i uint, lf *leaf) {
	n.leafs[i] = lf
	n.nkids++
}

func (n *inner) dropKid(i uint) {
	n.kids[i] = nil
	n.nkids--
}

func (n *inner) dropLeaf(i uint) {
	n.leafs[i] = nil
	n.nkids--
}

// size returns how many offsets are set below n, at level l; n must lie
// inside [0, last] (hold no padding).
func (n *inner) size(l int) uint64 {
	var c uint64
	for i := range uint(64) {
		switch {
		case l == 1 && n.leafs[i] != nil:
			c += n.leafs[i].count
		case l > 1 && n.kids[i] != nil:
			c += n.kids[i].size(l - 1)
		case n.full&(1<<i) != 0:
			c += 1 << childShift(l)
		}
	}
	return c
}

// Set is a set of offsets in [0, last]. Create one with New; the zero value
// is not usable.
type Set struct {
	last   uint64
	height int    // level of root, 0..maxHeight
	root   *inner // nil at height 0
	// rleaf is the set at height 0 (up to 4096 offsets): a leaf and no
	// inner node, which would take twice its memory (a network of a /20
	// and smaller; needed by BenchmarkBestFit in service/peerbench, whose
	// every allocation makes such a network). It is then always the
	// finger (fLeaf, fKey 0), so every operation finds it there.
	rleaf *leaf
	n     uint64 // number of offsets set, modulo 2^64
	over  bool   // the set holds all 2^64 offsets (n wrapped to 0)

	// The finger is the leaf last reached by Add or Remove, and its
	// ancestors, so that the next operation on the same leaf need not
	// walk down the tree. fLeaf is nil when there is no finger; anything
	// that may detach a node clears it.
	fLeaf *leaf
	fKey  uint64 // off>>leafShift for the offsets of fLeaf
	fPath [maxHeight + 1]*inner

	// nodes released empty, kept for reuse
	spareLeaf   *leaf
	spareInner  [maxHeight]*inner
	spareInners int
}

// childShift is log2 of the span of a child of an inner node at level l.
func childShift(l int) uint { return uint(leafShift + fanShift*(l-1)) }

// index is the position, in its parent at level l, of the child that holds
// off.
func index(off uint64, l int) uint { return uint(off>>childShift(l)) & 63 }

// New returns an empty set covering [0, last]; last may be math.MaxUint64.
func New(last uint64) *Set {
	if last < 1<<leafShift {
		lf := &leaf{}
		if last < 1<<leafShift-1 {
			lf.addRange(last+1, 1<<leafShift-1)
		}
		return &Set{last: last, rleaf: lf, fLeaf: lf}
	}
	h := 1
	for h < maxHeight && last>>(childShift(h)+fanShift) != 0 {
		h++
	}
	s := &Set{last: last, height: h, root: &inner{}}
	s.pad(s.root, h, last)
	return s
}

// pad marks every offset of n (at level l) past the relative offset r as
// set, so that searches never leave [0, last]. Padding is not counted in
// the size of the set.
func (s *Set) pad(n *inner, l int, r uint64) {
	cs := childShift(l)
	i := uint(r>>cs) & 63
	n.full |= all << i << 1
	rr := r & (1<<cs - 1)
	if rr == 1<<cs-1 {
		return // child i ends exactly at r
	}
	if l == 1 {
		lf := &leaf{}
		lf.addRange(rr+1, 1<<leafShift-1)
		n.setLeaf(i, lf)
		return
	}
	c := &inner{}
	s.pad(c, l-1, rr)
	n.setKid(i, c)
}

// Last returns the largest offset the set can hold.
func (s *Set) Last() uint64 { return s.last }

// Len returns the number of offsets in the set. It saturates at
// math.MaxUint64: only a set over [0, math.MaxUint64] holding every offset
// has more.
func (s *Set) Len() uint64 {
	if s.over {
		return math.MaxUint64
	}
	return s.n
}

// grow adds d to the size of the set.
func (s *Set) grow(d uint64, over bool) {
	var c uint64
	s.n, c = bits.Add64(s.n, d, 0)
	if c != 0 || over {
		s.over = true
	}
}

// shrink subtracts d from the size of the set.
func (s *Set) shrink(d uint64, over bool) {
	var b uint64
	s.n, b = bits.Sub64(s.n, d, 0)
	if b != 0 || over {
		s.over = false
	}
}

// Has reports whether off is in the set.
func (s *Set) Has(off uint64) bool {
	if off > s.last {
		return false
	}
	if lf := s.fLeaf; lf != nil && off>>leafShift == s.fKey {
		return lf.words[off>>6&63]&(1<<(off&63)) != 0
	}
	n := s.root
	for l := s.height; l > 1; l-- {
		i := index(off, l)
		if n.full&(1<<i) != 0 {
			return true
		}
		n = n.kids[i]
		if n == nil {
			return false
		}
	}
	i := index(off, 1)
	if n.full&(1<<i) != 0 {
		return true
	}
	lf := n.leafs[i]
	return lf != nil && lf.words[off>>6&63]&(1<<(off&63)) != 0
}

// Add adds off to the set. It reports false if off was already in the set
// or is beyond Last.
func (s *Set) Add(off uint64) bool {
	if off > s.last {
		return false
	}
	lf := s.fLeaf
	if lf == nil || off>>leafShift != s.fKey {
		// Walk down to the leaf, recording the path as the new finger.
		s.fLeaf = nil
		n := s.root
		for l := s.height; l > 1; l-- {
			i := index(off, l)
			if n.full&(1<<i) != 0 {
				return false
			}
			s.fPath[l] = n
			c := n.kids[i]
			if c == nil {
				c = s.newInner()
				n.setKid(i, c)
			}
			n = c
		}
		i := index(off, 1)
		if n.full&(1<<i) != 0 {
			return false
		}
		s.fPath[1] = n
		lf = n.leafs[i]
		if lf == nil {
			lf = s.newLeaf()
			n.setLeaf(i, lf)
		}
		s.fLeaf, s.fKey = lf, off>>leafShift
	}
	w, b := off>>6&63, off&63
	if lf.words[w]&(1<<b) != 0 {
		return false
	}
	lf.words[w] |= 1 << b
	lf.count++
	if lf.words[w] == all {
		lf.full |= 1 << w
		// Mark the ancestors that became full.
		for l, full := 1, lf.full == all; full && l <= s.height; l++ {
			p := s.fPath[l]
			p.full |= 1 << index(off, l)
			full = p.full == all
		}
	}
	s.n++
	if s.n == 0 {
		s.over = true
	}
	return true
}

// Remove removes off from the set. It reports false if off was not in the
// set.
func (s *Set) Remove(off uint64) bool {
	if off > s.last {
		return false
	}
	lf := s.fLeaf
	if lf == nil || off>>leafShift != s.fKey {
		// Walk down to the leaf, recording the path as the new finger and
		// splitting children that are full but absent.
		s.fLeaf = nil
		n := s.root
		for l := s.height; l > 1; l-- {
			i := index(off, l)
			s.fPath[l] = n
			c := n.kids[i]
			if c == nil {
				if n.full&(1<<i) == 0 {
					return false
				}
				c = s.fullInner()
				n.setKid(i, c)
			}
			n = c
		}
		s.fPath[1] = n
		i := index(off, 1)
		lf = n.leafs[i]
		if lf == nil {
			if n.full&(1<<i) == 0 {
				return false
			}
			lf = s.fullLeaf()
			n.setLeaf(i, lf)
		}
		s.fLeaf, s.fKey = lf, off>>leafShift
	}
	w, b := off>>6&63, off&63
	if lf.words[w]&(1<<b) == 0 {
		return false
	}
	if lf.words[w] == all {
		// Unmark the ancestors that were full.
		for l, full := 1, lf.full == all; full && l <= s.height; l++ {
			p := s.fPath[l]
			full = p.full == all
			p.full &^= 1 << index(off, l)
		}
		lf.full &^= 1 << w
	}
	lf.words[w] &^= 1 << b
	lf.count--
	if lf.count == 0 && s.height > 0 {
		s.fLeaf = nil
		s.fPath[1].dropLeaf(index(off, 1))
		s.freeLeaf(lf)
		for l := 1; l < s.height && s.fPath[l].empty(); l++ {
			s.fPath[l+1].dropKid(index(off, l+1))
			s.freeInner(s.fPath[l])
		}
	}
	if s.over {
		s.over = false
	}
	s.n--
	return true
}

// NextFree returns the lowest offset in [lo, hi] that is not in the set; hi
// is clamped to Last. It reports false if there is none (including when
// lo > hi).
func (s *Set) NextFree(lo, hi uint64) (uint64, bool) {
	hi = min(hi, s.last)
	if lo > hi {
		return 0, false
	}
	off, ok := s.nextFree(lo)
	if !ok || off > hi {
		return 0, false
	}
	return off, true
}

// nextFree returns the lowest offset at or after lo that is not set; lo is
// at most last, so the answer is too (padding beyond last is set).
func (s *Set) nextFree(lo uint64) (uint64, bool) {
	var local [maxHeight + 1]*inner
	path := &local
	l := 1
	if s.fLeaf != nil && lo>>leafShift == s.fKey {
		// Start at the finger's leaf; only read the finger, as NextFree
		// does not modify the set.
		if off, ok := s.fLeaf.nextFree(lo); ok {
			return off, true
		}
		path = &s.fPath
	} else {
		n := s.root
		for l = s.height; ; l-- {
			local[l] = n
			i := index(lo, l)
			if n.full&(1<<i) != 0 {
				break
			}
			if l == 1 {
				lf := n.leafs[i]
				if lf == nil {
					return lo, true
				}
				if off, ok := lf.nextFree(lo); ok {
					return off, true
				}
				break
			}
			c := n.kids[i]
			if c == nil {
				return lo, true
			}
			n = c
		}
	}
	// Nothing is free at or after lo in the child of path[l] holding lo:
	// look at its later siblings, then at those of its ancestors.
	for ; l <= s.height; l++ {
		n := path[l]
		i := index(lo, l)
		if m := ^n.full & (all << i << 1); m != 0 {
			j := uint(bits.TrailingZeros64(m))
			cs := childShift(l)
			base := lo&^spanMask(cs+fanShift) | uint64(j)<<cs
			return s.leftmostFree(n, l, j, base), true
		}
	}
	return 0, false
}

// nextFree returns the lowest free offset of lf at or after lo, if any;
// lo and the answer are absolute offsets.
func (lf *leaf) nextFree(lo uint64) (uint64, bool) {
	w := lo >> 6 & 63
	if m := ^lf.words[w] & (all << (lo & 63)); m != 0 {
		return lo&^63 | uint64(bits.TrailingZeros64(m)), true
	}
	if m := ^lf.full & (all << w << 1); m != 0 {
		w = uint64(bits.TrailingZeros64(m))
		return lo&^(1<<leafShift-1) | w<<6 | uint64(bits.TrailingZeros64(^lf.words[w])), true
	}
	return 0, false
}

// spanMask returns 2^shift-1, or all ones when shift >= 64.
func spanMask(shift uint) uint64 {
	if shift >= 64 {
		return all
	}
	return 1<<shift - 1
}

// leftmostFree returns the lowest free offset in child j of n (at level l),
// which is not full and starts at base.
func (s *Set) leftmostFree(n *inner, l int, j uint, base uint64) uint64 {
	for ; l > 1; l-- {
		c := n.kids[j]
		if c == nil {
			return base
		}
		n = c
		j = uint(bits.TrailingZeros64(^n.full))
		base |= uint64(j) << childShift(l-1)
	}
	lf := n.leafs[j]
	if lf == nil {
		return base
	}
	w := uint64(bits.TrailingZeros64(^lf.full))
	return base | w<<6 | uint64(bits.TrailingZeros64(^lf.words[w]))
}

// NextFreeRun returns the lowest offset s such that the n offsets s, s+1,
// ..., s+n-1 all lie in [lo, hi] and none of them is in the set; hi is
// clamped to Last. It reports false if there is no such run. A run of
// n = 0 offsets fits at lo whenever lo <= hi.
func (s *Set) NextFreeRun(lo, hi, n uint64) (uint64, bool) {
	hi = min(hi, s.last)
	if lo > hi || (n > 0 && n-1 > hi-lo) {
		return 0, false
	}
	switch n {
	case 0:
		return lo, true
	case 1:
		return s.NextFree(lo, hi)
	}
	r := runSearch{n: n, maxStart: hi - (n - 1)}
	if s.height == 0 {
		r.leaf(s.rleaf, 0, lo)
	} else {
		r.inner(s.root, s.height, 0, lo)
	}
	if !r.found {
		return 0, false
	}
	return r.start, true
}

// Ascend calls fn for each offset of the set in [lo, hi], in ascending
// order, until fn returns false; hi is clamped to Last. fn must not modify
// the set.
func (s *Set) Ascend(lo, hi uint64, fn func(off uint64) bool) {
	hi = min(hi, s.last)
	if lo > hi {
		return
	}
	if s.height == 0 {
		s.rleaf.ascend(0, lo, hi, fn)
		return
	}
	ascendInner(s.root, s.height, 0, lo, hi, fn)
}

// AddRange adds every offset in [lo, hi] to the set; hi is clamped to Last.
// It returns how many offsets were not in the set before, saturating at
// math.MaxUint64.
func (s *Set) AddRange(lo, hi uint64) (added uint64) {
	hi = min(hi, s.last)
	if lo > hi {
		return 0
	}
	if s.height == 0 {
		d := s.rleaf.addRange(lo, hi)
		s.grow(d, false)
		return d
	}
	s.fLeaf = nil
	d, over := s.addInner(s.root, s.height, 0, lo, hi)
	s.grow(d, over)
	if over {
		return math.MaxUint64
	}
	return d
}

// RemoveRange removes every offset in [lo, hi] from the set; hi is clamped
// to Last. It returns how many offsets were in the set before, saturating at
// math.MaxUint64.
func (s *Set) RemoveRange(lo, hi uint64) (removed uint64) {
	hi = min(hi, s.last)
	if lo > hi {
		return 0
	}
	if s.height == 0 {
		d := s.rleaf.removeRange(lo, hi)
		s.shrink(d, false)
		return d
	}
	s.fLeaf = nil
	d, over := s.removeInner(s.root, s.height, 0, lo, hi)
	s.shrink(d, over)
	if over {
		return math.MaxUint64
	}
	return d
}
