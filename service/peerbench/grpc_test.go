package peerbench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	goipam "github.com/metal-stack/go-ipam"
	goipamv1 "github.com/metal-stack/go-ipam/api/v1"
	"github.com/metal-stack/go-ipam/api/v1/apiv1connect"
	goipamservice "github.com/metal-stack/go-ipam/pkg/service"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/grpcopt"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// The served workload: 64 clients, each on its own connection, acquire
// addresses of one /12 network over the peer's own RPC service, each
// call a new address. Ours is ipam-server (gRPC) with its file store,
// whose every acknowledged change is fsynced, or its memory store;
// go-ipam is its connect service (pkg/service, over gRPC on HTTP/2)
// with its local file backend, which rewrites its JSON file on every
// change without fsync, or its memory backend.
const servedClients = 64

var servedNet = "10.0.0.0/12"

func BenchmarkServedAcquireIP64(b *testing.B) {
	for _, store := range []string{"file", "memory"} {
		b.Run("store="+store+"/ours", func(b *testing.B) { servedOurs(b, store) })
		b.Run("store="+store+"/go-ipam", func(b *testing.B) { servedGoIPAM(b, store) })
	}
}

// parallel runs call b.N times from servedClients goroutines, each with
// the client dial gives it.
func parallel[C any](b *testing.B, dial func() C, call func(c C, i int64) error) {
	var next atomic.Int64
	b.SetParallelism((servedClients + 1) / max(1, runtimeProcs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := dial()
		for pb.Next() {
			if err := call(c, next.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func servedOurs(b *testing.B, store string) {
	cfg := server.Config{Store: store, Logger: slog.New(slog.DiscardHandler)}
	if store == "file" {
		cfg.DataDir = filepath.Join(b.TempDir(), "data")
	}
	srv := servertest.Start(b, cfg, false)
	ctx := context.Background()
	key := func(name string) *ipamv1.Key { return &ipamv1.Key{Namespace: "default", Name: name} }
	if _, err := srv.Client(b).Sync(ctx, &ipamv1.SyncRequest{Owner: "infra",
		NetworkInstances: []*ipamv1.NetworkInstance{{Key: key("v")}},
		Prefixes: []*ipamv1.Prefix{{Key: key("agg"), NetworkInstance: "v", Kind: "aggregate", Prefix: "10.0.0.0/8"},
			{Key: key("net"), NetworkInstance: "v", Kind: "network", Prefix: servedNet, Network: "net"}}}); err != nil {
		b.Fatal(err)
	}
	sel := map[string]string{"nephio.org/network-instance": "v", "nephio.org/network-name": "net"}
	parallel(b, func() ipamv1.IPAMClient {
		conn, err := grpc.NewClient(srv.Addr, append(grpcopt.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		return ipamv1.NewIPAMClient(conn)
	}, func(c ipamv1.IPAMClient, i int64) error {
		_, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{
			Key: &ipamv1.Key{Owner: "bench", Namespace: "default", Name: fmt.Sprint("a", i)}, Selector: sel}})
		return err
	})
}

func servedGoIPAM(b *testing.B, store string) {
	ctx := context.Background()
	var ipamer goipam.Ipamer
	if store == "file" {
		ipamer = goipam.NewWithStorage(goipam.NewLocalFile(ctx, filepath.Join(b.TempDir(), "ipam-db.json")))
	} else {
		ipamer = goipam.New(ctx)
	}
	mux := http.NewServeMux()
	mux.Handle(apiv1connect.NewIpamServiceHandler(goipamservice.New(slog.New(slog.DiscardHandler), ipamer)))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: mux, Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	b.Cleanup(func() { _ = hs.Close() })
	base := "http://" + lis.Addr().String()
	newClient := func() apiv1connect.IpamServiceClient {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
		return apiv1connect.NewIpamServiceClient(hc, base, connect.WithGRPC())
	}
	if _, err := newClient().CreatePrefix(ctx, connect.NewRequest(&goipamv1.CreatePrefixRequest{Cidr: servedNet})); err != nil {
		b.Fatal(err)
	}
	parallel(b, newClient, func(c apiv1connect.IpamServiceClient, _ int64) error {
		_, err := c.AcquireIP(ctx, connect.NewRequest(&goipamv1.AcquireIPRequest{PrefixCidr: servedNet}))
		return err
	})
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
