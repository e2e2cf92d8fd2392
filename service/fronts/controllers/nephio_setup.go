package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
)

// nephioFront is the Nephio front (NetworkInstance, IPPrefix, IPClaim,
// VLANClaim and VLANIndex reconcilers), on once the ipam.resource.nephio.org and
// vlan.resource.nephio.org CRDs are installed and the RBAC lets the
// controllers watch them.
func nephioFront(mgr ctrl.Manager, base *reconciler, hook func(string, types.NamespacedName, ctrl.Result, error)) *front {
	f := &front{name: "Nephio"}
	f.missing = func(ctx context.Context) (string, error) {
		on, err := served(mgr, nipamv1alpha1.GroupVersion, nipamv1alpha1.KindNetworkInstance, nipamv1alpha1.KindIPPrefix, nipamv1alpha1.KindIPClaim)
		if err == nil && on {
			on, err = served(mgr, vlanv1alpha1.GroupVersion, vlanv1alpha1.KindVLANClaim, vlanv1alpha1.KindVLANIndex)
		}
		if err != nil {
			return "", err
		}
		if !on {
			return "the ipam.resource.nephio.org and vlan.resource.nephio.org CRDs are not installed", nil
		}
		if why, err := denied(ctx, mgr, nipamv1alpha1.Group, "networkinstances", "ipprefixes", "ipclaims"); why != "" || err != nil {
			return why, err
		}
		return denied(ctx, mgr, vlanv1alpha1.Group, "vlanclaims", "vlanindices")
	}
	f.turnOn = func(ctx context.Context) error { return setupNephio(ctx, mgr, base, hook) }
	return f
}

// setupNephio registers the Nephio front's reconcilers. A claim waiting
// for its VLAN index is served again when the index changes.
func setupNephio(ctx context.Context, mgr ctrl.Manager, base *reconciler, hook func(string, types.NamespacedName, ctrl.Result, error)) error {
	c8s := mgr.GetClient()
	watched := builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{},
		predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	if err := ctrl.NewControllerManagedBy(mgr).Named("nephio-networkinstance").
		For(&nipamv1alpha1.NetworkInstance{}, watched).
		Complete(observed("nephio-networkinstance", reconcilerOf[nipamv1alpha1.NetworkInstance](base, nephioNetworkInstanceKind{base}), hook)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("nephio-ipprefix").
		For(&nipamv1alpha1.IPPrefix{}, watched).
		Complete(observed("nephio-ipprefix", reconcilerOf[nipamv1alpha1.IPPrefix](base, nephioPrefixKind{base}), hook)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("nephio-ipclaim").
		For(&nipamv1alpha1.IPClaim{}, watched).
		Complete(observed("nephio-ipclaim", reconcilerOf[nipamv1alpha1.IPClaim](base, nephioIPClaimKind{base}), hook)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("nephio-vlanindex").
		For(&vlanv1alpha1.VLANIndex{}, watched).
		Complete(observed("nephio-vlanindex", reconcilerOf[vlanv1alpha1.VLANIndex](base, nephioVLANIndexKind{base}), hook)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("nephio-vlanclaim").
		For(&vlanv1alpha1.VLANClaim{}, watched).
		Watches(&vlanv1alpha1.VLANIndex{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var list vlanv1alpha1.VLANClaimList
			if err := c8s.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
				log.FromContext(ctx).Error(err, "listing VLANClaims of VLANIndex", "index", o.GetName())
				return nil
			}
			var reqs []reconcile.Request
			for _, c := range list.Items {
				if c.Spec.VLANIndex.Name == o.GetName() && c.Status.VLANID == nil && c.Status.VLANRange == nil {
					reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
				}
			}
			return reqs
		})).
		Complete(observed("nephio-vlanclaim", reconcilerOf[vlanv1alpha1.VLANClaim](base, nephioVLANClaimKind{base}), hook)); err != nil {
		return err
	}
	log.FromContext(ctx).WithName("nephio").Info("Nephio front on")
	return nil
}
