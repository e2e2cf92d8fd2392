package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
)

// testServer is a real ipam-server (server.Run) on a loopback port.
type testServer struct {
	addr   string
	cfg    server.Config
	cancel context.CancelFunc
	done   chan error
}

// startServer runs server.Run on 127.0.0.1:0 with cfg (an in-memory store
// unless cfg says otherwise) and stops it when the test ends.
func startServer(t testing.TB, cfg server.Config) *testServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = lis
	if cfg.Store == "" {
		cfg.Store = "memory"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{addr: lis.Addr().String(), cfg: cfg, cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- server.Run(ctx, cfg) }()
	t.Cleanup(func() {
		if err := ts.stop(); err != nil {
			t.Errorf("server.Run: %v", err)
		}
	})
	return ts
}

// stop cancels Run and returns its error (once; later calls return nil).
func (ts *testServer) stop() error {
	ts.cancel()
	select {
	case err, ok := <-ts.done:
		if ok {
			close(ts.done)
		}
		return err
	case <-time.After(30 * time.Second):
		return errors.New("server did not stop")
	}
}

// dial connects to ts and waits until it reports SERVING.
func (ts *testServer) dial(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(ts.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	waitServing(t, conn)
	return conn
}

// client dials ts and returns an IPAM client.
func (ts *testServer) client(t testing.TB) ipamv1.IPAMClient {
	return ipamv1.NewIPAMClient(ts.dial(t))
}

func waitServing(t testing.TB, conn *grpc.ClientConn) {
	t.Helper()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not SERVING: %v %v", resp.GetStatus(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func key(name string) *ipamv1.Key { return &ipamv1.Key{Owner: "test", Namespace: "default", Name: name} }

// seed creates the README's example: VRF vpc-1, aggregate 10.0.0.0/8 and
// network net1 10.0.1.0/24 with gateway 10.0.1.1.
func seed(t testing.TB, c ipamv1.IPAMClient) {
	t.Helper()
	ctx := context.Background()
	must(t, call(c.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{Key: key("vpc-1")}})))
	must(t, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("aggregate0"), NetworkInstance: "vpc-1",
		Kind: "aggregate", Prefix: "10.0.0.0/8"}})))
	must(t, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("net1-prefix1"), NetworkInstance: "vpc-1",
		Prefix: "10.0.1.1/24", Network: "net1", Labels: map[string]string{"nephio.org/gateway": "true"}}})))
}

func call[T any](_ T, err error) error { return err }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantStatus checks an error's code and message.
func wantStatus(t testing.TB, err error, code codes.Code, msg string) *status.Status {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a gRPC status", err)
	}
	if st.Code() != code || (msg != "" && st.Message() != msg) {
		t.Fatalf("got %s %q, want %s %q", st.Code(), st.Message(), code, msg)
	}
	return st
}

// syncFailure returns the SyncFailure detail of a status.
func syncFailure(t testing.TB, st *status.Status) *ipamv1.SyncFailure {
	t.Helper()
	for _, d := range st.Details() {
		if f, ok := d.(*ipamv1.SyncFailure); ok {
			return f
		}
	}
	t.Fatalf("status %s %q has no SyncFailure detail (details: %v)", st.Code(), st.Message(), st.Details())
	return nil
}
