package etcd_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// mtlsSetup is a PKI and an authorization policy for replicas under
// mTLS: the servers' certificate (cn:ipam-server) is the replicas', the
// admin's (cn:ipamctl) may change everything, team-a's (cn:team-a, and
// cn:équipe-a) owners a.* only. The replicas' own identity may change everything
// too, so that a leader that made a relayed call as the replica that
// relayed it, instead of as its caller, would let team-a change b.*.
type mtlsSetup struct {
	certs   servertest.Certs
	policy  string
	teamA   servertest.Certs // certs with team-a's client certificate
	equipeA servertest.Certs // with cn:équipe-a's
}

func newMTLSSetup(t testing.TB) mtlsSetup {
	t.Helper()
	dir := t.TempDir()
	s := mtlsSetup{certs: servertest.WriteCerts(t, dir), policy: filepath.Join(dir, "policy.yaml")}
	s.teamA = s.certs
	s.teamA.ClientCert, s.teamA.ClientKey = s.certs.WriteClient(t, "team-a", servertest.ClientCert{CommonName: "team-a"})
	s.equipeA = s.certs
	s.equipeA.ClientCert, s.equipeA.ClientKey = s.certs.WriteClient(t, "equipe-a", servertest.ClientCert{CommonName: "équipe-a"})
	if err := os.WriteFile(s.policy, []byte(`apiVersion: ipam.nephio.org/v1alpha1
kind: AuthorizationPolicy
replicas: [cn:ipam-server]
rules:
- identities: [cn:ipamctl, cn:ipam-server]
  owners: ["*"]
  networkInstances: ["*"]
  write: true
  read: true
- identities: [cn:team-a, "cn:équipe-a"]
  owners: ["a.*"]
  networkInstances: ["*"]
  write: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// config is a replica's configuration: mTLS with the policy, on etcd.
func (s mtlsSetup) config(eps []string, prefix string) server.Config {
	return server.Config{Store: "etcd", EtcdEndpoints: eps, EtcdPrefix: prefix,
		TLSCert: s.certs.ServerCert, TLSKey: s.certs.ServerKey, ClientCA: s.certs.CA, AuthzPolicy: s.policy}
}

// dial connects to srv presenting the client certificate of certs.
func dial(t testing.TB, srv *servertest.Server, certs servertest.Certs) *grpc.ClientConn {
	t.Helper()
	return srv.Dial(t, grpc.WithTransportCredentials(credentials.NewTLS(certs.ClientTLS(t, true))))
}

// ownedBy is an allocation request in vpc-1's net20 keyed under owner.
func ownedBy(owner, name string) *ipamv1.AllocateRequest {
	return &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: &ipamv1.Key{Owner: owner, Namespace: "default", Name: name}, Selector: net20}}
}

// TestRelayUnderMTLS: three replicas serving mTLS with a policy that
// names their certificate as the replicas'. The two without the write
// lead relay their clients' changes to the leader, which commits them
// (the followers commit no etcd transaction of their own), and the
// leader makes each relayed call as its caller: team-a, allowed on a.*,
// gets a.x through a follower and PermissionDenied naming cn:team-a for
// b.x, as it does at the leader directly, although the replicas' own
// identity may change b.*. A request too large for the relay stream
// goes to the leader as its own call, its caller's names in a header,
// a common name outside ASCII (cn:équipe-a) included.
func TestRelayUnderMTLS(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	s := newMTLSSetup(t)
	cfg := s.config(c.endpoints(), "/mtls/")
	first := servertest.Start(t, cfg, true)
	waitLeads(t, cli, "/mtls/", first.Addr)
	var followers []*servertest.Server
	for range 2 {
		followers = append(followers, servertest.Start(t, cfg, true))
	}
	leader := ipamv1.NewIPAMClient(dial(t, first, s.certs))
	seed20(t, leader, "10.0.0.0/20")
	leaderTxns := metric(t, first.MetricsAddr, "ipam_etcd_transactions_total")

	ctx := context.Background()
	const perFollower = 32
	var wg sync.WaitGroup
	for f, fs := range followers {
		admin := ipamv1.NewIPAMClient(dial(t, fs, s.certs))
		for i := range perFollower {
			wg.Go(func() {
				if _, err := admin.Allocate(ctx, ownedBy("test", fmt.Sprintf("f%d-%d", f, i))); err != nil {
					t.Errorf("allocating through follower %d: %v", f, err)
				}
			})
		}
	}
	wg.Wait()
	for f, fs := range followers {
		if n := forwards(t, fs.MetricsAddr, "forwarded"); n != perFollower {
			t.Errorf("follower %d forwarded %v changes, want %d", f, n, perFollower)
		}
		if n := forwards(t, fs.MetricsAddr, "committed_here"); n != 0 {
			t.Errorf("follower %d made %v changes itself, want 0", f, n)
		}
		if n := metric(t, fs.MetricsAddr, "ipam_etcd_transactions_total"); n != 0 {
			t.Errorf("follower %d committed %v etcd transactions, want 0: the leader commits relayed changes", f, n)
		}
	}
	if n := metric(t, first.MetricsAddr, "ipam_etcd_transactions_total") - leaderTxns; n < 1 {
		t.Errorf("the leader committed %v etcd transactions for the relayed changes", n)
	}

	viaFollower := ipamv1.NewIPAMClient(dial(t, followers[0], s.teamA))
	direct := ipamv1.NewIPAMClient(dial(t, first, s.teamA))
	for _, tc := range []struct {
		owner string
		want  codes.Code
	}{{"a.x", codes.OK}, {"b.x", codes.PermissionDenied}} {
		_, rerr := viaFollower.Allocate(ctx, ownedBy(tc.owner, "relayed"))
		_, derr := direct.Allocate(ctx, ownedBy(tc.owner, "direct"))
		if status.Code(rerr) != tc.want || status.Code(derr) != tc.want {
			t.Fatalf("owner %s: relayed %v, direct %v; want %v for both", tc.owner, rerr, derr, tc.want)
		}
		if rerr != nil && (!strings.Contains(status.Convert(rerr).Message(), `"cn:team-a"`) || status.Convert(rerr).Message() != status.Convert(derr).Message()) {
			t.Errorf("owner %s: relayed refusal %q, direct %q; want the same, naming cn:team-a", tc.owner, status.Convert(rerr).Message(), status.Convert(derr).Message())
		}
	}

	// A request too large for the relay goes as its own call, the
	// caller's names (any UTF-8) in a header.
	for _, tc := range []struct {
		owner string
		want  codes.Code
	}{{"a.big", codes.OK}, {"b.big", codes.PermissionDenied}} {
		big := &ipamv1.SyncRequest{Owner: tc.owner}
		for i := range 1500 {
			big.Allocations = append(big.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: fmt.Sprintf("big-%04d", i)}, Selector: net20})
		}
		if n := proto.Size(big); n <= 64<<10 {
			t.Fatalf("the large Sync is only %d bytes", n)
		}
		resp, err := ipamv1.NewIPAMClient(dial(t, followers[0], s.equipeA)).Sync(ctx, big)
		if status.Code(err) != tc.want || tc.want == codes.OK && len(resp.GetAllocations()) != 1500 {
			t.Fatalf("large Sync of %s by cn:équipe-a through a follower: %d results, %v; want %v", tc.owner, len(resp.GetAllocations()), err, tc.want)
		}
		if err != nil && !strings.Contains(status.Convert(err).Message(), "équipe-a") {
			t.Errorf("large Sync of %s refused %q, not naming cn:équipe-a", tc.owner, status.Convert(err).Message())
		}
	}
	if n := forwards(t, followers[0].MetricsAddr, "forwarded"); n != perFollower+4 {
		t.Errorf("follower 0 forwarded %v changes, want %d", n, perFollower+4)
	}
	if n := metric(t, followers[0].MetricsAddr, "ipam_etcd_transactions_total"); n != 0 {
		t.Errorf("follower 0 committed %v etcd transactions, want 0", n)
	}
}

// TestRelayUnderMTLSRefusesNonReplicas: a client with a valid client
// certificate that is not a replica's (team-a, allowed on a.* only)
// cannot have a change made as another identity: the leader refuses it
// the Forward stream (PermissionDenied), whatever caller its calls name;
// the ipam-forwarded-for-bin header, at the leader or a follower, is refused
// (PermissionDenied); and the ipam-forwarded-by header only has its call
// made where it arrives, as team-a itself.
func TestRelayUnderMTLSRefusesNonReplicas(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	s := newMTLSSetup(t)
	cfg := s.config(c.endpoints(), "/mtls-hostile/")
	first := servertest.Start(t, cfg, true)
	waitLeads(t, cli, "/mtls-hostile/", first.Addr)
	second := servertest.Start(t, cfg, true)
	seed20(t, ipamv1.NewIPAMClient(dial(t, first, s.certs)), "10.0.0.0/20")
	waitSeen(t, ipamv1.NewIPAMClient(dial(t, second, s.certs)), key("net20")) // a call made at the follower needs it
	ctx := context.Background()

	req, err := proto.Marshal(ownedBy("b.x", "claimed"))
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range [][]string{{"cn:ipamctl"}, {"cn:ipam-server"}, nil} {
		stream, err := ipamv1.NewReplicaClient(dial(t, first, s.teamA)).Forward(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&ipamv1.ForwardRequest{Calls: []*ipamv1.ForwardedCall{
			{Id: 1, Method: ipamv1.IPAM_Allocate_FullMethodName, Request: req, CallerNames: names}}}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err) // (io.EOF: the stream already ended; Recv says how)
		}
		resp, err := stream.Recv()
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("team-a relaying a call of %v: %v %v, want the stream refused with PermissionDenied", names, resp, err)
		}
	}

	for _, tc := range []struct {
		name   string
		to     *servertest.Server
		header []string // metadata key, value pairs
		owner  string
		want   codes.Code
	}{
		{"forwarded-for at the leader", first, []string{"ipam-forwarded-by", "x", "ipam-forwarded-for-bin", "cn:ipamctl"}, "b.x", codes.PermissionDenied},
		{"forwarded-for alone at the leader", first, []string{"ipam-forwarded-for-bin", "cn:ipam-server"}, "b.x", codes.PermissionDenied},
		{"forwarded-for at a follower", second, []string{"ipam-forwarded-for-bin", "cn:ipamctl"}, "b.x", codes.PermissionDenied},
		{"forwarded-for of itself", second, []string{"ipam-forwarded-for-bin", "cn:team-a"}, "a.x", codes.PermissionDenied},
		{"forwarded-by at the leader", first, []string{"ipam-forwarded-by", "x"}, "b.x", codes.PermissionDenied},
		{"forwarded-by at a follower", second, []string{"ipam-forwarded-by", "x"}, "b.x", codes.PermissionDenied},
		{"forwarded-by, own owner", second, []string{"ipam-forwarded-by", "x"}, "a.x", codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ipamv1.NewIPAMClient(dial(t, tc.to, s.teamA))
			_, err := c.Allocate(metadata.AppendToOutgoingContext(ctx, tc.header...), ownedBy(tc.owner, strings.ReplaceAll(tc.name, " ", "-")))
			if status.Code(err) != tc.want {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	if n := forwards(t, second.MetricsAddr, "forwarded"); n != 0 {
		t.Errorf("the follower forwarded %v calls that claimed to be forwarded already", n)
	}
}

// TestRelayOnlyToAReplica: under mTLS a replica relays only to a leader
// whose certificate is a replica's. Whoever can write the election keys
// in etcd advertises a server of its own as the write lead, one with a
// certificate of the same CA that is not a replica's: the replica's TLS
// handshakes with it fail before any call (and its callers' credentials)
// goes out, and the replica commits its clients' changes itself.
func TestRelayOnlyToAReplica(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	s := newMTLSSetup(t)
	cert, keyFile := s.certs.WriteClient(t, "rogue", servertest.ClientCert{CommonName: "rogue",
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	pair, err := tls.LoadX509KeyPair(cert, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rogue.Close() })
	var tried, handshaken atomic.Int64
	go func() {
		for {
			conn, err := rogue.Accept()
			if err != nil {
				return
			}
			tried.Add(1)
			if conn.(*tls.Conn).HandshakeContext(context.Background()) == nil {
				handshaken.Add(1)
			}
			conn.Close()
		}
	}()
	// The oldest key of the election holds the lead.
	if _, err := cli.Put(context.Background(), "/rogue/lead//0", rogue.Addr().String()); err != nil {
		t.Fatal(err)
	}
	r := servertest.Start(t, s.config(c.endpoints(), "/rogue/"), true)
	admin := ipamv1.NewIPAMClient(dial(t, r, s.certs))
	seed20(t, admin, "10.0.0.0/20")
	allocate := func(name string) {
		t.Helper()
		if _, err := admin.Allocate(context.Background(), ownedBy("test", name)); err != nil {
			t.Fatal(err)
		}
	}
	// Until it has read the election the replica commits without trying.
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; forwards(t, r.MetricsAddr, "committed_here") == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatal("the replica never tried the advertised leader")
		}
		allocate(fmt.Sprint("w", i))
	}
	before := forwards(t, r.MetricsAddr, "committed_here")
	for i := range 5 {
		allocate(fmt.Sprint("a", i))
	}
	if n := forwards(t, r.MetricsAddr, "committed_here") - before; n != 5 {
		t.Errorf("the replica made %v of 5 changes itself", n)
	}
	if n := forwards(t, r.MetricsAddr, "forwarded"); n != 0 {
		t.Errorf("the replica forwarded %v changes to a leader whose certificate is not a replica's", n)
	}
	if tried.Load() == 0 {
		t.Fatal("the replica never dialed the advertised leader")
	}
	if n := handshaken.Load(); n != 0 {
		t.Errorf("the replica completed %d TLS handshakes with a leader whose certificate is not a replica's", n)
	}
}

// waitSeen waits until the replica of c has the prefix of key, which
// another replica created.
func waitSeen(t testing.TB, c ipamv1.IPAMClient, key *ipamv1.Key) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := c.Get(context.Background(), &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_PREFIX, Key: key})
		if err == nil {
			return
		}
		if status.Code(err) != codes.NotFound || time.Now().After(deadline) {
			t.Fatalf("the replica does not have prefix %v: %v", key, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplicaCertificateChecks: a replica whose policy names replicas
// checks its own certificate at start, since the others would refuse it
// as a relay: one without client authentication (extendedKeyUsage
// serverAuth only) or whose names are not the replicas' does not start,
// and says why.
func TestReplicaCertificateChecks(t *testing.T) {
	c := startCluster(t, 1)
	s := newMTLSSetup(t)
	serverOnly, serverOnlyKey := s.certs.WriteClient(t, "server-only", servertest.ClientCert{CommonName: "ipam-server",
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	other, otherKey := s.certs.WriteClient(t, "other", servertest.ClientCert{CommonName: "other-server",
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"server auth only", serverOnly, serverOnlyKey, "for clientAuth"},
		{"not a replica", other, otherKey, `none of its names ("cn:other-server") is listed under replicas`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := s.config(c.endpoints(), "/checks/")
			cfg.TLSCert, cfg.TLSKey = tc.cert, tc.key
			cfg.Listen = "127.0.0.1:0"
			cfg.Logger = slog.New(slog.DiscardHandler)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := server.Run(ctx, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v; want an error with %q", err, tc.want)
			}
		})
	}
}
