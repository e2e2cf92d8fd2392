package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capicorev1beta2 "github.com/nephio-project/ipam/api/capi/core/v1beta2"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
)

// metal3Front is the Metal3 front (IPPool and IPClaim reconcilers), on
// once the ipam.metal3.io CRDs are installed. If the Cluster API front's
// claim controller is running by then (*claims), it watches Metal3 pools
// too.
func metal3Front(mgr ctrl.Manager, base *reconciler, hook func(string, types.NamespacedName, ctrl.Result, error), claims *controller.Controller) *front {
	var clusters bool
	f := &front{name: "Metal3"}
	f.missing = func(ctx context.Context) (string, error) {
		on, err := served(mgr, metal3v1alpha1.GroupVersion, metal3v1alpha1.KindIPPool, metal3v1alpha1.KindIPClaim, metal3v1alpha1.KindIPAddress)
		if err != nil {
			return "", err
		}
		if !on {
			return "the ipam.metal3.io CRDs are not installed", nil
		}
		if why, err := denied(ctx, mgr, metal3v1alpha1.Group, "ippools", "ipclaims", "ipaddresses"); why != "" || err != nil {
			return why, err
		}
		clusters, err = clustersWatched(ctx, mgr)
		return "", err
	}
	f.turnOn = func(ctx context.Context) error {
		if err := setupMetal3(ctx, mgr, base, hook, clusters); err != nil {
			return err
		}
		if *claims != nil {
			return watchMetal3Pools(mgr, *claims)
		}
		return nil
	}
	return f
}

// setupMetal3 registers the Metal3 front's reconcilers; clusters watches
// Cluster API's Clusters for their pause.
func setupMetal3(ctx context.Context, mgr ctrl.Manager, base *reconciler, hook func(string, types.NamespacedName, ctrl.Result, error), clusters bool) error {
	logger := log.FromContext(ctx).WithName("metal3")
	idx := mgr.GetFieldIndexer()
	for _, f := range []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&metal3v1alpha1.IPAddress{}, indexMetal3Pool, indexMetal3ByPool},
		{&metal3v1alpha1.IPClaim{}, indexMetal3Pool, indexMetal3ByPool},
		{&metal3v1alpha1.IPAddress{}, indexMetal3Claim, indexMetal3ByClaim},
		{&metal3v1alpha1.IPPool{}, indexMetal3Cluster, indexMetal3ByCluster},
	} {
		if err := idx.IndexField(ctx, f.obj, f.field, f.fn); err != nil {
			return err
		}
	}
	c8s := mgr.GetClient()
	watched := builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{},
		predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	pools := ctrl.NewControllerManagedBy(mgr).Named("metal3-ippool").
		For(&metal3v1alpha1.IPPool{}, watched).
		Watches(&metal3v1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			a := o.(*metal3v1alpha1.IPAddress)
			return []reconcile.Request{{NamespacedName: nsName(refKey(a.Namespace, a.Spec.Pool))}}
		}))
	claims := ctrl.NewControllerManagedBy(mgr).Named("metal3-ipclaim").
		For(&metal3v1alpha1.IPClaim{}, watched).
		Watches(&metal3v1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if a := o.(*metal3v1alpha1.IPAddress); a.Spec.Claim.Name != "" {
				return []reconcile.Request{{NamespacedName: nsName(refKey(a.Namespace, a.Spec.Claim))}}
			}
			return nil
		})).
		Watches(&metal3v1alpha1.IPPool{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return metal3Claims(ctx, c8s, []string{o.GetNamespace() + "/" + o.GetName()}, true)
		}))
	if clusters {
		pools = pools.Watches(&capicorev1beta2.Cluster{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var reqs []reconcile.Request
			for _, k := range clusterPools(ctx, c8s, o) {
				reqs = append(reqs, reconcile.Request{NamespacedName: nsName(k)})
			}
			return reqs
		}))
		claims = claims.Watches(&capicorev1beta2.Cluster{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return metal3Claims(ctx, c8s, clusterPools(ctx, c8s, o), false)
		}))
	}
	if err := pools.Complete(observed("metal3-ippool", reconcilerOf[metal3v1alpha1.IPPool](base, metal3PoolKind{base, clusters}), hook)); err != nil {
		return err
	}
	if err := claims.Complete(observed("metal3-ipclaim", reconcilerOf[metal3v1alpha1.IPClaim](base, metal3ClaimKind{base, &adoption{}, clusters}), hook)); err != nil {
		return err
	}
	logger.Info("Metal3 front on", "clusters", clusters)
	return nil
}

// clusterPools are the IPPools (namespace/name) of cluster, whose pause
// stops them and their claims.
func clusterPools(ctx context.Context, c client.Client, cluster client.Object) []string {
	var list metal3v1alpha1.IPPoolList
	if err := c.List(ctx, &list, client.InNamespace(cluster.GetNamespace()), client.MatchingFields{indexMetal3Cluster: cluster.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "listing IPPools of cluster", "cluster", cluster.GetName())
		return nil
	}
	keys := make([]string, 0, len(list.Items))
	for _, p := range list.Items {
		keys = append(keys, p.Namespace+"/"+p.Name)
	}
	return keys
}

// nsName splits namespace/name.
func nsName(key string) types.NamespacedName {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return types.NamespacedName{Namespace: key[:i], Name: key[i+1:]}
		}
	}
	return types.NamespacedName{Name: key}
}

// metal3Claims are the claims of the pools keys (namespace/name); with
// waiting, only those without an address.
func metal3Claims(ctx context.Context, c client.Client, keys []string, waiting bool) []reconcile.Request {
	var reqs []reconcile.Request
	for _, k := range keys {
		var list metal3v1alpha1.IPClaimList
		if err := c.List(ctx, &list, client.MatchingFields{indexMetal3Pool: k}); err != nil {
			log.FromContext(ctx).Error(err, "listing claims of IPPool", "pool", k)
			continue
		}
		for _, cl := range list.Items {
			if !waiting || cl.Status.Address == nil {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}})
			}
		}
	}
	return reqs
}
