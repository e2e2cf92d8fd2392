package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"

	"google.golang.org/grpc"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
)

// BenchmarkServerPath measures what the server adds to the allocation
// core for one Allocate and one Release (an op), without the transport or
// the proto codec: "core" calls the allocator alone, "server" makes the
// same calls as the gRPC handlers do, through the call gate (readiness,
// latency metrics, failure logs), the request conversion and the
// responses. Both journal to the Watch hub. The difference is the
// server's own cost per op.
func BenchmarkServerPath(b *testing.B) {
	hub := NewHub(memoryStore{}, 0, nil)
	a := ipam.New(ipam.WithJournal(hub))
	hub.Attach(a)
	k := func(name string) ipam.Key { return ipam.Key{Owner: "test", Namespace: "default", Name: name} }
	if _, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "test",
		NetworkInstances: []ipam.NetworkInstance{{Key: k("vpc-1")}},
		Prefixes: []ipam.Prefix{
			{Key: k("aggregate0"), NetworkInstance: "vpc-1", Kind: ipam.KindAggregate, Prefix: netip.MustParsePrefix("10.0.0.0/8")},
			{Key: k("net16"), NetworkInstance: "vpc-1", Kind: ipam.KindNetwork, Prefix: netip.MustParsePrefix("10.2.0.0/16"), Network: "net16"},
		}}); err != nil {
		b.Fatal(err)
	}
	metrics := NewMetrics(a, hub)
	svc := NewService(a, hub, metrics)
	gate := &callGate{metrics: metrics, log: slog.New(slog.DiscardHandler)}
	gate.ready.Store(true)
	sel := map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net16"}
	ctx := context.Background()

	keys := make([]ipam.Key, 8)
	reqs := make([]*ipamv1.AllocateRequest, len(keys))
	rels := make([]*ipamv1.DeleteRequest, len(keys))
	for i := range keys {
		keys[i] = k(fmt.Sprint("path-", i))
		key := &ipamv1.Key{Owner: keys[i].Owner, Namespace: keys[i].Namespace, Name: keys[i].Name}
		reqs[i] = &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key, Selector: sel}}
		rels[i] = &ipamv1.DeleteRequest{Key: key}
	}
	b.Run("core", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			key := keys[i%len(keys)]
			if _, err := a.Allocate(context.Background(), ipam.Allocation{Key: key, Selector: ipam.Labels(sel)}); err != nil {
				b.Fatal(err)
			}
			if err := a.Release(context.Background(), key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("server", func(b *testing.B) {
		allocInfo := &grpc.UnaryServerInfo{Server: svc, FullMethod: ipamv1.IPAM_Allocate_FullMethodName}
		releaseInfo := &grpc.UnaryServerInfo{Server: svc, FullMethod: ipamv1.IPAM_Release_FullMethodName}
		allocate := func(ctx context.Context, req any) (any, error) {
			return svc.Allocate(ctx, req.(*ipamv1.AllocateRequest))
		}
		release := func(ctx context.Context, req any) (any, error) { return svc.Release(ctx, req.(*ipamv1.DeleteRequest)) }
		for i := 0; b.Loop(); i++ {
			if _, err := gate.unary(ctx, reqs[i%len(reqs)], allocInfo, allocate); err != nil {
				b.Fatal(err)
			}
			if _, err := gate.unary(ctx, rels[i%len(rels)], releaseInfo, release); err != nil {
				b.Fatal(err)
			}
		}
	})
}
