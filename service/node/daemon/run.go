package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	ipamnodev1 "github.com/nephio-project/ipam/api/proto/ipam/node/v1"
	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
	"github.com/nephio-project/ipam/service/internal/walmetrics"
	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// Name is the daemon's name: the component of its events.
const Name = "ipam-node"

// poolResync is how often every pool is reconciled again without a
// change.
const poolResync = time.Minute

// Run serves the node until ctx ends: it opens the store (serving the last
// known blocks at once), installs the plugin, serves the node API, probes
// and metrics, watches the pools and cleans up stale allocations.
func Run(ctx context.Context, cfg Config, log logr.Logger, slogger *slog.Logger) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	if err := importNVIDIAStore(cfg.StoreFile, log, slogger); err != nil {
		return err
	}
	wal := walmetrics.New()
	engine, err := nodeipam.Open(cfg.StoreFile, nodeipam.Options{Logger: slogger, OnFsync: wal.ObserveFsync, OnCommit: wal.ObserveCommit})
	if err != nil {
		return err
	}
	defer func() {
		if err := engine.Close(); err != nil {
			log.Error(err, "close store")
		}
	}()
	if err := InstallCNI(cfg.CNI); err != nil {
		return err
	}
	metrics := NewMetrics(engine, wal.Collectors()...)
	srv := grpc.NewServer(ServerOptions()...)
	api := NewServer(engine, log, metrics)
	nodev1.RegisterIPAMServiceServer(srv, api)
	ipamnodev1.RegisterNodeAllocationsServer(srv, NewAllocations(api))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	l, err := listen(cfg.BindAddress)
	if err != nil {
		return fmt.Errorf("node API: %w", err)
	}
	errs := make(chan error, 3)
	go func() { errs <- srv.Serve(l) }()
	defer srv.GracefulStop()
	log.Info("serving", "address", cfg.BindAddress, "node", cfg.NodeName, "store", cfg.StoreFile, "pools", len(engine.Pools()))

	type named struct {
		name string
		srv  *http.Server
	}
	var httpServers []named
	if cfg.HealthProbeAddr != "" && cfg.HealthProbeAddr != "0" {
		mux := http.NewServeMux()
		ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }
		mux.HandleFunc("/healthz", ok)
		mux.HandleFunc("/readyz", ok)
		httpServers = append(httpServers, named{"health", &http.Server{Addr: cfg.HealthProbeAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}})
	}
	if cfg.MetricsAddr != "" && cfg.MetricsAddr != "0" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
		httpServers = append(httpServers, named{"metrics", &http.Server{Addr: cfg.MetricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}})
	}
	for _, h := range httpServers {
		hsrv := h.srv
		hl, err := net.Listen("tcp", hsrv.Addr)
		if err != nil {
			return fmt.Errorf("%s %s: %w", h.name, hsrv.Addr, err)
		}
		log.Info("http", "server", h.name, "address", hl.Addr().String())
		go func() {
			if err := hsrv.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		}()
		defer func() { _ = hsrv.Close() }()
	}

	restCfg, err := loadRESTConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	// Pod reads and events time out; the pool cache's watches must not.
	callCfg := rest.CopyConfig(restCfg)
	callCfg.Timeout = 10 * time.Second
	clientset, err := kubernetes.NewForConfig(callCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := nvv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clientset.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme, corev1.EventSource{Component: Name, Host: cfg.NodeName})
	watch := newPoolWatch(restCfg, scheme, engine, cfg.NodeName, cfg.PoolsNamespace, log.WithName("pools"), recorder)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watch.run(ctx, poolResync)
	cl := &cleaner{node: cfg.NodeName, engine: engine, pods: clientset, grace: cfg.CleanupGrace, log: log.WithName("cleanup"), metrics: metrics}
	go cl.run(ctx, cfg.CleanupInterval)

	select {
	case <-ctx.Done():
		log.Info("shutting down")
		hs.Shutdown()
		return nil
	case err := <-errs:
		return err
	}
}

// loadRESTConfig reads path, or with no path the in-cluster config or the
// default loading rules.
func loadRESTConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}
