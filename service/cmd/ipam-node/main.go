// Command ipam-node is the node daemon of NVIDIA's IPAM served by the
// project's allocation core: it hands the addresses of this node's block
// of each IPPool and CIDRPool to the nv-ipam CNI plugin over a unix socket.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nephio-project/ipam/service/node/daemon"
)

func main() {
	var cfg daemon.Config
	fs := flag.NewFlagSet("ipam-node", flag.ExitOnError)
	cfg.RegisterFlags(fs)
	_ = fs.Parse(os.Args[1:])
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "ipam-node: --log-level:", err)
		os.Exit(2)
	}
	slogger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	log := logr.FromSlogHandler(slogger.Handler())
	ctrl.SetLogger(log)
	if err := daemon.Run(ctrl.SetupSignalHandler(), cfg, log, slogger); err != nil {
		fmt.Fprintln(os.Stderr, "ipam-node:", err)
		os.Exit(1)
	}
}
