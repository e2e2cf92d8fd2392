// Command ipam-server serves the IPAM gRPC API (ipam.v1.IPAM) over the
// allocation core and a durable store, with the standard health service,
// server reflection and Prometheus metrics.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nephio-project/ipam/service/server"
)

func main() {
	var cfg server.Config
	var etcd string
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:9090", "gRPC listen address host:port")
	flag.StringVar(&cfg.DataDir, "data-dir", "./ipam-data", "directory of the file store")
	flag.StringVar(&cfg.Store, "store", "file", "store: file (embedded, crash-safe) or etcd (several replicas share one etcd); memory keeps nothing")
	flag.StringVar(&etcd, "etcd-endpoints", "", "comma-separated etcd endpoints (--store etcd)")
	flag.StringVar(&cfg.AdvertiseAddr, "advertise-addr", "", "host:port the other replicas reach this one at (--store etcd over plaintext, or mTLS with a policy naming the replicas: changes are forwarded to the replica holding the write lead; empty: the listen address, or the first interface address when listening on all)")
	flag.StringVar(&cfg.EtcdPrefix, "etcd-prefix", "/ipam/", "key prefix in etcd (--store etcd)")
	flag.StringVar(&cfg.EtcdCA, "etcd-ca", "", "PEM file of the CA of etcd's server certificates (--store etcd over TLS)")
	flag.StringVar(&cfg.EtcdCert, "etcd-cert", "", "PEM file of the client certificate for etcd (--store etcd, with --etcd-key)")
	flag.StringVar(&cfg.EtcdKey, "etcd-key", "", "PEM file of the client key for etcd (--store etcd)")
	flag.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM file of the server certificate (enables TLS)")
	flag.StringVar(&cfg.TLSKey, "tls-key", "", "PEM file of the server key")
	flag.StringVar(&cfg.ClientCA, "client-ca", "", "PEM file of the CA of client certificates (requires and verifies them: mTLS)")
	flag.StringVar(&cfg.AuthzPolicy, "authz-policy", "", "authorization policy file: which client identities (certificate names, tokens) may change which owners in which network instances, and read (empty: everyone may do everything)")
	flag.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on http://ADDR/metrics (empty: off)")
	flag.StringVar(&cfg.WebAddr, "web-addr", "", "serve the read-only web view on ADDR (same TLS, client certificates and authorization policy as the API; empty: off); beyond loopback it needs --tls-cert or --authz-policy, or --web-insecure")
	flag.BoolVar(&cfg.WebInsecure, "web-insecure", false, "serve the web view on a --web-addr beyond loopback without TLS and without an authorization policy: every owner's objects, in plaintext, to anyone who reaches it")
	flag.StringVar(&cfg.LogFormat, "log-format", "json", "log format: json or text")
	flag.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	flag.BoolVar(&cfg.Demo, "demo", false, "seed the demo network instance vpc-1 when the state is empty")
	flag.IntVar(&cfg.SnapshotEvery, "snapshot-every", 0, "snapshot the store after this many changes (file: records, etcd: log entries; 0: the store's default, <0: never)")
	flag.BoolVar(&cfg.DurableReads, "durable-reads", false, "file store: reads (Get, List, Tree, the web view) wait until the changes they may show are fsynced, so that none shows a change a failed fsync or a crash would lose (slower reads under write load)")
	flag.BoolVar(&cfg.RecoverTruncated, "recover-truncated", false, "start although the file store's log ends before the last acknowledged change (a cut or deleted file), accepting the loss; the lost range is logged")
	flag.Int64Var(&cfg.MaxInflightBytes, "max-inflight-bytes", server.DefaultMaxInflightBytes, "memory budget of the requests in flight, in bytes: each is charged "+fmt.Sprint(server.RequestMemoryFactor)+" times its encoded size until answered, and one that does not fit waits --inflight-wait, then is refused ResourceExhausted (<0: no budget)")
	flag.DurationVar(&cfg.InflightWait, "inflight-wait", server.DefaultInflightWait, "how long a request waits for room in --max-inflight-bytes before it is refused")
	flag.IntVar(&cfg.MaxWatchesPerConn, "max-watches-per-conn", server.DefaultMaxWatchesPerConn, "most Watch streams open at once on one connection; more are refused with ResourceExhausted (<0: no limit)")
	flag.IntVar(&cfg.MaxWatchesPerIdentity, "max-watches-per-identity", server.DefaultMaxWatchesPerIdentity, "most Watch streams open at once of one caller over all its connections: its certificate's or token's identity, or its IP address (IPv6: its /64) when anonymous; more are refused with ResourceExhausted (<0: no limit)")
	flag.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "how long a graceful shutdown waits for in-flight calls")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "ipam-server: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if etcd != "" {
		cfg.EtcdEndpoints = strings.Split(etcd, ",")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := server.Run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ipam-server: %v\n", err)
		os.Exit(1)
	}
}
