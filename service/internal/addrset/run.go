package addrset

import "math/bits"

// runSearch looks for the lowest run of n >= 2 free offsets that starts at
// or before maxStart, visiting offsets in ascending order and carrying the
// free run seen so far across words, leaves and inner nodes.
type runSearch struct {
	n        uint64 // length wanted
	maxStart uint64 // latest acceptable start
	start    uint64 // start of the current run, or of the answer
	length   uint64 // length of the current run, always < n
	found    bool
	stop     bool // found, or no acceptable run is left
}

// extend extends the current run, which starts at or before at, by the
// free offsets [at, at+avail); a new run starts at at if none is current.
func (r *runSearch) extend(at, avail uint64) {
	if r.length == 0 {
		if at > r.maxStart {
			r.stop = true
			return
		}
		r.start = at
	}
	if avail >= r.n-r.length {
		r.found, r.stop = true, true
		return
	}
	r.length += avail
}

// inner scans n (at level l, starting at base) from offset from onward.
func (r *runSearch) inner(n *inner, l int, base, from uint64) {
	cs := childShift(l)
	span := uint64(1) << cs
	for i := index(from, l); i < 64; i++ {
		if n.full&(1<<i) != 0 {
			r.length = 0
			m := ^n.full & (all << i << 1)
			if m == 0 {
				return
			}
			i = uint(bits.TrailingZeros64(m))
			from = base + uint64(i)<<cs
		}
		cb := base + uint64(i)<<cs
		at := max(from, cb)
		if r.length == 0 && at > r.maxStart {
			r.stop = true
			return
		}
		switch {
		case l == 1 && n.leafs[i] != nil:
			r.leaf(n.leafs[i], cb, at)
		case l > 1 && n.kids[i] != nil:
			r.inner(n.kids[i], l-1, cb, at)
		default:
			r.extend(at, cb+(span-1)-at+1)
		}
		if r.stop {
			return
		}
	}
}

// leaf scans lf (starting at base) from offset from onward.
func (r *runSearch) leaf(lf *leaf, base, from uint64) {
	w := (from - base) >> 6
	x := lf.words[w] | (1<<(from&63) - 1) // offsets before from count as set
	for {
		wb := base + w<<6
		switch {
		case x == all:
			r.length = 0
			m := ^lf.full & (all << w << 1)
			if m == 0 {
				return
			}
			w = uint64(bits.TrailingZeros64(m))
			x = lf.words[w]
			continue
		case r.length == 0 && wb > r.maxStart:
			r.stop = true
			return
		case x == 0:
			r.extend(wb, 64)
		default:
			if tz := uint64(bits.TrailingZeros64(x)); r.length > 0 && tz >= r.n-r.length {
				r.found, r.stop = true, true
				return
			}
			r.length = 0
			if r.n <= 64 {
				if p := runOfZeros(x, r.n); p < 64 {
					r.extend(wb+p, r.n)
					return
				}
			}
			if lz := uint64(bits.LeadingZeros64(x)); lz > 0 {
				r.extend(wb+64-lz, lz)
			}
		}
		if r.stop || w == 63 {
			return
		}
		w++
		x = lf.words[w]
	}
}

// runOfZeros returns the lowest position p such that bits p..p+n-1 of x are
// all zero, or 64 if there is none; 2 <= n <= 64.
func runOfZeros(x, n uint64) uint64 {
	m := ^x
	for k := uint64(1); k < n; {
		sh := min(k, n-k)
		m &= m >> sh
		k += sh
	}
	return uint64(bits.TrailingZeros64(m))
}
