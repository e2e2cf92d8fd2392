package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// adoption is what the fronts share to adopt the address objects they
// find (after clusterctl move, or a restore): the addresses known to be
// held by ipam-server, by object UID.
type adoption struct {
	mu      sync.Mutex
	adopted map[types.UID]bool
}

func (a *adoption) isAdopted(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.adopted[uid]
}

func (a *adoption) markAdopted(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.adopted == nil {
		a.adopted = map[types.UID]bool{}
	}
	a.adopted[uid] = true
}

func (a *adoption) forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.adopted, uid)
}

// holdExactly makes ipam-server hold ip for key, the allocation of an
// address object: nothing to do when it does; when it does not know key,
// the allocation want() builds, asking for exactly ip. It returns the
// server's refusal, or a refusal when the server holds another address
// for key (never silently moved); err is a failure to reach the server.
func holdExactly(ctx context.Context, c ipamv1.IPAMClient, key *ipamv1.Key, ip netip.Addr, want func() (*ipamv1.Allocation, error)) (refused error, err error) {
	got, err := c.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: key})
	switch {
	case err == nil:
		held := got.GetObject().GetAllocation().GetResult().GetPrefix()
		if p, err := netip.ParsePrefix(held); err == nil && p.Addr() == ip {
			return nil, nil
		}
		return status.Errorf(codes.FailedPrecondition, "the object says %s but ipam-server holds %s for it", ip, held), nil
	case status.Code(err) != codes.NotFound:
		return nil, fmt.Errorf("ipam-server: %w", err)
	}
	a, err := want()
	if err != nil {
		return err, nil
	}
	a.Prefix = netip.PrefixFrom(ip, ip.BitLen()).String()
	if _, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: a}); err != nil {
		if isVerdict(err) {
			return err, nil
		}
		return nil, fmt.Errorf("ipam-server: %w", err)
	}
	return nil, nil
}

// isVerdict reports whether err is ipam-server's answer about the request
// rather than a failure to get one (classify's synced).
func isVerdict(err error) bool { return err != nil && classify(err, "").synced }
