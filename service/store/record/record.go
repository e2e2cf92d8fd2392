// Package record is the versioned binary encoding of ipam.Record that both
// stores write: the file store's log and snapshots, and the etcd store's
// log entries and snapshots. A stored byte never depends on a Go field
// name; a change of the format is a new version, and decoding refuses
// versions it does not know.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"

	"github.com/nephio-project/ipam/service/ipam"
)

// Record encoding, version 1.
//
// Every ipam.Record is encoded on its own. The file store writes one encoded
// record per WAL payload and frames them with their length in snapshots;
// the etcd store frames them with their length in log entries and
// snapshots (see package etcd).
// Integers are Go varints (encoding/binary): uvarint for lengths, counts and
// masks, zig-zag varint for signed ints. The grammar:
//
//	record     = version:byte(1) op:byte key objects:byte [ni] [prefix] [range] [alloc] [owner]
//	op         = byte: 1 PutNetworkInstance ... 8 DeleteAllocation, 9 PutOwner, 10 DeleteOwner
//	key        = string(owner) string(namespace) string(name)
//	objects    = bit 0 NetworkInstance, 1 Prefix, 2 Range, 3 Allocation, 4 Owner present;
//	             the present objects follow in that order
//	string     = uvarint(len) bytes
//	ni         = uvarint(mask) fields...   bits: 0 Key, 1 Prefixes, 2 Labels
//	prefix     = uvarint(mask) fields...   bits: 0 Key, 1 NetworkInstance, 2 Kind,
//	             3 Prefix, 4 Network, 5 Labels, 6 Exclusions, 7 AllocateReserved,
//	             8 GatewayInBlocks (7 and 8 are flags: the bit is the value, no
//	             field follows)
//	range      = uvarint(mask) fields...   bits: 0 Key, 1 NetworkInstance, 2 Start,
//	             3 End, 4 Labels, 5 Exclusions, 6 PreAllocations, 7 PrefixLength,
//	             8 Gateway, 9 AllocateReserved (a flag)
//	alloc      = uvarint(mask) fields...   bits: 0 Key, 1 NetworkInstance, 2 Kind,
//	             3 PrefixLength, 4 Prefix, 5 AddressFamily, 6 Selector, 7 Labels,
//	             8 Count, 9 Result.NetworkInstance, 10 Result.Prefix,
//	             11 Result.Gateway, 12 Result.Last
//	owner      = uvarint(mask) fields...   bits: 0 Identity, 1 Source, 2 Generation
//
// Fields are written in bit order and only when their bit is set. An absent
// field is the zero value, with two exceptions that keep common records
// short: an absent object Key equals the record's Key, and an absent
// Result.NetworkInstance equals the request's NetworkInstance. Field types:
//
//	Kind       = byte: 1 aggregate, 2 network, 3 pool, 4 loopback, or 0 string
//	Family     = byte: 1 ipv4, 2 ipv6, or 0 string
//	int        = varint (zig-zag)
//	Generation = uvarint
//	addr       = byte(0) (invalid) | byte(4) 4 bytes | byte(6) 16 bytes |
//	             byte(7) 16 bytes string(zone)
//	prefix     = addr without zone, then, unless invalid, byte(bits+1) (0: the
//	             address with invalid bits)
//	labels     = uvarint(n>0) n × (string(key) string(value)), keys strictly increasing
//	preallocs  = uvarint(n>0) n × (string(name) addr), names strictly increasing
//	ranges     = uvarint(n>0) n × (addr(start) addr(end))
//	vrfprefixes= uvarint(n>0) n × (prefix labels-or-0)   (labels: uvarint(0) when empty)
//
// Empty maps and slices are absent, so they decode as nil. Maps are written
// in key order, so an encoding is deterministic. Decoding rejects anything
// else: an unknown version, op, mask bit or tag, a truncated field, a length
// beyond the input, unsorted or duplicate map keys, or trailing bytes.
// Ops 9 and 10, the owner object (and its bits 1 and 2), prefix bits 7
// and 8 and range bits 7 to 9 came after the
// first release of version 1; they only add what earlier encodings never
// set, so every earlier encoding still decodes to the same record (and an
// older reader refuses the new ops and bits as unknown).

// Version is the format version written in the first byte of every
// encoded record.
const Version = 1

// Object presence bits of a record.
const (
	objNI = 1 << iota
	objPrefix
	objRange
	objAlloc
	objOwner
	objAll = objNI | objPrefix | objRange | objAlloc | objOwner
)

// Field bits of an OwnerInfo.
const (
	owIdentity = 1 << iota
	owSource
	owGeneration
	owAll = 1<<iota - 1
)

// Field bits of a NetworkInstance.
const (
	niKey = 1 << iota
	niPrefixes
	niLabels
	niAll = 1<<iota - 1
)

// Field bits of a Prefix.
const (
	pfKey = 1 << iota
	pfNI
	pfKind
	pfPrefix
	pfNetwork
	pfLabels
	pfExclusions
	pfAllocateReserved // a flag: no field follows
	pfGatewayInBlocks  // a flag: no field follows
	pfAll              = 1<<iota - 1
)

// Field bits of an IPRange.
const (
	rgKey = 1 << iota
	rgNI
	rgStart
	rgEnd
	rgLabels
	rgExclusions
	rgPreAllocs
	rgPrefixLength
	rgGateway
	rgAllocateReserved // a flag: no field follows
	rgAll              = 1<<iota - 1
)

// Field bits of an AllocationRecord.
const (
	alKey = 1 << iota
	alNI
	alKind
	alPrefixLength
	alPrefix
	alFamily
	alSelector
	alLabels
	alCount
	alResNI
	alResPrefix
	alResGateway
	alResLast
	alAll = 1<<iota - 1
)

// Address tags.
const (
	addrInvalid = 0
	addr4       = 4
	addr6       = 6
	addr6Zone   = 7
)

var kinds = [...]ipam.Kind{"", ipam.KindAggregate, ipam.KindNetwork, ipam.KindPool, ipam.KindLoopback}

var families = [...]ipam.Family{"", ipam.IPv4, ipam.IPv6}

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed record")

// --- encoding ----------------------------------------------------------------

// Append appends the encoding of r to dst.
func Append(dst []byte, r *ipam.Record) []byte {
	dst = append(dst, Version, byte(r.Op))
	dst = appendKey(dst, r.Key)
	var objs byte
	if r.NetworkInstance != nil {
		objs |= objNI
	}
	if r.Prefix != nil {
		objs |= objPrefix
	}
	if r.Range != nil {
		objs |= objRange
	}
	if r.Allocation != nil {
		objs |= objAlloc
	}
	if r.Owner != nil {
		objs |= objOwner
	}
	dst = append(dst, objs)
	if r.NetworkInstance != nil {
		dst = appendNI(dst, r.Key, r.NetworkInstance)
	}
	if r.Prefix != nil {
		dst = appendPrefixObj(dst, r.Key, r.Prefix)
	}
	if r.Range != nil {
		dst = appendRange(dst, r.Key, r.Range)
	}
	if r.Allocation != nil {
		dst = appendAlloc(dst, r.Key, r.Allocation)
	}
	if r.Owner != nil {
		dst = appendOwner(dst, r.Owner)
	}
	return dst
}

func appendOwner(dst []byte, o *ipam.OwnerInfo) []byte {
	var mask uint64
	bit(&mask, owIdentity, o.Identity != "")
	bit(&mask, owSource, o.Source != "")
	bit(&mask, owGeneration, o.Generation != 0)
	dst = binary.AppendUvarint(dst, mask)
	if mask&owIdentity != 0 {
		dst = appendString(dst, o.Identity)
	}
	if mask&owSource != 0 {
		dst = appendString(dst, o.Source)
	}
	if mask&owGeneration != 0 {
		dst = binary.AppendUvarint(dst, o.Generation)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendKey(dst []byte, k ipam.Key) []byte {
	dst = appendString(dst, k.Owner)
	dst = appendString(dst, k.Namespace)
	return appendString(dst, k.Name)
}

func appendKind(dst []byte, k ipam.Kind) []byte {
	if i := slices.Index(kinds[1:], k); i >= 0 {
		return append(dst, byte(i+1))
	}
	return appendString(append(dst, 0), string(k))
}

func appendFamily(dst []byte, f ipam.Family) []byte {
	if i := slices.Index(families[1:], f); i >= 0 {
		return append(dst, byte(i+1))
	}
	return appendString(append(dst, 0), string(f))
}

func appendAddr(dst []byte, a netip.Addr) []byte {
	switch {
	case !a.IsValid():
		return append(dst, addrInvalid)
	case a.Is4():
		b := a.As4()
		return append(append(dst, addr4), b[:]...)
	}
	b := a.As16()
	if z := a.Zone(); z != "" {
		return appendString(append(append(dst, addr6Zone), b[:]...), z)
	}
	return append(append(dst, addr6), b[:]...)
}

func appendPrefix(dst []byte, p netip.Prefix) []byte {
	a := p.Addr() // PrefixFrom drops zones: a has none
	dst = appendAddr(dst, a)
	if !a.IsValid() {
		return dst
	}
	return append(dst, byte(p.Bits()+1)) // Bits is -1 when invalid
}

// appendLabels writes a non-empty map in key order.
func appendLabels(dst []byte, m map[string]string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(m)))
	var small [8]string
	for _, k := range sortedKeys(small[:0], m) {
		dst = appendString(appendString(dst, k), m[k])
	}
	return dst
}

// sortedKeys appends the keys of m to buf and sorts them.
func sortedKeys[V any](buf []string, m map[string]V) []string {
	for k := range m {
		buf = append(buf, k)
	}
	slices.Sort(buf)
	return buf
}

func appendRanges(dst []byte, rs []ipam.AddrRange) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	for _, r := range rs {
		dst = appendAddr(appendAddr(dst, r.Start), r.End)
	}
	return dst
}

// bit sets b in mask when the field is present.
func bit(mask *uint64, b uint64, present bool) {
	if present {
		*mask |= b
	}
}

func appendNI(dst []byte, rk ipam.Key, ni *ipam.NetworkInstance) []byte {
	var m uint64
	bit(&m, niKey, ni.Key != rk)
	bit(&m, niPrefixes, len(ni.Prefixes) > 0)
	bit(&m, niLabels, len(ni.Labels) > 0)
	dst = binary.AppendUvarint(dst, m)
	if m&niKey != 0 {
		dst = appendKey(dst, ni.Key)
	}
	if m&niPrefixes != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(ni.Prefixes)))
		for _, p := range ni.Prefixes {
			dst = appendPrefix(dst, p.Prefix)
			if len(p.Labels) == 0 {
				dst = append(dst, 0)
			} else {
				dst = appendLabels(dst, p.Labels)
			}
		}
	}
	if m&niLabels != 0 {
		dst = appendLabels(dst, ni.Labels)
	}
	return dst
}

func appendPrefixObj(dst []byte, rk ipam.Key, p *ipam.Prefix) []byte {
	var m uint64
	bit(&m, pfKey, p.Key != rk)
	bit(&m, pfNI, p.NetworkInstance != "")
	bit(&m, pfKind, p.Kind != "")
	bit(&m, pfPrefix, p.Prefix != netip.Prefix{})
	bit(&m, pfNetwork, p.Network != "")
	bit(&m, pfLabels, len(p.Labels) > 0)
	bit(&m, pfExclusions, len(p.Exclusions) > 0)
	bit(&m, pfAllocateReserved, p.AllocateReserved)
	bit(&m, pfGatewayInBlocks, p.GatewayInBlocks)
	dst = binary.AppendUvarint(dst, m)
	if m&pfKey != 0 {
		dst = appendKey(dst, p.Key)
	}
	if m&pfNI != 0 {
		dst = appendString(dst, p.NetworkInstance)
	}
	if m&pfKind != 0 {
		dst = appendKind(dst, p.Kind)
	}
	if m&pfPrefix != 0 {
		dst = appendPrefix(dst, p.Prefix)
	}
	if m&pfNetwork != 0 {
		dst = appendString(dst, p.Network)
	}
	if m&pfLabels != 0 {
		dst = appendLabels(dst, p.Labels)
	}
	if m&pfExclusions != 0 {
		dst = appendRanges(dst, p.Exclusions)
	}
	return dst
}

func appendRange(dst []byte, rk ipam.Key, r *ipam.IPRange) []byte {
	var m uint64
	bit(&m, rgKey, r.Key != rk)
	bit(&m, rgNI, r.NetworkInstance != "")
	bit(&m, rgStart, r.Start != netip.Addr{})
	bit(&m, rgEnd, r.End != netip.Addr{})
	bit(&m, rgLabels, len(r.Labels) > 0)
	bit(&m, rgExclusions, len(r.Exclusions) > 0)
	bit(&m, rgPreAllocs, len(r.PreAllocations) > 0)
	bit(&m, rgPrefixLength, r.PrefixLength != 0)
	bit(&m, rgGateway, r.Gateway != netip.Addr{})
	bit(&m, rgAllocateReserved, r.AllocateReserved)
	dst = binary.AppendUvarint(dst, m)
	if m&rgKey != 0 {
		dst = appendKey(dst, r.Key)
	}
	if m&rgNI != 0 {
		dst = appendString(dst, r.NetworkInstance)
	}
	if m&rgStart != 0 {
		dst = appendAddr(dst, r.Start)
	}
	if m&rgEnd != 0 {
		dst = appendAddr(dst, r.End)
	}
	if m&rgLabels != 0 {
		dst = appendLabels(dst, r.Labels)
	}
	if m&rgExclusions != 0 {
		dst = appendRanges(dst, r.Exclusions)
	}
	if m&rgPreAllocs != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(r.PreAllocations)))
		for _, k := range sortedKeys(nil, r.PreAllocations) {
			dst = appendAddr(appendString(dst, k), r.PreAllocations[k])
		}
	}
	if m&rgPrefixLength != 0 {
		dst = binary.AppendVarint(dst, int64(r.PrefixLength))
	}
	if m&rgGateway != 0 {
		dst = appendAddr(dst, r.Gateway)
	}
	return dst
}

func appendAlloc(dst []byte, rk ipam.Key, ar *ipam.AllocationRecord) []byte {
	a, res := &ar.Allocation, &ar.Result
	var m uint64
	bit(&m, alKey, a.Key != rk)
	bit(&m, alNI, a.NetworkInstance != "")
	bit(&m, alKind, a.Kind != "")
	bit(&m, alPrefixLength, a.PrefixLength != 0)
	bit(&m, alPrefix, a.Prefix != netip.Prefix{})
	bit(&m, alFamily, a.AddressFamily != "")
	bit(&m, alSelector, len(a.Selector) > 0)
	bit(&m, alLabels, len(a.Labels) > 0)
	bit(&m, alCount, a.Count != 0)
	bit(&m, alResNI, res.NetworkInstance != a.NetworkInstance)
	bit(&m, alResPrefix, res.Prefix != netip.Prefix{})
	bit(&m, alResGateway, res.Gateway != netip.Addr{})
	bit(&m, alResLast, res.Last != netip.Addr{})
	dst = binary.AppendUvarint(dst, m)
	if m&alKey != 0 {
		dst = appendKey(dst, a.Key)
	}
	if m&alNI != 0 {
		dst = appendString(dst, a.NetworkInstance)
	}
	if m&alKind != 0 {
		dst = appendKind(dst, a.Kind)
	}
	if m&alPrefixLength != 0 {
		dst = binary.AppendVarint(dst, int64(a.PrefixLength))
	}
	if m&alPrefix != 0 {
		dst = appendPrefix(dst, a.Prefix)
	}
	if m&alFamily != 0 {
		dst = appendFamily(dst, a.AddressFamily)
	}
	if m&alSelector != 0 {
		dst = appendLabels(dst, a.Selector)
	}
	if m&alLabels != 0 {
		dst = appendLabels(dst, a.Labels)
	}
	if m&alCount != 0 {
		dst = binary.AppendVarint(dst, int64(a.Count))
	}
	if m&alResNI != 0 {
		dst = appendString(dst, res.NetworkInstance)
	}
	if m&alResPrefix != 0 {
		dst = appendPrefix(dst, res.Prefix)
	}
	if m&alResGateway != 0 {
		dst = appendAddr(dst, res.Gateway)
	}
	if m&alResLast != 0 {
		dst = appendAddr(dst, res.Last)
	}
	return dst
}

// --- decoding ----------------------------------------------------------------

// Decoder decodes records. It interns short strings that recur from record
// to record (owners, namespaces, network instances, label keys and values)
// and reuses the decoded label maps of identical encodings, so that decoding
// a million allocations does not allocate a million copies of them. Decoded
// records may therefore share maps and strings: they must be treated as
// read-only (the core copies what it keeps). The zero Decoder is ready to
// use; a Decoder is not safe for concurrent use.
// Decoder decodes records, sharing repeated strings and label maps
// between them. Its zero value is ready to use.
type Decoder struct {
	strs   map[string]string
	labels map[string]ipam.Labels
	slab   []ipam.AllocationRecord // zeroed records that newAllocation hands out

	// The strings and label maps seen last, by a cheap hash of their
	// encoding: records in a row repeat their owner, namespace, network
	// instance and selector, which then cost a comparison, not a map
	// lookup (those lookups were a tenth of a restore).
	recentStrs   [8]string
	recentLabels [4]struct {
		enc string
		m   ipam.Labels
	}
}

// recentSlot is the slot of a non-empty encoding in a Decoder's cache of
// recent values with slots slots (a power of two): a cheap hash of its
// length and last byte.
func recentSlot(enc []byte, slots int) int {
	return (len(enc) ^ int(enc[len(enc)-1])) & (slots - 1)
}

const (
	maxInterned     = 1 << 14 // strings kept by one Decoder
	maxInternLen    = 64      // longer strings are not interned
	maxCachedLabels = 1 << 12 // label maps kept by one Decoder
	maxCachedLen    = 256     // longer label encodings are not cached
)

// Decode decodes one record from b; all of b must be consumed.
func Decode(b []byte) (ipam.Record, error) {
	var d Decoder
	return d.Decode(b)
}

// Decode decodes one record from b; all of b must be consumed. Strings
// and label maps it has seen are shared between the records it decodes.
func (d *Decoder) Decode(b []byte) (ipam.Record, error) { return d.record(b) }

// UseSlab makes the Decoder take the AllocationRecords of the records it
// decodes from slab (zeroed records), and from the heap once it is used up:
// a caller that decodes many records in chunks recycles their storage.
func (d *Decoder) UseSlab(slab []ipam.AllocationRecord) { d.slab = slab }

// record decodes one record from b; all of b must be consumed.
func (d *Decoder) record(b []byte) (ipam.Record, error) {
	r := reader{b: b, d: d}
	rec := r.record()
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return ipam.Record{}, r.err
	}
	return rec, nil
}

func (d *Decoder) intern(b []byte) string {
	if len(b) > maxInternLen {
		return string(b)
	}
	recent := &d.recentStrs[recentSlot(b, len(d.recentStrs))]
	if *recent == string(b) {
		return *recent
	}
	if s, ok := d.strs[string(b)]; ok {
		*recent = s
		return s
	}
	s := string(b)
	*recent = s
	if d.strs == nil {
		d.strs = make(map[string]string)
	}
	if len(d.strs) < maxInterned {
		d.strs[s] = s
	}
	return s
}

// newAllocation returns a zero AllocationRecord from the slab, or from the
// heap when the slab is used up. Restore gives the Decoder the slab of the
// chunk being filled and recycles it once the chunk is applied.
func (d *Decoder) newAllocation() *ipam.AllocationRecord {
	if len(d.slab) == 0 {
		return new(ipam.AllocationRecord)
	}
	ar := &d.slab[0]
	d.slab = d.slab[1:]
	return ar
}

// reader consumes an encoding; the first error sticks and every later read
// returns zero values.
type reader struct {
	b   []byte
	d   *Decoder
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
		r.b = nil
	}
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail("truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes(n int) []byte {
	if n > len(r.b) {
		r.fail("truncated: %d bytes wanted, %d left", n, len(r.b))
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int() int {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	if v < math.MinInt || v > math.MaxInt {
		r.fail("int %d out of range", v)
		return 0
	}
	return int(v)
}

// count reads a count of items each at least min bytes long.
func (r *reader) count(min int) int {
	n := r.uvarint()
	if r.err != nil {
		return 0
	}
	if n == 0 || n > uint64(len(r.b)/min) {
		r.fail("count %d invalid for %d bytes left", n, len(r.b))
		return 0
	}
	return int(n)
}

func (r *reader) rawString() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("string of %d bytes, %d left", n, len(r.b))
		return nil
	}
	return r.bytes(int(n))
}

// string reads a string that is interned when short.
func (r *reader) string() string {
	b := r.rawString()
	if r.err != nil || len(b) == 0 {
		return ""
	}
	return r.d.intern(b)
}

// unique reads a string that is not expected to recur (a name).
func (r *reader) unique() string {
	return string(r.rawString())
}

func (r *reader) mask(all uint64, what string) uint64 {
	m := r.uvarint()
	if m&^all != 0 {
		r.fail("unknown %s field bits %#x", what, m&^all)
		return 0
	}
	return m
}

func (r *reader) key() ipam.Key {
	return ipam.Key{Owner: r.string(), Namespace: r.string(), Name: r.unique()}
}

func (r *reader) kind() ipam.Kind {
	c := r.byte()
	switch {
	case c == 0:
		return ipam.Kind(r.string())
	case int(c) < len(kinds):
		return kinds[c]
	}
	r.fail("unknown kind code %d", c)
	return ""
}

func (r *reader) family() ipam.Family {
	c := r.byte()
	switch {
	case c == 0:
		return ipam.Family(r.string())
	case int(c) < len(families):
		return families[c]
	}
	r.fail("unknown family code %d", c)
	return ""
}

func (r *reader) addr() netip.Addr {
	switch tag := r.byte(); tag {
	case addrInvalid:
		return netip.Addr{}
	case addr4:
		b := r.bytes(4)
		if r.err != nil {
			return netip.Addr{}
		}
		return netip.AddrFrom4([4]byte(b))
	case addr6, addr6Zone:
		b := r.bytes(16)
		if r.err != nil {
			return netip.Addr{}
		}
		a := netip.AddrFrom16([16]byte(b))
		if tag == addr6Zone {
			a = a.WithZone(r.string())
		}
		return a
	default:
		r.fail("unknown address tag %d", tag)
		return netip.Addr{}
	}
}

func (r *reader) prefix() netip.Prefix {
	a := r.addr()
	if r.err != nil || !a.IsValid() {
		return netip.Prefix{}
	}
	if a.Zone() != "" {
		r.fail("prefix address with a zone")
		return netip.Prefix{}
	}
	b := int(r.byte())
	if b > a.BitLen()+1 {
		r.fail("prefix length %d exceeds /%d", b-1, a.BitLen())
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, b-1)
}

// labels reads a non-empty map. Identical encodings share one decoded map:
// the encoding is delimited first and looked up, and only a new one is
// decoded into a map.
func (r *reader) labels() ipam.Labels {
	enc := r.labelsExtent()
	if r.err != nil {
		return nil
	}
	if len(enc) > 0 {
		recent := &r.d.recentLabels[recentSlot(enc, len(r.d.recentLabels))]
		if recent.m != nil && recent.enc == string(enc) {
			r.b = r.b[len(enc):]
			return recent.m
		}
		if m, ok := r.d.labels[string(enc)]; ok {
			r.b = r.b[len(enc):]
			recent.enc, recent.m = string(enc), m
			return m
		}
	}
	n := r.count(2)
	if r.err != nil {
		return nil
	}
	m := make(ipam.Labels, n)
	prev := ""
	for i := range n {
		k, v := r.string(), r.string()
		if r.err != nil {
			return nil
		}
		if i > 0 && k <= prev {
			r.fail("label keys out of order: %q after %q", k, prev)
			return nil
		}
		m[k], prev = v, k
	}
	r.d.keepLabels(enc, m)
	return m
}

// labelsExtent returns the bytes of the labels encoding at the start of r.b
// without consuming them, or nil (and no error) when it is not cacheable or
// malformed, which the full decoding then reports.
func (r *reader) labelsExtent() []byte {
	b := r.b
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > uint64(len(b)) {
		return nil
	}
	off := k
	for range 2 * n {
		l, k := binary.Uvarint(b[off:])
		if k <= 0 || l > uint64(len(b)-off-k) {
			return nil
		}
		off += k + int(l)
		if off > maxCachedLen {
			return nil
		}
	}
	return b[:off]
}

// keepLabels remembers the decoded map m of the encoding enc.
func (d *Decoder) keepLabels(enc []byte, m ipam.Labels) {
	if len(enc) == 0 || len(enc) > maxCachedLen {
		return
	}
	if d.labels == nil {
		d.labels = make(map[string]ipam.Labels)
	}
	if len(d.labels) < maxCachedLabels {
		d.labels[string(enc)] = m
	}
}

func (r *reader) ranges() []ipam.AddrRange {
	n := r.count(2)
	if r.err != nil {
		return nil
	}
	out := make([]ipam.AddrRange, n)
	for i := range out {
		out[i] = ipam.AddrRange{Start: r.addr(), End: r.addr()}
	}
	if r.err != nil {
		return nil
	}
	return out
}

func (r *reader) record() ipam.Record {
	if v := r.byte(); v != Version {
		if r.err == nil {
			r.fail("unknown version %d", v)
		}
		return ipam.Record{}
	}
	rec := ipam.Record{Op: ipam.Op(r.byte())}
	if r.err == nil && (rec.Op < ipam.OpPutNetworkInstance || rec.Op > ipam.OpDeleteOwner) {
		r.fail("unknown op %d", rec.Op)
	}
	rec.Key = r.key()
	objs := r.byte()
	if objs&^objAll != 0 {
		r.fail("unknown object bits %#x", objs&^objAll)
	}
	if r.err != nil {
		return ipam.Record{}
	}
	if objs&objNI != 0 {
		rec.NetworkInstance = r.ni(rec.Key)
	}
	if objs&objPrefix != 0 {
		rec.Prefix = r.prefixObj(rec.Key)
	}
	if objs&objRange != 0 {
		rec.Range = r.rangeObj(rec.Key)
	}
	if objs&objAlloc != 0 {
		rec.Allocation = r.alloc(rec.Key)
	}
	if objs&objOwner != 0 {
		rec.Owner = r.owner()
	}
	return rec
}

func (r *reader) owner() *ipam.OwnerInfo {
	m := r.mask(owAll, "owner")
	o := &ipam.OwnerInfo{}
	if m&owIdentity != 0 {
		o.Identity = r.string()
	}
	if m&owSource != 0 {
		o.Source = r.string()
	}
	if m&owGeneration != 0 {
		o.Generation = r.uvarint()
	}
	return o
}

func (r *reader) ni(rk ipam.Key) *ipam.NetworkInstance {
	m := r.mask(niAll, "network instance")
	ni := &ipam.NetworkInstance{Key: rk}
	if m&niKey != 0 {
		ni.Key = r.key()
	}
	if m&niPrefixes != 0 {
		n := r.count(2)
		if r.err == nil {
			ni.Prefixes = make([]ipam.VRFPrefix, n)
			for i := range ni.Prefixes {
				ni.Prefixes[i].Prefix = r.prefix()
				if len(r.b) > 0 && r.b[0] == 0 {
					r.b = r.b[1:]
				} else {
					ni.Prefixes[i].Labels = r.labels()
				}
			}
		}
	}
	if m&niLabels != 0 {
		ni.Labels = r.labels()
	}
	return ni
}

func (r *reader) prefixObj(rk ipam.Key) *ipam.Prefix {
	m := r.mask(pfAll, "prefix")
	p := &ipam.Prefix{Key: rk}
	if m&pfKey != 0 {
		p.Key = r.key()
	}
	if m&pfNI != 0 {
		p.NetworkInstance = r.string()
	}
	if m&pfKind != 0 {
		p.Kind = r.kind()
	}
	if m&pfPrefix != 0 {
		p.Prefix = r.prefix()
	}
	if m&pfNetwork != 0 {
		p.Network = r.string()
	}
	if m&pfLabels != 0 {
		p.Labels = r.labels()
	}
	if m&pfExclusions != 0 {
		p.Exclusions = r.ranges()
	}
	p.AllocateReserved = m&pfAllocateReserved != 0
	p.GatewayInBlocks = m&pfGatewayInBlocks != 0
	return p
}

func (r *reader) rangeObj(rk ipam.Key) *ipam.IPRange {
	m := r.mask(rgAll, "range")
	g := &ipam.IPRange{Key: rk}
	if m&rgKey != 0 {
		g.Key = r.key()
	}
	if m&rgNI != 0 {
		g.NetworkInstance = r.string()
	}
	if m&rgStart != 0 {
		g.Start = r.addr()
	}
	if m&rgEnd != 0 {
		g.End = r.addr()
	}
	if m&rgLabels != 0 {
		g.Labels = r.labels()
	}
	if m&rgExclusions != 0 {
		g.Exclusions = r.ranges()
	}
	if m&rgPreAllocs != 0 {
		n := r.count(2)
		if r.err == nil {
			g.PreAllocations = make(map[string]netip.Addr, n)
			prev := ""
			for i := range n {
				k, a := r.string(), r.addr()
				if r.err != nil {
					break
				}
				if i > 0 && k <= prev {
					r.fail("pre-allocation names out of order: %q after %q", k, prev)
					break
				}
				g.PreAllocations[k], prev = a, k
			}
		}
	}
	if m&rgPrefixLength != 0 {
		g.PrefixLength = r.int()
	}
	if m&rgGateway != 0 {
		g.Gateway = r.addr()
	}
	g.AllocateReserved = m&rgAllocateReserved != 0
	return g
}

func (r *reader) alloc(rk ipam.Key) *ipam.AllocationRecord {
	m := r.mask(alAll, "allocation")
	ar := r.d.newAllocation()
	ar.Allocation.Key = rk
	a, res := &ar.Allocation, &ar.Result
	if m&alKey != 0 {
		a.Key = r.key()
	}
	if m&alNI != 0 {
		a.NetworkInstance = r.string()
	}
	if m&alKind != 0 {
		a.Kind = r.kind()
	}
	if m&alPrefixLength != 0 {
		a.PrefixLength = r.int()
	}
	if m&alPrefix != 0 {
		a.Prefix = r.prefix()
	}
	if m&alFamily != 0 {
		a.AddressFamily = r.family()
	}
	if m&alSelector != 0 {
		a.Selector = r.labels()
	}
	if m&alLabels != 0 {
		a.Labels = r.labels()
	}
	if m&alCount != 0 {
		a.Count = r.int()
	}
	res.NetworkInstance = a.NetworkInstance
	if m&alResNI != 0 {
		res.NetworkInstance = r.string()
	}
	if m&alResPrefix != 0 {
		res.Prefix = r.prefix()
	}
	if m&alResGateway != 0 {
		res.Gateway = r.addr()
	}
	if m&alResLast != 0 {
		res.Last = r.addr()
	}
	return ar
}
