package injector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/functions/engine"
	ipamclient "github.com/nephio-project/ipam/service/client"
)

// Name is the injector's controller and event source name.
const Name = "ipam-injector"

// DefaultResyncInterval is how often the injector lists the
// PackageRevisions once to find Drafts it has not processed at their
// current version, and collects garbage, when Config.ResyncInterval is
// zero. It is a safety net: edits are found by the PackageRevision watch
// (Porch sends an event with a new resourceVersion for every write of a
// revision's resources), and events lost in a burst by the list made
// activityResync after activity.
const DefaultResyncInterval = 5 * time.Minute

// DefaultGCInterval is how soon after a PackageRevision deletion the
// injector collects garbage when Config.GCInterval is zero; a package that
// is gone is released by the first collection at least 30 s after the
// first that found it gone, when every collection in between did too.
const DefaultGCInterval = time.Minute

// DefaultWorkers is how many revisions are processed at once when
// Config.Workers is zero.
const DefaultWorkers = 4

// MaxWorkers bounds Config.Workers.
const MaxWorkers = 64

// Retry backoff of a revision whose processing failed (ipam-server refused
// or could not be reached, Porch failed): doubled per failure, from
// retryBase up to retryMax.
const (
	retryBase = time.Second
	retryMax  = 5 * time.Minute
)

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
	// GCInterval is how soon after a deletion the garbage is collected;
	// zero means DefaultGCInterval.
	GCInterval time.Duration
	// ResyncInterval is how often the PackageRevisions are listed to find
	// Drafts not processed at their current version (and garbage is
	// collected); zero means DefaultResyncInterval.
	ResyncInterval time.Duration
	// Workers is how many revisions are processed at once (never two of
	// one package); zero means DefaultWorkers, at most MaxWorkers.
	Workers int
	// MetricsBindAddress serves the controller metrics (and
	// ipam_injector_api_requests_total); empty or "0" serves none.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz (the process
	// runs, whether or not Porch is served yet); empty or "0" serves none.
	HealthProbeBindAddress string
	// PorchCheck is how often the injector looks again for Porch's API
	// while the cluster does not serve it; zero means DefaultPorchCheck.
	PorchCheck time.Duration
	// Logger, when set, is the manager's logger.
	Logger logr.Logger
	// SkipNameValidation lets one process run more than one injector in
	// turn (tests).
	SkipNameValidation bool

	// beforeWrite is Injector.beforeWrite (tests).
	beforeWrite func(ctx context.Context, in *Injector, key types.NamespacedName, attempt int)
	// afterGC is called after each garbage collection with the time it
	// started (tests wait for one that started after a deletion).
	afterGC func(started time.Time)
}

// Run watches PackageRevisions and allocates the IPAM resources of Drafts
// until ctx is cancelled, collecting garbage after deletions.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Server == "" {
		return errors.New("--server: the address of ipam-server is required")
	}
	if cfg.Workers < 0 || cfg.Workers > MaxWorkers {
		return fmt.Errorf("--workers %d: want 1 to %d", cfg.Workers, MaxWorkers)
	}
	if cfg.ResyncInterval < 0 || cfg.GCInterval < 0 {
		return errors.New("--resync-interval and --gc-interval must not be negative")
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
	restCfg = countRequests(restCfg)
	if restCfg.QPS == 0 && restCfg.RateLimiter == nil {
		// client-go's default (5 requests/s) would throttle a burst of
		// Drafts far below what Porch serves; as controller-runtime's own
		// config loader does, leave the pace to the API server's
		// priority and fairness.
		restCfg.QPS = -1
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
	metricsAddr := cfg.MetricsBindAddress
	if metricsAddr == "" {
		metricsAddr = "0"
	}
	probeAddr := cfg.HealthProbeBindAddress
	if probeAddr == "" {
		probeAddr = "0"
	}
	opts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		Controller:             config.Controller{SkipNameValidation: ptr.To(cfg.SkipNameValidation)},
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
	if probeAddr != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return err
		}
	}
	in := &Injector{
		Client:      mgr.GetClient(),
		Reader:      mgr.GetAPIReader(),
		Revisions:   mgr.GetCache(),
		IPAM:        ipamv1.NewIPAMClient(conn),
		Sync:        syncOpts,
		Namespace:   cfg.Namespace,
		Recorder:    mgr.GetEventRecorder(Name),
		Log:         mgr.GetLogger().WithName(Name),
		beforeWrite: cfg.beforeWrite,
	}
	in.gcDue.Store(true) // at start: packages deleted while it was down
	in.activity = make(chan struct{}, 1)
	workers := cfg.Workers
	if workers == 0 {
		workers = DefaultWorkers
	}
	check := cfg.PorchCheck
	if check <= 0 {
		check = DefaultPorchCheck
	}
	porch := &porchWait{served: func() (bool, error) { return porchServed(restCfg) }, every: check,
		log: mgr.GetLogger().WithName("porch"), start: func() error { return registerInjector(mgr, in, cfg, workers) }}
	if err := porch.try(true); err != nil {
		return err
	}
	if !porch.on {
		if err := mgr.Add(porch); err != nil {
			return err
		}
	}
	return mgr.Start(ctx)
}

// registerInjector registers the injector's controller and its garbage
// collection and resync with mgr: once Porch's API is served.
func registerInjector(mgr ctrl.Manager, in *Injector, cfg Config, workers int) error {
	resync := make(chan event.GenericEvent, 256)
	if err := ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(newRevision(), builder.WithPredicates(revisionEvents{in: in})).
		WatchesRawSource(source.Channel(resync, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: workers,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](retryBase, retryMax),
		}).
		Complete(in); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	interval := cfg.GCInterval
	if interval <= 0 {
		interval = DefaultGCInterval
	}
	if err := mgr.Add(gcRunnable{in: in, interval: interval, log: mgr.GetLogger().WithName("gc"), after: cfg.afterGC}); err != nil {
		return err
	}
	every := cfg.ResyncInterval
	if every <= 0 {
		every = DefaultResyncInterval
	}
	return mgr.Add(resyncRunnable{in: in, interval: every, out: resync, log: mgr.GetLogger().WithName("resync"), after: cfg.afterGC})
}

// gcRunnable runs Injector.CollectGarbage, checking every interval whether
// one is due: after a PackageRevision deletion, after a failed collection,
// while an owner waits for its release, and once at start.
type gcRunnable struct {
	in       *Injector
	interval time.Duration
	log      logr.Logger
	after    func(started time.Time) // called after each collection; may be nil
}

// Start collects garbage when due until ctx is done.
func (g gcRunnable) Start(ctx context.Context) error {
	logger := g.log
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !g.in.gcDue.Swap(false) {
			continue
		}
		g.in.collect(ctx, logger, nil, g.after)
	}
}

// collect runs one garbage collection (prs: a live list already made, or
// nil) and makes the next one due when it failed or an owner waits for
// its release.
func (in *Injector) collect(ctx context.Context, logger logr.Logger, prs *unstructured.UnstructuredList, after func(time.Time)) {
	started := time.Now()
	released, err := in.CollectGarbage(ctx, prs)
	if err != nil {
		logger.Error(err, "garbage collection")
	}
	if err != nil || in.pendingRelease() {
		in.gcDue.Store(true)
	}
	if len(released) > 0 {
		logger.Info("released the allocations of deleted packages", "owners", released)
	}
	if after != nil {
		after(started)
	}
}

// NeedLeaderElection: GC runs wherever the manager runs.
func (g gcRunnable) NeedLeaderElection() bool { return true }

// activityResync is how long after a PackageRevision event the injector
// lists the PackageRevisions once to find Drafts whose event it missed:
// under load, Porch's watch has been seen to drop events of new Drafts.
// While events keep coming it lists at most once per activityResync.
const activityResync = 30 * time.Second

// resyncRunnable lists the PackageRevisions every interval, and
// activityResync after an event or after a list that found Drafts to
// process, and sends the controller each Draft not processed at its
// current version; the periodic list also serves a garbage collection.
type resyncRunnable struct {
	in       *Injector
	interval time.Duration
	out      chan<- event.GenericEvent
	log      logr.Logger
	after    func(started time.Time) // called after each collection; may be nil
}

// Start resyncs until ctx is done: one list call to Porch each time, no
// per-Draft read.
func (r resyncRunnable) Start(ctx context.Context) error {
	logger := r.log
	t := time.NewTicker(r.interval)
	defer t.Stop()
	var soon <-chan time.Time // armed by an event
	for {
		periodic := false
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			periodic = true
		case <-r.in.activity:
			if soon == nil {
				soon = time.After(activityResync)
			}
			continue
		case <-soon:
		}
		soon = nil
		prs := newRevisionList()
		var opts []client.ListOption
		if r.in.Namespace != "" {
			opts = append(opts, client.InNamespace(r.in.Namespace))
		}
		lctx, cancel := context.WithTimeout(ctx, PorchTimeout)
		err := r.in.Reader.List(lctx, prs, opts...)
		cancel()
		if err != nil {
			logger.Error(err, "list PackageRevisions")
			continue
		}
		live := make(map[types.NamespacedName]bool, len(prs.Items))
		stale, verify := 0, 0
		for i := range prs.Items {
			pr := &prs.Items[i]
			key := client.ObjectKeyFromObject(pr)
			live[key] = true
			if lifecycle(pr) != string(porchv1alpha1.PackageRevisionLifecycleDraft) {
				continue
			}
			switch {
			case !r.in.upToDate(key, pr.GetResourceVersion()):
				stale++
			case r.in.toVerify(key, pr):
				verify++
			default:
				continue
			}
			r.in.sawListed(key)
			select {
			case r.out <- event.GenericEvent{Object: pr}:
			case <-ctx.Done():
				return nil
			}
		}
		if stale+verify > 0 {
			logger.Info("Drafts to read", "notProcessed", stale, "toVerify", verify, "periodic", periodic)
			// List again activityResync later, until a list finds every
			// Draft processed and verified: the events of these Drafts'
			// writes may be dropped too.
			soon = time.After(activityResync)
		}
		if periodic {
			r.in.forgetAllBut(live)
			r.in.collect(ctx, logger, prs, r.after)
		}
	}
}

// NeedLeaderElection: the resync runs wherever the controller runs.
func (r resyncRunnable) NeedLeaderElection() bool { return true }
