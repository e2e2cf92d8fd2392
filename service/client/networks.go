package client

import (
	"context"

	"google.golang.org/grpc"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// Lister is the List call of ipam-server, a client's or the service's own.
type Lister func(ctx context.Context, req *ipamv1.ListRequest, opts ...grpc.CallOption) (*ipamv1.ListResponse, error)

// ListNetworks lists the network prefixes of vrf that ipam-server holds,
// every page of them.
func ListNetworks(ctx context.Context, list Lister, vrf string) ([]*ipamv1.Prefix, error) {
	var out []*ipamv1.Prefix
	for token := ""; ; {
		resp, err := list(ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_PREFIX, NetworkInstance: vrf, PageToken: token})
		if err != nil {
			return nil, err
		}
		for _, obj := range resp.GetObjects() {
			if p := obj.GetPrefix().GetPrefix(); p.GetKind() == "" || p.GetKind() == "network" {
				out = append(out, p)
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}
