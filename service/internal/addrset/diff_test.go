package addrset

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// checker applies operations to a Set and to the naive model and fails on
// the first disagreement or broken invariant.
type checker struct {
	tb   testing.TB
	s    *Set
	r    *naive
	step int

	every int // check the invariants after every so many steps
}

func newChecker(tb testing.TB, last uint64) *checker {
	return &checker{tb: tb, s: New(last), r: newNaive(last), every: 1}
}

const numOps = 10

// op applies operation kind%numOps with arguments a, b, c.
func (c *checker) op(kind int, a, b, n uint64) {
	c.tb.Helper()
	c.step++
	s, r := c.s, c.r
	fail := func(format string, args ...any) {
		c.tb.Helper()
		c.tb.Fatalf("last=%d step %d: %s", s.Last(), c.step, fmt.Sprintf(format, args...))
	}
	switch kind % numOps {
	case 0:
		if got, want := s.Add(a), r.add(a); got != want {
			fail("Add(%d) = %v, want %v", a, got, want)
		}
	case 1:
		if got, want := s.Remove(a), r.remove(a); got != want {
			fail("Remove(%d) = %v, want %v", a, got, want)
		}
	case 2:
		if got, want := s.Has(a), r.has(a); got != want {
			fail("Has(%d) = %v, want %v", a, got, want)
		}
	case 3:
		got, ok := s.NextFree(a, b)
		want, wok := r.nextFree(a, b)
		if got != want || ok != wok {
			fail("NextFree(%d, %d) = %d, %v; want %d, %v", a, b, got, ok, want, wok)
		}
		c.checkNextFree(a, b, got, ok)
	case 4:
		got, ok := s.NextFreeRun(a, b, n)
		want, wok := r.nextFreeRun(a, b, n)
		if got != want || ok != wok {
			fail("NextFreeRun(%d, %d, %d) = %d, %v; want %d, %v", a, b, n, got, ok, want, wok)
		}
	case 5:
		if got, want := s.AddRange(a, b), r.addRange(a, b); got != want {
			fail("AddRange(%d, %d) = %d, want %d", a, b, got, want)
		}
	case 6:
		if got, want := s.RemoveRange(a, b), r.removeRange(a, b); got != want {
			fail("RemoveRange(%d, %d) = %d, want %d", a, b, got, want)
		}
	case 7:
		limit := int(n % 50)
		var got, want []uint64
		s.Ascend(a, b, func(off uint64) bool { got = append(got, off); return len(got) < limit })
		r.ascend(a, b, func(off uint64) bool { want = append(want, off); return len(want) < limit })
		if !slices.Equal(got, want) {
			fail("Ascend(%d, %d) stopping after %d = %v, want %v", a, b, limit, got, want)
		}
	case 8:
		// NextFree then Add, as an allocator does.
		got, ok := s.NextFree(a, b)
		want, wok := r.nextFree(a, b)
		if got != want || ok != wok {
			fail("NextFree(%d, %d) = %d, %v; want %d, %v", a, b, got, ok, want, wok)
		}
		if ok && (!s.Add(got) || !r.add(got)) {
			fail("Add(NextFree(%d, %d) = %d) failed", a, b, got)
		}
	case 9:
		// NextFreeRun then AddRange.
		got, ok := s.NextFreeRun(a, b, n)
		want, wok := r.nextFreeRun(a, b, n)
		if got != want || ok != wok {
			fail("NextFreeRun(%d, %d, %d) = %d, %v; want %d, %v", a, b, n, got, ok, want, wok)
		}
		if ok && n > 0 {
			if g, w := s.AddRange(got, got+n-1), r.addRange(got, got+n-1); g != n || w != n {
				fail("AddRange of the run [%d, +%d) = %d, %d", got, n, g, w)
			}
		}
	}
	if got, want := s.Len(), r.len(); got != want {
		fail("Len() = %d, want %d", got, want)
	}
	if c.step%c.every == 0 {
		if err := checkInvariants(s); err != nil {
			fail("after %s: %v", opName(kind), err)
		}
	}
}

func opName(kind int) string {
	return [numOps]string{"Add", "Remove", "Has", "NextFree", "NextFreeRun", "AddRange", "RemoveRange", "Ascend", "NextFree+Add", "NextFreeRun+AddRange"}[kind%numOps]
}

// checkNextFree checks the answer of NextFree(lo, hi) against the set
// itself: the answer is free and every offset from lo up to it is set.
func (c *checker) checkNextFree(lo, hi, got uint64, ok bool) {
	c.tb.Helper()
	s := c.s
	hi = min(hi, s.Last())
	if !ok {
		if lo <= hi && hi-lo < 1<<12 {
			for x := lo; ; x++ {
				if !s.Has(x) {
					c.tb.Fatalf("NextFree(%d, %d) found nothing but %d is free", lo, hi, x)
				}
				if x == hi {
					break
				}
			}
		}
		return
	}
	if got < lo || got > hi || s.Has(got) {
		c.tb.Fatalf("NextFree(%d, %d) = %d: not a free offset in range", lo, hi, got)
	}
	if got-lo < 1<<12 {
		for x := lo; x < got; x++ {
			if !s.Has(x) {
				c.tb.Fatalf("NextFree(%d, %d) = %d but %d is free", lo, hi, got, x)
			}
		}
	}
}

// checkAll compares the whole set with the model (for small spaces only).
func (c *checker) checkAll() {
	c.tb.Helper()
	var got []uint64
	c.s.Ascend(0, c.s.Last(), func(off uint64) bool { got = append(got, off); return true })
	want := c.r.sorted(0, c.r.last)
	if !slices.Equal(got, want) {
		c.tb.Fatalf("step %d: Ascend(all) has %d offsets, model %d", c.step, len(got), len(want))
	}
	for x := uint64(0); x <= c.s.Last() && x < 1<<17; x++ {
		if c.s.Has(x) != c.r.has(x) {
			c.tb.Fatalf("step %d: Has(%d) = %v", c.step, x, c.s.Has(x))
		}
	}
}

// picker draws offsets that are likely to hit edges: both ends of the space
// and word, leaf and node boundaries.
type picker struct {
	rng  *rand.Rand
	last uint64
}

func (p picker) off() uint64 {
	var x uint64
	switch p.rng.IntN(6) {
	case 0:
		x = p.rng.Uint64N(300)
	case 1:
		x = p.last - p.rng.Uint64N(min(p.last, 300)+1)
	case 2: // near a boundary of a word, leaf or node
		shift := []uint{6, 12, 18, 24, 30, 60}[p.rng.IntN(6)]
		k := p.rng.Uint64N(4)
		if shift < 60 {
			k = p.rng.Uint64N(1 << 8)
		}
		x = k<<shift + p.rng.Uint64N(130) - 65
	case 3:
		x = p.rng.Uint64()
	default:
		x = p.rng.Uint64N(min(p.last, 20000) + 1)
	}
	if p.last != math.MaxUint64 && p.rng.IntN(20) != 0 {
		x %= p.last + 1
	}
	return x
}

func runDifferential(t *testing.T, last uint64, seed uint64, steps int) {
	c := newChecker(t, last)
	c.every = 7
	p := picker{rng: rand.New(rand.NewPCG(seed, last)), last: last}
	// Start with a dense low part, as an allocator produces.
	c.op(5, 0, min(last, 9000), 0)
	for range 900 {
		c.op(1, p.rng.Uint64N(min(last, 9000)+1), 0, 0)
	}
	for i := range steps {
		kind := p.rng.IntN(numOps + 3)
		if kind >= numOps {
			kind = 8 // favour allocation
		}
		a := p.off()
		var b uint64
		switch p.rng.IntN(4) {
		case 0:
			b = p.off()
		case 1:
			b = last
		default:
			b = a + p.rng.Uint64N(9000)
			if b < a {
				b = math.MaxUint64
			}
		}
		if kind == 5 || kind == 6 {
			if b < a && p.rng.IntN(2) == 0 {
				a, b = b, a
			}
			// Keep the model's work bounded: mostly short ranges, now and
			// then one that covers whole leaves.
			span := p.rng.Uint64N(300)
			if p.rng.IntN(8) == 0 {
				span = p.rng.Uint64N(9000)
			}
			if lim := a + span; lim >= a {
				b = min(b, lim)
			}
		}
		n := p.rng.Uint64N(5)
		switch p.rng.IntN(4) {
		case 0:
			n = p.rng.Uint64N(300)
		case 1:
			n = p.rng.Uint64N(10000)
		}
		if kind == 9 && p.rng.IntN(8) != 0 {
			n %= 70 // the run is then added: keep the model small
		}
		c.op(kind, a, b, n)
		if last < 1<<17 && i%500 == 0 {
			c.checkAll()
		}
		if i%1000 == 999 {
			// Remove a large aligned block, or everything, to keep the model
			// small and to cover removal of whole subtrees.
			shift := uint(12 + p.rng.IntN(53))
			lo := p.off() >> shift << shift
			hi := lo + (1<<shift - 1)
			if hi < lo || shift == 64 {
				lo, hi = 0, last
			}
			c.op(6, lo, hi, 0)
		}
	}
	if last < 1<<20 {
		c.checkAll()
	}
}

func TestDifferential(t *testing.T) {
	lasts := []uint64{0, 1, 63, 64, 100, 4095, 4096, 5000, 65535, 1<<18 - 1, 1 << 18, 1<<20 + 12345, 1<<32 - 1, 1<<40 + 7, math.MaxUint64 - 1, math.MaxUint64}
	steps := 6000
	if testing.Short() {
		steps = 1500
	}
	if raceEnabled {
		steps /= 3
	}
	for _, last := range lasts {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("last=%d/seed=%d", last, seed), func(t *testing.T) {
				t.Parallel()
				runDifferential(t, last, seed, steps)
			})
		}
	}
}

// TestDifferentialHugeRanges checks ranges too long for the naive model
// against a model made of intervals.
func TestDifferentialHugeRanges(t *testing.T) {
	for _, last := range []uint64{65535, 1<<24 - 1, 1<<40 + 99, math.MaxUint64 - 4096, math.MaxUint64} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("last=%d/seed=%d", last, seed), func(t *testing.T) {
				t.Parallel()
				runHuge(t, last, seed, 3000)
			})
		}
	}
}

func runHuge(t *testing.T, last, seed uint64, steps int) {
	s, r := New(last), newIntervals(last)
	rng := rand.New(rand.NewPCG(seed, last^0x9e3779b97f4a7c15))
	p := picker{rng: rng, last: last}
	pick := func() uint64 {
		if rng.IntN(3) == 0 {
			// a multiple of a large power of two, give or take one
			shift := uint(rng.IntN(64))
			return (rng.Uint64() >> shift << shift) + rng.Uint64N(3) - 1
		}
		return p.off()
	}
	wantLen := func() uint64 {
		l := r.len()
		if l.IsUint64() {
			return l.Uint64()
		}
		return math.MaxUint64
	}
	sat := func(z *big.Int) uint64 {
		if z.IsUint64() {
			return z.Uint64()
		}
		return math.MaxUint64
	}
	for step := range steps {
		a, b := pick(), pick()
		if a > b && rng.IntN(4) != 0 {
			a, b = b, a
		}
		n := rng.Uint64N(300)
		if rng.IntN(3) == 0 {
			n = rng.Uint64() >> rng.IntN(64)
		}
		switch k := rng.IntN(9); k {
		case 0:
			if got, want := s.AddRange(a, b), sat(r.addRange(a, b)); got != want {
				t.Fatalf("step %d: AddRange(%d, %d) = %d, want %d", step, a, b, got, want)
			}
		case 1:
			if got, want := s.RemoveRange(a, b), sat(r.removeRange(a, b)); got != want {
				t.Fatalf("step %d: RemoveRange(%d, %d) = %d, want %d", step, a, b, got, want)
			}
		case 2:
			want := !r.has(a) && a <= last
			if got := s.Add(a); got != want {
				t.Fatalf("step %d: Add(%d) = %v, want %v", step, a, got, want)
			}
			if want {
				r.addRange(a, a)
			}
		case 3:
			want := r.has(a)
			if got := s.Remove(a); got != want {
				t.Fatalf("step %d: Remove(%d) = %v, want %v", step, a, got, want)
			}
			r.removeRange(a, a)
		case 4:
			if got, want := s.Has(a), r.has(a); got != want {
				t.Fatalf("step %d: Has(%d) = %v, want %v", step, a, got, want)
			}
		case 5:
			got, ok := s.NextFree(a, b)
			want, wok := r.nextFree(a, b)
			if got != want || ok != wok {
				t.Fatalf("step %d: NextFree(%d, %d) = %d, %v; want %d, %v", step, a, b, got, ok, want, wok)
			}
		case 6, 7:
			got, ok := s.NextFreeRun(a, b, n)
			want, wok := r.nextFreeRun(a, b, n)
			if got != want || ok != wok {
				t.Fatalf("step %d: NextFreeRun(%d, %d, %d) = %d, %v; want %d, %v", step, a, b, n, got, ok, want, wok)
			}
		case 8:
			limit := int(n%100) + 1
			var got, want []uint64
			s.Ascend(a, b, func(off uint64) bool { got = append(got, off); return len(got) < limit })
			r.ascend(a, b, limit, func(off uint64) bool { want = append(want, off); return true })
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: Ascend(%d, %d) stopping after %d = %v, want %v", step, a, b, limit, got, want)
			}
		}
		if got, want := s.Len(), wantLen(); got != want {
			t.Fatalf("step %d: Len() = %d, want %d", step, got, want)
		}
		if err := checkInvariants(s); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}
