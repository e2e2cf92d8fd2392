package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/record/recordtest"
)

var k1 = ipam.Key{Owner: "pkg-a", Namespace: "default", Name: "n1"}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

func TestCodecRoundTrip(t *testing.T) {
	for _, tc := range recordtest.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			enc := Append(nil, &tc.Record)
			got, err := Decode(enc)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.Record) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, tc.Record)
			}
			if again := Append(nil, &got); !bytes.Equal(again, enc) {
				t.Fatalf("re-encoding differs:\n%x\n%x", again, enc)
			}
			// Every strict prefix of an encoding is malformed.
			for i := range enc {
				if _, err := Decode(enc[:i]); !errors.Is(err, ErrMalformed) {
					t.Fatalf("decode of %d of %d bytes: err = %v, want malformed", i, len(enc), err)
				}
			}
			if _, err := Decode(append(enc, 0)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("trailing byte accepted: %v", err)
			}
		})
	}
}

func TestCodecDeterministic(t *testing.T) {
	labels := ipam.Labels{}
	for _, k := range []string{"q", "w", "e", "r", "t", "y", "u", "i", "o", "p", "a", "s", "d", "f"} {
		labels[k] = k + k
	}
	rec := ipam.Record{Op: ipam.OpPutAllocation, Key: k1, Allocation: &ipam.AllocationRecord{
		Allocation: ipam.Allocation{Key: k1, Selector: labels, Labels: labels}}}
	first := Append(nil, &rec)
	for range 20 {
		if again := Append(nil, &rec); !bytes.Equal(first, again) {
			t.Fatal("encoding of the same record differs between calls")
		}
	}
}

// A typical address allocation stays small on disk.
func TestCodecCompact(t *testing.T) {
	k := ipam.Key{Owner: "ipam-fn", Namespace: "default", Name: "upf-n3"}
	rec := ipam.Record{Op: ipam.OpPutAllocation, Key: k, Allocation: &ipam.AllocationRecord{
		Allocation: ipam.Allocation{Key: k, NetworkInstance: "vpc-1", Kind: ipam.KindNetwork,
			Selector: ipam.Labels{ipam.LabelNetworkName: "n3"}},
		Result: ipam.Result{NetworkInstance: "vpc-1", Prefix: pfx("10.0.1.2/24"), Gateway: ip("10.0.1.1")},
	}}
	enc := Append(nil, &rec)
	if len(enc) > 80 {
		t.Errorf("allocation record is %d bytes, want <= 80: %x", len(enc), enc)
	}
	t.Logf("typical allocation record: %d bytes", len(enc))
}

func TestCodecRejects(t *testing.T) {
	valid := Append(nil, &ipam.Record{Op: ipam.OpDeletePrefix, Key: k1})
	u := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	emptyKey := []byte{0, 0, 0}
	for name, b := range map[string][]byte{
		"empty":           nil,
		"version 0":       append([]byte{0}, valid[1:]...),
		"version 2":       append([]byte{2}, valid[1:]...),
		"op 0":            cat([]byte{1, 0}, emptyKey, []byte{0}),
		"op 11":           cat([]byte{1, 11}, emptyKey, []byte{0}),
		"object bit 5":    cat([]byte{1, 1}, emptyKey, []byte{32}),
		"owner mask bit":  cat([]byte{1, 9}, emptyKey, []byte{objOwner}, u(1<<3)),
		"string too long": cat([]byte{1, 1}, u(1<<62), []byte("x")),
		"bad uvarint":     cat([]byte{1, 1}, bytes.Repeat([]byte{0xff}, 11)),
		"ni mask bit":     cat([]byte{1, 1}, emptyKey, []byte{objNI}, u(1<<3)),
		"alloc mask bit":  cat([]byte{1, 7}, emptyKey, []byte{objAlloc}, u(1<<13)),
		"zero count":      cat([]byte{1, 1}, emptyKey, []byte{objNI}, u(niLabels), u(0)),
		"huge count":      cat([]byte{1, 1}, emptyKey, []byte{objNI}, u(niLabels), u(1<<40), []byte{0, 0}),
		"unsorted labels": cat([]byte{1, 1}, emptyKey, []byte{objNI}, u(niLabels), u(2), []byte{1, 'b', 0, 1, 'a', 0}),
		"duplicate label": cat([]byte{1, 1}, emptyKey, []byte{objNI}, u(niLabels), u(2), []byte{1, 'a', 0, 1, 'a', 0}),
		"unsorted prealloc": cat([]byte{1, 5}, emptyKey, []byte{objRange}, u(rgPreAllocs), u(2),
			[]byte{1, 'b', 0, 1, 'a', 0}),
		"addr tag":       cat([]byte{1, 5}, emptyKey, []byte{objRange}, u(rgStart), []byte{5}),
		"addr truncated": cat([]byte{1, 5}, emptyKey, []byte{objRange}, u(rgStart), []byte{6, 1, 2}),
		"prefix bits":    cat([]byte{1, 3}, emptyKey, []byte{objPrefix}, u(pfPrefix), []byte{4, 10, 0, 0, 0, 34}),
		"prefix zone":    cat([]byte{1, 3}, emptyKey, []byte{objPrefix}, u(pfPrefix), []byte{7}, make([]byte, 16), []byte{1, 'z', 1}),
		"kind code":      cat([]byte{1, 3}, emptyKey, []byte{objPrefix}, u(pfKind), []byte{5}),
		"family code":    cat([]byte{1, 7}, emptyKey, []byte{objAlloc}, u(alFamily), []byte{3}),
		"varint":         cat([]byte{1, 7}, emptyKey, []byte{objAlloc}, u(alCount), []byte{0x80}),
		"trailing":       append(valid, 0),
	} {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want malformed", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, tc := range recordtest.Cases() {
		f.Add(Append(nil, &tc.Record))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Decoder
		rec, err := d.record(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// The same Decoder again (its string and label caches now hit)
		// decodes the same.
		if again, err := d.record(b); err != nil || !reflect.DeepEqual(again, rec) {
			t.Fatalf("second decode with warm caches: %v\n got %#v\nwant %#v", err, again, rec)
		}
		// What decodes re-encodes to something that decodes to the same.
		again, err := Decode(Append(nil, &rec))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(again, rec) {
			t.Fatalf("re-decode differs:\n got %#v\nwant %#v", again, rec)
		}
	})
}

// gen builds values from fuzz input; exhausted input yields zero values.
type gen struct{ b []byte }

func (g *gen) byte() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *gen) bool() bool { return g.byte()&1 == 1 }

func (g *gen) string() string {
	n := int(g.byte() % 12)
	n = min(n, len(g.b))
	s := string(g.b[:n])
	g.b = g.b[n:]
	return s
}

func (g *gen) int() int {
	var v uint64
	for range int(g.byte() % 9) {
		v = v<<8 | uint64(g.byte())
	}
	return int(v)
}

func (g *gen) key() ipam.Key {
	return ipam.Key{Owner: g.string(), Namespace: g.string(), Name: g.string()}
}

func (g *gen) addr() netip.Addr {
	var b [16]byte
	switch g.byte() % 4 {
	case 1:
		for i := range 4 {
			b[i] = g.byte()
		}
		return netip.AddrFrom4([4]byte(b[:4]))
	case 2:
		for i := range b {
			b[i] = g.byte()
		}
		return netip.AddrFrom16(b)
	case 3:
		for i := range b {
			b[i] = g.byte()
		}
		return netip.AddrFrom16(b).WithZone(g.string())
	}
	return netip.Addr{}
}

func (g *gen) prefix() netip.Prefix {
	return netip.PrefixFrom(g.addr(), int(g.byte())%140-1)
}

func (g *gen) labels() ipam.Labels {
	n := int(g.byte() % 5)
	if n == 0 {
		return nil
	}
	m := ipam.Labels{}
	for range n {
		m[g.string()] = g.string()
	}
	return m
}

func (g *gen) ranges() []ipam.AddrRange {
	var out []ipam.AddrRange
	for range int(g.byte() % 4) {
		out = append(out, ipam.AddrRange{Start: g.addr(), End: g.addr()})
	}
	return out
}

func (g *gen) kind() ipam.Kind {
	if c := g.byte() % 7; int(c) < len(kinds) {
		return kinds[c]
	}
	return ipam.Kind(g.string())
}

func (g *gen) record() ipam.Record {
	r := ipam.Record{Op: ipam.Op(g.byte()%8 + 1), Key: g.key()}
	objs := g.byte()
	objKey := func() ipam.Key {
		if g.bool() {
			return g.key()
		}
		return r.Key
	}
	if objs&objNI != 0 {
		ni := &ipam.NetworkInstance{Key: objKey(), Labels: g.labels()}
		for range int(g.byte() % 4) {
			ni.Prefixes = append(ni.Prefixes, ipam.VRFPrefix{Prefix: g.prefix(), Labels: g.labels()})
		}
		r.NetworkInstance = ni
	}
	if objs&objPrefix != 0 {
		r.Prefix = &ipam.Prefix{Key: objKey(), NetworkInstance: g.string(), Kind: g.kind(), Prefix: g.prefix(),
			Network: g.string(), Labels: g.labels(), Exclusions: g.ranges()}
	}
	if objs&objRange != 0 {
		rg := &ipam.IPRange{Key: objKey(), NetworkInstance: g.string(), Start: g.addr(), End: g.addr(),
			Labels: g.labels(), Exclusions: g.ranges()}
		for range int(g.byte() % 4) {
			if rg.PreAllocations == nil {
				rg.PreAllocations = map[string]netip.Addr{}
			}
			rg.PreAllocations[g.string()] = g.addr()
		}
		r.Range = rg
	}
	if objs&objAlloc != 0 {
		a := ipam.Allocation{Key: objKey(), NetworkInstance: g.string(), Kind: g.kind(), PrefixLength: g.int(),
			Prefix: g.prefix(), AddressFamily: ipam.Family(g.string()), Selector: g.labels(), Labels: g.labels(), Count: g.int()}
		res := ipam.Result{NetworkInstance: a.NetworkInstance, Prefix: g.prefix(), Gateway: g.addr(), Last: g.addr()}
		if g.bool() {
			res.NetworkInstance = g.string()
		}
		r.Allocation = &ipam.AllocationRecord{Allocation: a, Result: res}
	}
	return r
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x07\x03own\x02ns\x04name\x0f\x01\x05vpc-1\x02\x01\x01\x0a\x00\x01\x02\x18"))
	f.Add(bytes.Repeat([]byte{0xff, 0x01, 0x33}, 100))
	f.Fuzz(func(t *testing.T, b []byte) {
		g := gen{b: b}
		var d Decoder
		for len(g.b) > 0 || len(b) == 0 {
			rec := g.record()
			enc := Append(nil, &rec)
			got, err := d.record(enc)
			if err != nil {
				t.Fatalf("decode %x: %v\nrecord %#v", enc, err, rec)
			}
			if !reflect.DeepEqual(got, rec) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, rec)
			}
			if len(b) == 0 {
				break
			}
		}
	})
}
