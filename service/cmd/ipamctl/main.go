// Command ipamctl is the command line client of ipam-server: it lists,
// shows, creates and deletes network instances, prefixes, ranges and
// allocations and prints a network instance's prefix tree.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nephio-project/ipam/service/fronts/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
