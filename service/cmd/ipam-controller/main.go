// Command ipam-controller reconciles the ipam.nephio.org custom resources
// (NetworkInstance, IPPrefix, IPAllocation) against ipam-server.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nephio-project/ipam/service/fronts/controllers"
)

func main() {
	var cfg controllers.Config
	var level slog.Level
	fs := flag.NewFlagSet("ipam-controller", flag.ExitOnError)
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster config")
	fs.StringVar(&cfg.Server, "server", "127.0.0.1:9090", "host:port of ipam-server")
	fs.StringVar(&cfg.TLSCA, "tls-ca", "", "CA certificate (PEM) that verifies ipam-server (enables TLS; without it, with --tls-cert, the system roots verify it)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "client certificate (PEM) for mTLS")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "client key (PEM) for mTLS")
	fs.StringVar(&cfg.TokenFile, "token-file", "", "file holding the bearer token that identifies the controllers to ipam-server (sent over TLS or to loopback only)")
	fs.StringVar(&cfg.Owner, "owner", controllers.DefaultOwner, "owner under which objects are keyed in ipam-server")
	fs.DurationVar(&cfg.Resync, "resync", controllers.DefaultResync, "how often every resource is reconciled again")
	fs.StringVar(&cfg.MetricsBindAddress, "metrics-bind-address", controllers.DefaultMetricsBindAddress, `address of the metrics endpoint; "0" turns it off`)
	fs.StringVar(&cfg.HealthProbeBindAddress, "health-probe-bind-address", controllers.DefaultHealthProbeBindAddress, "address of /healthz and /readyz")
	fs.BoolVar(&cfg.LeaderElect, "leader-elect", false, "elect a leader so that one replica reconciles")
	fs.BoolVar(&cfg.NVIDIA, "nvidia", false, "serve NVIDIA's per-node pools (nv-ipam.nvidia.com IPPool and CIDRPool; install blueprints/ipam-nvidia, before or after the start, and not next to NVIDIA's own controller)")
	fs.BoolVar(&cfg.Metal3, "metal3", false, "serve the Metal3 IP Address Manager API (ipam.metal3.io IPPool, IPClaim, IPAddress; install blueprints/ipam-metal3, before or after the start, and not next to Metal3's own)")
	fs.BoolVar(&cfg.NephioResource, "nephio-resource", false, "serve Nephio's resource API (ipam.resource.nephio.org NetworkInstance, IPPrefix and IPClaim, vlan.resource.nephio.org VLANIndex and VLANClaim; install blueprints/ipam-nephio, before or after the start, and not next to Nephio's own resource backend)")
	fs.DurationVar(&cfg.FrontCheck, "front-check-interval", controllers.DefaultFrontCheck, "how often a front that is off (the Cluster API front; Metal3, NVIDIA and Nephio when asked for) checks whether its CRDs are installed and the RBAC lets it watch them, to turn on without a restart")
	fs.StringVar(&cfg.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease (in-cluster: the pod's)")
	fs.TextVar(&level, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	_ = fs.Parse(os.Args[1:])

	cfg.Logger = logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctrl.SetLogger(cfg.Logger)
	if err := controllers.Run(ctrl.SetupSignalHandler(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "ipam-controller:", err)
		os.Exit(1)
	}
}
