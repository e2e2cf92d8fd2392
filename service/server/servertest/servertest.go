// Package servertest runs a real ipam-server (server.Run) on a loopback
// port for tests of the server and of its clients, and makes TLS
// certificates for them.
package servertest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/grpcopt"
	"github.com/nephio-project/ipam/service/server"
)

// Server is a running server.Run on 127.0.0.1.
type Server struct {
	// Addr is the gRPC address (host:port).
	Addr string
	// MetricsAddr is the metrics address when Start was asked for one.
	MetricsAddr string

	cancel context.CancelFunc
	done   chan error
	err    error
	ended  bool
}

// Start runs server.Run with cfg on a loopback port (an in-memory store
// unless cfg names one; metrics on a loopback port too when metrics is
// true), waits until it reports SERVING, and stops it when the test ends,
// failing the test if Run failed.
func Start(t testing.TB, cfg server.Config, metrics bool) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = lis
	s := &Server{Addr: lis.Addr().String(), done: make(chan error, 1)}
	if metrics {
		ml, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.MetricsListener = ml
		s.MetricsAddr = ml.Addr().String()
	}
	if cfg.Store == "" {
		cfg.Store = "memory"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- server.Run(ctx, cfg) }()
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("server.Run: %v", err)
		}
	})
	if cfg.TLSCert == "" {
		// (A TLS server is checked by the test's own Dial.)
		s.Dial(t)
	}
	return s
}

// Stop cancels Run, waits for it to return and returns its error.
func (s *Server) Stop() error {
	s.cancel()
	if s.ended {
		return s.err
	}
	select {
	case s.err = <-s.done:
	case <-time.After(60 * time.Second):
		s.err = errors.New("server did not stop within 60s")
	}
	s.ended = true
	return s.err
}

// Dial connects to the server with the clients' transport options
// (grpcopt.DialOptions), plaintext unless opts say otherwise, waits until
// its health service reports SERVING and closes the connection when the
// test ends.
func (s *Server) Dial(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(s.Addr, append(grpcopt.DialOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := WaitServing(conn, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return conn
}

// Client dials the server and returns an IPAM client.
func (s *Server) Client(t testing.TB) ipamv1.IPAMClient {
	t.Helper()
	return ipamv1.NewIPAMClient(s.Dial(t))
}

// WaitServing polls the health service of conn until it reports SERVING.
func WaitServing(conn *grpc.ClientConn, timeout time.Duration) error {
	return WaitServingOrExit(conn, timeout, nil)
}

// ErrExited is WaitServingOrExit's error when the server's process exits.
var ErrExited = errors.New("the server's process exited")

// WaitServingOrExit is WaitServing for a server in a process the test
// started: it gives up at once with ErrExited when exited is closed (a
// nil exited never is).
func WaitServingOrExit(conn *grpc.ClientConn, timeout time.Duration, exited <-chan struct{}) error {
	ctx, cancel := context.WithCancel(context.Background()) // cancelled when the process exits
	defer cancel()
	if exited != nil {
		go func() {
			select {
			case <-exited:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(timeout)
	for {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(actx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		acancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if ctx.Err() != nil {
			return ErrExited
		}
		if time.Now().After(deadline) {
			return errors.Join(errors.New("server not SERVING: "+resp.GetStatus().String()), err)
		}
		select {
		case <-ctx.Done():
			return ErrExited
		case <-time.After(10 * time.Millisecond):
		}
	}
}
