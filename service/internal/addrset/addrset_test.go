package addrset

import (
	"math"
	"slices"
	"testing"
)

const max64 = math.MaxUint64

// span is an inclusive range of offsets.
type span struct{ lo, hi uint64 }

// build returns a set over [0, last] holding the given ranges.
func build(t *testing.T, last uint64, set ...span) *Set {
	t.Helper()
	s := New(last)
	for _, r := range set {
		s.AddRange(r.lo, r.hi)
	}
	if err := checkInvariants(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewLastLen(t *testing.T) {
	for _, last := range []uint64{0, 1, 63, 64, 4095, 4096, 65535, 1<<18 - 1, 1 << 18, 1<<32 - 1, max64 - 1, max64} {
		s := New(last)
		if s.Last() != last || s.Len() != 0 {
			t.Errorf("New(%d): Last() = %d, Len() = %d", last, s.Last(), s.Len())
		}
		if err := checkInvariants(s); err != nil {
			t.Errorf("New(%d): %v", last, err)
		}
		if s.Has(last) || (last < max64 && s.Has(last+1)) {
			t.Errorf("New(%d): Has(last) or Has(last+1)", last)
		}
	}
}

func TestAddRemoveHas(t *testing.T) {
	tests := []struct {
		name string
		last uint64
		set  []span
		off  uint64
		add  bool // Add(off)
		rem  bool // Remove(off) after Add
	}{
		{"last=0", 0, nil, 0, true, true},
		{"beyond last=0", 0, nil, 1, false, false},
		{"beyond last", 100, nil, 101, false, false},
		{"max of a /64", max64, nil, max64, true, true},
		{"present", 65535, []span{{10, 10}}, 10, false, true},
		{"inside a full leaf", 65535, []span{{4096, 8191}}, 5000, false, true},
		{"inside a huge range", max64, []span{{0, max64}}, 1 << 63, false, true},
		{"next to a huge range", max64, []span{{1 << 40, 1<<62 - 1}}, 1 << 62, true, true},
		{"top of a huge range", max64, []span{{5, max64}}, max64, false, true},
		{"word boundary", 65535, []span{{0, 63}}, 64, true, true},
		{"leaf boundary", 65535, []span{{0, 4095}}, 4096, true, true},
		{"inner boundary", 1 << 20, []span{{0, 1<<18 - 1}}, 1 << 18, true, true},
		{"padded leaf", 5000, nil, 5000, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(t, tt.last, tt.set...)
			n := s.Len()
			had := s.Has(tt.off)
			if got := s.Add(tt.off); got != tt.add {
				t.Fatalf("Add(%d) = %v, want %v", tt.off, got, tt.add)
			}
			if tt.add && (had || s.Len() != n+1) {
				t.Fatalf("Add(%d): had %v, Len %d -> %d", tt.off, had, n, s.Len())
			}
			if want := tt.off <= tt.last; s.Has(tt.off) != want {
				t.Fatalf("Has(%d) after Add = %v, want %v", tt.off, !want, want)
			}
			if got := s.Add(tt.off); got {
				t.Fatalf("second Add(%d) = true", tt.off)
			}
			n = s.Len()
			if got := s.Remove(tt.off); got != tt.rem {
				t.Fatalf("Remove(%d) = %v, want %v", tt.off, got, tt.rem)
			}
			if tt.rem && n != max64 && s.Len() != n-1 { // Len saturates
				t.Fatalf("Remove(%d): Len %d -> %d", tt.off, n, s.Len())
			}
			if s.Has(tt.off) || s.Remove(tt.off) {
				t.Fatalf("%d still present after Remove", tt.off)
			}
			if err := checkInvariants(s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRemoveReleasesNodes checks that memory follows the offsets held.
func TestRemoveReleasesNodes(t *testing.T) {
	s := New(max64)
	offs := []uint64{0, 4095, 4096, 1 << 30, 1<<60 + 7, max64}
	for _, off := range offs {
		s.Add(off)
	}
	for _, off := range offs {
		s.Remove(off)
		if err := checkInvariants(s); err != nil {
			t.Fatalf("after Remove(%d): %v", off, err)
		}
	}
	if s.root.kids != [64]*inner{} || s.root.leafs != [64]*leaf{} {
		t.Fatal("nodes left behind in an empty set")
	}
}

func TestNextFree(t *testing.T) {
	tests := []struct {
		name   string
		last   uint64
		set    []span
		lo, hi uint64
		want   uint64
		ok     bool
	}{
		{"empty last=0", 0, nil, 0, 0, 0, true},
		{"full last=0", 0, []span{{0, 0}}, 0, 0, 0, false},
		{"lo > hi", 100, nil, 5, 4, 0, false},
		{"lo > last", 100, nil, 101, 200, 0, false},
		{"hi clamped", 100, []span{{0, 100}}, 0, max64, 0, false},
		{"hi clamped, free at last", 100, []span{{0, 99}}, 0, max64, 100, true},
		{"lo itself", 65535, []span{{0, 9}}, 5, 5, 0, false},
		{"lo free", 65535, []span{{0, 9}}, 10, 20, 10, true},
		{"after lo", 65535, []span{{0, 9}}, 3, 20, 10, true},
		{"hi set", 65535, []span{{0, 20}}, 3, 20, 0, false},
		{"hi free", 65535, []span{{0, 19}}, 3, 20, 20, true},
		{"across words", 65535, []span{{0, 200}}, 0, 65535, 201, true},
		{"across leaves", 65535, []span{{0, 3*4096 + 5}}, 0, 65535, 3*4096 + 6, true},
		{"hole in the middle", 65535, []span{{0, 999}, {1001, 65535}}, 0, 65535, 1000, true},
		{"hole below lo", 65535, []span{{0, 999}, {1001, 65534}}, 1001, 65535, 65535, true},
		{"full /16", 65535, []span{{0, 65535}}, 0, 65535, 0, false},
		{"/64 empty", max64, nil, 0, max64, 0, true},
		{"/64 at max", max64, nil, max64, max64, max64, true},
		{"/64 max set", max64, []span{{max64, max64}}, max64 - 1, max64, max64 - 1, true},
		{"/64 top set", max64, []span{{max64 - 5000, max64}}, max64 - 6000, max64, max64 - 6000, true},
		{"/64 top full", max64, []span{{max64 - 5000, max64}}, max64 - 5000, max64, 0, false},
		{"/64 across root children", max64, []span{{0, 1<<60 + 3}}, 0, max64, 1<<60 + 4, true},
		{"/64 all but one", max64, []span{{0, 1<<63 - 1}, {1<<63 + 1, max64}}, 0, max64, 1 << 63, true},
		{"/64 full", max64, []span{{0, max64}}, 0, max64, 0, false},
		{"padded end", 5000, []span{{0, 4999}}, 0, max64, 5000, true},
		{"padded end full", 5000, []span{{0, 5000}}, 0, max64, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(t, tt.last, tt.set...)
			got, ok := s.NextFree(tt.lo, tt.hi)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("NextFree(%d, %d) = %d, %v; want %d, %v", tt.lo, tt.hi, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestNextFreeRun(t *testing.T) {
	tests := []struct {
		name      string
		last      uint64
		set       []span
		lo, hi, n uint64
		want      uint64
		ok        bool
	}{
		{"n=0", 100, nil, 7, 50, 0, 7, true},
		{"n=0 on a set offset", 100, []span{{7, 7}}, 7, 50, 0, 7, true},
		{"n=0 lo > hi", 100, nil, 8, 7, 0, 0, false},
		{"n=0 lo > last", 100, nil, 101, 200, 0, 0, false},
		{"n=1", 100, []span{{0, 9}}, 0, 50, 1, 10, true},
		{"n=1 none", 100, []span{{0, 50}}, 0, 50, 1, 0, false},
		{"last=0", 0, nil, 0, 0, 1, 0, true},
		{"last=0 n=2", 0, nil, 0, max64, 2, 0, false},
		{"n = range", 100, nil, 10, 19, 10, 10, true},
		{"n > range", 100, nil, 10, 19, 11, 0, false},
		{"n > space", 100, nil, 0, max64, 102, 0, false},
		{"n = space", 100, nil, 0, max64, 101, 0, true},
		{"huge n", max64, nil, 0, max64, max64, 0, true},
		{"huge n from 1", max64, nil, 1, max64, max64, 1, true},
		{"huge n blocked", max64, []span{{5, 5}}, 0, max64, max64, 0, false},
		{"lo > hi", 100, nil, 50, 40, 2, 0, false},
		{"within a word", 65535, []span{{0, 9}, {12, 12}, {16, 30}}, 0, 65535, 3, 13, true},
		{"exact fit", 65535, []span{{0, 9}, {12, 12}, {16, 30}}, 0, 65535, 2, 10, true},
		{"across a word boundary", 65535, []span{{0, 59}, {68, 200}}, 0, 300, 8, 60, true},
		{"across a word boundary, too short", 65535, []span{{0, 59}, {68, 200}}, 0, 300, 9, 201, true},
		{"across a word boundary, hi", 65535, []span{{0, 59}, {68, 200}}, 0, 200, 9, 0, false},
		{"run ends at hi", 65535, []span{{0, 59}}, 0, 67, 8, 60, true},
		{"run passes hi", 65535, []span{{0, 59}}, 0, 66, 8, 0, false},
		{"whole words", 65535, []span{{0, 63}, {64 * 5, 64 * 5}}, 0, 65535, 256, 64, true},
		{"whole words, longer", 65535, []span{{0, 63}, {64 * 5, 64 * 5}}, 0, 65535, 257, 321, true},
		{"across a leaf boundary", 65535, []span{{0, 4090}, {4100, 5000}}, 0, 65535, 9, 4091, true},
		{"across a leaf boundary, too short", 65535, []span{{0, 4090}, {4100, 5000}}, 0, 65535, 10, 5001, true},
		{"across an empty leaf", 65535, []span{{0, 4090}, {8192, 9000}}, 0, 65535, 4096 + 5, 4091, true},
		{"across an empty leaf, too short", 65535, []span{{0, 4090}, {8193, 9000}}, 0, 65535, 4096 + 7, 9001, true},
		{"lo inside a run", 65535, []span{{0, 9}, {20, 30}}, 15, 65535, 5, 15, true},
		{"lo inside a short run", 65535, []span{{0, 9}, {20, 30}}, 15, 65535, 6, 31, true},
		{"alternating bits", 65535, alternate(0, 4096), 0, 65535, 2, 4095, true},
		{"alternating bits, longer", 65535, alternate(0, 4096), 0, 65535, 3, 4095, true},
		{"alternating bits, blocked", 65535, append(alternate(0, 4096), span{4096, 4096}), 0, 65535, 2, 4097, true},
		{"at the end", 100, []span{{0, 95}}, 0, 100, 5, 96, true},
		{"past the end", 100, []span{{0, 95}}, 0, max64, 6, 0, false},
		{"padded end", 5000, []span{{0, 4990}}, 0, max64, 10, 4991, true},
		{"padded end, too long", 5000, []span{{0, 4990}}, 0, max64, 11, 0, false},
		{"full", 65535, []span{{0, 65535}}, 0, 65535, 2, 0, false},
		{"/64 at the top", max64, []span{{0, max64 - 10}}, 0, max64, 10, max64 - 9, true},
		{"/64 at the top, too long", max64, []span{{0, max64 - 10}}, 0, max64, 11, 0, false},
		{"/64 across root children", max64, []span{{0, 1<<60 - 3}, {1<<60 + 3, 1<<61 + 100}}, 0, max64, 5, 1<<60 - 2, true},
		{"/64 across root children, too short", max64, []span{{0, 1<<60 - 3}, {1<<60 + 3, 1<<61 + 100}}, 0, max64, 6, 1<<61 + 101, true},
		{"/64 sparse", max64, []span{{0, 5000}, {max64, max64}}, 0, max64, 1 << 40, 5001, true},
		{"/64 huge run across empty nodes", max64, []span{{0, 5000}, {1 << 50, 1 << 50}}, 0, max64, 1<<50 - 5001, 5001, true},
		{"/64 huge run, too long", max64, []span{{0, 5000}, {1 << 50, 1 << 50}}, 0, max64, 1<<50 - 5000, 1<<50 + 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(t, tt.last, tt.set...)
			got, ok := s.NextFreeRun(tt.lo, tt.hi, tt.n)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("NextFreeRun(%d, %d, %d) = %d, %v; want %d, %v", tt.lo, tt.hi, tt.n, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// alternate returns every other offset of [lo, hi).
func alternate(lo, hi uint64) []span {
	var out []span
	for x := lo; x < hi; x += 2 {
		out = append(out, span{x, x})
	}
	return out
}

func TestRanges(t *testing.T) {
	tests := []struct {
		name            string
		last            uint64
		set             []span
		lo, hi          uint64
		added, removed  uint64 // AddRange on the set, RemoveRange after
		lenAfterAdd     uint64
		lenAfterRemoved uint64
	}{
		{"lo > hi", 100, []span{{0, 10}}, 20, 19, 0, 0, 11, 11},
		{"lo > last", 100, []span{{0, 10}}, 101, 200, 0, 0, 11, 11},
		{"hi clamped", 100, []span{{0, 10}}, 95, max64, 6, 6, 17, 11},
		{"overlap", 65535, []span{{0, 10}, {20, 30}}, 5, 25, 9, 21, 31, 10},
		{"last=0", 0, nil, 0, max64, 1, 1, 1, 0},
		{"whole /16", 65535, []span{{100, 200}}, 0, 65535, 65536 - 101, 65536, 65536, 0},
		{"across leaves", 65535, []span{{4000, 4100}}, 4090, 3*4096 + 7, 3*4096 + 8 - 4090 - 11, 3*4096 + 8 - 4090, 3*4096 + 8 - 4000, 4090 - 4000},
		{"whole /64", max64, nil, 0, max64, max64, max64, max64, 0},
		{"whole /64 but one", max64, []span{{7, 7}}, 0, max64, max64, max64, max64, 0},
		{"half of a /64", max64, []span{{0, 99}}, 1 << 63, max64, 1 << 63, 1 << 63, 1<<63 + 100, 100},
		{"top of a /64", max64, []span{{max64, max64}}, max64 - 4096, max64, 4096, 4097, 4097, 0},
		{"/64 unaligned", max64, nil, 12345, 1<<61 + 77, 1<<61 + 77 - 12345 + 1, 1<<61 + 77 - 12345 + 1, 1<<61 + 77 - 12345 + 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(t, tt.last, tt.set...)
			if got := s.AddRange(tt.lo, tt.hi); got != tt.added {
				t.Fatalf("AddRange(%d, %d) = %d, want %d", tt.lo, tt.hi, got, tt.added)
			}
			if got := s.Len(); got != tt.lenAfterAdd {
				t.Fatalf("Len() after AddRange = %d, want %d", got, tt.lenAfterAdd)
			}
			if err := checkInvariants(s); err != nil {
				t.Fatal(err)
			}
			if got := s.AddRange(tt.lo, tt.hi); got != 0 {
				t.Fatalf("second AddRange(%d, %d) = %d", tt.lo, tt.hi, got)
			}
			if got := s.RemoveRange(tt.lo, tt.hi); got != tt.removed {
				t.Fatalf("RemoveRange(%d, %d) = %d, want %d", tt.lo, tt.hi, got, tt.removed)
			}
			if got := s.Len(); got != tt.lenAfterRemoved {
				t.Fatalf("Len() after RemoveRange = %d, want %d", got, tt.lenAfterRemoved)
			}
			if got := s.RemoveRange(tt.lo, tt.hi); got != 0 {
				t.Fatalf("second RemoveRange(%d, %d) = %d", tt.lo, tt.hi, got)
			}
			if err := checkInvariants(s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFullSpace walks a set over all 2^64 offsets through its saturated
// size.
func TestFullSpace(t *testing.T) {
	s := New(max64)
	if got := s.AddRange(0, max64); got != max64 || s.Len() != max64 {
		t.Fatalf("AddRange(all) = %d, Len() = %d", got, s.Len())
	}
	if s.Add(123) {
		t.Fatal("Add into a full set")
	}
	if _, ok := s.NextFree(0, max64); ok {
		t.Fatal("NextFree in a full set")
	}
	if !s.Remove(1<<63 + 5) {
		t.Fatal("Remove from a full set")
	}
	if s.Len() != max64 { // 2^64 - 1 exactly
		t.Fatalf("Len() = %d", s.Len())
	}
	if got, ok := s.NextFree(0, max64); !ok || got != 1<<63+5 {
		t.Fatalf("NextFree = %d, %v", got, ok)
	}
	if !s.Add(1<<63 + 5) {
		t.Fatal("Add back")
	}
	if got := s.RemoveRange(1, max64); got != max64 || s.Len() != 1 {
		t.Fatalf("RemoveRange(1, max) = %d, Len() = %d", got, s.Len())
	}
	if got := s.AddRange(0, max64); got != max64 || s.Len() != max64 {
		t.Fatalf("AddRange(all) = %d, Len() = %d", got, s.Len())
	}
	if got := s.RemoveRange(0, max64); got != max64 || s.Len() != 0 {
		t.Fatalf("RemoveRange(all) = %d, Len() = %d", got, s.Len())
	}
	if err := checkInvariants(s); err != nil {
		t.Fatal(err)
	}
}

func TestAscend(t *testing.T) {
	tests := []struct {
		name   string
		last   uint64
		set    []span
		lo, hi uint64
		limit  int // stop after so many
		want   []uint64
	}{
		{"empty", 100, nil, 0, 100, 10, nil},
		{"lo > hi", 100, []span{{0, 100}}, 6, 5, 10, nil},
		{"lo > last", 100, []span{{0, 100}}, 101, max64, 10, nil},
		{"bounds", 65535, []span{{3, 5}, {64, 64}, {4095, 4097}}, 4, 4096, 10, []uint64{4, 5, 64, 4095, 4096}},
		{"stop", 65535, []span{{3, 5}, {64, 64}, {4095, 4097}}, 0, 65535, 4, []uint64{3, 4, 5, 64}},
		{"last=0", 0, []span{{0, 0}}, 0, max64, 10, []uint64{0}},
		{"/64 top", max64, []span{{max64 - 2, max64}}, 0, max64, 10, []uint64{max64 - 2, max64 - 1, max64}},
		{"/64 full top", max64, []span{{0, max64}}, max64 - 1, max64, 10, []uint64{max64 - 1, max64}},
		{"/64 huge range, stop", max64, []span{{1 << 50, max64}}, 0, max64, 3, []uint64{1 << 50, 1<<50 + 1, 1<<50 + 2}},
		{"/64 sparse", max64, []span{{0, 1}, {1 << 40, 1 << 40}, {max64, max64}}, 1, max64, 10, []uint64{1, 1 << 40, max64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(t, tt.last, tt.set...)
			var got []uint64
			s.Ascend(tt.lo, tt.hi, func(off uint64) bool {
				got = append(got, off)
				return len(got) < tt.limit
			})
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Ascend(%d, %d) = %v, want %v", tt.lo, tt.hi, got, tt.want)
			}
		})
	}
}

// TestChurnDoesNotAllocate checks that allocating and releasing addresses
// in a steady state needs no memory, even when nodes empty and refill.
func TestChurnDoesNotAllocate(t *testing.T) {
	s := New(65535)
	s.AddRange(0, 60000)
	v6 := New(max64)
	v6.Add(0)
	v6.Add(max64)
	allocs := testing.AllocsPerRun(1000, func() {
		s.Remove(12345)
		off, _ := s.NextFree(0, s.Last())
		s.Add(off)
		v6.Add(1 << 40)
		v6.Remove(1 << 40)
		off, _ = v6.NextFree(0, max64)
		v6.Add(off)
		v6.Remove(off)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}

// TestConcurrentReaders runs the methods that do not modify a set from
// several goroutines at once; under the race detector it checks that they
// do not write to it.
func TestConcurrentReaders(t *testing.T) {
	s := New(max64)
	s.AddRange(0, 9999)
	s.Remove(5000)
	s.Add(max64)
	s.Add(20000) // leaves a finger on the leaf of 20000
	done := make(chan bool)
	for g := range 4 {
		go func() {
			defer func() { done <- true }()
			for i := range uint64(200) {
				lo := i * 100 * uint64(g+1)
				s.Has(lo)
				s.NextFree(lo, max64)
				s.NextFree(20000, max64)
				s.NextFreeRun(lo, max64, 3)
				s.Ascend(lo, lo+10, func(uint64) bool { return true })
				s.Len()
			}
		}()
	}
	for range 4 {
		<-done
	}
	if got, _ := s.NextFree(0, max64); got != 5000 {
		t.Fatalf("NextFree = %d", got)
	}
}
