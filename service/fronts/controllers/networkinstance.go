package controllers

import (
	"context"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
)

// networkInstanceKind adapts NetworkInstances: created in ipam-server with
// their aggregates' utilization in the status, deleted with their
// resource.
type networkInstanceKind struct{ *reconciler }

func (networkInstanceKind) conditions(ni *ipamv1alpha1.NetworkInstance) *[]metav1.Condition {
	return &ni.Status.Conditions
}

func (networkInstanceKind) status(ni *ipamv1alpha1.NetworkInstance) any { return ni.Status }

func (r networkInstanceKind) release(ctx context.Context, ni *ipamv1alpha1.NetworkInstance) (ctrl.Result, error) {
	return r.releaseKeyed(ctx, ni, &ni.Status.Conditions, "DeleteNetworkInstance", r.ipam.DeleteNetworkInstance)
}

func (r networkInstanceKind) serve(ctx context.Context, ni *ipamv1alpha1.NetworkInstance) (verdict, error) {
	_, err := r.ipam.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: translate.NetworkInstance(r.owner, ni)})
	o := classify(err, translate.ReadyMessage(ipamv1alpha1.KindNetworkInstance, nil))
	setConditions(&ni.Status.Conditions, o, ni.Generation)
	if err == nil {
		if u, uerr := r.utilization(ctx, ni.Name); uerr == nil {
			ni.Status.Utilization = u
		}
	}
	return verdict{o: o, err: err, action: "CreateNetworkInstance"}, nil
}

// utilization reads the network instance's aggregates from the service's
// prefix tree.
func (r networkInstanceKind) utilization(ctx context.Context, name string) ([]ipamv1alpha1.PrefixUtilization, error) {
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
