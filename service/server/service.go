package server

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/grpcopt"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server/authz"
)

// Service is the ipam.v1.IPAM gRPC service over an allocator. Every error
// it returns is a gRPC status made by toStatus.
type Service struct {
	ipamv1.UnimplementedIPAMServer

	a       *ipam.Allocator
	hub     *Hub
	metrics *Metrics      // may be nil
	policy  *authz.Policy // nil: every caller may do everything
	// maxTreeBytes overrides MaxTreeBytes (tests).
	maxTreeBytes int
}

// NewService returns the service over a; hub feeds Watch (it must be a's
// journal) and metrics, when not nil, counts Sync items.
func NewService(a *ipam.Allocator, hub *Hub, metrics *Metrics) *Service {
	return &Service{a: a, hub: hub, metrics: metrics}
}

var _ ipamv1.IPAMServer = (*Service)(nil)

// CreateNetworkInstance creates or updates a network instance.
func (s *Service) CreateNetworkInstance(ctx context.Context, req *ipamv1.CreateNetworkInstanceRequest) (*ipamv1.CreateNetworkInstanceResponse, error) {
	if req.GetNetworkInstance() == nil {
		return nil, toStatus(invalidRequest("network_instance", "is required"))
	}
	ni, err := networkInstanceFromProto(req.GetNetworkInstance())
	if err == nil {
		err = checkName(ipam.ObjNetworkInstance, ni.Key)
	}
	if err == nil {
		err = s.allowWrite(ctx, ni.Key.Owner, ni.Key.Name)
	}
	if err == nil {
		err = s.a.CreateNetworkInstance(s.authorizing(ctx), ni)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.CreateNetworkInstanceResponse{}, nil
}

// DeleteNetworkInstance deletes an empty network instance.
func (s *Service) DeleteNetworkInstance(ctx context.Context, req *ipamv1.DeleteRequest) (*ipamv1.DeleteResponse, error) {
	return s.delete(ctx, req, ipam.ObjNetworkInstance, s.a.DeleteNetworkInstance, func(k ipam.Key) string { return k.Name })
}

// CreatePrefix creates or updates an IPPrefix.
func (s *Service) CreatePrefix(ctx context.Context, req *ipamv1.CreatePrefixRequest) (*ipamv1.CreatePrefixResponse, error) {
	if req.GetPrefix() == nil {
		return nil, toStatus(invalidRequest("prefix", "is required"))
	}
	p, err := prefixFromProto(req.GetPrefix())
	if err == nil {
		err = checkName(ipam.ObjPrefix, p.Key)
	}
	if err == nil {
		err = s.allowWrite(ctx, p.Key.Owner, p.NetworkInstance, s.prefixVRF(p.Key))
	}
	var res ipam.Result
	if err == nil {
		res, err = s.a.CreatePrefix(s.authorizing(ctx), p)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.CreatePrefixResponse{Result: resultToProto(res)}, nil
}

// DeletePrefix deletes an IPPrefix with no children or allocations.
func (s *Service) DeletePrefix(ctx context.Context, req *ipamv1.DeleteRequest) (*ipamv1.DeleteResponse, error) {
	return s.delete(ctx, req, ipam.ObjPrefix, s.a.DeletePrefix, s.prefixVRF)
}

// CreateRange creates or replaces an IP range.
func (s *Service) CreateRange(ctx context.Context, req *ipamv1.CreateRangeRequest) (*ipamv1.CreateRangeResponse, error) {
	if req.GetRange() == nil {
		return nil, toStatus(invalidRequest("range", "is required"))
	}
	r, err := rangeFromProto(req.GetRange())
	if err == nil {
		err = checkName(ipam.ObjRange, r.Key)
	}
	if err == nil {
		err = s.allowWrite(ctx, r.Key.Owner, r.NetworkInstance, s.rangeVRF(r.Key))
	}
	if err == nil {
		err = s.a.CreateRange(s.authorizing(ctx), r)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.CreateRangeResponse{}, nil
}

// DeleteRange deletes an IP range with no allocations.
func (s *Service) DeleteRange(ctx context.Context, req *ipamv1.DeleteRequest) (*ipamv1.DeleteResponse, error) {
	return s.delete(ctx, req, ipam.ObjRange, s.a.DeleteRange, s.rangeVRF)
}

// Allocate allocates an address, a block or a sub-prefix.
func (s *Service) Allocate(ctx context.Context, req *ipamv1.AllocateRequest) (*ipamv1.AllocateResponse, error) {
	if req.GetAllocation() == nil {
		return nil, toStatus(invalidRequest("allocation", "is required"))
	}
	r, err := allocationFromProto(req.GetAllocation())
	if err == nil {
		err = checkName(ipam.ObjAllocation, r.Key)
	}
	if err == nil && s.policy != nil {
		err = s.allowWrite(ctx, r.Key.Owner, allocVRF(r), s.allocationVRF(r.Key))
	}
	var res ipam.Result
	if err == nil {
		res, err = s.a.Allocate(s.authorizing(ctx), r)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.AllocateResponse{Result: resultToProto(res)}, nil
}

// Release releases an allocation.
func (s *Service) Release(ctx context.Context, req *ipamv1.DeleteRequest) (*ipamv1.DeleteResponse, error) {
	return s.delete(ctx, req, ipam.ObjAllocation, s.a.Release, s.allocationVRF)
}

// delete deletes the object of req's key with del, once the caller may
// change its owner in the network instance vrf names it in (and the core
// asks again, under its locks, about the one it deletes from).
func (s *Service) delete(ctx context.Context, req *ipamv1.DeleteRequest, obj string, del func(context.Context, ipam.Key) error, vrf func(ipam.Key) string) (*ipamv1.DeleteResponse, error) {
	key := keyFromProto(req.GetKey())
	err := checkName(obj, key)
	if err == nil && s.policy != nil {
		err = s.allowWrite(ctx, key.Owner, vrf(key))
	}
	if err == nil {
		err = del(s.authorizing(ctx), key)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.DeleteResponse{}, nil
}

// checkName rejects a key without a name, or one beyond the core's
// limits, before the core sees it.
func checkName(obj string, key ipam.Key) error {
	if err := ipam.CheckKey(obj, key); err != nil {
		return err
	}
	if key.Name == "" {
		return &ipam.Error{Object: obj, Key: key, Field: "metadata.name", Msg: "a name is required", Err: ipam.ErrInvalid}
	}
	return nil
}

// checkFilter checks the filters of List and Watch against the core's
// limits on names and labels.
func checkFilter(networkInstance, owner string, labels map[string]string) error {
	if err := ipam.CheckName("request", ipam.Key{}, "network_instance", networkInstance); err != nil {
		return err
	}
	if err := ipam.CheckName("request", ipam.Key{}, "owner", owner); err != nil {
		return err
	}
	return ipam.CheckLabels("request", ipam.Key{}, "labels", labels)
}

// Get returns one object. For network instances only key.name matters;
// for the other kinds an empty key.owner matches any owner.
func (s *Service) Get(ctx context.Context, req *ipamv1.GetRequest) (*ipamv1.GetResponse, error) {
	if err := s.allowRead(ctx); err != nil {
		return nil, toStatus(err)
	}
	var obj *ipamv1.Object
	var err error
	if serr := s.a.ReadSettled(func() { obj, err = s.get(req) }); serr != nil {
		return nil, toStatus(serr)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.GetResponse{Object: obj}, nil
}

// get reads the object Get asks for.
func (s *Service) get(req *ipamv1.GetRequest) (*ipamv1.Object, error) {
	key := keyFromProto(req.GetKey())
	obj := &ipamv1.Object{}
	var err error
	switch req.GetKind() {
	case ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE:
		if err = checkName(ipam.ObjNetworkInstance, key); err == nil {
			var ni ipam.NetworkInstance
			if ni, err = s.a.GetNetworkInstance(key.Name); err == nil {
				obj.Object = &ipamv1.Object_NetworkInstance{NetworkInstance: networkInstanceToProto(ni)}
			}
		}
	case ipamv1.ObjectKind_OBJECT_KIND_PREFIX:
		if err = checkName(ipam.ObjPrefix, key); err == nil {
			var rec ipam.PrefixRecord
			if rec, err = s.a.GetPrefix(key); err == nil {
				obj.Object = &ipamv1.Object_Prefix{Prefix: prefixRecordToProto(rec)}
			}
		}
	case ipamv1.ObjectKind_OBJECT_KIND_RANGE:
		if err = checkName(ipam.ObjRange, key); err == nil {
			var r ipam.IPRange
			if r, err = s.a.GetRange(key); err == nil {
				obj.Object = &ipamv1.Object_Range{Range: rangeToProto(r)}
			}
		}
	case ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION:
		if err = checkName(ipam.ObjAllocation, key); err == nil {
			var rec ipam.AllocationRecord
			if rec, err = s.a.GetAllocation(key); err == nil {
				obj.Object = &ipamv1.Object_Allocation{Allocation: allocationRecordToProto(rec)}
			}
		}
	default:
		err = invalidRequest("kind", fmt.Sprintf("%s is not an object kind", req.GetKind()))
	}
	return obj, err
}

// List returns objects of one kind, filtered and paged.
func (s *Service) List(ctx context.Context, req *ipamv1.ListRequest) (*ipamv1.ListResponse, error) {
	if err := s.allowRead(ctx); err != nil {
		return nil, toStatus(err)
	}
	var resp *ipamv1.ListResponse
	var err error
	if serr := s.a.ReadSettled(func() { resp, err = s.list(req) }); serr != nil {
		return nil, toStatus(serr)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// Sync applies the whole desired set of one owner atomically.
func (s *Service) Sync(ctx context.Context, req *ipamv1.SyncRequest) (*ipamv1.SyncResponse, error) {
	n := len(req.GetNetworkInstances()) + len(req.GetPrefixes()) + len(req.GetRanges()) + len(req.GetAllocations())
	if s.metrics != nil {
		s.metrics.syncItems.Add(float64(n))
	}
	err := ipam.CheckNewName(ipam.ObjSync, ipam.Key{}, "owner", req.GetOwner())
	switch {
	case err != nil:
	case req.GetOwner() == "":
		err = invalidRequest("owner", "an owner is required (the kpt package or controller that declares the objects)")
	case n > ipam.MaxSyncItems:
		err = &ipam.Error{Object: ipam.ObjSync, Key: ipam.Key{Name: req.GetOwner()}, Err: ipam.ErrInvalid,
			Msg: fmt.Sprintf("%d objects exceed the limit of %d per request", n, ipam.MaxSyncItems)}
	}
	var sreq ipam.SyncRequest
	if err == nil {
		sreq, err = syncRequestFromProto(req)
		// The converted request shares the strings and label maps of the
		// message; the message's own structures are not needed any more
		// and can be collected while the core applies the request.
		req.NetworkInstances, req.Prefixes, req.Ranges, req.Allocations = nil, nil, nil, nil
	}
	if err == nil && s.policy != nil {
		err = s.allowWrite(ctx, sreq.Owner, s.syncVRFs(ctx, sreq)...)
	}
	var res ipam.SyncResult
	if err == nil {
		res, err = s.a.Sync(s.authorizing(ctx), sreq)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return syncResultToProto(res), nil
}

// Watch streams committed changes, after they are durable, until the
// client goes away, the server shuts down (Unavailable) or the client falls
// behind (ResourceExhausted).
func (s *Service) Watch(req *ipamv1.WatchRequest, stream grpc.ServerStreamingServer[ipamv1.WatchEvent]) error {
	err := s.allowRead(stream.Context())
	if err == nil {
		err = checkFilter(req.GetNetworkInstance(), req.GetOwner(), nil)
	}
	var sub *Subscription
	if err == nil {
		sub, err = s.hub.Subscribe(req.GetNetworkInstance(), req.GetOwner())
	}
	if err != nil {
		return toStatus(err)
	}
	defer sub.Close()
	// Tell the client the watch is open: headers are the acknowledgement,
	// so a client that lists after receiving them misses nothing.
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	ctx := stream.Context()
	for {
		select {
		case ev := <-sub.Events():
			if err := stream.Send(ev); err != nil {
				return err
			}
		case <-sub.Done():
			return toStatus(sub.Err())
		case <-ctx.Done():
			return toStatus(ctx.Err())
		}
	}
}

// Tree returns a network instance's prefix hierarchy with utilization.
func (s *Service) Tree(ctx context.Context, req *ipamv1.TreeRequest) (*ipamv1.TreeResponse, error) {
	if err := s.allowRead(ctx); err != nil {
		return nil, toStatus(err)
	}
	if req.GetNetworkInstance() == "" {
		return nil, toStatus(invalidRequest("network_instance", "is required"))
	}
	if err := ipam.CheckName("request", ipam.Key{}, "network_instance", req.GetNetworkInstance()); err != nil {
		return nil, toStatus(err)
	}
	var nodes []ipam.TreeNode
	var err error
	if serr := s.a.ReadSettled(func() { nodes, err = s.a.Tree(req.GetNetworkInstance()) }); serr != nil {
		return nil, toStatus(serr)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	max := s.maxTreeBytes
	if max == 0 {
		max = MaxTreeBytes
	}
	resp, ok := treeToProto(nodes, max)
	if !ok {
		return nil, status.Errorf(codes.ResourceExhausted, "network instance %s: its tree of %d prefixes is larger than the %d MiB a Tree answer may hold; list its prefixes with List (network_instance %s), which pages, or browse it in the web view",
			ipam.Quote(req.GetNetworkInstance()), len(nodes), max>>20, ipam.Quote(req.GetNetworkInstance()))
	}
	return resp, nil
}

// MaxTreeBytes bounds the nodes of a Tree answer: 63 MiB, so that the
// answer fits the 64 MiB the fronts accept (grpcopt.MaxMsgSize). It is
// about 100,000 prefixes with the longest names and owners, 800,000 with
// short ones. A larger tree is refused with ResourceExhausted instead of
// being built and sent to a client that would refuse it.
const MaxTreeBytes = grpcopt.MaxMsgSize - 1<<20

// allowWrite refuses, with an error wrapping authz.ErrDenied, a caller
// that may not change owner's objects in each of vrfs ("" entries are
// skipped; with none, the owner alone is checked).
func (s *Service) allowWrite(ctx context.Context, owner string, vrfs ...string) error {
	if s.policy == nil {
		return nil
	}
	vrfs = slices.DeleteFunc(slices.Compact(vrfs), func(v string) bool { return v == "" })
	return s.policy.Write(principalOf(ctx), owner, vrfs)
}

// authorizing returns ctx carrying the policy's decision for the caller
// of ctx: the core asks it, under the mutation's locks and before
// anything is committed, about every network instance each change takes
// from or releases in, wherever the core finds the object (see
// ipam.WithAuthorizer). allowWrite's checks before the call refuse early
// what the request itself names; this one closes what it cannot see: an
// object of the same key living elsewhere, a concurrent change between
// the check and the call. ctx itself without a policy.
func (s *Service) authorizing(ctx context.Context) context.Context {
	if s.policy == nil {
		return ctx
	}
	pr := principalOf(ctx)
	return ipam.WithAuthorizer(ctx, func(owner, networkInstance string) error {
		return s.policy.Write(pr, owner, []string{networkInstance})
	})
}

// allowRead refuses a caller that may not read.
func (s *Service) allowRead(ctx context.Context) error {
	if s.policy == nil {
		return nil
	}
	return s.policy.Read(principalOf(ctx))
}

// prefixVRF, rangeVRF and allocationVRF name the network instance the
// object of key lives in now ("" when it does not exist).
func (s *Service) prefixVRF(key ipam.Key) string {
	if s.policy == nil {
		return ""
	}
	rec, err := s.a.GetPrefix(key)
	if err != nil {
		return ""
	}
	return rec.Prefix.NetworkInstance
}

func (s *Service) rangeVRF(key ipam.Key) string {
	if s.policy == nil {
		return ""
	}
	r, err := s.a.GetRange(key)
	if err != nil {
		return ""
	}
	return r.NetworkInstance
}

func (s *Service) allocationVRF(key ipam.Key) string {
	rec, err := s.a.GetAllocation(key)
	if err != nil {
		return ""
	}
	return rec.Result.NetworkInstance
}

// allocVRF is the network instance an allocation request names.
func allocVRF(r ipam.Allocation) string {
	if r.NetworkInstance != "" {
		return r.NetworkInstance
	}
	return r.Selector[ipam.LabelNetworkInstance]
}

// syncVRFs lists the network instances allowWrite checks before a Sync:
// the ones its objects name and, when it prunes and the caller's grant is
// not for every network instance, the ones the owner holds objects in.
// Objects of the same keys living elsewhere, which the Sync moves, are
// checked by the core (authorizing).
func (s *Service) syncVRFs(ctx context.Context, req ipam.SyncRequest) []string {
	set := map[string]struct{}{}
	for _, ni := range req.NetworkInstances {
		set[ni.Key.Name] = struct{}{}
	}
	for _, p := range req.Prefixes {
		set[p.NetworkInstance] = struct{}{}
	}
	for _, r := range req.Ranges {
		set[r.NetworkInstance] = struct{}{}
	}
	for _, r := range req.Allocations {
		set[allocVRF(r)] = struct{}{}
	}
	if req.Prune && !s.policy.AllNetworkInstances(principalOf(ctx), req.Owner) {
		f := ipam.Filter{Owner: req.Owner}
		for _, ni := range s.a.ListNetworkInstances(f) {
			set[ni.Key.Name] = struct{}{}
		}
		for _, p := range s.a.ListPrefixes(f) {
			set[p.Prefix.NetworkInstance] = struct{}{}
		}
		for _, r := range s.a.ListRanges(f) {
			set[r.NetworkInstance] = struct{}{}
		}
		for _, r := range s.a.ListAllocations(f) {
			set[r.Result.NetworkInstance] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(set))
}
