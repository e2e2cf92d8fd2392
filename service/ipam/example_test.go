package ipam_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nephio-project/ipam/service/ipam"
)

// A package declares a VRF, an aggregate and a network with its gateway,
// and asks for an address and a /16 pool in one Sync; a later Sync without
// the pool releases it.
func ExampleAllocator_Sync() {
	a := ipam.New()
	ctx := context.Background()
	key := func(name string) ipam.Key { return ipam.Key{Namespace: "default", Name: name} }
	req := ipam.SyncRequest{
		Owner:            "my-package",
		Prune:            true,
		NetworkInstances: []ipam.NetworkInstance{{Key: key("vpc-1")}},
		Prefixes: []ipam.Prefix{
			{Key: key("aggregate0"), NetworkInstance: "vpc-1", Kind: ipam.KindAggregate, Prefix: netip.MustParsePrefix("10.0.0.0/8")},
			{Key: key("net1"), NetworkInstance: "vpc-1", Prefix: netip.MustParsePrefix("10.0.1.1/24"), Network: "net1",
				Labels: ipam.Labels{ipam.LabelGateway: "true"}},
		},
		Allocations: []ipam.Allocation{
			{Key: key("alloc1"), Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "net1"}},
			{Key: key("pool1"), Kind: ipam.KindPool, PrefixLength: 16, Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1"}},
		},
	}
	res, err := a.Sync(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res.Allocations {
		if r.Gateway.IsValid() {
			fmt.Println(r.Prefix, "gateway", r.Gateway)
		} else {
			fmt.Println(r.Prefix)
		}
	}

	req.Allocations = req.Allocations[:1] // the pool is no longer declared
	if _, err := a.Sync(ctx, req); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(a.ListAllocations(ipam.Filter{Owner: "my-package"})), "allocation left")
	// Output:
	// 10.0.1.2/24 gateway 10.0.1.1
	// 10.1.0.0/16
	// 1 allocation left
}

// Errors name the object and the field, and wrap one sentinel error.
func ExampleAllocator_Allocate_error() {
	a := ipam.New()
	_, err := a.Allocate(context.Background(), ipam.Allocation{Key: ipam.Key{Namespace: "default", Name: "n3"},
		NetworkInstance: "vpc-1", PrefixLength: 33, AddressFamily: ipam.IPv4})
	fmt.Println(err)
	// Output:
	// IPAllocation default/n3: spec.prefixLength: 33 exceeds /32
}
