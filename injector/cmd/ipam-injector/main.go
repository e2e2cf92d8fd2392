// Command ipam-injector watches Porch PackageRevisions and allocates the
// IPAM resources of Draft revisions with ipam-server (see package injector).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nephio-project/ipam/injector"
)

func main() {
	var cfg injector.Config
	// A FlagSet of its own: controller-runtime registers --kubeconfig on
	// flag.CommandLine when it is imported.
	fs := flag.NewFlagSet("ipam-injector", flag.ExitOnError)
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster or $KUBECONFIG)")
	fs.StringVar(&cfg.Server, "server", "", "ipam-server address, host:port (required)")
	fs.StringVar(&cfg.Namespace, "namespace", "", "watch PackageRevisions in this namespace only (default: all)")
	fs.StringVar(&cfg.TLSCA, "tls-ca", "", "PEM file of the CA that signed ipam-server's certificate (enables TLS)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM client certificate for mTLS")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM client key for mTLS")
	fs.StringVar(&cfg.TokenFile, "token-file", "", "file holding the bearer token that identifies the injector to ipam-server (sent over TLS or to loopback only)")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "bound of each ipam-server call (default 10s)")
	fs.DurationVar(&cfg.GCInterval, "gc-interval", 0, "how soon after a PackageRevision deletion garbage is collected; a package that is gone is released at the second collection that finds it gone (default 1m)")
	fs.IntVar(&cfg.Workers, "workers", 0, fmt.Sprintf("how many Drafts are processed at once, never two of one package (default %d, at most %d)", injector.DefaultWorkers, injector.MaxWorkers))
	fs.DurationVar(&cfg.ResyncInterval, "resync-interval", 0, fmt.Sprintf("how often, while nothing happens, all PackageRevisions are listed (one call) to find Drafts whose watch event was lost, and garbage is collected (default %s)", injector.DefaultResyncInterval))
	fs.StringVar(&cfg.MetricsBindAddress, "metrics-bind-address", "0", `address of the metrics endpoint (controller metrics and ipam_injector_api_requests_total); "0" turns it off`)
	fs.StringVar(&cfg.HealthProbeBindAddress, "health-probe-bind-address", "0", `address of the /healthz and /readyz probes; "0" turns them off`)
	fs.DurationVar(&cfg.PorchCheck, "porch-check-interval", 0, fmt.Sprintf("while the cluster does not serve Porch's API, how often the injector looks again (default %s)", injector.DefaultPorchCheck))
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "ipam-injector: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	cfg.Logger = logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, nil))
	ctrl.SetLogger(cfg.Logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := injector.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "ipam-injector:", err)
		os.Exit(1)
	}
}
