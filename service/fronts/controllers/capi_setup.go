package controllers

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	capicorev1beta2 "github.com/nephio-project/ipam/api/capi/core/v1beta2"
	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
)

// denied says which of resource of group the controllers may not list
// and watch in every namespace ("" when they may all be): a front whose
// RBAC is missing stays off instead of stalling every controller's cache.
func denied(ctx context.Context, mgr ctrl.Manager, group string, resources ...string) (string, error) {
	for _, res := range resources {
		for _, verb := range []string{"list", "watch"} {
			r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: group, Resource: res, Verb: verb}}}
			if err := mgr.GetClient().Create(ctx, r); err != nil {
				return "", fmt.Errorf("checking access to %s.%s: %w", res, group, err)
			}
			if !r.Status.Allowed {
				return fmt.Sprintf("the RBAC does not let the controllers %s %s", verb, strings.TrimSuffix(res+"."+group, ".")), nil
			}
		}
	}
	return "", nil
}

// clustersWatched reports whether Cluster API's Cluster kind is served and
// the controllers may watch it (then pausing a cluster pauses its pools
// and claims).
func clustersWatched(ctx context.Context, mgr ctrl.Manager) (bool, error) {
	on, err := served(mgr, capicorev1beta2.GroupVersion, "Cluster")
	if err != nil || !on {
		return false, err
	}
	why, err := denied(ctx, mgr, capicorev1beta2.Group, "clusters")
	return why == "", err
}

// served reports whether the API server serves every one of kinds at gv;
// a kind whose CRD is not installed is not an error. A front checks every
// kind it registers a controller or a watch for: CRDs installed together
// reach the API server's discovery one by one, and registering a watch of
// a kind not yet served fails.
func served(mgr ctrl.Manager, gv schema.GroupVersion, kinds ...string) (bool, error) {
	for _, kind := range kinds {
		_, err := mgr.GetRESTMapper().RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// capiFront is the Cluster API front: the InClusterIPPool and
// GlobalInClusterIPPool reconcilers and the IPAddressClaim reconciler, on
// once the pool CRDs and Cluster API's IPAM CRDs are installed. Claims may
// name a Metal3 IPPool when the metal3 front (nil: not asked for) is on;
// claims is set to the claim controller once the front is on, so that a
// Metal3 front turning on later adds its pools' watch to it.
func capiFront(mgr ctrl.Manager, base *reconciler, hook func(string, types.NamespacedName, ctrl.Result, error), metal3 *front, claims *controller.Controller) *front {
	var clusters bool
	f := &front{name: "Cluster API"}
	f.missing = func(ctx context.Context) (string, error) {
		pools, err := served(mgr, ipamv1alpha1.GroupVersion, ipamv1alpha1.KindInClusterIPPool, ipamv1alpha1.KindGlobalInClusterIPPool)
		if err != nil {
			return "", err
		}
		if !pools {
			return "the InClusterIPPool and GlobalInClusterIPPool CRDs (ipam.nephio.org) are not installed", nil
		}
		claimsServed, err := served(mgr, capiv1beta2.GroupVersion, capiv1beta2.KindIPAddressClaim, capiv1beta2.KindIPAddress)
		if err != nil {
			return "", err
		}
		if !claimsServed {
			return "Cluster API's IPAddressClaim and IPAddress CRDs (ipam.cluster.x-k8s.io) are not installed", nil
		}
		if why, err := denied(ctx, mgr, capiv1beta2.Group, "ipaddressclaims", "ipaddresses"); why != "" || err != nil {
			return why, err
		}
		clusters, err = clustersWatched(ctx, mgr)
		return "", err
	}
	f.turnOn = func(ctx context.Context) error {
		c, err := setupCAPI(ctx, mgr, base, hook, metal3 != nil && metal3.on, clusters)
		*claims = c
		return err
	}
	return f
}

// setupCAPI registers the Cluster API front's reconcilers and returns the
// claim controller. Claims may name a Metal3 IPPool when metal3 (the Metal3
// front is on); clusters watches Cluster API's Clusters for their pause.
func setupCAPI(ctx context.Context, mgr ctrl.Manager, base *reconciler, hook func(string, types.NamespacedName, ctrl.Result, error), metal3, clusters bool) (controller.Controller, error) {
	logger := log.FromContext(ctx).WithName("capi")
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &capiv1beta2.IPAddress{}, indexPool, indexByPool); err != nil {
		return nil, err
	}
	if err := idx.IndexField(ctx, &capiv1beta2.IPAddressClaim{}, indexPool, indexByPool); err != nil {
		return nil, err
	}
	if err := idx.IndexField(ctx, &capiv1beta2.IPAddressClaim{}, indexCluster, indexByCluster); err != nil {
		return nil, err
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
			Complete(observed(p.name, &Reconciler[client.Object]{reconciler: base, newObject: p.obj, kind: capiPoolKind{base}}, hook)); err != nil {
			return nil, err
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
	c, err := b.Build(observed("ipaddressclaim", reconcilerOf[capiv1beta2.IPAddressClaim](base, capiClaimKind{base, &adoption{}, clusters}), hook))
	if err != nil {
		return nil, err
	}
	logger.Info("Cluster API front on", "clusters", clusters)
	return c, nil
}

// watchMetal3Pools makes the claim controller c, built before the Metal3
// front turned on, serve the claims of Metal3 IPPools too.
func watchMetal3Pools(mgr ctrl.Manager, c controller.Controller) error {
	return c.Watch(source.Kind(mgr.GetCache(), client.Object(&metal3v1alpha1.IPPool{}), poolClaims(mgr.GetClient())))
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
