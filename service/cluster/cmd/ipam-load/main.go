// Command ipam-load allocates addresses from ipam-server with several
// clients at once and prints every allocation the server acknowledged, one
// JSON line each, so that a test can check afterwards that none was lost
// or handed out twice. The cluster tests run it as a pod under restarts and
// failovers of the server.
//
//	ipam-load --server ipam-server.ipam-system.svc:9090 --tls-ca ca.crt --tls-cert tls.crt --tls-key tls.key \
//	  --selector nephio.org/network-instance=vpc-1 --clients 8 --count 2000
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nephio-project/ipam/service/cluster/load"
)

func main() {
	cfg, err := load.ParseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := load.Run
	if cfg.Release {
		run = load.Release
	}
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ipam-load:", err)
		os.Exit(1)
	}
}
