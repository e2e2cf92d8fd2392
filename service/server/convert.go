package server

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
)

// This file is the only place that translates between the wire types
// (ipamv1) and the core's types (ipam). Addresses and prefixes are parsed
// strictly with net/netip; a malformed string becomes an *ipam.Error
// wrapping ipam.ErrInvalid that names the object and the field, so it is
// mapped like any other core error.

// parser collects the errors of one object's fields.
type parser struct {
	obj  string
	key  ipam.Key
	errs []error
}

func (p *parser) fail(field, format string, args ...any) {
	p.errs = append(p.errs, &ipam.Error{Object: p.obj, Key: p.key, Field: field, Msg: fmt.Sprintf(format, args...), Err: ipam.ErrInvalid})
}

// err returns the first error of the object (one message per object keeps
// the SyncFailure detail one item per failed object).
func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return p.errs[0]
}

// prefix parses a prefix such as 10.0.1.1/24; empty means unset.
func (p *parser) prefix(field, s string) netip.Prefix {
	if s == "" {
		return netip.Prefix{}
	}
	v, err := netip.ParsePrefix(s)
	if err != nil {
		if a, aerr := netip.ParseAddr(s); aerr == nil && a.Zone() == "" {
			p.fail(field, "%s is not a prefix (write it with a length, e.g. %s/%d)", ipam.Quote(s), a, a.BitLen())
		} else {
			p.fail(field, "%s is not a prefix", ipam.Quote(s))
		}
		return netip.Prefix{}
	}
	return v
}

// addr parses an address such as 10.0.1.1; empty means unset. Zones are
// refused: an IPAM address is never link-scoped to an interface.
func (p *parser) addr(field, s string) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	v, err := netip.ParseAddr(s)
	if err != nil || v.Zone() != "" {
		p.fail(field, "%s is not an IP address", ipam.Quote(s))
		return netip.Addr{}
	}
	return v
}

func (p *parser) ranges(field string, in []*ipamv1.AddrRange) []ipam.AddrRange {
	if len(in) == 0 {
		return nil
	}
	out := make([]ipam.AddrRange, len(in))
	for i, r := range in {
		f := fmt.Sprintf("%s[%d]", field, i)
		out[i] = ipam.AddrRange{Start: p.addr(f+".start", r.GetStart()), End: p.addr(f+".end", r.GetEnd())}
	}
	return out
}

func (p *parser) int(field string, v int32) int {
	if v < 0 {
		p.fail(field, "%d is negative", v)
	}
	return int(v)
}

func keyFromProto(k *ipamv1.Key) ipam.Key {
	return ipam.Key{Owner: k.GetOwner(), Namespace: k.GetNamespace(), Name: k.GetName()}
}

func keyToProto(k ipam.Key) *ipamv1.Key {
	return &ipamv1.Key{Owner: k.Owner, Namespace: k.Namespace, Name: k.Name}
}

// Label maps are shared, not copied, in both directions: the core keeps
// private copies of what it stores and hands out copies (or immutable
// stored maps, in records), and a request message is not used after its
// call.

func labelsFromProto(m map[string]string) ipam.Labels {
	if len(m) == 0 {
		return nil
	}
	return ipam.Labels(m)
}

func labelsToProto(l ipam.Labels) map[string]string {
	if len(l) == 0 {
		return nil
	}
	return map[string]string(l)
}

// networkInstanceFromProto converts a NetworkInstance.
func networkInstanceFromProto(in *ipamv1.NetworkInstance) (ipam.NetworkInstance, error) {
	p := parser{obj: ipam.ObjNetworkInstance, key: keyFromProto(in.GetKey())}
	ni := ipam.NetworkInstance{Key: p.key, Labels: labelsFromProto(in.GetLabels())}
	for i, vp := range in.GetPrefixes() {
		ni.Prefixes = append(ni.Prefixes, ipam.VRFPrefix{
			Prefix: p.prefix(fmt.Sprintf("spec.prefixes[%d].prefix", i), vp.GetPrefix()),
			Labels: labelsFromProto(vp.GetLabels()),
		})
	}
	return ni, p.err()
}

func networkInstanceToProto(ni ipam.NetworkInstance) *ipamv1.NetworkInstance {
	out := &ipamv1.NetworkInstance{Key: keyToProto(ni.Key), Labels: labelsToProto(ni.Labels)}
	for _, vp := range ni.Prefixes {
		out.Prefixes = append(out.Prefixes, &ipamv1.VRFPrefix{Prefix: prefixString(vp.Prefix), Labels: labelsToProto(vp.Labels)})
	}
	return out
}

// prefixFromProto converts an IPPrefix.
func prefixFromProto(in *ipamv1.Prefix) (ipam.Prefix, error) {
	p := parser{obj: ipam.ObjPrefix, key: keyFromProto(in.GetKey())}
	out := ipam.Prefix{
		Key:              p.key,
		NetworkInstance:  in.GetNetworkInstance(),
		Kind:             ipam.Kind(in.GetKind()),
		Prefix:           p.prefix("spec.prefix", in.GetPrefix()),
		Network:          in.GetNetwork(),
		Labels:           labelsFromProto(in.GetLabels()),
		Exclusions:       p.ranges("spec.exclusions", in.GetExclusions()),
		AllocateReserved: in.GetAllocateReserved(),
		GatewayInBlocks:  in.GetGatewayInBlocks(),
	}
	return out, p.err()
}

func prefixToProto(in ipam.Prefix) *ipamv1.Prefix {
	return &ipamv1.Prefix{
		Key:              keyToProto(in.Key),
		NetworkInstance:  in.NetworkInstance,
		Kind:             string(in.Kind),
		Prefix:           prefixString(in.Prefix),
		Network:          in.Network,
		Labels:           labelsToProto(in.Labels),
		Exclusions:       rangesToProto(in.Exclusions),
		AllocateReserved: in.AllocateReserved,
		GatewayInBlocks:  in.GatewayInBlocks,
	}
}

// rangeFromProto converts an IPRange.
func rangeFromProto(in *ipamv1.IPRange) (ipam.IPRange, error) {
	p := parser{obj: ipam.ObjRange, key: keyFromProto(in.GetKey())}
	out := ipam.IPRange{
		Key:              p.key,
		NetworkInstance:  in.GetNetworkInstance(),
		Start:            p.addr("spec.start", in.GetStart()),
		End:              p.addr("spec.end", in.GetEnd()),
		Labels:           labelsFromProto(in.GetLabels()),
		Exclusions:       p.ranges("spec.exclusions", in.GetExclusions()),
		PrefixLength:     int(in.GetPrefixLength()),
		Gateway:          p.addr("spec.gateway", in.GetGateway()),
		AllocateReserved: in.GetAllocateReserved(),
	}
	if pre := in.GetPreAllocations(); len(pre) > 0 {
		out.PreAllocations = make(map[string]netip.Addr, len(pre))
		for _, name := range slices.Sorted(maps.Keys(pre)) {
			out.PreAllocations[name] = p.addr("spec.preAllocations["+name+"]", pre[name])
		}
	}
	if out.Start.IsValid() && out.End.IsValid() && out.Start.Is4() != out.End.Is4() {
		p.fail("spec.end", "%s and spec.start %s are of different address families", out.End, out.Start)
	}
	return out, p.err()
}

func rangeToProto(in ipam.IPRange) *ipamv1.IPRange {
	out := &ipamv1.IPRange{
		Key:              keyToProto(in.Key),
		NetworkInstance:  in.NetworkInstance,
		Start:            addrString(in.Start),
		End:              addrString(in.End),
		Labels:           labelsToProto(in.Labels),
		Exclusions:       rangesToProto(in.Exclusions),
		PrefixLength:     int32(in.PrefixLength),
		Gateway:          addrString(in.Gateway),
		AllocateReserved: in.AllocateReserved,
	}
	if len(in.PreAllocations) > 0 {
		out.PreAllocations = make(map[string]string, len(in.PreAllocations))
		for name, a := range in.PreAllocations {
			out.PreAllocations[name] = a.String()
		}
	}
	return out
}

func rangesToProto(in []ipam.AddrRange) []*ipamv1.AddrRange {
	if len(in) == 0 {
		return nil
	}
	out := make([]*ipamv1.AddrRange, len(in))
	for i, r := range in {
		out[i] = &ipamv1.AddrRange{Start: addrString(r.Start), End: addrString(r.End)}
	}
	return out
}

// allocationFromProto converts an IPAllocation request.
func allocationFromProto(in *ipamv1.Allocation) (ipam.Allocation, error) {
	p := parser{obj: ipam.ObjAllocation, key: keyFromProto(in.GetKey())}
	out := ipam.Allocation{
		Key:             p.key,
		NetworkInstance: in.GetNetworkInstance(),
		Kind:            ipam.Kind(in.GetKind()),
		PrefixLength:    p.int("spec.prefixLength", in.GetPrefixLength()),
		Prefix:          p.prefix("spec.prefix", in.GetPrefix()),
		AddressFamily:   ipam.Family(strings.ToLower(in.GetAddressFamily())),
		Selector:        labelsFromProto(in.GetSelector()),
		Labels:          labelsFromProto(in.GetLabels()),
		Count:           p.int("spec.count", in.GetCount()),
	}
	return out, p.err()
}

func allocationToProto(in ipam.Allocation) *ipamv1.Allocation {
	return &ipamv1.Allocation{
		Key:             keyToProto(in.Key),
		NetworkInstance: in.NetworkInstance,
		Kind:            string(in.Kind),
		PrefixLength:    int32(in.PrefixLength),
		Prefix:          prefixString(in.Prefix),
		AddressFamily:   string(in.AddressFamily),
		Selector:        labelsToProto(in.Selector),
		Labels:          labelsToProto(in.Labels),
		Count:           int32(in.Count),
	}
}

func resultToProto(r ipam.Result) *ipamv1.Result {
	return &ipamv1.Result{
		NetworkInstance: r.NetworkInstance,
		Prefix:          prefixString(r.Prefix),
		Gateway:         addrString(r.Gateway),
		Last:            addrString(r.Last),
	}
}

func prefixRecordToProto(r ipam.PrefixRecord) *ipamv1.PrefixRecord {
	return &ipamv1.PrefixRecord{Prefix: prefixToProto(r.Prefix), Result: resultToProto(r.Result)}
}

func allocationRecordToProto(r ipam.AllocationRecord) *ipamv1.AllocationRecord {
	return &ipamv1.AllocationRecord{Allocation: allocationToProto(r.Allocation), Result: resultToProto(r.Result)}
}

// syncRequestFromProto converts a Sync request; every malformed item is
// reported, so the SyncFailure detail lists all of them at once.
func syncRequestFromProto(in *ipamv1.SyncRequest) (ipam.SyncRequest, error) {
	out := ipam.SyncRequest{Owner: in.GetOwner(), Identity: in.GetIdentity(), Source: in.GetSource(), Adopt: in.GetAdopt(), Prune: in.GetPrune(),
		Generation: in.GetGeneration(), CheckGeneration: in.Generation != nil,
		NetworkInstances: make([]ipam.NetworkInstance, 0, len(in.GetNetworkInstances())),
		Prefixes:         make([]ipam.Prefix, 0, len(in.GetPrefixes())),
		Ranges:           make([]ipam.IPRange, 0, len(in.GetRanges())),
		Allocations:      make([]ipam.Allocation, 0, len(in.GetAllocations())),
	}
	var errs []error
	for _, x := range in.GetNetworkInstances() {
		v, err := networkInstanceFromProto(x)
		errs = appendErr(errs, err)
		out.NetworkInstances = append(out.NetworkInstances, v)
	}
	for _, x := range in.GetPrefixes() {
		v, err := prefixFromProto(x)
		errs = appendErr(errs, err)
		out.Prefixes = append(out.Prefixes, v)
	}
	for _, x := range in.GetRanges() {
		v, err := rangeFromProto(x)
		errs = appendErr(errs, err)
		out.Ranges = append(out.Ranges, v)
	}
	for _, x := range in.GetAllocations() {
		v, err := allocationFromProto(x)
		errs = appendErr(errs, err)
		out.Allocations = append(out.Allocations, v)
	}
	if len(errs) > 0 {
		// Items carry the owner the request forces on them, as the core
		// reports its own item errors.
		for _, err := range errs {
			err.(*ipam.Error).Key.Owner = in.GetOwner()
		}
		return out, &ipam.SyncError{Errs: errs}
	}
	return out, nil
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

func syncResultToProto(r ipam.SyncResult) *ipamv1.SyncResponse {
	out := &ipamv1.SyncResponse{
		Prefixes:    make([]*ipamv1.Result, len(r.Prefixes)),
		Allocations: make([]*ipamv1.Result, len(r.Allocations)),
		Adopted:     r.Adopted,
		Generation:  r.Generation,
	}
	for i, x := range r.Prefixes {
		out.Prefixes[i] = resultToProto(x)
	}
	for i, x := range r.Allocations {
		out.Allocations[i] = resultToProto(x)
	}
	for _, x := range r.Released {
		out.Released = append(out.Released, &ipamv1.Released{Kind: kindOfOp(x.Op), Key: keyToProto(x.Key)})
	}
	return out
}

// treeToProto converts a tree, unless its nodes encode to more than
// maxBytes (then it returns false).
func treeToProto(nodes []ipam.TreeNode, maxBytes int) (*ipamv1.TreeResponse, bool) {
	out := &ipamv1.TreeResponse{Nodes: make([]*ipamv1.TreeNode, len(nodes))}
	size := 0
	for i, n := range nodes {
		out.Nodes[i] = &ipamv1.TreeNode{
			Depth:      int32(n.Depth),
			Prefix:     prefixString(n.Prefix),
			Kind:       string(n.Kind),
			Name:       n.Name,
			Owner:      n.Owner,
			Used:       n.Used,
			Total:      n.Total,
			StaticOnly: n.StaticOnly,
		}
		// nodes is field 1 of TreeResponse: a tag, a length, the node.
		if size += protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(out.Nodes[i])); size > maxBytes {
			return nil, false
		}
	}
	return out, true
}

// kindOfOp returns the object kind a change record is about.
func kindOfOp(op ipam.Op) ipamv1.ObjectKind {
	switch op {
	case ipam.OpPutNetworkInstance, ipam.OpDeleteNetworkInstance:
		return ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE
	case ipam.OpPutPrefix, ipam.OpDeletePrefix:
		return ipamv1.ObjectKind_OBJECT_KIND_PREFIX
	case ipam.OpPutRange, ipam.OpDeleteRange:
		return ipamv1.ObjectKind_OBJECT_KIND_RANGE
	case ipam.OpPutAllocation, ipam.OpDeleteAllocation:
		return ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION
	}
	return ipamv1.ObjectKind_OBJECT_KIND_UNSPECIFIED
}

// eventFromRecord converts a committed change record into a WatchEvent.
// A put of a prefix carries the declaration and the network instance and
// prefix of its result; the gateway of its network is not part of the
// record (Get returns it).
func eventFromRecord(r ipam.Record) *ipamv1.WatchEvent {
	ev := &ipamv1.WatchEvent{Type: ipamv1.WatchEvent_TYPE_DELETE, Kind: kindOfOp(r.Op), Key: keyToProto(r.Key)}
	switch r.Op {
	case ipam.OpPutNetworkInstance:
		if r.NetworkInstance != nil {
			ev.Type = ipamv1.WatchEvent_TYPE_PUT
			ev.Object = &ipamv1.Object{Object: &ipamv1.Object_NetworkInstance{NetworkInstance: networkInstanceToProto(*r.NetworkInstance)}}
		}
	case ipam.OpPutPrefix:
		if r.Prefix != nil {
			ev.Type = ipamv1.WatchEvent_TYPE_PUT
			ev.Object = &ipamv1.Object{Object: &ipamv1.Object_Prefix{Prefix: &ipamv1.PrefixRecord{
				Prefix: prefixToProto(*r.Prefix),
				Result: &ipamv1.Result{NetworkInstance: r.Prefix.NetworkInstance, Prefix: prefixString(r.Prefix.Prefix)},
			}}}
		}
	case ipam.OpPutRange:
		if r.Range != nil {
			ev.Type = ipamv1.WatchEvent_TYPE_PUT
			ev.Object = &ipamv1.Object{Object: &ipamv1.Object_Range{Range: rangeToProto(*r.Range)}}
		}
	case ipam.OpPutAllocation:
		if r.Allocation != nil {
			ev.Type = ipamv1.WatchEvent_TYPE_PUT
			ev.Object = &ipamv1.Object{Object: &ipamv1.Object_Allocation{Allocation: allocationRecordToProto(*r.Allocation)}}
		}
	}
	return ev
}

// recordVRF returns the network instance a record is about, if the record
// says so.
func recordVRF(r ipam.Record) string {
	switch {
	case r.Op == ipam.OpPutNetworkInstance || r.Op == ipam.OpDeleteNetworkInstance:
		return r.Key.Name
	case r.NetworkInstance != nil:
		return r.NetworkInstance.Key.Name
	case r.Prefix != nil:
		return r.Prefix.NetworkInstance
	case r.Range != nil:
		return r.Range.NetworkInstance
	case r.Allocation != nil:
		return r.Allocation.Result.NetworkInstance
	}
	return ""
}

func prefixString(p netip.Prefix) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
