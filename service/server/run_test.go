package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestConcurrentAllocate has 64 clients, each on its own connection,
// allocate from one /20 network until it is full: every address is handed
// out once, the total is the capacity and one more is ResourceExhausted.
func TestConcurrentAllocate(t *testing.T) {
	ts := startServer(t, server.Config{})
	c := ts.Client(t)
	ctx := context.Background()
	seed(t, c)
	must(t, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("net20"), NetworkInstance: "vpc-1",
		Prefix: "10.1.0.0/20", Network: "net20"}})))
	sel := map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net20"}

	const clients = 64
	var (
		mu  sync.Mutex
		got = map[netip.Addr]string{}
		wg  sync.WaitGroup
	)
	for i := range clients {
		cc := ipamv1.NewIPAMClient(ts.Dial(t))
		wg.Go(func() {
			for j := 0; ; j++ {
				name := fmt.Sprintf("c%d-%d", i, j)
				res, err := cc.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(name), Selector: sel}})
				if status.Code(err) == codes.ResourceExhausted {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				p := netip.MustParsePrefix(res.GetResult().GetPrefix())
				mu.Lock()
				if other, dup := got[p.Addr()]; dup {
					t.Errorf("%s handed out to %s and %s", p.Addr(), other, name)
				}
				got[p.Addr()] = name
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != 4094 {
		t.Fatalf("allocated %d distinct addresses, want 4094", len(got))
	}
	net20 := netip.MustParsePrefix("10.1.0.0/20")
	for a := range got {
		if !net20.Contains(a) || a == net20.Addr() || a == netip.MustParseAddr("10.1.15.255") {
			t.Errorf("%s is not a usable address of %s", a, net20)
		}
	}
	_, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("one-more"), Selector: sel}})
	wantStatus(t, err, codes.ResourceExhausted, "IPAllocation default/one-more: spec.selector: no free address left in network 10.1.0.0/20")
}

// TestTLS serves over TLS: a client that trusts the CA works, a plaintext
// client is refused.
func TestTLS(t *testing.T) {
	certs := servertest.WriteCerts(t, t.TempDir())
	ts := startServer(t, server.Config{TLSCert: certs.ServerCert, TLSKey: certs.ServerKey})
	conn := ts.Dial(t, grpc.WithTransportCredentials(credentials.NewTLS(certs.ClientTLS(t, false))))
	seed(t, ipamv1.NewIPAMClient(conn))

	plain, err := grpc.NewClient(ts.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer plain.Close()
	_, err = healthpb.NewHealthClient(plain).Check(context.Background(), &healthpb.HealthCheckRequest{})
	wantStatus(t, err, codes.Unavailable, "")
}

// TestMTLS requires client certificates signed by the client CA on every
// call, health included, and tells a refused client why.
func TestMTLS(t *testing.T) {
	certs := servertest.WriteCerts(t, t.TempDir())
	other := servertest.WriteCerts(t, t.TempDir()) // another CA
	var logs servertest.LogBuffer
	ts := startServer(t, server.Config{TLSCert: certs.ServerCert, TLSKey: certs.ServerKey, ClientCA: certs.CA,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	conn := ts.Dial(t, grpc.WithTransportCredentials(credentials.NewTLS(certs.ClientTLS(t, true))))
	seed(t, ipamv1.NewIPAMClient(conn))

	expiredCert, expiredKey := certs.WriteClient(t, "expired", servertest.ClientCert{CommonName: "old-client", NotAfter: time.Now().Add(-time.Hour)})
	for _, tc := range []struct {
		name, reason string
		tls          func() *tls.Config
	}{
		{"no client certificate", "no client certificate was presented", func() *tls.Config { return certs.ClientTLS(t, false) }},
		{"certificate of another CA", "signed by unknown authority", func() *tls.Config {
			c := other.ClientTLS(t, true)
			c.RootCAs = certs.ClientTLS(t, false).RootCAs // trusts the server, presents a foreign cert
			return c
		}},
		{"expired certificate", "expired", func() *tls.Config {
			c := certs.ClientTLS(t, false)
			pair, err := tls.LoadX509KeyPair(expiredCert, expiredKey)
			must(t, err)
			c.Certificates = []tls.Certificate{pair}
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := grpc.NewClient(ts.Addr, grpc.WithTransportCredentials(credentials.NewTLS(tc.tls())))
			must(t, err)
			defer conn.Close()
			_, err = ipamv1.NewIPAMClient(conn).List(context.Background(), &ipamv1.ListRequest{Kind: niKind})
			st := status.Convert(err)
			if st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), tc.reason) {
				t.Fatalf("List = %v, want Unauthenticated saying %q", err, tc.reason)
			}
			_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
			if status.Code(err) != codes.Unauthenticated {
				t.Fatalf("health without a valid certificate = %v, want Unauthenticated", err)
			}
			if !strings.Contains(logs.String(), tc.reason) || !strings.Contains(logs.String(), "refused a caller") {
				t.Errorf("the server log does not name the refusal %q:\n%s", tc.reason, logs.String())
			}
		})
	}
}

// TestPaging lists thousands of objects page by page: every object comes
// exactly once, in order, even with changes between pages.
func TestPaging(t *testing.T) {
	c := startServer(t, server.Config{}).Client(t)
	ctx := context.Background()
	seed(t, c)
	must(t, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("net16"), NetworkInstance: "vpc-1",
		Prefix: "10.2.0.0/16", Network: "net16"}})))
	sel := map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net16"}
	want := map[string]bool{}
	for _, owner := range []string{"pkg-a", "pkg-b", "pkg-c"} {
		req := &ipamv1.SyncRequest{Owner: owner}
		for i := range 2345 {
			ns := []string{"default", "prod"}[i%2]
			req.Allocations = append(req.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: ns, Name: fmt.Sprintf("a%04d", i)}, Selector: sel})
			want[owner+"/"+ns+"/"+fmt.Sprintf("a%04d", i)] = true
		}
		must(t, call(c.Sync(ctx, req)))
	}
	seen := map[string]bool{}
	token, pages, prev := "", 0, ""
	for {
		resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: allocKind, PageSize: 1000, PageToken: token})
		must(t, err)
		pages++
		for _, o := range resp.GetObjects() {
			k := o.GetAllocation().GetAllocation().GetKey()
			id := k.GetOwner() + "/" + k.GetNamespace() + "/" + k.GetName()
			if seen[id] {
				t.Fatalf("%s listed twice", id)
			}
			if id <= prev {
				t.Fatalf("%s listed after %s", id, prev)
			}
			seen[id], prev = true, id
		}
		if pages == 2 {
			// A change between pages: an object before the cursor and
			// one after it; the new one after the cursor is listed once.
			must(t, call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: &ipamv1.Key{Owner: "pkg-a", Name: "early"}, Selector: sel}})))
			must(t, call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: &ipamv1.Key{Owner: "pkg-z", Name: "late"}, Selector: sel}})))
			want["pkg-z//late"] = true
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if pages != 8 {
		t.Errorf("%d pages of 1000 for %d objects", pages, len(want))
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("%s never listed", id)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("listed %d objects, want %d", len(seen), len(want))
	}

	// The default page is 500, the largest 5000; a token is bound to its kind.
	resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: allocKind})
	must(t, err)
	if len(resp.GetObjects()) != server.DefaultPageSize {
		t.Errorf("default page has %d objects", len(resp.GetObjects()))
	}
	big, err := c.List(ctx, &ipamv1.ListRequest{Kind: allocKind, PageSize: 1 << 20})
	must(t, err)
	if len(big.GetObjects()) != server.MaxPageSize {
		t.Errorf("a huge page has %d objects, want %d", len(big.GetObjects()), server.MaxPageSize)
	}
	_, err = c.List(ctx, &ipamv1.ListRequest{Kind: prefixKind, PageToken: resp.GetNextPageToken()})
	wantStatus(t, err, codes.InvalidArgument, "page_token: was issued for another kind of object")
	_, err = c.List(ctx, &ipamv1.ListRequest{Kind: allocKind, PageSize: -1})
	wantStatus(t, err, codes.InvalidArgument, "page_size: -1 is negative")
}

// TestGracefulShutdown cancels the server while a call is in flight: the
// call completes, new calls are refused, open watches end with
// Unavailable, and Run returns without error.
func TestGracefulShutdown(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	hold := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if info.FullMethod == ipamv1.IPAM_Allocate_FullMethodName {
			close(entered)
			<-release
		}
		return handler(ctx, req)
	}
	ts := startServer(t, server.Config{UnaryInterceptors: []grpc.UnaryServerInterceptor{hold}})
	conn := ts.Dial(t)
	c := ipamv1.NewIPAMClient(conn)
	ctx := context.Background()
	seed(t, c)
	watch := openWatch(t, c, &ipamv1.WatchRequest{})

	type result struct {
		res *ipamv1.AllocateResponse
		err error
	}
	inflight := make(chan result, 1)
	go func() {
		res, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: alloc1()})
		inflight <- result{res, err}
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- ts.Stop() }()

	// The watch ends first, so GracefulStop is not held by it.
	for {
		if _, err := watch.Recv(); err != nil {
			wantStatus(t, err, codes.Unavailable, "server is shutting down")
			break
		}
	}
	select {
	case err := <-stopped:
		t.Fatalf("Run returned (%v) while a call was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	r := <-inflight
	if r.err != nil || r.res.GetResult().GetPrefix() != "10.0.1.2/24" {
		t.Fatalf("in-flight Allocate = %v, %v; want it to complete", r.res, r.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Run = %v", err)
	}
	_, err := c.Get(ctx, &ipamv1.GetRequest{Kind: allocKind, Key: key("alloc1")})
	wantStatus(t, err, codes.Unavailable, "")
}

// TestMetrics scrapes /metrics: RPC latency by method and code, allocations
// by VRF, free addresses per prefix and Sync items.
func TestMetrics(t *testing.T) {
	ts := servertest.Start(t, server.Config{}, true)
	c := ts.Client(t)
	ctx := context.Background()
	seed(t, c)
	must(t, call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: alloc1()})))
	must(t, call(c.Sync(ctx, &ipamv1.SyncRequest{Owner: "pkg", Allocations: []*ipamv1.Allocation{
		{Key: &ipamv1.Key{Name: "s1"}, Selector: alloc1().GetSelector()}, {Key: &ipamv1.Key{Name: "s2"}, Selector: alloc1().GetSelector()}}})))
	_, err := c.Get(ctx, &ipamv1.GetRequest{Kind: allocKind, Key: key("missing")})
	wantStatus(t, err, codes.NotFound, "")

	resp, err := http.Get("http://" + ts.MetricsAddr + "/metrics")
	must(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	must(t, err)
	text := string(body)
	for _, want := range []string{
		`ipam_allocations{network_instance="vpc-1"} 3`,
		`ipam_prefix_free_addresses{kind="network",name="default/net1-prefix1",network_instance="vpc-1",prefix="10.0.1.0/24"} 250`,
		`ipam_prefix_free_addresses{kind="aggregate",name="default/aggregate0",network_instance="vpc-1",prefix="10.0.0.0/8"} 1.677696e+07`,
		`ipam_prefix_used_addresses{kind="network",name="default/net1-prefix1",network_instance="vpc-1",prefix="10.0.1.0/24"} 6`,
		`ipam_prefix_size_addresses{kind="network",name="default/net1-prefix1",network_instance="vpc-1",prefix="10.0.1.0/24"} 256`,
		`ipam_sync_items_total 2`,
		`ipam_rpc_duration_seconds_count{code="OK",method="Allocate"} 1`,
		`ipam_rpc_duration_seconds_count{code="NotFound",method="Get"} 1`,
		`ipam_watchers 0`,
		`go_goroutines `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Log(grepLines(text, "ipam_"))
	}
}

// TestWALMetrics checks the histograms of the file store's log: every
// change is counted in a group commit, each commit waited for an fsync of
// plausible length; the memory store exports none of them.
func TestWALMetrics(t *testing.T) {
	for _, tc := range []struct {
		store string
		want  bool
	}{{"file", true}, {"memory", false}} {
		t.Run(tc.store, func(t *testing.T) {
			cfg := server.Config{Store: tc.store}
			if tc.store == "file" {
				cfg.DataDir = t.TempDir()
			}
			ts := servertest.Start(t, cfg, true)
			c := ts.Client(t)
			ctx := context.Background()
			seed(t, c) // 3 changes
			const allocs = 5
			for i := range allocs {
				a := alloc1()
				a.Key = key(fmt.Sprintf("alloc%d", i))
				must(t, call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: a})))
			}
			text := scrape(t, ts.MetricsAddr)
			if !tc.want {
				if strings.Contains(text, "ipam_wal_") {
					t.Errorf("the %s store exports WAL metrics:\n%s", tc.store, grepLines(text, "ipam_wal_"))
				}
				return
			}
			v := func(name string) float64 {
				t.Helper()
				for l := range strings.Lines(text) {
					if val, ok := strings.CutPrefix(l, name+" "); ok {
						f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
						must(t, err)
						return f
					}
				}
				t.Fatalf("metrics lack %s:\n%s", name, grepLines(text, "ipam_wal_"))
				return 0
			}
			fsyncs, fsyncSecs := v("ipam_wal_fsync_duration_seconds_count"), v("ipam_wal_fsync_duration_seconds_sum")
			commits, records := v("ipam_wal_batch_records_count"), v("ipam_wal_batch_records_sum")
			byteCommits, bytes := v("ipam_wal_batch_bytes_count"), v("ipam_wal_batch_bytes_sum")
			if commits < 1 || records < 3+allocs || records < commits {
				t.Errorf("%v group commits wrote %v records; want at least one, of %d changes or more", commits, records, 3+allocs)
			}
			if byteCommits != commits || bytes < records {
				t.Errorf("%v group commits wrote %v bytes; want %v commits of at least a byte per record", byteCommits, bytes, commits)
			}
			if fsyncs < commits || fsyncSecs <= 0 || fsyncSecs > 10*fsyncs {
				t.Errorf("%v fsyncs took %vs for %v group commits; want one per commit at least, each under 10s", fsyncs, fsyncSecs, commits)
			}
		})
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestRunErrors checks that bad configurations fail fast with a clear
// message.
func TestRunErrors(t *testing.T) {
	certs := servertest.WriteCerts(t, t.TempDir())
	for _, tc := range []struct {
		cfg  server.Config
		want string
	}{
		{server.Config{Store: "etcd"}, "store etcd: --etcd-endpoints is required"},
		{server.Config{Store: "etcd", EtcdEndpoints: []string{"127.0.0.1:1"}, EtcdCert: certs.ServerCert}, "store etcd: --etcd-cert/--etcd-key: the client certificate and key go together"},
		{server.Config{Store: "etcd", EtcdEndpoints: []string{"127.0.0.1:1"}, EtcdCA: "/nonexistent/ca.pem"}, "store etcd: --etcd-ca: "},
		{server.Config{Store: "bolt"}, `store "bolt": unknown (file, etcd or memory)`},
		{server.Config{Store: "memory", TLSCert: certs.ServerCert}, "--tls-cert and --tls-key go together"},
		{server.Config{Store: "memory", ClientCA: certs.CA}, "--client-ca needs --tls-cert and --tls-key"},
		{server.Config{Store: "memory", LogFormat: "xml"}, `log format "xml": unknown (json or text)`},
		{server.Config{Store: "memory", Listen: "256.0.0.1:1"}, "listen: "},
	} {
		tc.cfg.LogOutput = io.Discard
		err := server.Run(context.Background(), tc.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	// A canceled context before anything runs still returns cleanly.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := server.Run(ctx, server.Config{Store: "memory", Listen: "127.0.0.1:0", LogOutput: io.Discard}); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a canceled context = %v", err)
	}
}

// TestRestart stops a server on the file store and starts another on the
// same directory: every object and allocation is back, and deletions of
// restored objects reach watchers filtered by network instance.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, server.Config{Store: "file", DataDir: dir, Demo: true})
	c := ts.Client(t)
	ctx := context.Background()
	sel := alloc1().GetSelector()
	var want []string
	for i := range 50 {
		res, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(fmt.Sprint("a", i)), Selector: sel}})
		must(t, err)
		want = append(want, res.GetResult().GetPrefix())
	}
	must(t, call(c.Release(ctx, &ipamv1.DeleteRequest{Key: key("a7")})))
	must(t, ts.Stop())

	ts = startServer(t, server.Config{Store: "file", DataDir: dir, Demo: true})
	c = ts.Client(t)
	for i := range 50 {
		resp, err := c.Get(ctx, &ipamv1.GetRequest{Kind: allocKind, Key: key(fmt.Sprint("a", i))})
		if i == 7 {
			wantStatus(t, err, codes.NotFound, "")
			continue
		}
		must(t, err)
		if got := resp.GetObject().GetAllocation().GetResult().GetPrefix(); got != want[i] {
			t.Errorf("a%d = %s after restart, want %s", i, got, want[i])
		}
	}
	// The demo is not seeded twice: the state was not empty.
	resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: prefixKind})
	must(t, err)
	if got := names(resp.GetObjects()); !slices.Equal(got, []string{"aggregate0", "net1-prefix1"}) {
		t.Errorf("prefixes after restart = %v", got)
	}
	// The lowest free address is the released one.
	res, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("new"), Selector: sel}})
	must(t, err)
	if res.GetResult().GetPrefix() != want[7] {
		t.Errorf("new allocation = %s, want the released %s", res.GetResult().GetPrefix(), want[7])
	}
	w := openWatch(t, c, &ipamv1.WatchRequest{NetworkInstance: "vpc-1"})
	must(t, call(c.Release(ctx, &ipamv1.DeleteRequest{Key: key("a3")})))
	if got := recvN(t, w, 1); got[0] != "TYPE_DELETE OBJECT_KIND_ALLOCATION a3" {
		t.Errorf("watch after restart got %v", got)
	}
}

// TestLoggerDurations: both log formats write durations as text, so a
// JSON line says "1.5ms" rather than 1500000.
func TestLoggerDurations(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"json", `"took":"1.5ms"`},
		{"text", `took=1.5ms`},
	} {
		var buf strings.Builder
		log, err := server.NewLogger(tc.format, "", &buf)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("done", "took", 1500*time.Microsecond)
		if !strings.Contains(buf.String(), tc.want) {
			t.Errorf("%s: %q lacks %s", tc.format, buf.String(), tc.want)
		}
	}
}
