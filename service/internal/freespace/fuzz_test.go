package freespace

import (
	"net/netip"
	"testing"
)

// FuzzSpace decodes its input into operations on a small root and checks
// every result, the free count and the block count against the reference
// model after every operation, and the whole state (free blocks, invariants,
// best fits of every size) after every fourth operation and at the end.
//
// data[0] picks the root from diffRoots; then every 3 bytes are one
// operation: kind, prefix length (offset from the root's), unit index. At
// most maxFuzzOps operations are run, which is plenty to reach any state of
// these small roots and keeps each run (and minimization) fast.
const maxFuzzOps = 64

func FuzzSpace(f *testing.F) {
	f.Add([]byte{0, 0, 8, 0, 2, 0, 0, 1, 8, 0})
	f.Add([]byte{1, 0, 8, 255, 2, 8, 0, 1, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 0, 1, 128, 0, 8, 255, 2, 8, 0, 1, 8, 255, 4, 0, 0, 0x14, 0, 0})
	f.Add([]byte{4, 0, 4, 0x18, 0, 5, 0x20, 2, 4, 0, 0x81, 7, 3, 1, 0, 0})
	f.Add([]byte{5, 0, 8, 255, 0, 0, 0, 3, 7, 254, 2, 8, 0, 0x34, 3, 0})
	f.Add([]byte{6, 0, 2, 0, 0, 2, 3, 0, 1, 0, 1, 0, 0, 0, 0, 0})
	f.Add([]byte{7, 0, 0, 0, 1, 0, 0, 2, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		rt := diffRoots[int(data[0])%len(diffRoots)]
		root := netip.MustParsePrefix(rt.root)
		h := newHarness(t, root, rt.unit)
		m := h.m
		span := m.unit - m.rbits
		data = data[1:]
		if len(data) > 3*maxFuzzOps {
			data = data[:3*maxFuzzOps]
		}
		n := 0
		for ; len(data) >= 3; data = data[3:] {
			kind, lb, ib := data[0], data[1], data[2]
			l := m.rbits + int(lb)%(span+1)
			i := int(ib) & (1<<span - 1)
			aligned := i &^ (1<<(m.unit-l) - 1)
			p := m.at(aligned, l)
			if kind&0x80 != 0 && i != aligned {
				p = m.at(i, l) // not canonical: host bits set
			}
			switch kind % 5 {
			case 0:
				h.take(p)
			case 1:
				h.release(p)
			case 2:
				if q, ok := h.bestFit(l); ok && kind&0x10 != 0 {
					if !h.take(q) {
						t.Fatalf("Take(%v) of the best fit failed", q)
					}
				}
			case 3:
				h.isFree(p)
			case 4:
				var bad netip.Prefix
				switch kind >> 4 & 3 {
				case 0:
					bad = otherFamily(p)
				case 1:
					if m.rbits > 0 {
						bad, _ = p.Addr().Prefix(m.rbits - 1)
					}
				case 2:
					if m.rbits > 0 {
						b := addrBytes(p.Addr())
						b[(m.rbits-1)/8] ^= 1 << (7 - (m.rbits-1)%8)
						a, _ := netip.AddrFromSlice(b)
						bad = netip.PrefixFrom(a, l)
					}
				}
				h.take(bad)
				h.release(bad)
				h.isFree(bad)
			}
			if n++; n%4 == 0 {
				h.verify()
			} else {
				h.counts()
			}
		}
		h.verify()
	})
}
