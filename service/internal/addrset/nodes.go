package addrset

import "math/bits"

// newLeaf returns an empty leaf.
func (s *Set) newLeaf() *leaf {
	if lf := s.spareLeaf; lf != nil {
		s.spareLeaf = nil
		return lf
	}
	return &leaf{}
}

// newInner returns an empty inner node.
func (s *Set) newInner() *inner {
	if s.spareInners > 0 {
		s.spareInners--
		n := s.spareInner[s.spareInners]
		s.spareInner[s.spareInners] = nil
		return n
	}
	return &inner{}
}

// fullLeaf returns a leaf holding all of its offsets.
func (s *Set) fullLeaf() *leaf {
	lf := s.newLeaf()
	for i := range lf.words {
		lf.words[i] = all
	}
	lf.full = all
	lf.count = 1 << leafShift
	return lf
}

// fullInner returns an inner node holding all of its offsets.
func (s *Set) fullInner() *inner {
	n := s.newInner()
	n.full = all
	return n
}

// freeLeaf takes back a leaf that became empty.
func (s *Set) freeLeaf(lf *leaf) {
	if s.spareLeaf == nil {
		*lf = leaf{}
		s.spareLeaf = lf
	}
}

// freeInner takes back an inner node that became empty.
func (s *Set) freeInner(n *inner) {
	if s.spareInners < len(s.spareInner) {
		*n = inner{}
		s.spareInner[s.spareInners] = n
		s.spareInners++
	}
}

// addRange sets the offsets [a, b] (0 <= a <= b < 4096) of lf and returns
// how many were not set.
func (lf *leaf) addRange(a, b uint64) (d uint64) {
	wa, wb := a>>6, b>>6
	for w := wa; w <= wb; w++ {
		m := all
		if w == wa {
			m &= all << (a & 63)
		}
		if w == wb {
			m &= all >> (63 - b&63)
		}
		d += uint64(bits.OnesCount64(m &^ lf.words[w]))
		lf.words[w] |= m
		if lf.words[w] == all {
			lf.full |= 1 << w
		}
	}
	lf.count += d
	return d
}

// removeRange clears the offsets [a, b] (0 <= a <= b < 4096) of lf and
// returns how many were set.
func (lf *leaf) removeRange(a, b uint64) (d uint64) {
	wa, wb := a>>6, b>>6
	for w := wa; w <= wb; w++ {
		m := all
		if w == wa {
			m &= all << (a & 63)
		}
		if w == wb {
			m &= all >> (63 - b&63)
		}
		if c := uint64(bits.OnesCount64(m & lf.words[w])); c != 0 {
			d += c
			lf.words[w] &^= m
			lf.full &^= 1 << w
		}
	}
	lf.count -= d
	return d
}

// addInner adds the offsets [lo, hi], which lie in n (at level l, starting
// at base), and returns how many were not set. The count can reach 2^64 only
// at the root; over reports that it did (d is then 0).
func (s *Set) addInner(n *inner, l int, base, lo, hi uint64) (d uint64, over bool) {
	cs := childShift(l)
	span := uint64(1) << cs
	last := index(hi, l)
	for i := index(lo, l); i <= last; i++ {
		bit := uint64(1) << i
		if n.full&bit != 0 {
			continue
		}
		cb := base + uint64(i)<<cs
		a, b := max(lo, cb), min(hi, cb+(span-1))
		var c uint64
		switch {
		case a == cb && b == cb+(span-1):
			c = span
			if l == 1 {
				if lf := n.leafs[i]; lf != nil {
					c -= lf.count
					n.dropLeaf(i)
				}
			} else if k := n.kids[i]; k != nil {
				c -= k.size(l - 1)
				n.dropKid(i)
			}
			n.full |= bit
		case l == 1:
			lf := n.leafs[i]
			if lf == nil {
				lf = s.newLeaf()
				n.setLeaf(i, lf)
			}
			c = lf.addRange(a-cb, b-cb)
			if lf.full == all {
				n.full |= bit
			}
		default:
			k := n.kids[i]
			if k == nil {
				k = s.newInner()
				n.setKid(i, k)
			}
			c, _ = s.addInner(k, l-1, cb, a, b)
			if k.full == all {
				n.full |= bit
			}
		}
		var carry uint64
		d, carry = bits.Add64(d, c, 0)
		over = over || carry != 0
	}
	return d, over
}

// removeInner removes the offsets [lo, hi], which lie in n (at level l,
// starting at base), and returns how many were set. The count can reach
// 2^64 only at the root; over reports that it did (d is then 0).
func (s *Set) removeInner(n *inner, l int, base, lo, hi uint64) (d uint64, over bool) {
	cs := childShift(l)
	span := uint64(1) << cs
	last := index(hi, l)
	for i := index(lo, l); i <= last; i++ {
		bit := uint64(1) << i
		full := n.full&bit != 0
		cb := base + uint64(i)<<cs
		a, b := max(lo, cb), min(hi, cb+(span-1))
		var c uint64
		if l == 1 {
			lf := n.leafs[i]
			switch {
			case lf == nil && !full:
				continue
			case a == cb && b == cb+(span-1):
				if lf != nil {
					c = lf.count
					n.dropLeaf(i)
				} else {
					c = span
				}
			default:
				if lf == nil {
					lf = s.fullLeaf()
					n.setLeaf(i, lf)
				}
				c = lf.removeRange(a-cb, b-cb)
				if lf.count == 0 {
					n.dropLeaf(i)
					s.freeLeaf(lf)
				}
			}
		} else {
			k := n.kids[i]
			switch {
			case k == nil && !full:
				continue
			case a == cb && b == cb+(span-1):
				if k != nil {
					c = k.size(l - 1)
					n.dropKid(i)
				} else {
					c = span
				}
			default:
				if k == nil {
					k = s.fullInner()
					n.setKid(i, k)
				}
				c, _ = s.removeInner(k, l-1, cb, a, b)
				if k.empty() {
					n.dropKid(i)
					s.freeInner(k)
				}
			}
		}
		if c != 0 {
			n.full &^= bit
		}
		var carry uint64
		d, carry = bits.Add64(d, c, 0)
		over = over || carry != 0
	}
	return d, over
}

// ascendInner calls fn for the set offsets in [lo, hi], which lie in n (at
// level l, starting at base), and reports whether fn always returned true.
func ascendInner(n *inner, l int, base, lo, hi uint64, fn func(uint64) bool) bool {
	cs := childShift(l)
	span := uint64(1) << cs
	last := index(hi, l)
	for i := index(lo, l); i <= last; i++ {
		cb := base + uint64(i)<<cs
		a, b := max(lo, cb), min(hi, cb+(span-1))
		if n.full&(1<<i) != 0 {
			for x := a; ; x++ {
				if !fn(x) {
					return false
				}
				if x == b {
					break
				}
			}
			continue
		}
		if l == 1 {
			if lf := n.leafs[i]; lf != nil && !lf.ascend(cb, a-cb, b-cb, fn) {
				return false
			}
		} else if k := n.kids[i]; k != nil && !ascendInner(k, l-1, cb, a, b, fn) {
			return false
		}
	}
	return true
}

// ascend calls fn for the set offsets base+[a, b] of lf and reports whether
// fn always returned true.
func (lf *leaf) ascend(base, a, b uint64, fn func(uint64) bool) bool {
	wa, wb := a>>6, b>>6
	for w := wa; w <= wb; w++ {
		m := lf.words[w]
		if w == wa {
			m &= all << (a & 63)
		}
		if w == wb {
			m &= all >> (63 - b&63)
		}
		for m != 0 {
			if !fn(base + w<<6 + uint64(bits.TrailingZeros64(m))) {
				return false
			}
			m &= m - 1
		}
	}
	return true
}
