package controllers

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capicorev1beta2 "github.com/nephio-project/ipam/api/capi/core/v1beta2"
	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
)

// allowed reports whether the controllers may list and watch resource of
// group in every namespace: a front whose RBAC is missing stays off
// instead of stalling every controller's cache.
func allowed(ctx context.Context, mgr ctrl.Manager, group string, resources ...string) (bool, error) {
	for _, res := range resources {
		for _, verb := range []string{"list", "watch"} {
			r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: group, Resource: res, Verb: verb}}}
			if err := mgr.GetClient().Create(ctx, r); err != nil {
				return false, fmt.Errorf("checking access to %s.%s: %w", res, group, err)
			}
			if !r.Status.Allowed {
				log.FromContext(ctx).Info("not allowed to watch: its front stays off", "resource", res+"."+group, "verb", verb)
				return false, nil
			}
		}
	}
	return true, nil
}

// served reports whether the API server serves kind at gv; a kind whose
// CRD is not installed is not an error.
func served(mgr ctrl.Manager, gv schema.GroupVersion, kind string) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	return err == nil, err
}

// setupCAPI registers the Cluster API front: the InClusterIPPool and
// GlobalInClusterIPPool reconcilers when their CRDs are installed, and the
// IPAddressClaim reconciler when Cluster API's IPAM CRDs are too.
// Claims may name a Metal3 IPPool when metal3 (the Metal3 front is on).
func setupCAPI(ctx context.Context, mgr ctrl.Manager, base reconciler, hook func(string, types.NamespacedName, ctrl.Result, error), metal3 bool) error {
	logger := log.FromContext(ctx).WithName("capi")
	pools, err := served(mgr, ipamv1alpha1.GroupVersion, ipamv1alpha1.KindInClusterIPPool)
	if err != nil {
		return err
	}
	claims, err := served(mgr, capiv1beta2.GroupVersion, capiv1beta2.KindIPAddressClaim)
	if err != nil {
		return err
	}
	if !pools || !claims {
		logger.Info("Cluster API front off: its CRDs are not installed", "inClusterIPPool", pools, "ipAddressClaim", claims)
		return nil
	}
	if ok, err := allowed(ctx, mgr, capiv1beta2.Group, "ipaddressclaims", "ipaddresses"); err != nil || !ok {
		return err
	}
	clusters, err := served(mgr, capicorev1beta2.GroupVersion, "Cluster")
	if err == nil && clusters {
		clusters, err = allowed(ctx, mgr, capicorev1beta2.Group, "clusters")
	}
	if err != nil {
		return err
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &capiv1beta2.IPAddress{}, indexPool, indexByPool); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &capiv1beta2.IPAddressClaim{}, indexPool, indexByPool); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &capiv1beta2.IPAddressClaim{}, indexCluster, indexByCluster); err != nil {
		return err
	}
	c8s := mgr.GetClient()
	forSpec := builder.WithPredicates(specChanged)
	for _, p := range []struct {
		name string
		obj  func() client.Object
	}{
		{"inclusterippool", func() client.Object { return &ipamv1alpha1.InClusterIPPool{} }},
		{"globalinclusterippool", func() client.Object { return &ipamv1alpha1.GlobalInClusterIPPool{} }},
	} {
		kind, _, _ := capiPool(p.obj())
		if err := ctrl.NewControllerManagedBy(mgr).Named(p.name).
			For(p.obj(), forSpec).
			Watches(&capiv1beta2.IPAddress{}, addressPool(kind)).
			Complete(observed(p.name, &PoolReconciler{reconciler: base, newPool: p.obj}, hook)); err != nil {
			return err
		}
	}
	ours := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		c, ok := o.(*capiv1beta2.IPAddressClaim)
		return ok && ourPool(c.Spec.PoolRef)
	}), predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	b := ctrl.NewControllerManagedBy(mgr).Named("ipaddressclaim").
		For(&capiv1beta2.IPAddressClaim{}, ours).
		Owns(&capiv1beta2.IPAddress{})
	watchedPools := []client.Object{&ipamv1alpha1.InClusterIPPool{}, &ipamv1alpha1.GlobalInClusterIPPool{},
		&ipamv1alpha1.IPPrefix{}, &ipamv1alpha1.NetworkInstance{}}
	if metal3 {
		watchedPools = append(watchedPools, &metal3v1alpha1.IPPool{})
	}
	for _, pool := range watchedPools {
		b = b.Watches(pool, poolClaims(c8s))
	}
	if clusters {
		b = b.Watches(&capicorev1beta2.Cluster{}, clusterClaims(c8s))
	}
	logger.Info("Cluster API front on", "clusters", clusters)
	return b.Complete(observed("ipaddressclaim", &ClaimReconciler{reconciler: base, clusters: clusters}, hook))
}

// addressPool maps an IPAddress event to its pool of kind, whose counts
// it changes.
func addressPool(kind string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		a, ok := obj.(*capiv1beta2.IPAddress)
		if !ok || a.Spec.PoolRef.APIGroup != ipamv1alpha1.Group || a.Spec.PoolRef.Kind != kind {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: poolNamespace(kind, a.Namespace), Name: a.Spec.PoolRef.Name}}}
	})
}

// poolClaims maps an event of a pool (its readiness, its counts after a
// release) to the claims of that pool that wait for an address.
func poolClaims(c client.Client) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		if kind == "" {
			gvks, _, err := c.Scheme().ObjectKinds(obj)
			if err != nil || len(gvks) == 0 {
				return nil
			}
			kind = gvks[0].Kind
		}
		var list capiv1beta2.IPAddressClaimList
		if err := c.List(ctx, &list, client.MatchingFields{indexPool: poolKey(kind, obj.GetNamespace(), obj.GetName())}); err != nil {
			log.FromContext(ctx).Error(err, "listing claims of pool", "pool", poolKey(kind, obj.GetNamespace(), obj.GetName()))
			return nil
		}
		return waitingClaims(list.Items)
	})
}

// clusterClaims maps an event of a Cluster (unpaused, deleted) to its
// claims that wait for an address.
func clusterClaims(c client.Client) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		var list capiv1beta2.IPAddressClaimList
		if err := c.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexCluster: obj.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "listing claims of cluster", "cluster", obj.GetName())
			return nil
		}
		var reqs []reconcile.Request
		for _, cl := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}})
		}
		return reqs
	})
}

// waitingClaims are the requests of the claims that are not Ready.
func waitingClaims(claims []capiv1beta2.IPAddressClaim) []reconcile.Request {
	var reqs []reconcile.Request
	for _, cl := range claims {
		if !meta.IsStatusConditionTrue(cl.Status.Conditions, capiv1beta2.ConditionReady) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}})
		}
	}
	return reqs
}
