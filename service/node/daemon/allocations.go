package daemon

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamnodev1 "github.com/nephio-project/ipam/api/proto/ipam/node/v1"
	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// Allocations serves ipam.node.v1.NodeAllocations (CNI GC, STATUS and
// CHECK beyond NVIDIA's three calls) over the same Engine as Server.
type Allocations struct {
	ipamnodev1.UnimplementedNodeAllocationsServer
	s *Server
}

// NewAllocations returns the NodeAllocations service of s's engine.
func NewAllocations(s *Server) *Allocations { return &Allocations{s: s} }

// poolTypeOfProto reads a pool type; field names the field.
func poolTypeOfProto(field string, t nodev1.PoolType) (nodeipam.PoolType, error) {
	switch t {
	case nodev1.PoolType_POOL_TYPE_UNSPECIFIED, nodev1.PoolType_POOL_TYPE_IPPOOL:
		return nodeipam.IPPool, nil
	case nodev1.PoolType_POOL_TYPE_CIDRPOOL:
		return nodeipam.CIDRPool, nil
	}
	return "", status.Errorf(codes.InvalidArgument, "%s: %d is not a pool type", field, int32(t))
}

// GarbageCollect is the CNI GC.
func (a *Allocations) GarbageCollect(ctx context.Context, in *ipamnodev1.GarbageCollectRequest) (*ipamnodev1.GarbageCollectResponse, error) {
	start := time.Now()
	t, err := poolTypeOfProto("pool_type", in.GetPoolType())
	if err != nil {
		return nil, a.s.done("GarbageCollect", nil, start, err)
	}
	valid := make([]nodeipam.Attachment, len(in.GetValidAttachments()))
	for i, x := range in.GetValidAttachments() {
		valid[i] = nodeipam.Attachment{ContainerID: x.GetContainerId(), IfName: x.GetIfname()}
	}
	released, err := a.s.engine.GarbageCollect(ctx, t, in.GetPools(), valid)
	out := &ipamnodev1.GarbageCollectResponse{}
	ips := make([]string, 0, len(released))
	for _, h := range released {
		out.Released = append(out.Released, &ipamnodev1.Released{Pool: h.Pool.Name,
			Attachment: &ipamnodev1.Attachment{ContainerId: h.ContainerID, Ifname: h.IfName}, Ip: h.IP.String()})
		ips = append(ips, h.IP.String())
	}
	a.s.metrics.gcReleased(len(released))
	r := &nodeipam.Request{Type: t, Pools: in.GetPools()}
	if err = a.s.done("GarbageCollect", r, start, err, "valid", len(valid), "released", ips); err != nil {
		return nil, err
	}
	return out, nil
}

// PoolStatus is the CNI STATUS.
func (a *Allocations) PoolStatus(_ context.Context, in *ipamnodev1.PoolStatusRequest) (*ipamnodev1.PoolStatusResponse, error) {
	start := time.Now()
	t, err := poolTypeOfProto("pool_type", in.GetPoolType())
	if err != nil {
		return nil, a.s.done("PoolStatus", nil, start, err)
	}
	states, err := a.s.engine.PoolStatus(t, in.GetPools())
	if err = a.s.done("PoolStatus", &nodeipam.Request{Type: t, Pools: in.GetPools()}, start, err); err != nil {
		return nil, err
	}
	out := &ipamnodev1.PoolStatusResponse{}
	for i, st := range states {
		out.Pools = append(out.Pools, &ipamnodev1.PoolState{Pool: in.GetPools()[i], Ready: st.Ready, Reason: st.Reason})
	}
	return out, nil
}

// Check is the CNI CHECK.
func (a *Allocations) Check(ctx context.Context, in *ipamnodev1.CheckRequest) (*ipamnodev1.CheckResponse, error) {
	start := time.Now()
	r, err := requestOf(in.GetParameters())
	if err == nil {
		err = a.s.engine.Check(ctx, r)
	}
	if err = a.s.done("Check", r, start, err); err != nil {
		return nil, err
	}
	return &ipamnodev1.CheckResponse{}, nil
}
