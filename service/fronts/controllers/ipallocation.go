package controllers

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
)

// allocationKind adapts IPAllocations: addresses and prefixes allocated from
// ipam-server, released with their resource.
type allocationKind struct{ *reconciler }

func (allocationKind) conditions(a *ipamv1alpha1.IPAllocation) *[]metav1.Condition {
	return &a.Status.Conditions
}

func (allocationKind) status(a *ipamv1alpha1.IPAllocation) any { return a.Status }

func (r allocationKind) release(ctx context.Context, a *ipamv1alpha1.IPAllocation) (ctrl.Result, error) {
	return r.releaseKeyed(ctx, a, &a.Status.Conditions, "Release", r.ipam.Release)
}

func (r allocationKind) serve(ctx context.Context, a *ipamv1alpha1.IPAllocation) (verdict, error) {
	var o outcome
	var res *ipamv1.Result
	want, err := translate.Allocation(r.owner, a)
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
	return verdict{o: o, err: err, action: "Allocate", pool: networkInstanceOf(a)}, nil
}
