package server

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
)

// Paging limits of List.
const (
	DefaultPageSize = 500
	MaxPageSize     = 5000
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
// by key here) and the token of the next page, if there is one.
func page[T any](items []T, key func(T) ipam.Key, kind ipamv1.ObjectKind, after *pageToken, size int) ([]T, string) {
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
	next := ""
	if end < len(items) {
		next = pageToken{kind: kind, last: key(items[end-1])}.encode()
	}
	return items[start:end], next
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
		items, next := page(s.a.ListNetworkInstances(f), func(x ipam.NetworkInstance) ipam.Key { return ipam.Key{Name: x.Key.Name} }, kind, after, size)
		for _, x := range items {
			resp.Objects = append(resp.Objects, &ipamv1.Object{Object: &ipamv1.Object_NetworkInstance{NetworkInstance: networkInstanceToProto(x)}})
		}
		resp.NextPageToken = next
	case ipamv1.ObjectKind_OBJECT_KIND_PREFIX:
		items, next := page(s.a.ListPrefixes(f), func(x ipam.PrefixRecord) ipam.Key { return x.Prefix.Key }, kind, after, size)
		for _, x := range items {
			resp.Objects = append(resp.Objects, &ipamv1.Object{Object: &ipamv1.Object_Prefix{Prefix: prefixRecordToProto(x)}})
		}
		resp.NextPageToken = next
	case ipamv1.ObjectKind_OBJECT_KIND_RANGE:
		items, next := page(s.a.ListRanges(f), func(x ipam.IPRange) ipam.Key { return x.Key }, kind, after, size)
		for _, x := range items {
			resp.Objects = append(resp.Objects, &ipamv1.Object{Object: &ipamv1.Object_Range{Range: rangeToProto(x)}})
		}
		resp.NextPageToken = next
	case ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION:
		// The bulk: the core copies only the page.
		var from *ipam.Key
		if after != nil {
			from = &after.last
		}
		items, more := s.a.ListAllocationsPage(f, from, size)
		resp.Objects = make([]*ipamv1.Object, 0, len(items))
		for _, x := range items {
			resp.Objects = append(resp.Objects, &ipamv1.Object{Object: &ipamv1.Object_Allocation{Allocation: allocationRecordToProto(x)}})
		}
		if more {
			resp.NextPageToken = pageToken{kind: kind, last: items[len(items)-1].Allocation.Key}.encode()
		}
	default:
		return nil, invalidRequest("kind", fmt.Sprintf("%s is not an object kind", kind))
	}
	return resp, nil
}
