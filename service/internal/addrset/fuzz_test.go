package addrset

import (
	"encoding/binary"
	"math"
	"testing"
)

// fuzzLasts are the spaces a fuzz input can pick by its first byte.
var fuzzLasts = []uint64{0, 1, 63, 64, 100, 4095, 4096, 5000, 65535, 1<<18 - 1, 1 << 18, 1<<24 - 1, 1<<32 - 1, 1<<40 + 3, math.MaxUint64 - 1, math.MaxUint64}

// decoder turns fuzz input into operation arguments; past the end of the
// input it yields zeros.
type decoder struct {
	b    []byte
	last uint64
	prev uint64 // the last offset produced, for locality
}

func (d *decoder) u8() uint64 {
	if len(d.b) == 0 {
		return 0
	}
	x := d.b[0]
	d.b = d.b[1:]
	return uint64(x)
}

func (d *decoder) u16() uint64 { return d.u8() | d.u8()<<8 }

func (d *decoder) u64() uint64 {
	var buf [8]byte
	n := copy(buf[:], d.b)
	d.b = d.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// off returns an offset, most often near an edge of the space or of a
// word, leaf or node, or near the previous one.
func (d *decoder) off() uint64 {
	var x uint64
	switch sel := d.u8(); sel % 6 {
	case 0:
		x = d.u16()
	case 1:
		x = d.last - d.u16()
	case 2:
		shift := 6 * (1 + sel/6%10) // 6, 12, ..., 60
		x = d.u8()<<shift + d.u8() - 128
	case 3:
		x = d.u64()
	default:
		x = d.prev + d.u8() - 128
	}
	if d.last < math.MaxUint64 && x > d.last && x-d.last > 2 {
		x %= d.last + 1 // mostly in range, sometimes just past it
	}
	d.prev = x
	return x
}

// FuzzSet decodes the input into a space and a sequence of operations and
// checks every answer against the naive model and the invariants.
func FuzzSet(f *testing.F) {
	f.Add([]byte{8, 8, 0, 0, 0, 3, 0, 0, 0, 0xff, 0xff, 0})
	f.Add([]byte{15, 5, 0, 0, 0, 16, 0, 9, 1, 0xff, 0, 4, 3, 0, 0, 2, 1, 0xff, 0xff, 5})
	f.Add([]byte{9, 5, 2, 1, 0, 4, 0, 0x80, 0, 1, 0xff, 3, 40, 0, 0, 1, 1, 0, 0, 200})
	f.Add([]byte{7, 9, 0, 0, 0, 1, 0, 0, 0, 130, 8, 4, 0, 20, 0, 1, 0, 0, 0, 3})
	f.Fuzz(fuzzSet)
}

func fuzzSet(t *testing.T, data []byte) {
	{
		d := &decoder{b: data}
		d.last = fuzzLasts[int(d.u8())%len(fuzzLasts)]
		c := newChecker(t, d.last)
		for steps := 0; len(d.b) > 0 && steps < 200; steps++ {
			kind := int(d.u8())
			a := d.off()
			var b uint64
			switch sel := d.u8(); sel % 4 {
			case 0:
				b = d.off()
			case 1:
				b = d.last
			default:
				// a short range; for range operations the model's cost
				// is bounded by its length
				b = a + d.u16()%(1<<13)
				if b < a {
					b = math.MaxUint64
				}
			}
			if k := kind % numOps; (k == 5 || k == 6) && (b < a || b-a >= 1<<13) {
				b = a + d.u16()%(1<<13)
				if b < a {
					b = math.MaxUint64
				}
			}
			var n uint64
			switch sel := d.u8(); sel % 4 {
			case 0:
				n = d.u16()
			case 1:
				n = d.u64()
			default:
				n = sel / 4
			}
			if kind%numOps == 9 {
				n %= 1 << 13
			}
			c.op(kind, a, b, n)
		}
	}
}
