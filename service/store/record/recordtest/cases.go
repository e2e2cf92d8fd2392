// Package recordtest holds records that cover every operation and every
// field of package record's format, for the tests of the codec and of the
// stores that use it.
package recordtest

import (
	"net/netip"

	"github.com/nephio-project/ipam/service/ipam"
)

var (
	k1 = ipam.Key{Owner: "pkg-a", Namespace: "default", Name: "n1"}
	k2 = ipam.Key{Owner: "pkg-b", Namespace: "ns", Name: "other"}
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

// Case is a named record.
type Case struct {
	Name   string
	Record ipam.Record
}

// Cases covers every Op and every field of every object, with values at
// the edges of their encodings.
func Cases() []Case {
	return []Case{
		{"zero key", ipam.Record{Op: ipam.OpDeleteAllocation}},
		{"delete network instance", ipam.Record{Op: ipam.OpDeleteNetworkInstance, Key: ipam.Key{Name: "vpc-1"}}},
		{"delete prefix", ipam.Record{Op: ipam.OpDeletePrefix, Key: k1}},
		{"delete range", ipam.Record{Op: ipam.OpDeleteRange, Key: k1}},
		{"delete allocation", ipam.Record{Op: ipam.OpDeleteAllocation, Key: k2}},
		{"put network instance empty", ipam.Record{Op: ipam.OpPutNetworkInstance, Key: k1, NetworkInstance: &ipam.NetworkInstance{Key: k1}}},
		{"put network instance full", ipam.Record{Op: ipam.OpPutNetworkInstance, Key: k1, NetworkInstance: &ipam.NetworkInstance{
			Key: k2,
			Prefixes: []ipam.VRFPrefix{
				{Prefix: pfx("10.0.0.0/8")},
				{Prefix: pfx("2001:db8::/32"), Labels: ipam.Labels{"a": "1", "b": ""}},
				{Prefix: netip.PrefixFrom(ip("192.168.0.1"), -1)},
				{},
			},
			Labels: ipam.Labels{"env": "prod", "": "empty-key", "nephio.org/gateway": "true"},
		}}},
		{"put prefix minimal", ipam.Record{Op: ipam.OpPutPrefix, Key: k1, Prefix: &ipam.Prefix{Key: k1}}},
		{"put prefix full", ipam.Record{Op: ipam.OpPutPrefix, Key: k1, Prefix: &ipam.Prefix{
			Key:             k2,
			NetworkInstance: "vpc-1",
			Kind:            ipam.KindNetwork,
			Prefix:          pfx("10.0.1.1/24"),
			Network:         "net-1",
			Labels:          ipam.Labels{ipam.LabelGateway: "true"},
			Exclusions:      []ipam.AddrRange{{Start: ip("10.0.1.10"), End: ip("10.0.1.20")}, {Start: ip("10.0.1.30")}, {}},
		}}},
		{"put prefix kinds", ipam.Record{Op: ipam.OpPutPrefix, Key: k1, Prefix: &ipam.Prefix{Key: k1, Kind: ipam.KindAggregate, Prefix: pfx("0.0.0.0/0")}}},
		{"put prefix pool", ipam.Record{Op: ipam.OpPutPrefix, Key: k1, Prefix: &ipam.Prefix{Key: k1, Kind: ipam.KindPool, Prefix: pfx("::/0")}}},
		{"put prefix loopback", ipam.Record{Op: ipam.OpPutPrefix, Key: k1, Prefix: &ipam.Prefix{Key: k1, Kind: ipam.KindLoopback, Prefix: pfx("10.255.0.0/32")}}},
		{"put prefix unknown kind", ipam.Record{Op: ipam.OpPutPrefix, Key: k1, Prefix: &ipam.Prefix{Key: k1, Kind: "wormhole", Prefix: pfx("fe80::/128")}}},
		{"put range full", ipam.Record{Op: ipam.OpPutRange, Key: k1, Range: &ipam.IPRange{
			Key:             k1,
			NetworkInstance: "vpc-1",
			Start:           ip("10.0.1.100"),
			End:             ip("10.0.1.200"),
			Labels:          ipam.Labels{"pool": "metal3"},
			Exclusions:      []ipam.AddrRange{{Start: ip("10.0.1.150"), End: ip("10.0.1.150")}},
			PreAllocations:  map[string]netip.Addr{"m1": ip("10.0.1.101"), "m0": ip("10.0.1.102"), "z": {}},
		}}},
		{"put range v6 zone", ipam.Record{Op: ipam.OpPutRange, Key: k1, Range: &ipam.IPRange{
			Key: k2, Start: ip("fe80::1%eth0"), End: ip("::ffff:10.0.0.1"),
		}}},
		{"put allocation minimal", ipam.Record{Op: ipam.OpPutAllocation, Key: k1, Allocation: &ipam.AllocationRecord{Allocation: ipam.Allocation{Key: k1}}}},
		{"put allocation address", ipam.Record{Op: ipam.OpPutAllocation, Key: k1, Allocation: &ipam.AllocationRecord{
			Allocation: ipam.Allocation{Key: k1, NetworkInstance: "vpc-1", Kind: ipam.KindNetwork, AddressFamily: ipam.IPv4,
				Selector: ipam.Labels{ipam.LabelNetworkName: "net-1"}},
			Result: ipam.Result{NetworkInstance: "vpc-1", Prefix: pfx("10.0.1.2/24"), Gateway: ip("10.0.1.1")},
		}}},
		{"put allocation full", ipam.Record{Op: ipam.OpPutAllocation, Key: k1, Allocation: &ipam.AllocationRecord{
			Allocation: ipam.Allocation{Key: k2, NetworkInstance: "vpc-1", Kind: ipam.KindPool, PrefixLength: 24,
				Prefix: pfx("10.1.0.0/16"), AddressFamily: ipam.IPv6, Selector: ipam.Labels{"a": "b", "c": "d"},
				Labels: ipam.Labels{"x": "y"}, Count: 17},
			Result: ipam.Result{NetworkInstance: "vpc-2", Prefix: pfx("2001:db8::/64"), Gateway: ip("2001:db8::1"), Last: ip("2001:db8::11")},
		}}},
		{"put allocation negative ints, odd family", ipam.Record{Op: ipam.OpPutAllocation, Key: k1, Allocation: &ipam.AllocationRecord{
			Allocation: ipam.Allocation{Key: k1, Kind: ipam.KindLoopback, PrefixLength: -1, Count: -1 << 40, AddressFamily: "ipx"},
			Result:     ipam.Result{NetworkInstance: "only-result"},
		}}},
		{"several objects", ipam.Record{Op: ipam.OpPutPrefix, Key: k1,
			NetworkInstance: &ipam.NetworkInstance{Key: k1},
			Prefix:          &ipam.Prefix{Key: k1},
			Range:           &ipam.IPRange{Key: k1},
			Allocation:      &ipam.AllocationRecord{Allocation: ipam.Allocation{Key: k1}},
		}},
		{"put owner", ipam.Record{Op: ipam.OpPutOwner, Key: ipam.Key{Owner: "pkg-a"}, Owner: &ipam.OwnerInfo{Identity: "k7q2m9x4c1v8b3n6z5w0"}}},
		{"put owner with source", ipam.Record{Op: ipam.OpPutOwner, Key: ipam.Key{Owner: "pkg-a"}, Owner: &ipam.OwnerInfo{Identity: "k7q2m9x4c1v8b3n6z5w0", Source: "https://example.com/org/repo/tree/main/pkgs/pkg-a"}}},
		{"put owner empty", ipam.Record{Op: ipam.OpPutOwner, Key: ipam.Key{Owner: "pkg-a"}, Owner: &ipam.OwnerInfo{}}},
		{"delete owner", ipam.Record{Op: ipam.OpDeleteOwner, Key: ipam.Key{Owner: "pkg-b"}}},
		{"put prefix allocate reserved", ipam.Record{Op: ipam.OpPutPrefix, Key: k1, Prefix: &ipam.Prefix{Key: k1, NetworkInstance: "vpc-1",
			Prefix: pfx("10.0.2.0/24"), AllocateReserved: true}}},
		{"put prefix gateway in blocks", ipam.Record{Op: ipam.OpPutPrefix, Key: k1, Prefix: &ipam.Prefix{Key: k1, NetworkInstance: "vpc-1",
			Prefix: pfx("10.0.2.1/24"), GatewayInBlocks: true}}},
		{"put range prefix length and gateway", ipam.Record{Op: ipam.OpPutRange, Key: k1, Range: &ipam.IPRange{
			Key: k1, NetworkInstance: "vpc-1", Start: ip("10.0.1.100"), End: ip("10.0.1.200"), PrefixLength: 25, Gateway: ip("10.0.1.126"),
		}}},
		{"put range allocate reserved", ipam.Record{Op: ipam.OpPutRange, Key: k1, Range: &ipam.IPRange{
			Key: k1, NetworkInstance: "vpc-1", Start: ip("10.0.1.0"), End: ip("10.0.1.9"), AllocateReserved: true,
		}}},
		{"put owner with generation", ipam.Record{Op: ipam.OpPutOwner, Key: ipam.Key{Owner: "pkg-a"}, Owner: &ipam.OwnerInfo{
			Identity: "k7q2m9x4c1v8b3n6z5w0", Source: "https://example.com/org/repo/tree/main/pkgs/pkg-a", Generation: 300}}},
		{"put owner generation only", ipam.Record{Op: ipam.OpPutOwner, Key: ipam.Key{Owner: "pkg-b"}, Owner: &ipam.OwnerInfo{Generation: 1 << 62}}},
	}
}
