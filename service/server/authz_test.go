package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/client"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// authzSetup is a server with mTLS and a policy: the admin certificate
// (cn:ipamctl) may do everything; team-a (a SPIFFE id) may change owners
// team-a-* in vpc-1 and read; the token of "ci" may change owner ci in
// vpc-1 only and not read; extra rules, when given, follow those.
type authzSetup struct {
	ts    *servertest.Server
	certs servertest.Certs
	dir   string
	token string
}

func startAuthz(t *testing.T, extra ...string) authzSetup {
	t.Helper()
	return startAuthzWith(t, server.Config{}, extra...)
}

// startAuthzWith is startAuthz with cfg's other settings.
func startAuthzWith(t *testing.T, cfg server.Config, extra ...string) authzSetup {
	t.Helper()
	dir := t.TempDir()
	certs := servertest.WriteCerts(t, dir)
	token := filepath.Join(dir, "ci.token")
	if err := os.WriteFile(token, []byte("ci-secret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("ci-secret-token"))
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: ipam.nephio.org/v1alpha1
kind: AuthorizationPolicy
tokens:
- identity: ci
  sha256: `+hex.EncodeToString(sum[:])+`
rules:
- identities: [cn:ipamctl]
  owners: ["*"]
  networkInstances: ["*"]
  write: true
  read: true
- identities: [uri:spiffe://example.org/team-a]
  owners: [team-a-*]
  networkInstances: [vpc-1]
  write: true
  read: true
- identities: [token:ci]
  owners: [ci]
  networkInstances: [vpc-1]
  write: true
`+strings.Join(extra, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.TLSCert, cfg.TLSKey, cfg.ClientCA, cfg.AuthzPolicy = certs.ServerCert, certs.ServerKey, certs.CA, policy
	ts := startServer(t, cfg)
	return authzSetup{ts: ts, certs: certs, dir: dir, token: token}
}

// client dials as the identity of cert/key (the admin when empty), with
// the token file when given.
func (s authzSetup) client(t *testing.T, cert, key, token string) ipamv1.IPAMClient {
	t.Helper()
	admin := cert == "" && token == ""
	if cert == "" {
		cert, key = s.certs.ClientCert, s.certs.ClientKey
	}
	opts, err := client.DialOptions(client.Config{Server: s.ts.Addr, CA: s.certs.CA, Cert: cert, Key: key, TokenFile: token})
	must(t, err)
	conn, err := grpc.NewClient(s.ts.Addr, opts...)
	must(t, err)
	t.Cleanup(func() { conn.Close() })
	if admin {
		// The server restores its state before it serves; the admin may
		// ask its health service.
		must(t, servertest.WaitServing(conn, 20*time.Second))
	}
	return ipamv1.NewIPAMClient(conn)
}

func denied(t *testing.T, err error, want ...string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.PermissionDenied {
		t.Fatalf("got %v, want PermissionDenied", err)
	}
	for _, w := range want {
		if !strings.Contains(st.Message(), w) {
			t.Errorf("message %q does not name %s", st.Message(), w)
		}
	}
}

// TestAuthorization: each identity changes what the policy grants it and
// nothing else: not another owner, not another network instance, not a
// release, delete or prune of another owner's objects.
func TestAuthorization(t *testing.T) {
	s := startAuthz(t)
	ctx := context.Background()
	admin := s.client(t, "", "", "")
	seed(t, admin)
	must(t, call(admin.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{
		Key: key("vpc-2"), Prefixes: []*ipamv1.VRFPrefix{{Prefix: "10.0.0.0/8"}}}})))
	sel := func(vrf string) map[string]string {
		return map[string]string{"nephio.org/network-instance": vrf}
	}
	alloc := func(owner, name, vrf string) *ipamv1.Allocation {
		return &ipamv1.Allocation{Key: &ipamv1.Key{Owner: owner, Namespace: "default", Name: name}, Selector: sel(vrf), Kind: "pool", PrefixLength: 24}
	}
	// team-b's allocation, made by the admin.
	must(t, call(admin.Sync(ctx, &ipamv1.SyncRequest{Owner: "team-b", Allocations: []*ipamv1.Allocation{alloc("", "b1", "vpc-1")}})))

	cert, keyFile := s.certs.WriteClient(t, "team-a", servertest.ClientCert{CommonName: "team-a", URIs: []string{"spiffe://example.org/team-a"}})
	teamA := s.client(t, cert, keyFile, "")
	must(t, call(teamA.Sync(ctx, &ipamv1.SyncRequest{Owner: "team-a-pkg1", Prune: true, Allocations: []*ipamv1.Allocation{alloc("", "a1", "vpc-1")}})))
	_, err := teamA.Sync(ctx, &ipamv1.SyncRequest{Owner: "team-b", Prune: true})
	denied(t, err, `"uri:spiffe://example.org/team-a"`, `"team-b"`)
	_, err = teamA.Sync(ctx, &ipamv1.SyncRequest{Owner: "team-a-pkg1", Allocations: []*ipamv1.Allocation{alloc("", "a2", "vpc-2")}})
	denied(t, err, `"vpc-2"`)
	_, err = teamA.Release(ctx, &ipamv1.DeleteRequest{Key: &ipamv1.Key{Owner: "team-b", Namespace: "default", Name: "b1"}})
	denied(t, err, `"team-b"`, `"vpc-1"`)
	_, err = teamA.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: alloc("team-b", "b2", "vpc-1")})
	denied(t, err, `"team-b"`)
	_, err = teamA.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: key("net1-prefix1")})
	denied(t, err, `"test"`)
	_, err = teamA.DeleteNetworkInstance(ctx, &ipamv1.DeleteRequest{Key: key("vpc-2")})
	denied(t, err)
	// Reads are granted to team-a.
	if _, err := teamA.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: &ipamv1.Key{Owner: "team-b", Namespace: "default", Name: "b1"}}); err != nil {
		t.Fatalf("team-a reads: %v", err)
	}

	// team-a's certificate plus the token of ci: the caller goes by both
	// identities, and ci may change owner ci in vpc-1.
	ci := s.client(t, cert, keyFile, s.token)
	must(t, call(ci.Sync(ctx, &ipamv1.SyncRequest{Owner: "ci", Allocations: []*ipamv1.Allocation{alloc("", "c1", "vpc-1")}})))

	// A prune that would reach into vpc-2 is refused when the grant is
	// for vpc-1 only: ci's object in vpc-2 is made by the admin.
	must(t, call(admin.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: alloc("ci", "c2", "vpc-2")})))
	_, err = ci.Sync(ctx, &ipamv1.SyncRequest{Owner: "ci", Prune: true, Allocations: []*ipamv1.Allocation{alloc("", "c1", "vpc-1")}})
	denied(t, err, `"vpc-2"`)

	// Nothing of team-b or ci in vpc-2 was released.
	for _, k := range []*ipamv1.Key{{Owner: "team-b", Namespace: "default", Name: "b1"}, {Owner: "ci", Namespace: "default", Name: "c2"}} {
		if _, err := admin.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: k}); err != nil {
			t.Errorf("%v is gone: %v", k, err)
		}
	}

	// A bad token is Unauthenticated.
	bad := filepath.Join(s.dir, "bad.token")
	must(t, os.WriteFile(bad, []byte("wrong"), 0o600))
	_, err = s.client(t, "", "", bad).List(ctx, &ipamv1.ListRequest{Kind: niKind})
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "unknown bearer token") {
		t.Fatalf("bad token: %v, want Unauthenticated", err)
	}
}

// TestAuthorizationTokenOnly: a caller with a valid client certificate
// whose names no rule lists gets nothing but what its token grants, and
// cannot read when the policy does not say so.
func TestAuthorizationTokenOnly(t *testing.T) {
	s := startAuthz(t)
	ctx := context.Background()
	seed(t, s.client(t, "", "", ""))
	cert, keyFile := s.certs.WriteClient(t, "nobody", servertest.ClientCert{CommonName: "nobody"})
	c := s.client(t, cert, keyFile, s.token)
	must(t, call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: &ipamv1.Key{Owner: "ci", Namespace: "default", Name: "x"},
		NetworkInstance: "vpc-1", Selector: map[string]string{"nephio.org/network-name": "net1"}}})))
	_, err := c.List(ctx, &ipamv1.ListRequest{Kind: niKind})
	denied(t, err, `may not read`)
	nobody := s.client(t, cert, keyFile, "")
	_, err = nobody.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: &ipamv1.Key{Owner: "ci", Namespace: "default", Name: "y"}, NetworkInstance: "vpc-1"}})
	denied(t, err, `"cn:nobody"`, `"ci"`)
	// A raw header that is not "Bearer TOKEN" is refused.
	conn := s.ts.Dial(t, grpc.WithTransportCredentials(credentials.NewTLS(s.certs.ClientTLS(t, true))))
	octx := metadata.AppendToOutgoingContext(ctx, "authorization", "Basic abc")
	_, err = ipamv1.NewIPAMClient(conn).List(octx, &ipamv1.ListRequest{Kind: niKind})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Basic auth header: %v, want Unauthenticated", err)
	}
}
