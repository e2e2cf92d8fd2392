package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
)

// Service is the ipam.v1.IPAM gRPC service over an allocator. Every error
// it returns is a gRPC status made by toStatus.
type Service struct {
	ipamv1.UnimplementedIPAMServer

	a       *ipam.Allocator
	hub     *Hub
	metrics *Metrics // may be nil
}

// NewService returns the service over a; hub feeds Watch (it must be a's
// journal) and metrics, when not nil, counts Sync items.
func NewService(a *ipam.Allocator, hub *Hub, metrics *Metrics) *Service {
	return &Service{a: a, hub: hub, metrics: metrics}
}

var _ ipamv1.IPAMServer = (*Service)(nil)

// CreateNetworkInstance creates or updates a network instance.
func (s *Service) CreateNetworkInstance(_ context.Context, req *ipamv1.CreateNetworkInstanceRequest) (*ipamv1.CreateNetworkInstanceResponse, error) {
	if req.GetNetworkInstance() == nil {
		return nil, toStatus(invalidRequest("network_instance", "is required"))
	}
	ni, err := networkInstanceFromProto(req.GetNetworkInstance())
	if err == nil {
		err = checkName(ipam.ObjNetworkInstance, ni.Key)
	}
	if err == nil {
		err = s.a.CreateNetworkInstance(ni)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.CreateNetworkInstanceResponse{}, nil
}

// DeleteNetworkInstance deletes an empty network instance.
func (s *Service) DeleteNetworkInstance(_ context.Context, req *ipamv1.DeleteRequest) (*ipamv1.DeleteResponse, error) {
	return s.delete(req, ipam.ObjNetworkInstance, s.a.DeleteNetworkInstance)
}

// CreatePrefix creates or updates an IPPrefix.
func (s *Service) CreatePrefix(_ context.Context, req *ipamv1.CreatePrefixRequest) (*ipamv1.CreatePrefixResponse, error) {
	if req.GetPrefix() == nil {
		return nil, toStatus(invalidRequest("prefix", "is required"))
	}
	p, err := prefixFromProto(req.GetPrefix())
	if err == nil {
		err = checkName(ipam.ObjPrefix, p.Key)
	}
	var res ipam.Result
	if err == nil {
		res, err = s.a.CreatePrefix(p)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.CreatePrefixResponse{Result: resultToProto(res)}, nil
}

// DeletePrefix deletes an IPPrefix with no children or allocations.
func (s *Service) DeletePrefix(_ context.Context, req *ipamv1.DeleteRequest) (*ipamv1.DeleteResponse, error) {
	return s.delete(req, ipam.ObjPrefix, s.a.DeletePrefix)
}

// CreateRange creates or replaces an IP range.
func (s *Service) CreateRange(_ context.Context, req *ipamv1.CreateRangeRequest) (*ipamv1.CreateRangeResponse, error) {
	if req.GetRange() == nil {
		return nil, toStatus(invalidRequest("range", "is required"))
	}
	r, err := rangeFromProto(req.GetRange())
	if err == nil {
		err = checkName(ipam.ObjRange, r.Key)
	}
	if err == nil {
		err = s.a.CreateRange(r)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.CreateRangeResponse{}, nil
}

// DeleteRange deletes an IP range with no allocations.
func (s *Service) DeleteRange(_ context.Context, req *ipamv1.DeleteRequest) (*ipamv1.DeleteResponse, error) {
	return s.delete(req, ipam.ObjRange, s.a.DeleteRange)
}

// Allocate allocates an address, a block or a sub-prefix.
func (s *Service) Allocate(_ context.Context, req *ipamv1.AllocateRequest) (*ipamv1.AllocateResponse, error) {
	if req.GetAllocation() == nil {
		return nil, toStatus(invalidRequest("allocation", "is required"))
	}
	r, err := allocationFromProto(req.GetAllocation())
	if err == nil {
		err = checkName(ipam.ObjAllocation, r.Key)
	}
	var res ipam.Result
	if err == nil {
		res, err = s.a.Allocate(r)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.AllocateResponse{Result: resultToProto(res)}, nil
}

// Release releases an allocation.
func (s *Service) Release(_ context.Context, req *ipamv1.DeleteRequest) (*ipamv1.DeleteResponse, error) {
	return s.delete(req, ipam.ObjAllocation, s.a.Release)
}

func (s *Service) delete(req *ipamv1.DeleteRequest, obj string, del func(ipam.Key) error) (*ipamv1.DeleteResponse, error) {
	key := keyFromProto(req.GetKey())
	err := checkName(obj, key)
	if err == nil {
		err = del(key)
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
func (s *Service) Get(_ context.Context, req *ipamv1.GetRequest) (*ipamv1.GetResponse, error) {
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
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.GetResponse{Object: obj}, nil
}

// List returns objects of one kind, filtered and paged.
func (s *Service) List(_ context.Context, req *ipamv1.ListRequest) (*ipamv1.ListResponse, error) {
	resp, err := s.list(req)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// Sync applies the whole desired set of one owner atomically.
func (s *Service) Sync(_ context.Context, req *ipamv1.SyncRequest) (*ipamv1.SyncResponse, error) {
	n := len(req.GetNetworkInstances()) + len(req.GetPrefixes()) + len(req.GetRanges()) + len(req.GetAllocations())
	if s.metrics != nil {
		s.metrics.syncItems.Add(float64(n))
	}
	err := ipam.CheckName("Sync", ipam.Key{}, "owner", req.GetOwner())
	switch {
	case err != nil:
	case req.GetOwner() == "":
		err = invalidRequest("owner", "an owner is required (the kpt package or controller that declares the objects)")
	case n > ipam.MaxSyncItems:
		err = &ipam.Error{Object: "Sync", Key: ipam.Key{Name: req.GetOwner()}, Err: ipam.ErrInvalid,
			Msg: fmt.Sprintf("%d objects exceed the limit of %d per request", n, ipam.MaxSyncItems)}
	}
	var sreq ipam.SyncRequest
	if err == nil {
		sreq, err = syncRequestFromProto(req)
	}
	var res ipam.SyncResult
	if err == nil {
		res, err = s.a.Sync(sreq)
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
	err := checkFilter(req.GetNetworkInstance(), req.GetOwner(), nil)
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
func (s *Service) Tree(_ context.Context, req *ipamv1.TreeRequest) (*ipamv1.TreeResponse, error) {
	if req.GetNetworkInstance() == "" {
		return nil, toStatus(invalidRequest("network_instance", "is required"))
	}
	if err := ipam.CheckName("request", ipam.Key{}, "network_instance", req.GetNetworkInstance()); err != nil {
		return nil, toStatus(err)
	}
	nodes, err := s.a.Tree(req.GetNetworkInstance())
	if err != nil {
		return nil, toStatus(err)
	}
	return treeToProto(nodes), nil
}
