package server

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
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
}

// fail refuses every IPAM call from now on: the store failed, so memory
// and store may differ until the server restarts from the store.
func (g *callGate) fail(err error) {
	g.failed.Store(status.New(codes.Unavailable, "the store failed ("+err.Error()+"); ipam-server must be restarted"))
}

// refuse returns why an IPAM call cannot be served now, if it cannot.
func (g *callGate) refuse(method string) error {
	if !strings.HasPrefix(method, ipamMethodPrefix) {
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

func (g *callGate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	if err = g.refuse(info.FullMethod); err == nil {
		resp, err = handler(ctx, req)
	}
	g.done(info.FullMethod, err, start)
	return resp, err
}

func (g *callGate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	start := time.Now()
	if err = g.refuse(info.FullMethod); err == nil {
		err = handler(srv, ss)
	}
	g.done(info.FullMethod, err, start)
	return err
}

func (g *callGate) done(method string, err error, start time.Time) {
	code := status.Code(err)
	g.metrics.observe(method, code, start)
	switch code {
	case codes.OK:
	case codes.Internal, codes.Unavailable, codes.Unknown, codes.DataLoss:
		g.log.Error("call failed", "method", method, "code", code.String(), "err", status.Convert(err).Message())
	default:
		g.log.Debug("call refused", "method", method, "code", code.String(), "err", status.Convert(err).Message())
	}
}
