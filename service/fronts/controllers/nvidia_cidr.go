package controllers

import (
	"context"
	"fmt"
	"net/netip"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
)

// nvidiaCIDRPoolKind adapts NVIDIA CIDRPools: ipam-server holds the
// pool's CIDR as a pool prefix, every matching node holds a prefix of
// perNodeNetworkPrefix (its static allocation, or the lowest free one;
// nodes with a static allocation first, then in name order) with the
// gateway at gatewayIndex, a node that stops matching or goes gives it
// back, and status.allocations lists them. A matching node left without
// a prefix turns Ready False with reason PoolExhausted and a Warning event.
type nvidiaCIDRPoolKind struct{ nvidiaBase }

func (nvidiaCIDRPoolKind) conditions(pool *nvv1alpha1.CIDRPool) *[]metav1.Condition {
	return &pool.Status.Conditions
}

func (nvidiaCIDRPoolKind) status(pool *nvv1alpha1.CIDRPool) any { return pool.Status }

func (r nvidiaCIDRPoolKind) release(ctx context.Context, pool *nvv1alpha1.CIDRPool) (ctrl.Result, error) {
	return r.releasePool(ctx, pool, &pool.Status.Conditions, translate.NVIDIACIDRPoolID(r.owner, pool.Namespace, pool.Name))
}

func (r nvidiaCIDRPoolKind) serve(ctx context.Context, pool *nvv1alpha1.CIDRPool) (verdict, error) {
	o, allocs, exhausted, err := r.servePool(ctx, pool, translate.NVIDIACIDRPoolID(r.owner, pool.Namespace, pool.Name))
	if err != nil {
		return verdict{}, err
	}
	if o.synced {
		pool.Status.Allocations = allocs
	}
	what := fmt.Sprintf("/%d prefix", pool.Spec.PerNodeNetworkPrefix)
	return r.verdict(pool, &pool.Status.Conditions, o, exhausted, what, "AllocatePrefixes"), nil
}

func (r nvidiaCIDRPoolKind) report(orig, pool *nvv1alpha1.CIDRPool, v verdict) {
	r.reportPool(pool, orig.Status.Conditions, pool.Status.Conditions, v)
}

// servePool syncs the pool, releases the prefixes of nodes that no longer
// match and allocates one for each matching node.
func (r nvidiaCIDRPoolKind) servePool(ctx context.Context, pool *nvv1alpha1.CIDRPool, id string) (outcome, []nvv1alpha1.CIDRPoolAllocation, []string, error) {
	p, err := translate.ParseNVIDIACIDRPool(pool.Namespace, pool.Name, &pool.Spec)
	var sync *ipamv1.SyncRequest
	if err == nil {
		sync, err = p.Sync(r.owner)
	}
	matching, stop, err := r.syncNodes(ctx, sync, err, pool.Spec.NodeSelector, "CIDRPool "+translate.ID(pool.Namespace, pool.Name), id)
	if err != nil || stop != nil {
		return ptrOr(stop), nil, nil, err
	}
	// Static allocations first, so that no dynamic one takes their prefix.
	order := make([]string, 0, len(matching))
	for _, n := range matching {
		if p.Static(n) {
			order = append(order, n)
		}
	}
	for _, n := range matching {
		if !p.Static(n) {
			order = append(order, n)
		}
	}
	byNode := map[string]nvv1alpha1.CIDRPoolAllocation{}
	var exhausted []string
	for _, node := range order {
		resp, err := r.ipam.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: p.NodePrefix(r.owner, node)})
		switch {
		case status.Code(err) == codes.ResourceExhausted:
			exhausted = append(exhausted, node)
			continue
		case err != nil:
			o, err := verdictOf(err)
			return o, nil, nil, err
		}
		pfx, err := netip.ParsePrefix(resp.GetResult().GetPrefix())
		if err != nil {
			return outcome{}, nil, nil, fmt.Errorf("ipam-server answered %q: %w", resp.GetResult().GetPrefix(), err)
		}
		byNode[node] = nvv1alpha1.CIDRPoolAllocation{NodeName: node, Prefix: pfx.Masked().String(), Gateway: p.NodeGateway(node, pfx)}
	}
	allocs := make([]nvv1alpha1.CIDRPoolAllocation, 0, len(byNode))
	for _, n := range matching {
		if a, ok := byNode[n]; ok {
			allocs = append(allocs, a)
		}
	}
	return outcome{synced: true, ready: true, message: fmt.Sprintf("%d node(s) hold a prefix", len(allocs)), retry: retryResync}, allocs, exhausted, nil
}
