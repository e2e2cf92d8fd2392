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

// IPPrefixReconciler records IPPrefixes in ipam-server and deletes them
// with their resource, unless they still hold children.
type IPPrefixReconciler struct {
	reconciler
}

// Reconcile brings one IPPrefix and ipam-server in line.
func (r *IPPrefixReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p ipamv1alpha1.IPPrefix
	if err := r.client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	key := r.key(&p)
	if !p.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &p, &p.Status.Conditions, "DeletePrefix", func() error {
			_, err := r.ipam.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: key})
			return err
		})
	}
	if err := r.ensureFinalizer(ctx, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := p.DeepCopy()

	resp, err := r.ipam.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: translate.Prefix(r.owner, &p)})
	res := resp.GetResult()
	o := classify(err, translate.ReadyMessage(ipamv1alpha1.KindIPPrefix, res))
	setConditions(&p.Status.Conditions, o, p.Generation)
	if o.synced {
		// The service decided: its answer (or the absence of one) is the
		// status. When it could not be asked, the last answer stands.
		p.Status.Prefix, p.Status.Gateway = res.GetPrefix(), res.GetGateway()
	}
	changed := !equality.Semantic.DeepEqual(orig.Status, p.Status)
	return r.finish(ctx, &p, orig, p.Status.Conditions, orig.Status.Conditions, o, changed, "CreatePrefix", err)
}
