package controllers

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
)

// prefixKind adapts IPPrefixes: recorded in ipam-server, deleted with their
// resource unless they still hold children.
type prefixKind struct{ *reconciler }

func (prefixKind) conditions(p *ipamv1alpha1.IPPrefix) *[]metav1.Condition {
	return &p.Status.Conditions
}

func (prefixKind) status(p *ipamv1alpha1.IPPrefix) any { return p.Status }

func (r prefixKind) release(ctx context.Context, p *ipamv1alpha1.IPPrefix) (ctrl.Result, error) {
	return r.releaseKeyed(ctx, p, &p.Status.Conditions, "DeletePrefix", r.ipam.DeletePrefix)
}

func (r prefixKind) serve(ctx context.Context, p *ipamv1alpha1.IPPrefix) (verdict, error) {
	resp, err := r.ipam.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: translate.Prefix(r.owner, p)})
	res := resp.GetResult()
	o := classify(err, translate.ReadyMessage(ipamv1alpha1.KindIPPrefix, res))
	setConditions(&p.Status.Conditions, o, p.Generation)
	if o.synced {
		// The service decided: its answer (or the absence of one) is the
		// status. When it could not be asked, the last answer stands.
		p.Status.Prefix, p.Status.Gateway = res.GetPrefix(), res.GetGateway()
	}
	return verdict{o: o, err: err, action: "CreatePrefix", pool: p.Spec.NetworkInstance}, nil
}
