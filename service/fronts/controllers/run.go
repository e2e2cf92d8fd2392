package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	capicorev1beta2 "github.com/nephio-project/ipam/api/capi/core/v1beta2"
	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/client"
)

// Name is the controller's name: the reporting controller of the events
// it records.
const Name = "ipam-controller"

// LeaderElectionID is the name of the Lease the controller replicas elect
// their leader with.
const LeaderElectionID = "ipam-controller.ipam.nephio.org"

// DefaultMetricsBindAddress is where the metrics are served unless told
// otherwise: loopback, on a port that neither ipam-server's defaults nor
// `make run` (gRPC 127.0.0.1:9090, web view 127.0.0.1:8080) take, so the
// controller runs next to them on one machine. In a pod, set
// --metrics-bind-address (the blueprint serves them on :8080).
const DefaultMetricsBindAddress = "127.0.0.1:8082"

// DefaultHealthProbeBindAddress is where /healthz and /readyz are served
// unless told otherwise.
const DefaultHealthProbeBindAddress = ":8081"

// Config is everything ipam-controller is told on its command line, plus
// hooks for tests.
type Config struct {
	// Kubeconfig is the kubeconfig file; empty means in-cluster (or the
	// default loading rules: $KUBECONFIG, ~/.kube/config).
	Kubeconfig string
	// Server is the host:port of ipam-server.
	Server string
	// TLSCA verifies ipam-server's certificate; TLSCert and TLSKey are
	// the client certificate for mTLS; TLS is on when any is set.
	TLSCA, TLSCert, TLSKey string
	// TokenFile holds the bearer token that identifies the controllers to
	// ipam-server's authorization policy.
	TokenFile string
	// Owner keys every object in ipam-server; DefaultOwner when empty.
	Owner string
	// Resync is how often every resource is reconciled again;
	// DefaultResync when zero.
	Resync time.Duration
	// MetricsBindAddress serves controller metrics; "0" turns them off.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; empty or "0"
	// turns them off.
	HealthProbeBindAddress string
	// Metal3 serves the Metal3 IP Address Manager API (ipam.metal3.io):
	// opt-in, since Metal3's own controller serves the same kinds.
	Metal3 bool
	// NVIDIA serves NVIDIA's per-node pools (nv-ipam.nvidia.com): opt-in,
	// since NVIDIA's own controller serves the same kind.
	NVIDIA bool
	// NephioResource serves Nephio's NetworkInstances, IPPrefixes,
	// IPClaims, VLANIndexes and VLANClaims (ipam.resource.nephio.org,
	// vlan.resource.nephio.org): opt-in, since
	// Nephio's resource backend serves the same kinds.
	NephioResource bool
	// FrontCheck is how often a front whose CRDs are not installed yet
	// checks again; DefaultFrontCheck when zero.
	FrontCheck time.Duration
	// LeaderElect runs leader election so that one replica reconciles;
	// LeaderElectionNamespace is where its Lease lives (in-cluster: the
	// pod's namespace).
	LeaderElect             bool
	LeaderElectionNamespace string

	// RESTConfig, when set, is used instead of Kubeconfig.
	RESTConfig *rest.Config
	// Logger, when set, is the manager's logger.
	Logger logr.Logger
	// SkipNameValidation lets a process run more than one manager in turn
	// (tests restart the controllers).
	SkipNameValidation bool
	// DialOptions are added to the gRPC dial options (tests count calls
	// with an interceptor).
	DialOptions []grpc.DialOption
	// Reconciled is Options.Reconciled.
	Reconciled func(controller string, key types.NamespacedName, res ctrl.Result, err error)
}

// Run reconciles the ipam.nephio.org resources against ipam-server until
// ctx is cancelled.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Server == "" {
		return errors.New("--server: the address of ipam-server is required")
	}
	restCfg := cfg.RESTConfig
	if restCfg == nil {
		var err error
		if restCfg, err = loadRESTConfig(cfg.Kubeconfig); err != nil {
			return err
		}
	}
	dial, err := client.DialOptions(client.Config{Server: cfg.Server, CA: cfg.TLSCA, Cert: cfg.TLSCert, Key: cfg.TLSKey,
		TokenFile: cfg.TokenFile, UserAgent: Name})
	if err != nil {
		return fmt.Errorf("ipam-server: %w", err)
	}
	conn, err := grpc.NewClient(cfg.Server, append(dial, cfg.DialOptions...)...)
	if err != nil {
		return fmt.Errorf("ipam-server %s: %w", cfg.Server, err)
	}
	defer func() { _ = conn.Close() }()

	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		return err
	}
	opts := ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: cfg.MetricsBindAddress},
		HealthProbeBindAddress:        cfg.HealthProbeBindAddress,
		LeaderElection:                cfg.LeaderElect,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       cfg.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: ptr.To(cfg.SkipNameValidation)},
	}
	if cfg.MetricsBindAddress == "" {
		opts.Metrics.BindAddress = "0"
	}
	if cfg.Logger.GetSink() != nil {
		opts.Logger = cfg.Logger
	}
	mgr, err := ctrl.NewManager(restCfg, opts)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	setupCtx := log.IntoContext(ctx, mgr.GetLogger())
	if err := Setup(setupCtx, mgr, ipamv1.NewIPAMClient(conn), Options{Owner: cfg.Owner, Resync: cfg.Resync, EventRecorderName: Name,
		Reconciled: cfg.Reconciled, Metal3: cfg.Metal3, NVIDIA: cfg.NVIDIA,
		Nephio: cfg.NephioResource, FrontCheck: cfg.FrontCheck}); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while setting up
		}
		return fmt.Errorf("controllers: %w", err)
	}
	return mgr.Start(ctx)
}

// AddToScheme adds every type the controllers read and write: the
// Kubernetes built-ins, ipam.nephio.org, ipam.metal3.io,
// nv-ipam.nvidia.com, Nephio's ipam.resource.nephio.org and
// vlan.resource.nephio.org and the Cluster API mirrors.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ipamv1alpha1.AddToScheme,
		capiv1beta2.AddToScheme, capicorev1beta2.AddToScheme, metal3v1alpha1.AddToScheme, nvv1alpha1.AddToScheme,
		nipamv1alpha1.AddToScheme, vlanv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
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
