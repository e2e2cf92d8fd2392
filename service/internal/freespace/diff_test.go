package freespace

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// diffRoots are the roots the differential and fuzz tests use, each with the
// longest child length (unit) the reference model represents.
var diffRoots = []struct {
	root string
	unit int
}{
	{"10.0.0.0/24", 32},
	{"255.255.255.0/24", 32},     // end of the IPv4 space
	{"0.0.0.0/0", 8},             // whole IPv4 space
	{"::/0", 8},                  // whole IPv6 space: 2^128 addresses
	{"2001:db8:0:ff00::/60", 68}, // crosses the 64-bit word boundary
	{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/120", 128}, // end of the IPv6 space
	{"192.168.0.0/30", 32},
	{"2001:db8::/128", 128},
}

// otherFamily returns a prefix of the other family than p, or of the same
// bits as an IPv4-mapped IPv6 prefix.
func otherFamily(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4() {
		b := p.Addr().As16()
		return netip.PrefixFrom(netip.AddrFrom16(b), 96+p.Bits())
	}
	return netip.MustParsePrefix("10.0.0.0/8")
}

// randomOps drives h with n random operations from r, biased toward
// operations that succeed, verifying the whole state every verifyEvery ops.
func randomOps(h *harness, r *rand.Rand, n, verifyEvery int) {
	m := h.m
	span := m.unit - m.rbits
	randPrefix := func() netip.Prefix {
		// Longer prefixes are more likely, as in real use.
		l := m.unit - int(float64(span+1)*r.Float64()*r.Float64())
		i := r.IntN(len(m.free)) &^ (1<<(m.unit-l) - 1)
		return m.at(i, l)
	}
	var taken []netip.Prefix
	for op := range n {
		switch k := r.IntN(100); {
		case k < 35:
			p := randPrefix()
			if h.take(p) {
				taken = append(taken, p)
			}
		case k < 60 && len(taken) > 0:
			j := r.IntN(len(taken))
			p := taken[j]
			switch r.IntN(4) {
			case 0: // the parent, which may be wholly used
				if p.Bits() > m.rbits {
					p, _ = p.Addr().Prefix(p.Bits() - 1)
				}
			case 1: // a child
				if p.Bits() < m.unit {
					p = netip.PrefixFrom(p.Addr(), p.Bits()+1)
				}
			}
			if h.release(p) && p == taken[j] {
				taken[j] = taken[len(taken)-1]
				taken = taken[:len(taken)-1]
			}
		case k < 80:
			bits := m.rbits + r.IntN(span+1)
			if p, ok := h.bestFit(bits); ok && !h.take(p) {
				h.t.Fatalf("Take(%v) of the best fit failed", p)
			} else if ok {
				taken = append(taken, p)
			}
		case k < 90:
			p := randPrefix()
			h.isFree(p)
			h.release(p)
		default:
			p := randPrefix()
			var bad netip.Prefix
			switch r.IntN(4) {
			case 0: // non-canonical
				a := p.Addr().Next()
				if !a.IsValid() || p.Bits() == m.width {
					continue
				}
				bad = netip.PrefixFrom(a, p.Bits())
			case 1:
				bad = otherFamily(p)
			case 2: // outside the root
				if m.rbits == 0 {
					continue
				}
				b := addrBytes(p.Addr())
				b[(m.rbits-1)/8] ^= 1 << (7 - (m.rbits-1)%8)
				a, _ := netip.AddrFromSlice(b)
				bad = netip.PrefixFrom(a, p.Bits())
			case 3: // shorter than the root
				if m.rbits == 0 {
					continue
				}
				bad, _ = p.Addr().Prefix(m.rbits - 1)
			}
			h.take(bad)
			h.release(bad)
			h.isFree(bad)
		}
		if (op+1)%verifyEvery == 0 {
			h.verify()
		}
	}
	h.verify()
}

func TestDifferential(t *testing.T) {
	roots := append(diffRoots[:len(diffRoots):len(diffRoots)],
		struct {
			root string
			unit int
		}{"10.0.0.0/20", 32},
		struct {
			root string
			unit int
		}{"2001:db8::/52", 64},
	)
	for _, rt := range roots {
		t.Run(rt.root, func(t *testing.T) {
			for seed := range uint64(4) {
				h := newHarness(t, netip.MustParsePrefix(rt.root), rt.unit)
				r := rand.New(rand.NewPCG(seed, 0x5eed))
				n := 3000
				if testing.Short() {
					n = 300
				}
				randomOps(h, r, n, 50)
			}
		})
	}
}

// TestDifferentialFill fills a root completely through BestFit of random
// sizes, then empties it in random order, comparing with the model.
func TestDifferentialFill(t *testing.T) {
	for _, rt := range []struct {
		root string
		unit int
	}{{"10.0.0.0/20", 32}, {"2001:db8:0:ff00::/56", 68}} {
		t.Run(rt.root, func(t *testing.T) {
			h := newHarness(t, netip.MustParsePrefix(rt.root), rt.unit)
			r := rand.New(rand.NewPCG(1, 2))
			var taken []netip.Prefix
			for {
				bits := rt.unit - r.IntN(6)
				p, ok := h.bestFit(bits)
				if !ok {
					if p, ok = h.bestFit(rt.unit); !ok {
						break
					}
				}
				h.take(p)
				taken = append(taken, p)
			}
			h.verify()
			if h.s.Blocks() != 0 {
				t.Fatalf("full space has %d free blocks", h.s.Blocks())
			}
			r.Shuffle(len(taken), func(i, j int) { taken[i], taken[j] = taken[j], taken[i] })
			for i, p := range taken {
				if !h.release(p) {
					t.Fatalf("Release(%v) failed", p)
				}
				if i%64 == 0 {
					h.verify()
				}
			}
			h.verify()
			if h.s.Blocks() != 1 || len(h.s.nodes)-1 != countSpare(h.s, false) {
				t.Fatalf("empty space: %d blocks, %d nodes not on the spare list",
					h.s.Blocks(), len(h.s.nodes)-1-countSpare(h.s, false))
			}
		})
	}
}
