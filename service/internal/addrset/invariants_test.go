package addrset

import (
	"fmt"
	"math/bits"
)

// checkInvariants verifies the internal bookkeeping of s: counts and
// summary words agree with the nodes below them, no node other than the
// root is empty, and offsets past last are set (padding).
func checkInvariants(s *Set) error {
	var size uint64 // set offsets at or below last, modulo 2^64
	var walk func(n *inner, l int, base uint64) (uint64, error)
	walk = func(n *inner, l int, base uint64) (uint64, error) {
		cs := childShift(l)
		span := uint64(1) << cs
		var count uint64
		for i := range uint(64) {
			cb := base + uint64(i)<<cs
			valid := uint64(i) <= (s.last-base)>>cs // child starts at or before last
			full := n.full&(1<<i) != 0
			var c uint64
			var childFull bool
			if l == 1 {
				lf := n.leafs[i]
				if n.kids[i] != nil {
					return 0, fmt.Errorf("level 1 node at %d has an inner child %d", base, i)
				}
				if lf != nil {
					var cnt, fw uint64
					for w, x := range lf.words {
						cnt += uint64(bits.OnesCount64(x))
						if x == all {
							fw |= 1 << w
						}
						if cb+(span-1) <= s.last {
							size += uint64(bits.OnesCount64(x))
							continue
						}
						for b := range uint64(64) {
							off := cb + uint64(w)<<6 + b
							if off > s.last && x&(1<<b) == 0 {
								return 0, fmt.Errorf("padding offset %d is clear", off)
							}
							if off <= s.last && x&(1<<b) != 0 {
								size++
							}
						}
					}
					if cnt != lf.count || fw != lf.full {
						return 0, fmt.Errorf("leaf at %d: count %d (has %d), full %x (has %x)", cb, lf.count, cnt, lf.full, fw)
					}
					if cnt == 0 {
						return 0, fmt.Errorf("empty leaf at %d", cb)
					}
					c, childFull = cnt, fw == all
				}
			} else if k := n.kids[i]; k != nil {
				if n.leafs[i] != nil {
					return 0, fmt.Errorf("level %d node at %d has a leaf child %d", l, base, i)
				}
				var err error
				if c, err = walk(k, l-1, cb); err != nil {
					return 0, err
				}
				if c == 0 {
					return 0, fmt.Errorf("empty node at %d, level %d", cb, l-1)
				}
				childFull = k.full == all
			}
			present := n.leafs[i] != nil || n.kids[i] != nil
			switch {
			case !valid:
				if !full || present {
					return 0, fmt.Errorf("level %d node at %d: child %d past last is not padding", l, base, i)
				}
				c = span
			case !present && full:
				c = span
				// compressed: every offset set
				if cb+(span-1) > s.last {
					return 0, fmt.Errorf("compressed child at %d crosses last", cb)
				}
				size += span
			case present && full != childFull:
				return 0, fmt.Errorf("level %d node at %d: summary bit %d is %v, child full %v", l, base, i, full, childFull)
			}
			count += c
		}
		present := 0
		for i := range 64 {
			if n.kids[i] != nil || n.leafs[i] != nil {
				present++
			}
		}
		if present != n.nkids {
			return 0, fmt.Errorf("level %d node at %d: nkids %d, has %d", l, base, n.nkids, present)
		}
		return count, nil
	}
	if s.height == 0 {
		return checkRootLeaf(s)
	}
	if _, err := walk(s.root, s.height, 0); err != nil {
		return err
	}
	if size != s.n {
		return fmt.Errorf("size %d, counted %d", s.n, size)
	}
	if s.fLeaf != nil {
		off := s.fKey << leafShift
		n := s.root
		for l := s.height; l >= 1; l-- {
			if s.fPath[l] != n {
				return fmt.Errorf("finger at %d: wrong node at level %d", off, l)
			}
			if l > 1 {
				n = n.kids[index(off, l)]
			}
		}
		if n.leafs[index(off, 1)] != s.fLeaf {
			return fmt.Errorf("finger at %d: wrong leaf", off)
		}
	}
	return nil
}

// checkRootLeaf is checkInvariants for a set of height 0, a single leaf.
func checkRootLeaf(s *Set) error {
	if s.root != nil || s.rleaf == nil || s.last >= 1<<leafShift {
		return fmt.Errorf("height 0 with root %v, leaf %v, last %d", s.root, s.rleaf, s.last)
	}
	lf := s.rleaf
	var size, cnt, fw uint64
	for w, x := range lf.words {
		cnt += uint64(bits.OnesCount64(x))
		if x == all {
			fw |= 1 << w
		}
		for b := range uint64(64) {
			off := uint64(w)<<6 + b
			switch {
			case off > s.last && x&(1<<b) == 0:
				return fmt.Errorf("padding offset %d is clear", off)
			case off <= s.last && x&(1<<b) != 0:
				size++
			}
		}
	}
	if cnt != lf.count || fw != lf.full {
		return fmt.Errorf("root leaf: count %d (has %d), full %x (has %x)", lf.count, cnt, lf.full, fw)
	}
	if size != s.n {
		return fmt.Errorf("size %d, counted %d", s.n, size)
	}
	if s.fLeaf != lf || s.fKey != 0 {
		return fmt.Errorf("finger is not the root leaf")
	}
	return nil
}
