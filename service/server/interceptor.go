package server

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	resourcepb "github.com/nephio-project/ipam/api/proto/resource"
)

// callGate wraps every call in one interceptor: it refuses IPAM calls with
// Unavailable until the state is restored and after the store failed,
// observes the call's latency and logs failures (client errors at debug
// level, server-side failures as errors).
type callGate struct {
	ready   atomic.Bool
	failed  atomic.Pointer[status.Status] // set when the store failed
	metrics *Metrics
	log     *slog.Logger
	methods sync.Map // full method name → *gatedMethod; only registered methods reach the gate
}

// gatedMethod is what the gate works out once per method rather than on
// every call.
type gatedMethod struct {
	ipam    bool // an IPAM method, refused until ready and after a store failure
	latency *rpcLatency
}

// method returns what the gate knows of the method of that full name.
func (g *callGate) method(fullMethod string) *gatedMethod {
	if m, ok := g.methods.Load(fullMethod); ok {
		return m.(*gatedMethod)
	}
	m, _ := g.methods.LoadOrStore(fullMethod, &gatedMethod{
		ipam:    strings.HasPrefix(fullMethod, ipamMethodPrefix) || strings.HasPrefix(fullMethod, resourceMethodPrefix),
		latency: g.metrics.rpcLatency(fullMethod),
	})
	return m.(*gatedMethod)
}

// fail refuses every IPAM call from now on: the store failed, so memory
// and store may differ until the server restarts from the store.
func (g *callGate) fail(err error) {
	g.failed.Store(status.New(codes.Unavailable, "the store failed ("+err.Error()+"); ipam-server must be restarted"))
}

// refuse returns why a call of m cannot be served now, if it cannot.
func (g *callGate) refuse(m *gatedMethod) error {
	if !m.ipam {
		return nil
	}
	if st := g.failed.Load(); st != nil {
		return st.Err()
	}
	if !g.ready.Load() {
		return errNotReady
	}
	return nil
}

// errNotReady answers IPAM calls while the state is being restored.
var errNotReady = status.Error(codes.Unavailable, "ipam-server is restoring its state; retry shortly")

var ipamMethodPrefix = "/" + ipamv1.IPAM_ServiceDesc.ServiceName + "/"

// resourceMethodPrefix starts the methods of Nephio's resource API, which
// are IPAM calls too.
var resourceMethodPrefix = "/" + resourcepb.Resource_ServiceDesc.ServiceName + "/"

func (g *callGate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	m := g.method(info.FullMethod)
	if err = g.refuse(m); err == nil {
		resp, err = handler(ctx, req)
	}
	g.done(m, info.FullMethod, err, start)
	return resp, err
}

func (g *callGate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	start := time.Now()
	m := g.method(info.FullMethod)
	if err = g.refuse(m); err == nil {
		err = handler(srv, ss)
	}
	g.done(m, info.FullMethod, err, start)
	return err
}

func (g *callGate) done(m *gatedMethod, fullMethod string, err error, start time.Time) {
	code := status.Code(err)
	m.latency.observe(code, time.Since(start))
	switch code {
	case codes.OK:
	case codes.Internal, codes.Unavailable, codes.Unknown, codes.DataLoss:
		g.log.Error("call failed", "method", fullMethod, "code", code.String(), "err", status.Convert(err).Message())
	default:
		if g.log.Enabled(context.Background(), slog.LevelDebug) {
			g.log.Debug("call refused", "method", fullMethod, "code", code.String(), "err", status.Convert(err).Message())
		}
	}
}
