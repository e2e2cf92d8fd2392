package server

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
)

// TestTreeBytes: a Tree answer whose nodes would encode to more than the
// bound is refused with ResourceExhausted naming the network instance and
// how to list it, instead of being sent to a client that refuses it; one
// within the bound is answered whole.
func TestTreeBytes(t *testing.T) {
	a := ipam.New()
	ctx := context.Background()
	owner := strings.Repeat("o", ipam.MaxNameLength)
	req := ipam.SyncRequest{Owner: owner, NetworkInstances: []ipam.NetworkInstance{{Key: ipam.Key{Owner: owner, Name: "vpc-1"}}}}
	req.Prefixes = append(req.Prefixes, ipam.Prefix{Key: ipam.Key{Owner: owner, Namespace: "default", Name: "agg"}, NetworkInstance: "vpc-1",
		Kind: ipam.KindAggregate, Prefix: netip.MustParsePrefix("10.0.0.0/8")})
	for i := range 100 {
		name := (fmt.Sprintf("p%03d-", i) + strings.Repeat("x", ipam.MaxNameLength))[:ipam.MaxNameLength]
		req.Prefixes = append(req.Prefixes, ipam.Prefix{Key: ipam.Key{Owner: owner, Namespace: strings.Repeat("n", ipam.MaxNamespaceLength), Name: name},
			NetworkInstance: "vpc-1", Kind: ipam.KindPool, Prefix: netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", i))})
	}
	if _, err := a.Sync(ctx, req); err != nil {
		t.Fatal(err)
	}
	s := NewService(a, nil, nil)
	resp, err := s.Tree(ctx, &ipamv1.TreeRequest{NetworkInstance: "vpc-1"})
	if err != nil {
		t.Fatal(err)
	}
	size := proto.Size(resp)
	t.Logf("%d nodes with the longest names: %d bytes, %d per node; %d nodes fit MaxTreeBytes", len(resp.GetNodes()), size, size/len(resp.GetNodes()), MaxTreeBytes/(size/len(resp.GetNodes())))

	s.maxTreeBytes = size - 1
	_, err = s.Tree(ctx, &ipamv1.TreeRequest{NetworkInstance: "vpc-1"})
	want := `network instance "vpc-1": its tree of 101 prefixes is larger than the 0 MiB a Tree answer may hold; list its prefixes with List (network_instance "vpc-1"), which pages, or browse it in the web view`
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || st.Message() != want {
		t.Fatalf("Tree over the bound = %v, want ResourceExhausted %q", err, want)
	}
	s.maxTreeBytes = size
	if _, err := s.Tree(ctx, &ipamv1.TreeRequest{NetworkInstance: "vpc-1"}); err != nil {
		t.Fatalf("Tree at the bound: %v", err)
	}
}
