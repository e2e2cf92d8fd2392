package controllers

import (
	"context"
	"fmt"
	"net/netip"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
)

// indexPool indexes IPAddressClaims and IPAddresses by the pool they
// reference (poolKey).
const indexPool = "ipam.nephio.org/pool"

// poolKey names a pool in the pool index: kind/namespace/name, with the
// namespace empty for a GlobalInClusterIPPool.
func poolKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// poolNamespace is the namespace a pool reference of an object in
// namespace resolves in: none for the cluster-scoped global pool.
func poolNamespace(kind, namespace string) string {
	if kind == ipamv1alpha1.KindGlobalInClusterIPPool {
		return ""
	}
	return namespace
}

// ourPool reports whether ref names a pool kind this front serves: ours,
// or a Metal3 IPPool.
func ourPool(ref capiv1beta2.IPPoolReference) bool {
	if ref.APIGroup == metal3v1alpha1.Group {
		return ref.Kind == metal3v1alpha1.KindIPPool
	}
	if ref.APIGroup != ipamv1alpha1.Group {
		return false
	}
	switch ref.Kind {
	case ipamv1alpha1.KindInClusterIPPool, ipamv1alpha1.KindGlobalInClusterIPPool,
		ipamv1alpha1.KindIPPrefix, ipamv1alpha1.KindNetworkInstance:
		return true
	}
	return false
}

// indexByPool is the indexer of indexPool for claims and addresses.
func indexByPool(obj client.Object) []string {
	var ref capiv1beta2.IPPoolReference
	switch o := obj.(type) {
	case *capiv1beta2.IPAddressClaim:
		ref = o.Spec.PoolRef
	case *capiv1beta2.IPAddress:
		ref = o.Spec.PoolRef
	}
	if !ourPool(ref) {
		return nil
	}
	return []string{poolKey(ref.Kind, poolNamespace(ref.Kind, obj.GetNamespace()), ref.Name)}
}

// capiPool is what the reconciler reads of either pool kind.
func capiPool(obj client.Object) (kind string, spec *ipamv1alpha1.InClusterIPPoolSpec, st *ipamv1alpha1.InClusterIPPoolStatus) {
	switch p := obj.(type) {
	case *ipamv1alpha1.InClusterIPPool:
		return ipamv1alpha1.KindInClusterIPPool, &p.Spec, &p.Status
	case *ipamv1alpha1.GlobalInClusterIPPool:
		return ipamv1alpha1.KindGlobalInClusterIPPool, &p.Spec, &p.Status
	}
	panic(fmt.Sprintf("not a Cluster API pool: %T", obj))
}

// capiPoolKind adapts InClusterIPPools and GlobalInClusterIPPools (either
// kind, as client.Object): ipam-server holds each pool as its spec says
// (one Sync of the pool's own owner, refused as a whole when it would
// drop an allocated address), status.ipAddresses counts its addresses,
// and a deleted pool is held until no IPAddress uses it.
type capiPoolKind struct{ *reconciler }

func (capiPoolKind) conditions(pool client.Object) *[]metav1.Condition {
	_, _, st := capiPool(pool)
	return &st.Conditions
}

func (capiPoolKind) status(pool client.Object) any {
	_, _, st := capiPool(pool)
	return st
}

// addresses are the IPAddresses that use pool.
func (r capiPoolKind) addresses(ctx context.Context, pool client.Object) ([]capiv1beta2.IPAddress, error) {
	kind, _, _ := capiPool(pool)
	var addrs capiv1beta2.IPAddressList
	if err := r.client.List(ctx, &addrs, client.MatchingFields{indexPool: poolKey(kind, pool.GetNamespace(), pool.GetName())}); err != nil {
		return nil, err
	}
	return addrs.Items, nil
}

func (r capiPoolKind) release(ctx context.Context, pool client.Object) (ctrl.Result, error) {
	addrs, err := r.addresses(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	kind, _, st := capiPool(pool)
	return r.finalize(ctx, pool, &st.Conditions, "DeletePool", func() error {
		if n := len(addrs); n > 0 {
			a := &addrs[0]
			return poolInUse(kind+" "+translate.ID(pool.GetNamespace(), pool.GetName()), n, translate.ID(a.Namespace, a.Name), a.Spec.Address)
		}
		_, err := r.ipam.Sync(ctx, &ipamv1.SyncRequest{Owner: translate.PoolID(r.owner, kind, pool.GetNamespace(), pool.GetName()), Prune: true})
		return err
	})
}

func (r capiPoolKind) serve(ctx context.Context, pool client.Object) (verdict, error) {
	addrs, err := r.addresses(ctx, pool)
	if err != nil {
		return verdict{}, err
	}
	kind, spec, st := capiPool(pool)
	var o outcome
	parsed, perr := translate.ParsePool(kind, pool.GetNamespace(), pool.GetName(), spec)
	var sync *ipamv1.SyncRequest
	if perr == nil {
		sync, perr = parsed.Sync(r.owner)
	}
	if perr != nil {
		o = outcome{synced: true, message: perr.Error(), retry: retryResync}
	} else {
		_, err = r.ipam.Sync(ctx, sync)
		o = classify(err, fmt.Sprintf("ipam-server holds the pool's %d ranges", len(sync.Ranges)))
	}
	setConditions(&st.Conditions, o, pool.GetGeneration())
	if parsed != nil {
		st.Addresses = poolSummary(parsed, addrs)
	}
	return verdict{o: o, err: err, action: "SyncPool"}, nil
}

// poolInUse is the refusal to delete the pool what while n IPAddresses
// use it (example, at address, one of them).
func poolInUse(what string, n int, example, address string) error {
	return status.Errorf(codes.FailedPrecondition, "%s: %d IPAddresses still use the pool, e.g. %s (%s); delete their claims first", what, n, example, address)
}

// poolSummary counts the pool's addresses and the IPAddresses that use it.
func poolSummary(p *translate.PoolSpec, addrs []capiv1beta2.IPAddress) *ipamv1alpha1.IPAddressStatusSummary {
	s := &ipamv1alpha1.IPAddressStatusSummary{Total: p.Total(), Used: len(addrs)}
	inRange := 0
	for i := range addrs {
		if a, err := netip.ParseAddr(addrs[i].Spec.Address); err == nil && p.Contains(a.Unmap()) {
			inRange++
		} else {
			s.OutOfRange++
		}
	}
	s.Free = max(s.Total-inRange, 0)
	return s
}
