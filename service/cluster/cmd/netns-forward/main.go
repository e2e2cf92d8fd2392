// Command netns-forward lets the machine's shell reach a server that
// listens inside a network namespace: it accepts TCP connections on a
// loopback address of its own namespace and connects each, from inside
// the namespace named by --netns, to --to. The test cluster (`make
// cluster`) runs it for its API server, whose namespace has no route out.
//
//	netns-forward --listen 127.0.0.1:16443 --netns /var/run/netns/ipam-cluster --to 10.88.0.1:6443
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nephio-project/ipam/service/cluster/forward"
)

func main() {
	var cfg forward.Config
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:16443", "loopback host:port to accept connections on, in this process's network namespace")
	flag.StringVar(&cfg.Netns, "netns", "", "path of the network namespace to connect from (e.g. /var/run/netns/NAME)")
	flag.StringVar(&cfg.To, "to", "", "host:port to connect to inside that namespace")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := forward.Run(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		fmt.Fprintln(os.Stderr, "netns-forward:", err)
		os.Exit(1)
	}
}
