package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
)

// IPAllocationReconciler allocates addresses and prefixes for
// IPAllocations from ipam-server and releases them with their resource.
type IPAllocationReconciler struct {
	reconciler
}

// Reconcile brings one IPAllocation and ipam-server in line.
func (r *IPAllocationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var a ipamv1alpha1.IPAllocation
	if err := r.client.Get(ctx, req.NamespacedName, &a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	key := r.key(&a)
	if !a.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &a, &a.Status.Conditions, "Release", func() error {
			_, err := r.ipam.Release(ctx, &ipamv1.DeleteRequest{Key: key})
			return err
		})
	}
	if err := r.ensureFinalizer(ctx, &a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := a.DeepCopy()

	var o outcome
	var res *ipamv1.Result
	want, err := translate.Allocation(r.owner, &a)
	if err != nil {
		o = outcome{synced: true, message: err.Error(), retry: retryResync}
	} else {
		var resp *ipamv1.AllocateResponse
		resp, err = r.ipam.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: want})
		res = resp.GetResult()
		o = classify(err, translate.ReadyMessage(ipamv1alpha1.KindIPAllocation, res))
	}
	setConditions(&a.Status.Conditions, o, a.Generation)
	if o.synced {
		a.Status.Prefix, a.Status.Gateway = res.GetPrefix(), res.GetGateway()
	}
	changed := !equality.Semantic.DeepEqual(orig.Status, a.Status)
	return r.finish(ctx, &a, orig, a.Status.Conditions, orig.Status.Conditions, o, changed, "Allocate", err)
}
