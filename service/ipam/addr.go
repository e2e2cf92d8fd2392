package ipam

import (
	"encoding/binary"
	"math"
	"math/bits"
	"net/netip"
)

// hostBits is the length of a host prefix of a's family: 32 or 128.
func hostBits(a netip.Addr) int {
	if a.Is4() {
		return 32
	}
	return 128
}

func familyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

func u128(a netip.Addr) (hi, lo uint64) {
	if a.Is4() {
		b := a.As4()
		return 0, uint64(binary.BigEndian.Uint32(b[:]))
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

func fromU128(hi, lo uint64, is4 bool) netip.Addr {
	if is4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.AddrFrom16(b)
}

// offsetOf returns a - base when it fits in 64 bits.
func offsetOf(base, a netip.Addr) (uint64, bool) {
	bh, bl := u128(base)
	ah, al := u128(a)
	lo, borrow := bits.Sub64(al, bl, 0)
	hi, borrow2 := bits.Sub64(ah, bh, borrow)
	return lo, hi == 0 && borrow2 == 0
}

// addOffset returns base + off.
func addOffset(base netip.Addr, off uint64) netip.Addr {
	h, l := u128(base)
	l, c := bits.Add64(l, off, 0)
	return fromU128(h+c, l, base.Is4())
}

// lastOffset is the offset of p's last address, capped at 2^64-1 (only the
// first 2^64 addresses of a larger IPv6 prefix are addressable).
func lastOffset(p netip.Prefix) uint64 {
	n := hostBits(p.Addr()) - p.Bits()
	if n >= 64 {
		return math.MaxUint64
	}
	return 1<<uint(n) - 1
}

// sizeOf is the number of addresses of p, saturating at 2^64-1.
func sizeOf(p netip.Prefix) uint64 {
	n := hostBits(p.Addr()) - p.Bits()
	if n >= 64 {
		return math.MaxUint64
	}
	return 1 << uint(n)
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	h, l := u128(p.Addr())
	n := hostBits(p.Addr()) - p.Bits()
	switch {
	case n >= 128:
		h, l = math.MaxUint64, math.MaxUint64
	case n >= 64:
		h |= 1<<uint(n-64) - 1
		l = math.MaxUint64
	case n > 0:
		l |= 1<<uint(n) - 1
	}
	return fromU128(h, l, p.Addr().Is4())
}

// comparePrefix orders prefixes by address, then by length (the "prefix
// order" of the allocation rules).
func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// containsPrefix reports whether outer contains inner (same family).
func containsPrefix(outer, inner netip.Prefix) bool {
	return outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}
