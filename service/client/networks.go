package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
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

// ErrNoNetwork is wrapped by ResolveIndex's error when the claim's
// selector matches no network.
var ErrNoNetwork = errors.New("matches no network prefix")

// ResolveIndex makes want, an address claim with an index, a claim of the
// address at offset index of the first network its selector matches
// (translate.FirstNetwork) among the networks ipam-server holds in its
// network instance and extra (those a package declares with it). The
// error names the selector or the index.
func ResolveIndex(ctx context.Context, list Lister, want *ipamv1.Allocation, index uint32, extra []*ipamv1.Prefix) error {
	vrf := want.GetNetworkInstance()
	nets, err := ListNetworks(ctx, list, vrf)
	if err != nil {
		return err
	}
	for _, p := range extra {
		if p.GetNetworkInstance() == vrf && (p.GetKind() == "" || p.GetKind() == "network") {
			nets = append(nets, p)
		}
	}
	net, ok := translate.FirstNetwork(nets, want)
	if !ok {
		return fmt.Errorf("spec.selector: %v %w in network instance %s", want.GetSelector(), ErrNoNetwork, vrf)
	}
	addr, err := translate.IndexAddress(net, index)
	if err != nil {
		return fmt.Errorf("spec.index: %w", err)
	}
	want.Prefix = addr.String()
	return nil
}
