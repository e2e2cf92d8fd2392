package controllers

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
)

// NetworkInstanceReconciler creates network instances in ipam-server,
// reports their aggregates' utilization, and deletes them with their
// resource.
type NetworkInstanceReconciler struct {
	reconciler
}

// Reconcile brings one NetworkInstance and ipam-server in line.
func (r *NetworkInstanceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ni ipamv1alpha1.NetworkInstance
	if err := r.client.Get(ctx, req.NamespacedName, &ni); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	key := r.key(&ni)
	if !ni.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &ni, &ni.Status.Conditions, "DeleteNetworkInstance", func() error {
			_, err := r.ipam.DeleteNetworkInstance(ctx, &ipamv1.DeleteRequest{Key: key})
			return err
		})
	}
	if err := r.ensureFinalizer(ctx, &ni); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := ni.DeepCopy()

	_, err := r.ipam.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: translate.NetworkInstance(r.owner, &ni)})
	o := classify(err, translate.ReadyMessage(ipamv1alpha1.KindNetworkInstance, nil))
	setConditions(&ni.Status.Conditions, o, ni.Generation)
	if err == nil {
		if u, uerr := r.utilization(ctx, ni.Name); uerr == nil {
			ni.Status.Utilization = u
		}
	}
	changed := !equality.Semantic.DeepEqual(orig.Status, ni.Status)
	return r.finish(ctx, &ni, orig, ni.Status.Conditions, orig.Status.Conditions, o, changed, "CreateNetworkInstance", err)
}

// utilization reads the network instance's aggregates from the service's
// prefix tree.
func (r *NetworkInstanceReconciler) utilization(ctx context.Context, name string) ([]ipamv1alpha1.PrefixUtilization, error) {
	tree, err := r.ipam.Tree(ctx, &ipamv1.TreeRequest{NetworkInstance: name})
	if err != nil {
		return nil, err
	}
	var out []ipamv1alpha1.PrefixUtilization
	for _, n := range tree.GetNodes() {
		if n.GetDepth() != 0 {
			continue
		}
		out = append(out, ipamv1alpha1.PrefixUtilization{Prefix: n.GetPrefix(),
			Used: strconv.FormatUint(n.GetUsed(), 10), Total: strconv.FormatUint(n.GetTotal(), 10)})
	}
	return out, nil
}
