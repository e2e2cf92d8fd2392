package addrset

import (
	"math"
	"math/rand/v2"
	"testing"
)

// BenchmarkW1Fill allocates the lowest free address of an IPv4 /16 until
// it is full. Refilling from empty starts outside the timed region; the
// leaves allocated while filling are part of the cost (16 per 65,536
// operations).
func BenchmarkW1Fill(b *testing.B) {
	s := New(65535)
	b.ReportAllocs()
	for b.Loop() {
		off, ok := s.NextFree(0, s.Last())
		if !ok {
			b.StopTimer()
			s = New(65535)
			b.StartTimer()
			off, _ = s.NextFree(0, s.Last())
		}
		s.Add(off)
	}
}

// churnSet is a set with the offsets it holds listed in held (as uint16
// for a /16, to keep the benchmark's own bookkeeping small) and a random
// sequence of indexes into held.
type churnSet[T uint16 | uint64] struct {
	s    *Set
	held []T
	seq  []uint16 // indexes into held, length a power of two
}

// newW1Churn returns a /16 about 90% full with random holes.
func newW1Churn() *churnSet[uint16] {
	rng := rand.New(rand.NewPCG(1, 16))
	s := New(65535)
	s.AddRange(0, 65535)
	for _, off := range rng.Perm(65536)[:6554] {
		s.Remove(uint64(off))
	}
	return newChurn[uint16](rng, s)
}

func newChurn[T uint16 | uint64](rng *rand.Rand, s *Set) *churnSet[T] {
	c := &churnSet[T]{s: s}
	s.Ascend(0, s.Last(), func(off uint64) bool { c.held = append(c.held, T(off)); return true })
	if len(c.held) > 1<<16 {
		panic("too many offsets held")
	}
	c.seq = make([]uint16, 1<<16)
	for i := range c.seq {
		c.seq[i] = uint16(rng.IntN(len(c.held)))
	}
	return c
}

// run releases a random held offset and allocates the lowest free one, for
// as long as the benchmark runs.
func (c *churnSet[T]) run(b *testing.B) {
	s, held, seq := c.s, c.held, c.seq
	last := s.Last()
	k := 0
	b.ReportAllocs()
	for b.Loop() {
		i := seq[k&(1<<16-1)]
		k++
		s.Remove(uint64(held[i]))
		off, _ := s.NextFree(0, last)
		s.Add(off)
		held[i] = T(off)
	}
}

// BenchmarkW1Churn releases a random address of an IPv4 /16 kept about
// 90% full and allocates the lowest free one.
func BenchmarkW1Churn(b *testing.B) {
	newW1Churn().run(b)
}

// newV6Sparse returns a /64 holding its first and last offsets, a few
// thousand allocated from the bottom with some released, and a few
// hundred scattered far apart.
func newV6Sparse(rng *rand.Rand) *Set {
	s := New(math.MaxUint64)
	s.Add(math.MaxUint64)
	s.AddRange(0, 4999)
	for range 200 {
		s.Remove(1 + rng.Uint64N(4999))
	}
	for range 300 {
		s.Add(rng.Uint64())
	}
	return s
}

// BenchmarkV6NextFree looks up the lowest free address of a sparse IPv6
// /64.
func BenchmarkV6NextFree(b *testing.B) {
	s := newV6Sparse(rand.New(rand.NewPCG(1, 64)))
	b.ReportAllocs()
	for b.Loop() {
		s.NextFree(0, math.MaxUint64)
	}
}

// BenchmarkV6Fill allocates the lowest free address of an IPv6 /64 whose
// first and last addresses are reserved, 65,536 addresses at a time.
func BenchmarkV6Fill(b *testing.B) {
	fresh := func() *Set {
		s := New(math.MaxUint64)
		s.Add(0)
		s.Add(math.MaxUint64)
		return s
	}
	s := fresh()
	b.ReportAllocs()
	for b.Loop() {
		off, _ := s.NextFree(0, math.MaxUint64)
		s.Add(off)
		if off == 1<<16 {
			b.StopTimer()
			s = fresh()
			b.StartTimer()
		}
	}
}

// BenchmarkV6Churn releases a random allocated address of a sparse IPv6
// /64 and allocates the lowest free one.
func BenchmarkV6Churn(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 64))
	newChurn[uint64](rng, newV6Sparse(rng)).run(b)
}

// BenchmarkNextFreeRun looks for runs of n free addresses.
func BenchmarkNextFreeRun(b *testing.B) {
	w1 := newW1Churn().s
	rng := rand.New(rand.NewPCG(3, 64))
	v6 := newV6Sparse(rng)
	// A /16 whose lower half is allocated, with random holes above.
	half := New(65535)
	half.AddRange(0, 65535)
	half.RemoveRange(1<<15, 65535)
	for range 5000 {
		half.Add(1<<15 + rng.Uint64N(1<<15))
	}
	cases := []struct {
		name string
		s    *Set
		n    uint64
	}{
		{"W1-90pct/n=2", w1, 2},
		{"W1-90pct/n=4", w1, 4},
		{"W1-90pct/n=64/none", w1, 64},
		{"W1-half/n=8", half, 8},
		{"W1-half/n=256", half, 256},
		{"V6/n=16", v6, 16},
		{"V6/n=2^20", v6, 1 << 20},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.s.NextFreeRun(0, c.s.Last(), c.n)
			}
		})
	}
}

// BenchmarkHas looks up random addresses of a /16 about 90% full.
func BenchmarkHas(b *testing.B) {
	c := newW1Churn()
	k := 0
	b.ReportAllocs()
	for b.Loop() {
		c.s.Has(uint64(c.seq[k&(len(c.seq)-1)]))
		k++
	}
}

// BenchmarkRanges excludes and releases address ranges.
func BenchmarkRanges(b *testing.B) {
	for _, c := range []struct {
		name   string
		last   uint64
		lo, hi uint64
	}{
		{"W1/1000", 65535, 1000, 1999},
		{"W1/all", 65535, 0, 65535},
		{"V6/half", math.MaxUint64, 1<<32 + 5, 1<<63 + 7},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := newV6Sparse(rand.New(rand.NewPCG(4, 64)))
			if c.last != math.MaxUint64 {
				s = newW1Churn().s
			}
			b.ReportAllocs()
			for b.Loop() {
				s.AddRange(c.lo, c.hi)
				s.RemoveRange(c.lo, c.hi)
			}
		})
	}
}

// BenchmarkAscend visits the allocated addresses of a /16 about 90% full.
func BenchmarkAscend(b *testing.B) {
	s := newW1Churn().s
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		s.Ascend(0, s.Last(), func(uint64) bool { n++; return true })
	}
	if n == 0 {
		b.Fatal("nothing visited")
	}
	b.ReportMetric(float64(n)/float64(b.N)/float64(s.Len()), "visits/offset")
}
