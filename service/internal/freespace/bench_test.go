package freespace

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// v4Child returns the i-th /24 of 10.0.0.0/8.
func v4Child(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
}

// v6Child returns the i-th /48 of 2001:db8::/32.
func v6Child(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 8), byte(i)}), 48)
}

// fill takes all n children of a new Space of root, then releases free of
// them chosen at random with a fixed seed. It returns the space and the
// indexes of the released children.
func fill(tb testing.TB, root string, n, free int, child func(int) netip.Prefix) (*Space, []int) {
	s := New(netip.MustParsePrefix(root))
	for i := range n {
		if !s.Take(child(i)) {
			tb.Fatalf("Take(%v) failed", child(i))
		}
	}
	released := rand.New(rand.NewPCG(2026, 1)).Perm(n)[:free]
	for _, i := range released {
		if !s.Release(child(i)) {
			tb.Fatalf("Release(%v) failed", child(i))
		}
	}
	return s, released
}

// w2 is the W2 workload: 10.0.0.0/8 holding 65,000 taken /24 children.
func w2(tb testing.TB) (*Space, []int) {
	return fill(tb, "10.0.0.0/8", 65536, 536, v4Child)
}

// BenchmarkW2BestFit allocates the best-fit /24 in the W2 workload and
// releases it again.
func BenchmarkW2BestFit(b *testing.B) {
	s, _ := w2(b)
	b.ReportAllocs()
	for b.Loop() {
		p, _ := s.BestFit(24)
		if !s.Take(p) || !s.Release(p) {
			b.Fatalf("Take/Release(%v) failed", p)
		}
	}
}

// BenchmarkW2BestFitChurn allocates the best-fit /24 in the W2 workload and
// releases another taken /24 chosen at random, so the free space wanders
// while its size stays the same.
func BenchmarkW2BestFitChurn(b *testing.B) {
	s, _ := w2(b)
	r := rand.New(rand.NewPCG(7, 7))
	b.ReportAllocs()
	for b.Loop() {
		p, _ := s.BestFit(24)
		if !s.Take(p) {
			b.Fatalf("Take(%v) failed", p)
		}
		for !s.Release(v4Child(r.IntN(65536))) {
		}
	}
	if hi, lo := s.Free(); hi != 0 || lo != 536*256 {
		b.Fatalf("churn changed the free space to %d addresses", lo)
	}
}

// BenchmarkW2TakeStatic takes and releases one fixed free /24 in the W2
// workload.
func BenchmarkW2TakeStatic(b *testing.B) {
	s, released := w2(b)
	p := v4Child(released[0])
	b.ReportAllocs()
	for b.Loop() {
		if !s.Take(p) || !s.Release(p) {
			b.Fatalf("Take/Release(%v) failed", p)
		}
	}
}

// BenchmarkTakeStaticEmpty takes and releases a /24 in an empty /8: every
// take splits 16 blocks and every release merges them back.
func BenchmarkTakeStaticEmpty(b *testing.B) {
	s := New(netip.MustParsePrefix("10.0.0.0/8"))
	p := netip.MustParsePrefix("10.20.30.0/24")
	b.ReportAllocs()
	for b.Loop() {
		if !s.Take(p) || !s.Release(p) {
			b.Fatalf("Take/Release(%v) failed", p)
		}
	}
}

// BenchmarkW2IsFree asks whether a fixed free /24 is free in the W2
// workload.
func BenchmarkW2IsFree(b *testing.B) {
	s, released := w2(b)
	p := v4Child(released[0])
	b.ReportAllocs()
	for b.Loop() {
		if !s.IsFree(p) {
			b.Fatal("not free")
		}
	}
}

// BenchmarkW2Build builds the W2 workload from scratch: 65,536 takes and
// 536 releases.
func BenchmarkW2Build(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		w2(b)
	}
}

// v6 is the IPv6 workload: 2001:db8::/32 holding 50,000 taken /48s.
func v6(tb testing.TB) (*Space, []int) {
	return fill(tb, "2001:db8::/32", 65536, 65536-50000, v6Child)
}

// BenchmarkV6BestFit allocates the best-fit /48 in the IPv6 workload and
// releases it again.
func BenchmarkV6BestFit(b *testing.B) {
	s, _ := v6(b)
	b.ReportAllocs()
	for b.Loop() {
		p, _ := s.BestFit(48)
		if !s.Take(p) || !s.Release(p) {
			b.Fatalf("Take/Release(%v) failed", p)
		}
	}
}

// BenchmarkV6TakeStatic takes and releases one fixed free /48 in the IPv6
// workload.
func BenchmarkV6TakeStatic(b *testing.B) {
	s, released := v6(b)
	p := v6Child(released[0])
	b.ReportAllocs()
	for b.Loop() {
		if !s.Take(p) || !s.Release(p) {
			b.Fatalf("Take/Release(%v) failed", p)
		}
	}
}

// BenchmarkV6Deepest takes and releases a /128 in an empty ::/0, the
// longest path there is: 128 splits and 128 merges.
func BenchmarkV6Deepest(b *testing.B) {
	s := New(netip.MustParsePrefix("::/0"))
	p := netip.MustParsePrefix("2001:db8:1:2:3:4:5:6/128")
	b.ReportAllocs()
	for b.Loop() {
		if !s.Take(p) || !s.Release(p) {
			b.Fatalf("Take/Release(%v) failed", p)
		}
	}
}

// TestW2Workload checks the benchmark workload itself, so the benchmarks
// measure what they claim.
func TestW2Workload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 65,536 children")
	}
	s, released := w2(t)
	s.check(t)
	if hi, lo := s.Free(); hi != 0 || lo != 536*256 {
		t.Fatalf("Free() = %d:%d, want %d", hi, lo, 536*256)
	}
	// The best fit is the lowest released /24 whose buddy is still taken.
	isReleased := make(map[int]bool)
	for _, i := range released {
		isReleased[i] = true
	}
	want := -1
	for _, i := range released {
		if !isReleased[i^1] && (want < 0 || i < want) {
			want = i
		}
	}
	if p, ok := s.BestFit(24); !ok || want < 0 || p != v4Child(want) {
		t.Fatalf("BestFit(24) = %v, %v; want %v", p, ok, v4Child(want))
	}
	s6, _ := v6(t)
	s6.check(t)
	if hi, lo := s6.Free(); hi != (65536-50000)<<16 || lo != 0 {
		t.Fatalf("v6 Free() = %d:%d", hi, lo)
	}
}
