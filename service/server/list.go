package server

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
)

// Paging limits of List. A page holds at most the page size asked for
// (DefaultPageSize when none, at most MaxPageSize) objects, and is cut
// earlier when its objects would encode to more than MaxPageBytes.
const (
	DefaultPageSize = 500
	MaxPageSize     = 5000
	// MaxPageBytes bounds the encoded objects of one page: 3 MiB, so a
	// page with its envelope and next_page_token stays below the 4 MiB
	// that gRPC clients accept by default (and far below the 64 MiB of
	// grpcopt). A page always holds at least one object, whatever its
	// size: an object is never split, and none is larger than the request
	// that stored it (at most grpcopt.MaxMsgSize).
	MaxPageBytes = 3 << 20
)

// pageToken is the opaque List continuation: the kind listed and the key of
// the last object returned. Objects are listed in key order (owner,
// namespace, name; network instances by name), so the next page starts
// after that key and every object is returned exactly once even if others
// are created or deleted between pages.
type pageToken struct {
	kind ipamv1.ObjectKind
	last ipam.Key
}

const tokenVersion = "v1"

func (t pageToken) encode() string {
	s := strings.Join([]string{tokenVersion, fmt.Sprint(int32(t.kind)), t.last.Owner, t.last.Namespace, t.last.Name}, "\x00")
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func decodePageToken(s string, kind ipamv1.ObjectKind) (*pageToken, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	parts := strings.Split(string(b), "\x00")
	if err != nil || len(parts) != 5 || parts[0] != tokenVersion {
		return nil, invalidRequest("page_token", "malformed; pass the next_page_token of the previous response")
	}
	if parts[1] != fmt.Sprint(int32(kind)) {
		return nil, invalidRequest("page_token", "was issued for another kind of object")
	}
	return &pageToken{kind: kind, last: ipam.Key{Owner: parts[2], Namespace: parts[3], Name: parts[4]}}, nil
}

func compareKey(a, b ipam.Key) int {
	if c := cmp.Compare(a.Owner, b.Owner); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// page returns up to size items after the token's key (items are sorted
// by key here) and whether more follow.
func page[T any](items []T, key func(T) ipam.Key, after *pageToken, size int) ([]T, bool) {
	byKey := func(a, b T) int { return compareKey(key(a), key(b)) }
	if !slices.IsSortedFunc(items, byKey) {
		slices.SortFunc(items, byKey)
	}
	start := 0
	if after != nil {
		start, _ = slices.BinarySearchFunc(items, after.last, func(x T, k ipam.Key) int {
			if c := compareKey(key(x), k); c != 0 {
				return c
			}
			return -1 // equal keys sort before: start after them
		})
	}
	end := min(start+size, len(items))
	return items[start:end], end < len(items)
}

// fill appends items to resp as objects until the next one would take the
// encoded objects beyond MaxPageBytes (the first always goes in), and sets
// the next page token to the last object appended when it stopped early or
// more follow. Each object is converted and measured once, on its way in.
func fill[T any](resp *ipamv1.ListResponse, items []T, more bool, kind ipamv1.ObjectKind, key func(T) ipam.Key, object func(T) *ipamv1.Object) {
	resp.Objects = make([]*ipamv1.Object, 0, len(items))
	size := 0
	for i, x := range items {
		o := object(x)
		// objects is field 1 of ListResponse: a tag, a length, the object.
		n := protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(o))
		if i > 0 && size+n > MaxPageBytes {
			more = true
			break
		}
		resp.Objects = append(resp.Objects, o)
		size += n
	}
	if more && len(resp.Objects) > 0 {
		resp.NextPageToken = pageToken{kind: kind, last: key(items[len(resp.Objects)-1])}.encode()
	}
}

// list serves List.
func (s *Service) list(req *ipamv1.ListRequest) (*ipamv1.ListResponse, error) {
	size := int(req.GetPageSize())
	switch {
	case size < 0:
		return nil, invalidRequest("page_size", fmt.Sprintf("%d is negative", size))
	case size == 0:
		size = DefaultPageSize
	case size > MaxPageSize:
		size = MaxPageSize
	}
	kind := req.GetKind()
	after, err := decodePageToken(req.GetPageToken(), kind)
	if err != nil {
		return nil, err
	}
	if err := checkFilter(req.GetNetworkInstance(), req.GetOwner(), req.GetLabels()); err != nil {
		return nil, err
	}
	f := ipam.Filter{NetworkInstance: req.GetNetworkInstance(), Owner: req.GetOwner(), Labels: labelsFromProto(req.GetLabels())}
	resp := &ipamv1.ListResponse{}
	switch kind {
	case ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE:
		// Network instance names are unique: their key is the name.
		key := func(x ipam.NetworkInstance) ipam.Key { return ipam.Key{Name: x.Key.Name} }
		items, more := page(s.a.ListNetworkInstances(f), key, after, size)
		fill(resp, items, more, kind, key, func(x ipam.NetworkInstance) *ipamv1.Object {
			return &ipamv1.Object{Object: &ipamv1.Object_NetworkInstance{NetworkInstance: networkInstanceToProto(x)}}
		})
	case ipamv1.ObjectKind_OBJECT_KIND_PREFIX:
		key := func(x ipam.PrefixRecord) ipam.Key { return x.Prefix.Key }
		items, more := page(s.a.ListPrefixes(f), key, after, size)
		fill(resp, items, more, kind, key, func(x ipam.PrefixRecord) *ipamv1.Object {
			return &ipamv1.Object{Object: &ipamv1.Object_Prefix{Prefix: prefixRecordToProto(x)}}
		})
	case ipamv1.ObjectKind_OBJECT_KIND_RANGE:
		key := func(x ipam.IPRange) ipam.Key { return x.Key }
		items, more := page(s.a.ListRanges(f), key, after, size)
		fill(resp, items, more, kind, key, func(x ipam.IPRange) *ipamv1.Object {
			return &ipamv1.Object{Object: &ipamv1.Object_Range{Range: rangeToProto(x)}}
		})
	case ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION:
		// The bulk: the core copies only the page.
		var from *ipam.Key
		if after != nil {
			from = &after.last
		}
		items, more := s.a.ListAllocationsPage(f, from, size)
		fill(resp, items, more, kind, func(x ipam.AllocationRecord) ipam.Key { return x.Allocation.Key }, func(x ipam.AllocationRecord) *ipamv1.Object {
			return &ipamv1.Object{Object: &ipamv1.Object_Allocation{Allocation: allocationRecordToProto(x)}}
		})
	default:
		return nil, invalidRequest("kind", fmt.Sprintf("%s is not an object kind", kind))
	}
	return resp, nil
}
