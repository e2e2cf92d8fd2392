package daemon

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
	"github.com/nephio-project/ipam/service/grpcdecode"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// Limits of the node API's server.
const (
	// MaxRequestBytes caps a request: two pool names, ids and metadata
	// take well under 2 KiB; a GarbageCollect's valid attachments (at most
	// nodeipam.MaxAttachments, about 80 bytes each) take the most.
	MaxRequestBytes = 1 << 20
	// MaxConcurrentCalls bounds the calls served at once; more wait.
	MaxConcurrentCalls = 256
	// maxMessage caps an error message.
	maxMessage = 1024
)

// Server serves nvidia.ipam.node.v1.IPAMService over an Engine.
type Server struct {
	nodev1.UnimplementedIPAMServiceServer
	engine  *nodeipam.Engine
	log     logr.Logger
	metrics *Metrics
}

// NewServer returns the node API over e; m may be nil.
func NewServer(e *nodeipam.Engine, log logr.Logger, m *Metrics) *Server {
	return &Server{engine: e, log: log, metrics: m}
}

// ServerOptions are the gRPC options of the node API: a request that does
// not decode answered InvalidArgument naming the field (grpcdecode), the
// request size cap and the bound on concurrent calls.
func ServerOptions() []grpc.ServerOption {
	sem := make(chan struct{}, MaxConcurrentCalls)
	return append(grpcdecode.ServerOptions(),
		grpc.MaxRecvMsgSize(MaxRequestBytes),
		grpc.MaxConcurrentStreams(MaxConcurrentCalls),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			defer func() { <-sem }()
			return h(ctx, req)
		}),
	)
}

// requestOf reads the parameters of a call.
func requestOf(p *nodev1.IPAMParameters) (*nodeipam.Request, error) {
	if p == nil {
		return nil, status.Error(codes.InvalidArgument, "parameters: required")
	}
	r := &nodeipam.Request{Pools: p.GetPools(), ContainerID: p.GetCniContainerid(), IfName: p.GetCniIfname(), RequestedIPs: p.GetRequestedIps()}
	switch p.GetPoolType() {
	case nodev1.PoolType_POOL_TYPE_UNSPECIFIED, nodev1.PoolType_POOL_TYPE_IPPOOL:
		r.Type = nodeipam.IPPool
	case nodev1.PoolType_POOL_TYPE_CIDRPOOL:
		r.Type = nodeipam.CIDRPool
	default:
		return nil, status.Errorf(codes.InvalidArgument, "parameters.pool_type: %d is not a pool type", int32(p.GetPoolType()))
	}
	if m := p.GetMetadata(); m != nil {
		r.Pod = nodeipam.Pod{Name: m.GetK8SPodName(), Namespace: m.GetK8SPodNamespace(), UID: m.GetK8SPodUid(), DeviceID: m.GetDeviceId()}
	}
	if f := p.GetFeatures(); f != nil {
		r.AllocateDefaultGateway = f.GetAllocateDefaultGateway()
		if f.AllocateIpWithIndex != nil {
			i := f.GetAllocateIpWithIndex()
			r.IPWithIndex = &i
		}
	}
	return r, nil
}

func poolTypeOf(t nodeipam.PoolType) nodev1.PoolType {
	if t == nodeipam.CIDRPool {
		return nodev1.PoolType_POOL_TYPE_CIDRPOOL
	}
	return nodev1.PoolType_POOL_TYPE_IPPOOL
}

// statusOf maps an engine error once to its gRPC status, the message
// capped.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	c := codes.Internal
	switch {
	case errors.Is(err, context.Canceled):
		c = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		c = codes.DeadlineExceeded
	case errors.Is(err, ipam.ErrInvalid):
		c = codes.InvalidArgument
	case errors.Is(err, ipam.ErrNotFound):
		c = codes.NotFound
	case errors.Is(err, ipam.ErrConflict), errors.Is(err, ipam.ErrInUse):
		c = codes.AlreadyExists
	case errors.Is(err, ipam.ErrExhausted):
		c = codes.ResourceExhausted
	case errors.Is(err, ipam.ErrUnavailable):
		c = codes.Unavailable
	case errors.Is(err, nodeipam.ErrOutsideBlock):
		c = codes.FailedPrecondition
	}
	msg := err.Error()
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "..."
	}
	return status.Error(c, msg)
}

// done logs a call at V(1) and observes its latency.
func (s *Server) done(method string, r *nodeipam.Request, start time.Time, err error, kv ...any) error {
	err = statusOf(err)
	code := status.Code(err)
	s.metrics.observeCall(method, code, time.Since(start))
	if !s.log.V(1).Enabled() {
		return err
	}
	if r != nil {
		kv = append(kv, "pools", r.Pools, "type", r.Type, "container", r.ContainerID, "ifname", r.IfName,
			"pod", r.Pod.Namespace+"/"+r.Pod.Name)
	}
	kv = append(kv, "code", code.String(), "duration", time.Since(start))
	if err != nil {
		kv = append(kv, "error", err.Error())
	}
	s.log.V(1).Info(method, kv...)
	return err
}

// Allocate is the CNI ADD.
func (s *Server) Allocate(ctx context.Context, in *nodev1.AllocateRequest) (*nodev1.AllocateResponse, error) {
	start := time.Now()
	r, err := requestOf(in.GetParameters())
	if err != nil {
		return nil, s.done("Allocate", nil, start, err)
	}
	res, err := s.engine.Allocate(ctx, r)
	if err != nil {
		return nil, s.done("Allocate", r, start, err)
	}
	out := &nodev1.AllocateResponse{}
	var ips []string
	for _, x := range res {
		a := &nodev1.AllocationInfo{Pool: x.Pool, Ip: x.IP.String(), PoolType: poolTypeOf(x.Type)}
		if x.Gateway.IsValid() {
			a.Gateway = x.Gateway.String()
			for _, rt := range x.Routes {
				a.Routes = append(a.Routes, &nodev1.Route{Dest: rt.String()})
			}
		}
		ips = append(ips, a.Ip)
		out.Allocations = append(out.Allocations, a)
	}
	return out, s.done("Allocate", r, start, nil, "result", ips)
}

// IsAllocated is the CNI CHECK.
func (s *Server) IsAllocated(ctx context.Context, in *nodev1.IsAllocatedRequest) (*nodev1.IsAllocatedResponse, error) {
	start := time.Now()
	r, err := requestOf(in.GetParameters())
	if err == nil {
		err = s.engine.IsAllocated(ctx, r)
	}
	if err = s.done("IsAllocated", r, start, err); err != nil {
		return nil, err
	}
	return &nodev1.IsAllocatedResponse{}, nil
}

// Deallocate is the CNI DEL.
func (s *Server) Deallocate(ctx context.Context, in *nodev1.DeallocateRequest) (*nodev1.DeallocateResponse, error) {
	start := time.Now()
	r, err := requestOf(in.GetParameters())
	if err == nil {
		err = s.engine.Deallocate(ctx, r)
	}
	if err = s.done("Deallocate", r, start, err); err != nil {
		return nil, err
	}
	return &nodev1.DeallocateResponse{}, nil
}
