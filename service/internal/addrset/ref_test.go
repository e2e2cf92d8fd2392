package addrset

import (
	"math"
	"math/big"
	"slices"
)

// naive is the reference model: a map with linear scans. Range operations
// cost time proportional to the range, so it only suits short ranges.
type naive struct {
	last uint64
	m    map[uint64]bool
}

func newNaive(last uint64) *naive { return &naive{last: last, m: map[uint64]bool{}} }

func (r *naive) has(off uint64) bool { return r.m[off] }

func (r *naive) add(off uint64) bool {
	if off > r.last || r.m[off] {
		return false
	}
	r.m[off] = true
	return true
}

func (r *naive) remove(off uint64) bool {
	if !r.m[off] {
		return false
	}
	delete(r.m, off)
	return true
}

func (r *naive) len() uint64 { return uint64(len(r.m)) }

func (r *naive) nextFree(lo, hi uint64) (uint64, bool) {
	hi = min(hi, r.last)
	if lo > hi {
		return 0, false
	}
	for x := lo; ; x++ {
		if !r.m[x] {
			return x, true
		}
		if x == hi {
			return 0, false
		}
	}
}

// sorted returns the set offsets in [lo, hi], ascending.
func (r *naive) sorted(lo, hi uint64) []uint64 {
	var ks []uint64
	if lo > hi {
		return nil
	}
	if hi-lo < uint64(len(r.m)) {
		for x := lo; ; x++ {
			if r.m[x] {
				ks = append(ks, x)
			}
			if x == hi {
				return ks
			}
		}
	}
	for k := range r.m {
		if lo <= k && k <= hi {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

func (r *naive) nextFreeRun(lo, hi, n uint64) (uint64, bool) {
	hi = min(hi, r.last)
	if lo > hi {
		return 0, false
	}
	if n == 0 {
		return lo, true
	}
	if n > 1<<14 {
		return r.longRun(lo, hi, n)
	}
	run := uint64(0)
	for x := lo; ; x++ {
		if r.m[x] {
			run = 0
		} else if run++; run == n {
			return x - (n - 1), true
		}
		if x == hi {
			return 0, false
		}
		if run == 0 && hi-x < n {
			return 0, false // no room left for a run
		}
	}
}

// longRun is nextFreeRun for long runs: it walks the sorted set offsets
// rather than every offset.
func (r *naive) longRun(lo, hi, n uint64) (uint64, bool) {
	s := lo
	for _, k := range r.sorted(lo, hi) {
		if k-s >= n {
			break // [s, k) is free and long enough
		}
		if k == hi {
			return 0, false
		}
		s = k + 1
	}
	if hi-s >= n-1 {
		return s, true
	}
	return 0, false
}

func (r *naive) addRange(lo, hi uint64) (added uint64) {
	hi = min(hi, r.last)
	if lo > hi {
		return 0
	}
	for x := lo; ; x++ {
		if r.add(x) {
			added++
		}
		if x == hi {
			return added
		}
	}
}

func (r *naive) removeRange(lo, hi uint64) (removed uint64) {
	if lo <= hi && hi-lo < uint64(len(r.m)) {
		for x := lo; ; x++ {
			if r.remove(x) {
				removed++
			}
			if x == hi {
				return removed
			}
		}
	}
	for k := range r.m {
		if lo <= k && k <= hi {
			delete(r.m, k)
			removed++
		}
	}
	return removed
}

func (r *naive) ascend(lo, hi uint64, fn func(uint64) bool) {
	for _, k := range r.sorted(lo, min(hi, r.last)) {
		if !fn(k) {
			return
		}
	}
}

// intervals is a second reference model for huge ranges: a sorted list of
// disjoint intervals with linear scans.
type intervals struct {
	last uint64
	iv   [][2]uint64
}

func newIntervals(last uint64) *intervals { return &intervals{last: last} }

func (r *intervals) has(off uint64) bool {
	for _, v := range r.iv {
		if v[0] <= off && off <= v[1] {
			return true
		}
	}
	return false
}

func size(lo, hi uint64) *big.Int {
	z := new(big.Int).SetUint64(hi - lo)
	return z.Add(z, big.NewInt(1))
}

// overlap returns how many set offsets lie in [lo, hi].
func (r *intervals) overlap(lo, hi uint64) *big.Int {
	z := new(big.Int)
	for _, v := range r.iv {
		a, b := max(lo, v[0]), min(hi, v[1])
		if a <= b {
			z.Add(z, size(a, b))
		}
	}
	return z
}

func (r *intervals) len() *big.Int { return r.overlap(0, math.MaxUint64) }

// cut removes [lo, hi] from the intervals.
func (r *intervals) cut(lo, hi uint64) {
	var out [][2]uint64
	for _, v := range r.iv {
		if v[1] < lo || v[0] > hi {
			out = append(out, v)
			continue
		}
		if v[0] < lo {
			out = append(out, [2]uint64{v[0], lo - 1})
		}
		if v[1] > hi {
			out = append(out, [2]uint64{hi + 1, v[1]})
		}
	}
	r.iv = out
}

func (r *intervals) addRange(lo, hi uint64) *big.Int {
	hi = min(hi, r.last)
	if lo > hi {
		return new(big.Int)
	}
	added := size(lo, hi)
	added.Sub(added, r.overlap(lo, hi))
	r.cut(lo, hi)
	r.iv = append(r.iv, [2]uint64{lo, hi})
	slices.SortFunc(r.iv, func(a, b [2]uint64) int {
		if a[0] < b[0] {
			return -1
		}
		return 1
	})
	return added
}

func (r *intervals) removeRange(lo, hi uint64) *big.Int {
	hi = min(hi, r.last)
	if lo > hi {
		return new(big.Int)
	}
	removed := r.overlap(lo, hi)
	r.cut(lo, hi)
	return removed
}

func (r *intervals) nextFree(lo, hi uint64) (uint64, bool) {
	hi = min(hi, r.last)
	if lo > hi {
		return 0, false
	}
	x := lo
	for _, v := range r.iv {
		if v[0] <= x && x <= v[1] {
			if v[1] >= hi {
				return 0, false
			}
			x = v[1] + 1
		}
	}
	return x, true
}

func (r *intervals) nextFreeRun(lo, hi, n uint64) (uint64, bool) {
	hi = min(hi, r.last)
	if lo > hi {
		return 0, false
	}
	if n == 0 {
		return lo, true
	}
	s := lo
	for _, v := range r.iv {
		if v[1] < s {
			continue
		}
		if v[0] > s && v[0]-s >= n {
			break
		}
		if v[1] >= hi {
			return 0, false
		}
		s = v[1] + 1
	}
	if hi-s >= n-1 {
		return s, true
	}
	return 0, false
}

// ascend visits at most limit offsets.
func (r *intervals) ascend(lo, hi uint64, limit int, fn func(uint64) bool) {
	hi = min(hi, r.last)
	for _, v := range r.iv {
		a, b := max(lo, v[0]), min(hi, v[1])
		if a > b {
			continue
		}
		for x := a; ; x++ {
			if limit == 0 || !fn(x) {
				return
			}
			limit--
			if x == b {
				break
			}
		}
	}
}
