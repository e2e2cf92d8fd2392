package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	resourcepb "github.com/nephio-project/ipam/api/proto/resource"
	"github.com/nephio-project/ipam/service/client"
	"github.com/nephio-project/ipam/service/fronts/resource"
	"github.com/nephio-project/ipam/service/grpcdecode"
	"github.com/nephio-project/ipam/service/grpcopt"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server/authz"
	"github.com/nephio-project/ipam/service/server/web"
)

// DefaultShutdownTimeout bounds how long a graceful shutdown waits for
// in-flight calls before cutting them off.
const DefaultShutdownTimeout = 10 * time.Second

// Config is everything ipam-server is told on its command line, plus hooks
// for tests.
type Config struct {
	// Listen is the gRPC address (host:port).
	Listen string
	// DataDir is the directory of the file store.
	DataDir string
	// Store is the store kind: "file" (default), "etcd" or "memory"
	// (nothing persists; for tests and throwaway demos).
	Store string
	// EtcdEndpoints and EtcdPrefix configure the etcd store.
	EtcdEndpoints []string
	EtcdPrefix    string
	// EtcdCA, EtcdCert and EtcdKey are PEM files for TLS to etcd: the CA of
	// etcd's server certificates, and this client's certificate and key.
	EtcdCA, EtcdCert, EtcdKey string
	// TLSCert and TLSKey are PEM files of the server certificate; with
	// ClientCA, clients must present a certificate signed by it (mTLS).
	TLSCert, TLSKey, ClientCA string
	// AuthzPolicy is the authorization policy file; empty: every caller
	// may change every owner's objects (see package authz).
	AuthzPolicy string
	// AdvertiseAddr is the host:port the other replicas reach this one at
	// (--store etcd: they forward changes to the replica holding the write
	// lead); empty: the listen address, or the first address of a network
	// interface when it listens on every address.
	AdvertiseAddr string
	// MetricsAddr serves Prometheus metrics on /metrics; empty: off.
	MetricsAddr string
	// WebAddr serves the read-only web view (package web), with the
	// API's TLS and authorization when set; empty: off. Beyond loopback
	// it needs TLS or an authorization policy, or WebInsecure.
	WebAddr string
	// WebInsecure lets the web view be served beyond loopback in
	// plaintext to anyone (no TLS, no authorization policy); without it
	// Run refuses to start so.
	WebInsecure bool
	// LogFormat is "json" (default) or "text"; LogLevel is debug, info,
	// warn or error (default info). Logs go to LogOutput (default stderr).
	LogFormat string
	LogLevel  string
	LogOutput io.Writer
	// Demo seeds the demo network instance when the state is empty.
	Demo bool
	// SnapshotEvery compacts the file store's log after that many records
	// (0: the store's default).
	SnapshotEvery int
	// RecoverTruncated starts the file store from a log that ends before
	// the last acknowledged change, logging the lost range; without it
	// such a store refuses to start.
	RecoverTruncated bool
	// DurableReads makes reads of the file store (Get, List, Tree, the
	// web view) wait until the changes they may show are fsynced, so that
	// none shows a change a failed fsync or a crash would lose; without
	// it a read may show a change during its group commit's fsync. Reads
	// of the etcd store show only committed changes either way.
	DurableReads bool
	// NoSync turns fsync off in the file store (benchmarks only: a crash
	// may lose acknowledged changes).
	NoSync bool
	// ShutdownTimeout bounds the graceful shutdown; 0 means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// WatchBuffer bounds each watcher's backlog; 0 means
	// DefaultWatchBuffer.
	WatchBuffer int
	// MaxInflightBytes is the memory budget of the requests in flight,
	// each charged RequestMemoryFactor times its encoded size; 0 means
	// DefaultMaxInflightBytes, < 0 no budget.
	MaxInflightBytes int64
	// InflightWait is how long a request that does not fit in the budget
	// waits before it is refused ResourceExhausted; 0 means
	// DefaultInflightWait.
	InflightWait time.Duration
	// MaxWatchesPerConn and MaxWatchesPerIdentity bound the Watch
	// streams open at once on one connection and of one caller (an
	// anonymous caller: of one IP address); 0 means
	// DefaultMaxWatchesPerConn and DefaultMaxWatchesPerIdentity, a
	// negative value no limit.
	MaxWatchesPerConn     int
	MaxWatchesPerIdentity int

	// Listener, MetricsListener and WebListener, when set, are used
	// instead of Listen, MetricsAddr and WebAddr (tests pass loopback
	// listeners on port 0).
	Listener        net.Listener
	MetricsListener net.Listener
	WebListener     net.Listener
	// Logger, when set, is used instead of one built from LogFormat.
	Logger *slog.Logger
	// UnaryInterceptors run innermost, right around the service's methods
	// (authorization hooks; tests use one to hold a call in flight).
	UnaryInterceptors []grpc.UnaryServerInterceptor
}

// Store is the durable state behind the allocator: a journal of committed
// changes that can restore an allocator, compact itself into a snapshot,
// and flush on close. The file store implements it; an etcd store is the
// other planned implementation.
type Store interface {
	ipam.Journal
	// Restore loads the stored state into a fresh allocator.
	Restore(a *ipam.Allocator) error
	// Snapshot compacts the stored log into a snapshot of a's state.
	Snapshot(a *ipam.Allocator) error
	// Close flushes pending records and closes the store.
	Close() error
}

// memoryStore keeps nothing: every change is "durable" at once.
type memoryStore struct{}

// Append, Restore, Snapshot and Close of the memory store do nothing.
func (memoryStore) Append([]ipam.Record) func() error { return nil }
func (memoryStore) Restore(*ipam.Allocator) error     { return nil }
func (memoryStore) Snapshot(*ipam.Allocator) error    { return nil }
func (memoryStore) Close() error                      { return nil }

// openStore opens the store cfg names.
func openStore(cfg Config, log *slog.Logger) (Store, error) {
	switch cfg.Store {
	case "", "file":
		return openFileStore(cfg, log)
	case "memory":
		return memoryStore{}, nil
	case "etcd":
		return openEtcdStore(cfg, log)
	}
	return nil, fmt.Errorf("store %q: unknown (file, etcd or memory)", cfg.Store)
}

// NewLogger builds the server's logger from the log flags.
func NewLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	var lv slog.Level
	if level != "" {
		if err := lv.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("log level %q: %w", level, err)
		}
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: durationText}
	switch format {
	case "", "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: unknown (json or text)", format)
}

// durationText writes durations as text ("1.2ms") in both formats; the
// JSON handler would write integer nanoseconds.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// serverTLS loads the server certificate and, with a client CA, asks
// for client certificates and returns the pool that verifies them. The
// handshake accepts any certificate (or none): every call is then
// refused by the authenticator, with the reason, unless its certificate
// verifies against the pool, so that a refused client learns why.
func serverTLS(cfg Config) (*tls.Config, *x509.CertPool, error) {
	if cfg.TLSCert == "" && cfg.TLSKey == "" {
		if cfg.ClientCA != "" {
			return nil, nil, errors.New("--client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil, nil
	}
	if cfg.TLSCert == "" || cfg.TLSKey == "" {
		return nil, nil, errors.New("--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, nil, fmt.Errorf("server certificate: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.ClientCA == "" {
		return tc, nil, nil
	}
	pem, err := os.ReadFile(cfg.ClientCA)
	if err != nil {
		return nil, nil, fmt.Errorf("client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("client CA %s: no PEM certificate found", cfg.ClientCA)
	}
	tc.ClientAuth = tls.RequestClientCert
	return tc, pool, nil
}

// loopbackOnly reports whether lis accepts connections from this host
// only.
func loopbackOnly(lis net.Listener) bool {
	ap, err := netip.ParseAddrPort(lis.Addr().String())
	return err == nil && ap.Addr().IsLoopback()
}

// checkWebExposure refuses a web view served beyond loopback in plaintext
// with no authorization policy, where anyone who reaches the port reads
// every owner's objects, unless cfg.WebInsecure accepts it (then it
// warns). An address is loopback when its host is a loopback address or
// "localhost"; any other (a name, every address) counts as beyond.
func checkWebExposure(cfg Config, tls, policy bool, log *slog.Logger) error {
	if tls || policy {
		return nil
	}
	addr := cfg.WebAddr
	switch {
	case cfg.WebListener != nil:
		if loopbackOnly(cfg.WebListener) {
			return nil
		}
		addr = cfg.WebListener.Addr().String()
	case cfg.WebAddr == "":
		return nil
	case client.Loopback(cfg.WebAddr):
		return nil
	}
	if !cfg.WebInsecure {
		return fmt.Errorf("--web-addr %s is not a loopback address, and without --tls-cert or --authz-policy the web view would show every owner's objects to anyone who reaches it, in plaintext: add TLS or a policy, serve it on 127.0.0.1, or pass --web-insecure to serve it so anyway", addr)
	}
	log.Warn("--web-insecure: the web view shows every owner's objects to anyone who reaches this address, in plaintext", "addr", addr)
	return nil
}

// Run serves the IPAM gRPC service until ctx is cancelled: it opens the
// store, starts serving (Unavailable and health NOT_SERVING while the state
// is restored), restores the state, seeds the demo if asked, reports
// SERVING, and on cancellation stops accepting calls, lets in-flight calls
// finish (up to the shutdown timeout) and closes the store. Each step is a
// function below, in the order Run calls them.
func Run(ctx context.Context, cfg Config) (err error) {
	log := cfg.Logger
	if log == nil {
		if log, err = NewLogger(cfg.LogFormat, cfg.LogLevel, cfg.LogOutput); err != nil {
			return err
		}
	}
	sec, err := loadSecurity(cfg, log)
	if err != nil {
		return err
	}
	store, err := openStore(cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := store.Close(); cerr != nil {
			log.Error("closing the store", "err", cerr)
			err = errors.Join(err, fmt.Errorf("closing the store: %w", cerr))
		} else {
			log.Info("store closed")
		}
	}()
	in := newInstance(cfg, store, sec, log)
	lis := cfg.Listener
	if lis == nil {
		if lis, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	if err := in.buildGRPC(lis); err != nil {
		_ = lis.Close() // the error above is the one to report
		return err
	}
	if in.fwd != nil {
		defer in.fwd.close()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- in.grpc.Serve(lis) }()
	log.Info("serving", "addr", lis.Addr().String(), "tls", sec.tls != nil, "mtls", cfg.ClientCA != "", "authz_policy", cfg.AuthzPolicy, "store", storeName(cfg))
	if sec.policy == nil && !loopbackOnly(lis) {
		log.Warn("no --authz-policy: every client that reaches this address may change and release every owner's objects", "addr", lis.Addr().String())
	}
	if err := in.serveHTTP(); err != nil {
		in.grpc.Stop()
		return err
	}
	if err := in.restore(); err != nil {
		in.grpc.Stop()
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	}
	in.shutdown()
	return nil
}

// security is what the TLS and authorization flags load.
type security struct {
	tls       *tls.Config    // nil: plaintext
	clientCAs *x509.CertPool // nil: no client certificates asked for
	policy    *authz.Policy  // nil: no --authz-policy
}

// loadSecurity reads the TLS files and the authorization policy, and
// refuses a web view exposed without them.
func loadSecurity(cfg Config, log *slog.Logger) (security, error) {
	var sec security
	var err error
	if sec.tls, sec.clientCAs, err = serverTLS(cfg); err != nil {
		return sec, err
	}
	if cfg.AuthzPolicy != "" {
		if sec.policy, err = authz.Load(cfg.AuthzPolicy); err != nil {
			return sec, err
		}
	}
	return sec, checkWebExposure(cfg, sec.tls != nil, sec.policy != nil, log)
}

// instance is one running ipam-server: the allocator over the store, the
// gRPC server in front of it, and the HTTP servers beside it.
type instance struct {
	cfg     Config
	store   Store
	sec     security
	log     *slog.Logger
	hub     *Hub
	alloc   *ipam.Allocator
	metrics *Metrics
	svc     *Service

	calls              *callGate
	auth               *authenticator // nil without client certificates or policy
	fwd                *forwarder     // nil unless replicas relay changes to a write lead
	relay              *relayServer   // the leader's end of that relay
	grpc               *grpc.Server
	health             *health.Server
	metricsSrv, webSrv *http.Server
}

// newInstance builds the allocator over store: the hub journals its
// changes (and brings other replicas' to watchers), a shared store commits
// them under the allocator's locks.
func newInstance(cfg Config, store Store, sec security, log *slog.Logger) *instance {
	hub := NewHub(store, cfg.WatchBuffer, log)
	allocOpts := []ipam.Option{ipam.WithJournal(hub)}
	if c, ok := store.(ipam.Committer); ok { // shared stores (etcd) commit under the locks
		allocOpts = append(allocOpts, ipam.WithCommitter(c))
	}
	if p, ok := store.(interface{ Publish(ipam.Journal) }); ok { // and bring other replicas' changes to watchers
		p.Publish(hub)
	}
	if cfg.DurableReads {
		allocOpts = append(allocOpts, ipam.WithDurableReads())
	}
	a := ipam.New(allocOpts...)
	metrics := NewMetrics(a, hub)
	if cs, ok := store.(commitStatser); ok {
		metrics.watchCommits(cs)
	}
	if ws, ok := store.(walStore); ok {
		metrics.watchWAL(ws)
	}
	svc := NewService(a, hub, metrics)
	svc.policy = sec.policy
	return &instance{cfg: cfg, store: store, sec: sec, log: log, hub: hub, alloc: a, metrics: metrics, svc: svc,
		calls: &callGate{metrics: metrics, log: log}}
}

// buildGRPC builds the gRPC server: the interceptors (codec, call gate,
// authentication, watch limits, forwarding), the admission budget, the IPAM
// service, the relay, health (NOT_SERVING until restore) and reflection.
func (in *instance) buildGRPC(lis net.Listener) error {
	cfg, sec, log := in.cfg, in.sec, in.log
	// The codec's interceptors come first: they answer a request the codec
	// could not decode before anything else sees it.
	codec := grpcdecode.New(newAdmissionCodec())
	unary := []grpc.UnaryServerInterceptor{codec.Unary, in.calls.unary}
	stream := []grpc.StreamServerInterceptor{codec.Stream, in.calls.stream}
	if sec.clientCAs != nil || sec.policy != nil {
		in.auth = &authenticator{clientCAs: sec.clientCAs, policy: sec.policy, log: log, certs: map[[32]byte]verified{}}
		unary, stream = append(unary, in.auth.unary), append(stream, in.auth.stream)
	}
	stream = append(stream, newWatchLimits(cfg, log).stream) // after auth: it names the caller
	// Replicas of a store with a write lead forward changes to the leader:
	// over plaintext, or under mTLS when the policy names the replicas;
	// otherwise each commits its own (the lead is not campaigned for).
	if ls, ok := in.store.(leaderStore); ok {
		creds, err := replicaCreds(sec.tls, sec.clientCAs, sec.policy)
		if err != nil {
			return err
		}
		if creds == nil {
			log.Warn("replicas commit their own changes, without a write lead: with TLS, relaying changes to the lead needs --client-ca and an authorization policy that names the replicas' certificates under replicas")
		} else {
			self, err := advertiseAddr(cfg.AdvertiseAddr, lis)
			if err != nil {
				return err
			}
			in.fwd = newForwarder(ls, self, creds, log, in.metrics)
			unary = append(unary, in.fwd.unary)
		}
	}
	unary = append(unary, cfg.UnaryInterceptors...)
	budget := newAdmission(cfg.MaxInflightBytes, cfg.InflightWait)
	in.metrics.watchAdmission(budget)
	opts := append(grpcopt.ServerOptions(),
		grpc.ForceServerCodecV2(codec),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...))
	if sec.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(sec.tls)))
	}
	gs := grpc.NewServer(opts...)
	gs.RegisterService(budget.serviceDesc(&ipamv1.IPAM_ServiceDesc), in.svc)
	// Nephio's resource backend API, over the same service (so the same
	// authorization and limits) and the same admission budget.
	gs.RegisterService(budget.serviceDesc(&resourcepb.Resource_ServiceDesc), resource.New(in.svc))
	if in.fwd != nil { // the leader's end of the relay other replicas forward over
		var replica func(authz.Principal) bool
		if sec.clientCAs != nil {
			replica = sec.policy.Replica
		}
		in.relay = newRelayServer(in.svc, unary, replica, in.fwd.store.Applied)
		ipamv1.RegisterReplicaServer(gs, in.relay)
	}
	hs := health.NewServer()
	in.hub.OnFailure(func(err error) {
		log.Error("the store failed; refusing calls until ipam-server is restarted", "err", err)
		in.calls.fail(err)
		in.setServing(healthpb.HealthCheckResponse_NOT_SERVING)
	})
	in.grpc, in.health = gs, hs
	in.setServing(healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	return nil
}

// setServing sets the health of the server and of the IPAM service.
func (in *instance) setServing(st healthpb.HealthCheckResponse_ServingStatus) {
	in.health.SetServingStatus("", st)
	in.health.SetServingStatus(ipamv1.IPAM_ServiceDesc.ServiceName, st)
}

// serveHTTP starts the metrics endpoint and the web view, when asked for.
func (in *instance) serveHTTP() error {
	cfg, log := in.cfg, in.log
	var err error
	if cfg.MetricsAddr != "" || cfg.MetricsListener != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", in.metrics.Handler())
		if in.metricsSrv, err = serveHTTP("metrics", cfg.MetricsAddr, cfg.MetricsListener, mux, nil, log); err != nil {
			return err
		}
	}
	if cfg.WebAddr != "" || cfg.WebListener != nil {
		wcfg := web.Config{Allocator: in.alloc, Log: log, Subscribe: func() (web.Stream, error) {
			sub, err := in.hub.Subscribe("", "")
			if err != nil {
				return nil, err
			}
			return sub, nil
		}}
		wcfg.Client = func(r *http.Request) string { return callerName(authz.Principal{}, r.RemoteAddr) }
		if in.auth != nil {
			wcfg.Authorize, wcfg.Client = in.auth.authorizeHTTP, in.auth.clientHTTP
		}
		if in.webSrv, err = serveHTTP("web", cfg.WebAddr, cfg.WebListener, web.New(wcfg), in.sec.tls, log); err != nil {
			return err
		}
	}
	return nil
}

// restore restores the state from the store, takes part in the write lead,
// seeds the demo if asked, and reports ready and SERVING.
func (in *instance) restore() error {
	start := time.Now()
	if err := in.store.Restore(in.alloc); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	in.hub.Attach(in.alloc)
	if in.fwd != nil {
		in.fwd.store.Lead(in.fwd.self)
	}
	restored := time.Since(start)
	if in.cfg.Demo {
		if err := seedDemo(in.alloc, in.log); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	in.log.Info("ready", "network_instances", len(in.alloc.ListNetworkInstances(ipam.Filter{})), "restore_duration", restored)
	in.calls.ready.Store(true)
	in.setServing(healthpb.HealthCheckResponse_SERVING)
	return nil
}

// shutdown stops accepting calls, ends the streams that would hold a
// graceful stop, lets in-flight calls finish (up to the shutdown timeout)
// and stops the HTTP servers.
func (in *instance) shutdown() {
	in.log.Info("shutting down")
	in.health.Shutdown()
	in.hub.Close() // ends Watch streams, which would hold GracefulStop forever
	if in.relay != nil {
		in.relay.close() // and the relay streams of other replicas
	}
	timeout := in.cfg.ShutdownTimeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	stopped := make(chan struct{})
	go func() { in.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(timeout):
		in.log.Warn("in-flight calls did not finish in time; cutting them off", "timeout", timeout)
		in.grpc.Stop()
		<-stopped
	}
	for _, srv := range []*http.Server{in.metricsSrv, in.webSrv} {
		if srv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = srv.Shutdown(sctx)
			cancel()
		}
	}
}

// serveHTTP serves h on lis, or on a listener of addr, with TLS when tc
// is set, until the returned server is shut down.
func serveHTTP(what, addr string, lis net.Listener, h http.Handler, tc *tls.Config, log *slog.Logger) (*http.Server, error) {
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("%s listen: %w", what, err)
		}
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	if tc != nil {
		lis = tls.NewListener(lis, tc)
	}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(what+" server", "err", err)
		}
	}()
	log.Info(what, "addr", lis.Addr().String(), "tls", tc != nil)
	return srv, nil
}

func storeName(cfg Config) string {
	if cfg.Store == "" {
		return "file"
	}
	return cfg.Store
}

// seedDemo creates the demo network instance of the README when the state
// is empty: vpc-1 with aggregate 10.0.0.0/8 and network net1 10.0.1.0/24
// whose gateway is 10.0.1.1.
func seedDemo(a *ipam.Allocator, log *slog.Logger) error {
	if len(a.ListNetworkInstances(ipam.Filter{})) > 0 {
		log.Info("demo: state not empty; not seeding")
		return nil
	}
	key := func(name string) ipam.Key { return ipam.Key{Owner: "demo", Namespace: "default", Name: name} }
	_, err := a.Sync(context.Background(), ipam.SyncRequest{
		Owner:            "demo",
		NetworkInstances: []ipam.NetworkInstance{{Key: key("vpc-1")}},
		Prefixes: []ipam.Prefix{
			{Key: key("aggregate0"), NetworkInstance: "vpc-1", Kind: ipam.KindAggregate, Prefix: netip.MustParsePrefix("10.0.0.0/8")},
			{Key: key("net1-prefix1"), NetworkInstance: "vpc-1", Kind: ipam.KindNetwork, Prefix: netip.MustParsePrefix("10.0.1.1/24"),
				Network: "net1", Labels: ipam.Labels{ipam.LabelGateway: "true"}},
		},
	})
	if err != nil {
		return err
	}
	log.Info("demo: seeded network instance vpc-1 (10.0.0.0/8, net1 10.0.1.0/24 gateway 10.0.1.1)")
	return nil
}
