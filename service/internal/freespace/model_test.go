package freespace

import (
	"math/big"
	"net/netip"
	"slices"
	"testing"
)

// check verifies the internal invariants of s: critical bits grow strictly
// downwards, every leaf is a canonical block inside the root that agrees
// with its siblings' blocks up to each critical bit above it and has that
// bit on its own side, no two leaves are buddies, every mask matches its
// half, the free count and block count match the leaves, and every node and
// leaf is either reachable or on its spare list.
func (s *Space) check(t testing.TB) {
	t.Helper()
	nodes, leaves, blocks := 0, 0, 0
	var nfree u128
	// rec returns the free lengths below r and the address of one of its
	// blocks; every block below r must be longer than after.
	var rec func(r ref, after int) (lenset, u128)
	rec = func(r ref, after int) (lenset, u128) {
		if r.isLeaf() {
			if i := int(r.index()); r>>32&^(leafBit>>32) != 0 || i == 0 || i >= len(s.leaves) {
				t.Fatalf("bad leaf %d (arena %d)", i, len(s.leaves))
			}
			leaves++
			lf := s.leaf(r)
			l := int(lf.l)
			if l <= after || l > s.width || !lf.a.hostZero(l) || lf.a.top(s.rbits) != s.base {
				t.Fatalf("leaf %x/%d below critical bit %d is not a block inside the root", lf.a, l, after)
			}
			blocks++
			nfree = nfree.add(s.size(l))
			if l == 0 {
				return lenset{}, lf.a
			}
			return one(l), lf.a
		}
		if r == none || r.index() == 0 || int(r.index()) >= len(s.nodes) || r>>40 != 0 {
			t.Fatalf("bad node %x (arena %d)", r, len(s.nodes))
		}
		nodes++
		nd := s.nodes[r.index()]
		c := r.crit()
		if c <= after || c >= s.width {
			t.Fatalf("node %d: critical bit %d not in (%d, %d)", r, c, after, s.width)
		}
		var all lenset
		var addr [2]u128
		for b := range 2 {
			m, a := rec(nd.kid[b], c)
			if m != nd.m[b] {
				t.Fatalf("node %d: mask[%d] = %x, want %x", r, b, nd.m[b], m)
			}
			if a.bit(c) != b {
				t.Fatalf("node %d: block %x on side %d has bit %d = %d", r, a, b, c, a.bit(c))
			}
			addr[b] = a
			all = all.or(m)
		}
		if d := firstDiff(addr[0], addr[1]); d != c {
			t.Fatalf("node %d: halves differ first at bit %d, critical bit %d", r, d, c)
		}
		if nd.kid[0].isLeaf() && nd.kid[1].isLeaf() && int(s.leaf(nd.kid[0]).l) == c+1 && int(s.leaf(nd.kid[1]).l) == c+1 {
			t.Fatalf("node %d: its two leaves are free buddies", r)
		}
		return all, addr[0]
	}
	if s.top != none {
		rec(s.top, s.rbits-1)
	}
	if n := countSpare(s, false); nodes+n != len(s.nodes)-1 {
		t.Fatalf("nodes: %d reached + %d spare != %d in arena", nodes, n, len(s.nodes)-1)
	}
	if n := countSpare(s, true); leaves+n != len(s.leaves)-1 {
		t.Fatalf("leaves: %d reached + %d spare != %d in arena", leaves, n, len(s.leaves)-1)
	}
	if blocks != s.blocks {
		t.Fatalf("Blocks() = %d, tree has %d leaves", s.blocks, blocks)
	}
	if nfree != s.nfree {
		t.Fatalf("free count %x, tree holds %x", s.nfree, nfree)
	}
}

// countSpare returns the length of the spare list of leaves or of nodes.
func countSpare(s *Space, leaves bool) int {
	n := 0
	r, size := s.spareNode, len(s.nodes)
	if leaves {
		r, size = s.spareLeaf, len(s.leaves)
	}
	for r != 0 {
		if n++; n > size {
			panic("freespace: spare list has a cycle")
		}
		if leaves {
			r = s.leaves[r].next
		} else {
			r = uint32(s.nodes[r].kid[0])
		}
	}
	return n
}

// model is a naive reference: one bool per unit block, where the unit is the
// longest child prefix length a test uses. It relies only on net/netip.
type model struct {
	root  netip.Prefix
	width int
	rbits int
	unit  int
	free  []bool

	cache []netip.Prefix // blocks(), while valid
	valid bool
}

func newModel(root netip.Prefix, unit int) *model {
	m := &model{root: root, width: root.Addr().BitLen(), rbits: root.Bits(), unit: unit}
	m.free = make([]bool, 1<<(unit-m.rbits))
	for i := range m.free {
		m.free[i] = true
	}
	return m
}

func addrBytes(a netip.Addr) []byte {
	if a.Is4() {
		b := a.As4()
		return b[:]
	}
	b := a.As16()
	return b[:]
}

// getBits returns bits [from, from+n) of b, most significant first.
func getBits(b []byte, from, n int) int {
	v := 0
	for i := from; i < from+n; i++ {
		v = v<<1 | int(b[i/8]>>(7-i%8)&1)
	}
	return v
}

// at returns the prefix of length l whose address is the start of unit i.
func (m *model) at(i, l int) netip.Prefix {
	b := addrBytes(m.root.Addr())
	n := m.unit - m.rbits
	for k := range n {
		pos := m.rbits + k
		if i>>(n-1-k)&1 != 0 {
			b[pos/8] |= 1 << (7 - pos%8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(a, l)
}

// span returns the units of p, or false if p is not a canonical prefix of
// the root's family inside the root.
func (m *model) span(p netip.Prefix) (lo, n int, ok bool) {
	if !p.IsValid() || p.Addr().Is4() != m.root.Addr().Is4() || p.Masked() != p ||
		p.Bits() < m.rbits || !m.root.Contains(p.Addr()) {
		return 0, 0, false
	}
	if p.Bits() > m.unit {
		panic("model: prefix " + p.String() + " is longer than the unit")
	}
	return getBits(addrBytes(p.Addr()), m.rbits, m.unit-m.rbits), 1 << (m.unit - p.Bits()), true
}

func (m *model) count(lo, n int, want bool) int {
	c := 0
	for _, f := range m.free[lo : lo+n] {
		if f == want {
			c++
		}
	}
	return c
}

func (m *model) take(p netip.Prefix) bool {
	lo, n, ok := m.span(p)
	if !ok || m.count(lo, n, true) != n {
		return false
	}
	for i := lo; i < lo+n; i++ {
		m.free[i] = false
	}
	m.valid = false
	return true
}

func (m *model) release(p netip.Prefix) bool {
	lo, n, ok := m.span(p)
	if !ok || m.count(lo, n, true) != 0 {
		return false
	}
	for i := lo; i < lo+n; i++ {
		m.free[i] = true
	}
	m.valid = false
	return true
}

func (m *model) isFree(p netip.Prefix) bool {
	lo, n, ok := m.span(p)
	return ok && m.count(lo, n, true) == n
}

// blocks returns the maximal aligned free blocks, by brute force over every
// aligned block: a block is listed if it is all free and its parent is not.
func (m *model) blocks() []netip.Prefix {
	if m.valid {
		return m.cache
	}
	sum := make([]int, len(m.free)+1)
	for i, f := range m.free {
		sum[i+1] = sum[i]
		if f {
			sum[i+1]++
		}
	}
	allFree := func(lo, n int) bool { return sum[lo+n]-sum[lo] == n }
	type blk struct{ lo, l int }
	var out []blk
	for l := m.rbits; l <= m.unit; l++ {
		n := 1 << (m.unit - l)
		for lo := 0; lo < len(m.free); lo += n {
			if allFree(lo, n) && (l == m.rbits || !allFree(lo&^(2*n-1), 2*n)) {
				out = append(out, blk{lo, l})
			}
		}
	}
	slices.SortFunc(out, func(a, b blk) int { return a.lo - b.lo })
	ps := make([]netip.Prefix, len(out))
	for i, b := range out {
		ps[i] = m.at(b.lo, b.l)
	}
	m.cache, m.valid = ps, true
	return ps
}

// bestFit applies the product rule to the decomposition: among the maximal
// free blocks whose length is at most bits, the smallest (longest length),
// lowest address first; the answer is its first /bits.
func (m *model) bestFit(bits int) (netip.Prefix, bool) {
	if bits < m.rbits || bits > m.width {
		return netip.Prefix{}, false
	}
	var best netip.Prefix
	for _, b := range m.blocks() {
		if b.Bits() <= bits && (!best.IsValid() || b.Bits() > best.Bits()) {
			best = b
		}
	}
	if !best.IsValid() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(best.Addr(), bits), true
}

// freeCount returns the number of free addresses, saturated at 2^128-1.
func (m *model) freeCount() (hi, lo uint64) {
	c := big.NewInt(int64(m.count(0, len(m.free), true)))
	c.Lsh(c, uint(m.width-m.unit))
	max := new(big.Int).Lsh(big.NewInt(1), 128)
	max.Sub(max, big.NewInt(1))
	if c.Cmp(max) > 0 {
		c = max
	}
	lo = new(big.Int).And(c, new(big.Int).SetUint64(^uint64(0))).Uint64()
	hi = new(big.Int).Rsh(c, 64).Uint64()
	return hi, lo
}

// harness runs the same operations on a Space and a model and compares.
type harness struct {
	t testing.TB
	s *Space
	m *model
}

func newHarness(t testing.TB, root netip.Prefix, unit int) *harness {
	return &harness{t: t, s: New(root), m: newModel(root, unit)}
}

func (h *harness) take(p netip.Prefix) bool {
	h.t.Helper()
	got, want := h.s.Take(p), h.m.take(p)
	if got != want {
		h.t.Fatalf("Take(%v) = %v, want %v", p, got, want)
	}
	return got
}

func (h *harness) release(p netip.Prefix) bool {
	h.t.Helper()
	got, want := h.s.Release(p), h.m.release(p)
	if got != want {
		h.t.Fatalf("Release(%v) = %v, want %v", p, got, want)
	}
	return got
}

func (h *harness) isFree(p netip.Prefix) {
	h.t.Helper()
	if got, want := h.s.IsFree(p), h.m.isFree(p); got != want {
		h.t.Fatalf("IsFree(%v) = %v, want %v", p, got, want)
	}
}

func (h *harness) bestFit(bits int) (netip.Prefix, bool) {
	h.t.Helper()
	got, ok := h.s.BestFit(bits)
	want, wok := h.m.bestFit(bits)
	if got != want || ok != wok {
		h.t.Fatalf("BestFit(%d) = %v, %v; want %v, %v", bits, got, ok, want, wok)
	}
	return got, ok
}

// counts compares the free address count and the free block count.
func (h *harness) counts() {
	h.t.Helper()
	ghi, glo := h.s.Free()
	whi, wlo := h.m.freeCount()
	if ghi != whi || glo != wlo {
		h.t.Fatalf("Free() = %#x:%#x, want %#x:%#x", ghi, glo, whi, wlo)
	}
	if got, want := h.s.Blocks(), len(h.m.blocks()); got != want {
		h.t.Fatalf("Blocks() = %d, want %d", got, want)
	}
}

// verify compares the whole state and checks the invariants of the free
// blocks as seen through the API.
func (h *harness) verify() {
	h.t.Helper()
	h.s.check(h.t)
	var got []netip.Prefix
	h.s.Ascend(func(p netip.Prefix) bool { got = append(got, p); return true })
	want := h.m.blocks()
	if !slices.Equal(got, want) {
		h.t.Fatalf("free blocks\n got %v\nwant %v", got, want)
	}
	checkBlocks(h.t, h.s.Root(), got)
	h.counts()
	for bits := h.m.rbits - 1; bits <= h.m.unit+1; bits++ {
		h.bestFit(bits)
	}
	h.bestFit(h.m.width)
	h.bestFit(h.m.width + 1)
}

// checkBlocks checks that blocks, in the order Ascend visits them, are
// inside root, ascending, non-overlapping and canonical (no two buddies both
// free).
func checkBlocks(t testing.TB, root netip.Prefix, blocks []netip.Prefix) {
	t.Helper()
	for i, b := range blocks {
		if b.Masked() != b || b.Bits() < root.Bits() || !root.Contains(b.Addr()) {
			t.Fatalf("block %v is not a canonical prefix inside %v", b, root)
		}
		if i == 0 {
			continue
		}
		a := blocks[i-1]
		if a.Overlaps(b) || b.Addr().Less(a.Addr()) {
			t.Fatalf("blocks %v and %v overlap or are out of order", a, b)
		}
		if a.Bits() == b.Bits() && a.Bits() > root.Bits() {
			pa, _ := a.Addr().Prefix(a.Bits() - 1)
			pb, _ := b.Addr().Prefix(b.Bits() - 1)
			if pa == pb {
				t.Fatalf("buddies %v and %v are both free", a, b)
			}
		}
	}
}
