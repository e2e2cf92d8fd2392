package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
)

// maximalLabels returns ipam.MaxLabels labels of the longest key and value
// the core accepts, told apart by i and j.
func maximalLabels(i int) map[string]string {
	m := make(map[string]string, ipam.MaxLabels)
	for j := range ipam.MaxLabels {
		prefix := fmt.Sprintf("%d-%d.", i, j) + strings.Repeat("p", 253)
		k := prefix[:253] + "/" + strings.Repeat("n", 63)
		m[k] = fmt.Sprintf("%063d", j)
	}
	return m
}

// TestListPageBytes lists allocations that each carry ipam.MaxLabels
// maximal labels with the largest page size: every page stays under
// MaxPageBytes (plus its token), so a gRPC client with default options
// (4 MiB) and the fronts' clients (grpcopt) accept every page, and paging
// through returns each allocation exactly once.
func TestListPageBytes(t *testing.T) {
	ts := startServer(t, server.Config{})
	c := ts.Client(t)
	ctx := context.Background()
	seed(t, c)
	must(t, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("net16"), NetworkInstance: "vpc-1",
		Prefix: "10.2.0.0/16", Network: "net16"}})))
	sel := map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net16"}
	const n = 400 // ~10 MB of labels: 2.5 times a default client's limit
	req := &ipamv1.SyncRequest{Owner: strings.Repeat("o", ipam.MaxNameLength)}
	want := map[string]bool{}
	for i := range n {
		name := fmt.Sprintf("a%03d-", i) + strings.Repeat("x", ipam.MaxNameLength)
		name = name[:ipam.MaxNameLength]
		req.Allocations = append(req.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: strings.Repeat("d", ipam.MaxNamespaceLength), Name: name},
			Selector: sel, Labels: maximalLabels(i)})
		want[name] = true
	}
	must(t, call(c.Sync(ctx, req)))

	plain, err := grpc.NewClient(ts.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	for _, tc := range []struct {
		name   string
		client ipamv1.IPAMClient
	}{
		{"default gRPC client", ipamv1.NewIPAMClient(plain)},
		{"grpcopt client", c},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]bool{}
			token, pages, largest := "", 0, 0
			for {
				resp, err := tc.client.List(ctx, &ipamv1.ListRequest{Kind: allocKind, PageSize: server.MaxPageSize, PageToken: token})
				if err != nil {
					t.Fatalf("page %d: %v", pages+1, err)
				}
				pages++
				size := proto.Size(resp)
				largest = max(largest, size)
				if size > server.MaxPageBytes+1024 {
					t.Errorf("page %d is %d bytes, over the budget of %d", pages, size, server.MaxPageBytes)
				}
				if len(resp.GetObjects()) == 0 {
					t.Fatalf("page %d is empty", pages)
				}
				for _, o := range resp.GetObjects() {
					name := o.GetAllocation().GetAllocation().GetKey().GetName()
					if seen[name] {
						t.Fatalf("%s listed twice", name)
					}
					seen[name] = true
				}
				if token = resp.GetNextPageToken(); token == "" {
					break
				}
			}
			if len(seen) != len(want) {
				t.Errorf("listed %d allocations, want %d", len(seen), len(want))
			}
			if pages < 2 {
				t.Errorf("%d allocations of %d bytes came in %d page", n, largest, pages)
			}
			t.Logf("%d allocations in %d pages, the largest %d bytes", n, pages, largest)
		})
	}

	// An object larger than the budget comes alone on its page, whole.
	for _, name := range []string{"big-1", "big-2"} {
		ni := &ipamv1.NetworkInstance{Key: key(name)}
		for i := range 150 {
			ni.Prefixes = append(ni.Prefixes, &ipamv1.VRFPrefix{Prefix: fmt.Sprintf("10.%d.0.0/16", i), Labels: maximalLabels(i)})
		}
		must(t, call(c.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: ni})))
	}
	var got []string
	token := ""
	for {
		resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: niKind, PageSize: server.MaxPageSize, PageToken: token})
		must(t, err)
		if len(resp.GetObjects()) != 1 {
			t.Errorf("a page of %d bytes holds %d network instances, want 1", proto.Size(resp), len(resp.GetObjects()))
		}
		for _, o := range resp.GetObjects() {
			got = append(got, o.GetNetworkInstance().GetKey().GetName())
			if n := len(o.GetNetworkInstance().GetPrefixes()); o.GetNetworkInstance().GetKey().GetName() != "vpc-1" && n != 150 {
				t.Errorf("%s listed with %d prefixes, want 150", o.GetNetworkInstance().GetKey().GetName(), n)
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if fmt.Sprint(got) != "[big-1 big-2 vpc-1]" {
		t.Errorf("listed network instances %v, want [big-1 big-2 vpc-1]", got)
	}
}
