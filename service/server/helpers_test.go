package server_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// startServer runs a real server (in-memory store unless cfg says
// otherwise) on a loopback port for the test.
func startServer(t testing.TB, cfg server.Config) *servertest.Server {
	t.Helper()
	return servertest.Start(t, cfg, false)
}

func key(name string) *ipamv1.Key {
	return &ipamv1.Key{Owner: "test", Namespace: "default", Name: name}
}

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

// call drops a response, keeping the error.
func call[T any](_ T, err error) error { return err }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantStatus checks an error's code and (unless msg is empty) message.
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
