package resource_test

import (
	"context"
	"strconv"
	"testing"

	resourcepb "github.com/nephio-project/ipam/api/proto/resource"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// BenchmarkClaim measures Claim over loopback against an in-memory
// ipam-server: a new IPClaim and its release each iteration, and the same
// IPClaim again (the idempotent answer Nephio's specializers get on every
// reconcile).
func BenchmarkClaim(b *testing.B) {
	srv := servertest.Start(b, server.Config{}, false)
	c := resourcepb.NewResourceClient(srv.Dial(b))
	ctx := context.Background()
	infra(b, ctx, c)
	spec := func(name string) string {
		return `{"apiVersion":"ipam.resource.nephio.org/v1alpha1","kind":"IPClaim","metadata":{"name":"` + name +
			`"},"spec":{"networkInstance":{"name":"vpc"},"selector":{"matchLabels":{"nephio.org/cluster-name":"cluster01"}}}}`
	}
	b.Run("claim+release", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			name := "c" + strconv.Itoa(i%250)
			i++
			req := &resourcepb.ClaimRequest{Header: header(ipamGroup, "IPClaim", name, reqGroup, "Interface", "bench-"+strconv.Itoa(i/250)), Spec: spec(name)}
			if _, err := c.Claim(ctx, req); err != nil {
				b.Fatal(err)
			}
			if _, err := c.DeleteClaim(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("same", func(b *testing.B) {
		b.ReportAllocs()
		req := &resourcepb.ClaimRequest{Header: header(ipamGroup, "IPClaim", "same", reqGroup, "Interface", "n3"), Spec: spec("same")}
		for b.Loop() {
			if _, err := c.Claim(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
