package etcd_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// relayPolicy writes a policy under which the token "admin-token" may do
// everything and the token "ci-token" may change owner ci in vpc-1 only;
// anonymous callers may do nothing.
func relayPolicy(t *testing.T) string {
	t.Helper()
	sum := func(tok string) string { s := sha256.Sum256([]byte(tok)); return hex.EncodeToString(s[:]) }
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(`apiVersion: ipam.nephio.org/v1alpha1
kind: AuthorizationPolicy
tokens:
- identity: admin
  sha256: `+sum("admin-token")+`
- identity: ci
  sha256: `+sum("ci-token")+`
rules:
- identities: [token:admin]
  owners: ["*"]
  networkInstances: ["*"]
  write: true
  read: true
- identities: [token:ci]
  owners: [ci]
  networkInstances: [vpc-1]
  write: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// as returns ctx carrying the authorization header of token (none when
// empty).
func as(ctx context.Context, token ...string) context.Context {
	for _, tok := range token {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	return ctx
}

// TestRelayAuthorizesEachCall: two replicas with an authorization policy;
// the one without the write lead relays its clients' changes to the
// leader, which authenticates and authorizes each relayed call from the
// credentials it carries: every call gets the answer (and code) it gets
// from the leader directly (a caller the follower cannot authenticate is
// refused there). A request too large for the relay (64 KiB) goes as its
// own unary call.
func TestRelayAuthorizesEachCall(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	cfg := server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: "/relay/", AuthzPolicy: relayPolicy(t)}
	first := servertest.Start(t, cfg, true)
	waitLeads(t, cli, "/relay/", first.Addr)
	second := servertest.Start(t, cfg, true)
	leader, follower := first.Client(t), second.Client(t)
	ctx := context.Background()
	if _, err := leader.CreateNetworkInstance(as(ctx, "admin-token"), &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{Key: key("vpc-1")}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*ipamv1.Prefix{{Key: key("aggregate"), NetworkInstance: "vpc-1", Kind: "aggregate", Prefix: "10.0.0.0/8"},
		{Key: key("net20"), NetworkInstance: "vpc-1", Prefix: "10.0.0.0/20", Network: "net20"}} {
		if _, err := leader.CreatePrefix(as(ctx, "admin-token"), &ipamv1.CreatePrefixRequest{Prefix: p}); err != nil {
			t.Fatal(err)
		}
	}
	alloc := func(owner, name string) *ipamv1.AllocateRequest {
		return &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: &ipamv1.Key{Owner: owner, Namespace: "default", Name: name}, Selector: net20}}
	}
	for _, tc := range []struct {
		name   string
		tokens []string
		owner  string
		want   codes.Code
	}{
		{"allowed", []string{"ci-token"}, "ci", codes.OK},
		{"other owner", []string{"ci-token"}, "team-b", codes.PermissionDenied},
		{"anonymous", nil, "ci", codes.PermissionDenied},
		{"unknown token", []string{"forged"}, "ci", codes.Unauthenticated}, // refused by the follower itself
	} {
		t.Run(tc.name, func(t *testing.T) {
			relayed, rerr := follower.Allocate(as(ctx, tc.tokens...), alloc(tc.owner, "r-"+tc.name))
			direct, derr := leader.Allocate(as(ctx, tc.tokens...), alloc(tc.owner, "d-"+tc.name))
			if status.Code(rerr) != tc.want || status.Code(derr) != tc.want {
				t.Fatalf("relayed: %v, direct: %v; want %v for both", rerr, derr, tc.want)
			}
			if rerr != nil && status.Convert(rerr).Message() != status.Convert(derr).Message() {
				t.Errorf("relayed message %q, direct %q", status.Convert(rerr).Message(), status.Convert(derr).Message())
			}
			if tc.want == codes.OK && relayed.GetResult().GetPrefix() == direct.GetResult().GetPrefix() {
				t.Errorf("relayed and direct allocations both got %s", relayed.GetResult().GetPrefix())
			}
		})
	}
	// A request too large for the relay goes as its own unary call.
	big := &ipamv1.SyncRequest{Owner: "ci"}
	for i := range 1500 {
		big.Allocations = append(big.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: fmt.Sprintf("big-%04d", i)}, Selector: net20})
	}
	if n := proto.Size(big); n <= 64<<10 {
		t.Fatalf("the large Sync is only %d bytes", n)
	}
	resp, err := follower.Sync(as(ctx, "ci-token"), big)
	if err != nil || len(resp.GetAllocations()) != 1500 {
		t.Fatalf("large Sync through the follower: %d results, %v", len(resp.GetAllocations()), err)
	}
	if n := forwards(t, second.MetricsAddr, "forwarded"); n != 4 {
		t.Errorf("the follower forwarded %v calls, want 4", n)
	}
	if n := forwards(t, second.MetricsAddr, "committed_here"); n != 0 {
		t.Errorf("the follower made %v calls itself, want 0", n)
	}
}

// TestRelayRefusesWhatIsNotARelayedCall: a client that calls
// Replica.Forward on the leader itself gains nothing over calling IPAM:
// a method that is not one of IPAM's changes, a request that does not
// decode and a call without credentials are each answered with an error
// (the last as the direct call is), a call stating its caller's
// certificate names is refused (without mTLS nobody may state them), and
// a message with more than 1,024 calls ends the stream with
// InvalidArgument.
func TestRelayRefusesWhatIsNotARelayedCall(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	leader := servertest.Start(t, server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: "/hostile/", AuthzPolicy: relayPolicy(t)}, false)
	waitLeads(t, cli, "/hostile/", leader.Addr)
	rc := ipamv1.NewReplicaClient(leader.Dial(t))
	stream, err := rc.Forward(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	req, err := proto.Marshal(&ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{Key: key("vpc-9")}})
	if err != nil {
		t.Fatal(err)
	}
	calls := []*ipamv1.ForwardedCall{
		{Id: 1, Method: ipamv1.IPAM_Get_FullMethodName, Request: req},
		{Id: 2, Method: "/grpc.health.v1.Health/Check"},
		{Id: 3, Method: ipamv1.IPAM_CreateNetworkInstance_FullMethodName, Request: []byte{0xff, 0xff, 0xff}, Authorization: "Bearer admin-token"},
		{Id: 4, Method: ipamv1.IPAM_CreateNetworkInstance_FullMethodName, Request: req},
		{Id: 5, Method: ipamv1.IPAM_CreateNetworkInstance_FullMethodName, Request: req, Authorization: "Bearer admin-token"},
		{Id: 6, Method: ipamv1.IPAM_CreateNetworkInstance_FullMethodName, Request: req, Authorization: "Bearer admin-token", CallerNames: []string{"cn:ipamctl"}},
	}
	want := map[uint64]codes.Code{1: codes.InvalidArgument, 2: codes.InvalidArgument, 3: codes.InvalidArgument, 4: codes.PermissionDenied, 5: codes.OK, 6: codes.PermissionDenied}
	if err := stream.Send(&ipamv1.ForwardRequest{Calls: calls}); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]*ipamv1.ForwardedAnswer{}
	for len(got) < len(calls) {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range resp.GetAnswers() {
			got[a.GetId()] = a
		}
	}
	for id, code := range want {
		if a := got[id]; codes.Code(a.GetCode()) != code {
			t.Errorf("call %d: answered %v %q, want %v", id, codes.Code(a.GetCode()), a.GetMessage(), code)
		}
	}
	_, direct := leader.Client(t).CreateNetworkInstance(context.Background(), &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{Key: key("vpc-9")}})
	if msg := got[4].GetMessage(); msg != status.Convert(direct).Message() {
		t.Errorf("relayed anonymous call answered %q, the direct one %q", msg, status.Convert(direct).Message())
	}

	many := make([]*ipamv1.ForwardedCall, 1025)
	for i := range many {
		many[i] = &ipamv1.ForwardedCall{Id: uint64(100 + i), Method: ipamv1.IPAM_Release_FullMethodName}
	}
	if err := stream.Send(&ipamv1.ForwardRequest{Calls: many}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := stream.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a message of 1,025 calls ended the stream with %v, want InvalidArgument", err)
		}
		break
	}
	resp, err := leader.Client(t).Get(as(context.Background(), "admin-token"), &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE, Key: key("vpc-9")})
	if err != nil || resp.GetObject() == nil {
		t.Errorf("vpc-9, made by the one authorized relayed call: %v %v", resp, err)
	}
}

// TestRelayEndsWhenTheLeaderStops: a leader that stops gracefully ends
// the relay streams of the other replicas instead of waiting for them
// (its shutdown does not run into the timeout), and the follower's
// clients go on: it commits their changes itself until it holds the lead.
func TestRelayEndsWhenTheLeaderStops(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	logs := &servertest.LogBuffer{}
	cfg := server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: "/stop/", ShutdownTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	first := servertest.Start(t, cfg, false)
	waitLeads(t, cli, "/stop/", first.Addr)
	cfg.Logger = nil
	second := servertest.Start(t, cfg, true)
	follower := second.Client(t)
	seed20(t, first.Client(t), "10.0.0.0/20")
	ctx := context.Background()
	for i := range 10 {
		if _, err := follower.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(fmt.Sprint("before-", i)), Selector: net20}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := forwards(t, second.MetricsAddr, "forwarded"); n != 10 {
		t.Fatalf("the follower forwarded %v calls, want 10", n)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- first.Stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not stop: it waits for the follower's relay stream")
	}
	if logs.Count("did not finish in time") > 0 {
		t.Error("the leader's shutdown ran into its timeout")
	}
	for i := range 10 {
		if _, err := follower.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(fmt.Sprint("after-", i)), Selector: net20}}); err != nil {
			t.Fatalf("allocating through the follower once the leader stopped: %v", err)
		}
	}
}

// TestFollowerReadsItsOwnForwardedChanges: a replica without the write
// lead forwards its clients' changes to the leader and answers them once
// it has applied the leader's commit itself, so that a client reading
// from the replica it wrote to sees its change at once (ipamctl's
// "alloc create" reads the allocation back after making it), for
// relayed calls and for a Sync too large for the relay alike.
func TestFollowerReadsItsOwnForwardedChanges(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	cfg := server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: "/ryw/"}
	first := servertest.Start(t, cfg, true)
	waitLeads(t, cli, "/ryw/", first.Addr)
	second := servertest.Start(t, cfg, true)
	leader, follower := first.Client(t), second.Client(t)
	ctx := context.Background()
	if _, err := leader.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{Key: key("vpc-1")}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*ipamv1.Prefix{{Key: key("aggregate"), NetworkInstance: "vpc-1", Kind: "aggregate", Prefix: "10.0.0.0/8"},
		{Key: key("net20"), NetworkInstance: "vpc-1", Prefix: "10.0.0.0/20", Network: "net20"}} {
		if _, err := leader.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: p}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) error {
		_, err := follower.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: &ipamv1.Key{Owner: "ci", Namespace: "default", Name: name}})
		return err
	}
	for i := range 100 {
		name := fmt.Sprintf("a%03d", i)
		if _, err := follower.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: &ipamv1.Key{Owner: "ci", Namespace: "default", Name: name}, Selector: net20}}); err != nil {
			t.Fatal(err)
		}
		if err := get(name); err != nil {
			t.Fatalf("allocation %s, just made through the follower, read there: %v", name, err)
		}
	}
	big := &ipamv1.SyncRequest{Owner: "ci"}
	for i := range 1500 {
		big.Allocations = append(big.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: fmt.Sprintf("big-%04d", i)}, Selector: net20})
	}
	if n := proto.Size(big); n <= 64<<10 {
		t.Fatalf("the large Sync is only %d bytes", n)
	}
	if _, err := follower.Sync(ctx, big); err != nil {
		t.Fatal(err)
	}
	if err := get("big-1499"); err != nil {
		t.Fatalf("the last allocation of a large Sync made through the follower, read there: %v", err)
	}
	if n := forwards(t, second.MetricsAddr, "forwarded"); n != 101 {
		t.Errorf("the follower forwarded %v calls, want 101", n)
	}
}
