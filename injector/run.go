package injector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/functions/engine"
	ipamclient "github.com/nephio-project/ipam/service/client"
)

// Name is the injector's controller and event source name.
const Name = "ipam-injector"

// DefaultResyncInterval is how often every Draft is processed again when
// Config.ResyncInterval is zero: Porch sends no PackageRevision event when
// only a revision's resources change, so edits are found by this resync.
const DefaultResyncInterval = 10 * time.Second

// DefaultGCInterval is how often the injector releases the allocations of
// packages that no longer exist, when Config.GCInterval is zero.
const DefaultGCInterval = time.Minute

// Config is what ipam-injector needs to run.
type Config struct {
	// Kubeconfig is the kubeconfig file; empty means in-cluster or
	// $KUBECONFIG.
	Kubeconfig string
	// RESTConfig, when set, is used instead of Kubeconfig.
	RESTConfig *rest.Config
	// Server is the ipam-server address, host:port.
	Server string
	// Namespace limits the watch to one namespace; empty means all.
	Namespace string
	// TLSCA, TLSCert and TLSKey are PEM files for TLS (and mTLS) to
	// ipam-server; none means plaintext.
	TLSCA, TLSCert, TLSKey string
	// TokenFile holds the bearer token that identifies the injector to
	// ipam-server's authorization policy.
	TokenFile string
	// Timeout bounds each call to ipam-server; zero means
	// engine.DefaultTimeout.
	Timeout time.Duration
	// GCInterval is the garbage collection period; zero means
	// DefaultGCInterval.
	GCInterval time.Duration
	// ResyncInterval is how often every Draft is processed again; zero
	// means DefaultResyncInterval.
	ResyncInterval time.Duration
	// Logger, when set, is the manager's logger.
	Logger logr.Logger
	// SkipNameValidation lets one process run more than one injector in
	// turn (tests).
	SkipNameValidation bool

	// beforeWrite is Injector.beforeWrite (tests).
	beforeWrite func(ctx context.Context, attempt int)
	// afterGC is called after each garbage collection (tests count them).
	afterGC func()
}

// Run watches PackageRevisions and allocates the IPAM resources of Drafts
// until ctx is cancelled, collecting garbage every GCInterval.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Server == "" {
		return errors.New("--server: the address of ipam-server is required")
	}
	restCfg := cfg.RESTConfig
	if restCfg == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = cfg.Kubeconfig
		var err error
		restCfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
	}
	syncOpts := engine.Options{Server: cfg.Server, Timeout: cfg.Timeout, ServerHint: "check --server and that ipam-server runs"}
	conn, err := ipamclient.Dial(ipamclient.Config{Server: cfg.Server, CA: cfg.TLSCA, Cert: cfg.TLSCert, Key: cfg.TLSKey,
		TokenFile: cfg.TokenFile, UserAgent: Name})
	if err != nil {
		return fmt.Errorf("ipam-server: %w", err)
	}
	defer func() { _ = conn.Close() }()

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := porchv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	opts := ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(cfg.SkipNameValidation)},
	}
	if cfg.Namespace != "" {
		opts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{cfg.Namespace: {}}}
	}
	if cfg.Logger.GetSink() != nil {
		opts.Logger = cfg.Logger
	}
	mgr, err := ctrl.NewManager(restCfg, opts)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	in := &Injector{
		Client:      mgr.GetClient(),
		Reader:      mgr.GetAPIReader(),
		IPAM:        ipamv1.NewIPAMClient(conn),
		Sync:        syncOpts,
		Namespace:   cfg.Namespace,
		Recorder:    mgr.GetEventRecorder(Name),
		beforeWrite: cfg.beforeWrite,
	}
	resync := make(chan event.GenericEvent, 256)
	if err := ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(newRevision(), builder.WithPredicates(draftOrDeleted{})).
		WatchesRawSource(source.Channel(resync, &handler.EnqueueRequestForObject{})).
		Complete(in); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	interval := cfg.GCInterval
	if interval <= 0 {
		interval = DefaultGCInterval
	}
	if err := mgr.Add(gcRunnable{in: in, interval: interval, after: cfg.afterGC}); err != nil {
		return err
	}
	every := cfg.ResyncInterval
	if every <= 0 {
		every = DefaultResyncInterval
	}
	if err := mgr.Add(resyncRunnable{in: in, interval: every, out: resync}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// gcRunnable runs Injector.CollectGarbage every interval.
type gcRunnable struct {
	in       *Injector
	interval time.Duration
	after    func() // called after each collection; may be nil
}

// Start collects garbage every interval until ctx is done.
func (g gcRunnable) Start(ctx context.Context) error {
	logger := ctrl.LoggerFrom(ctx).WithName("gc")
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		released, err := g.in.CollectGarbage(ctx)
		if err != nil {
			logger.Error(err, "garbage collection")
		}
		if len(released) > 0 {
			logger.Info("released the allocations of deleted packages", "owners", released)
		}
		if g.after != nil {
			g.after()
		}
	}
}

// NeedLeaderElection: GC runs wherever the manager runs.
func (g gcRunnable) NeedLeaderElection() bool { return true }

// resyncRunnable enqueues every Draft every interval.
type resyncRunnable struct {
	in       *Injector
	interval time.Duration
	out      chan<- event.GenericEvent
}

// Start lists the Drafts every interval and sends each to the controller.
func (r resyncRunnable) Start(ctx context.Context) error {
	logger := ctrl.LoggerFrom(ctx).WithName("resync")
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		prs := newRevisionList()
		var opts []client.ListOption
		if r.in.Namespace != "" {
			opts = append(opts, client.InNamespace(r.in.Namespace))
		}
		if err := r.in.Reader.List(ctx, prs, opts...); err != nil {
			logger.Error(err, "list PackageRevisions")
			continue
		}
		for i := range prs.Items {
			if lifecycle(&prs.Items[i]) != string(porchv1alpha1.PackageRevisionLifecycleDraft) {
				continue
			}
			select {
			case r.out <- event.GenericEvent{Object: &prs.Items[i]}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// NeedLeaderElection: the resync runs wherever the controller runs.
func (r resyncRunnable) NeedLeaderElection() bool { return true }
