package controllers

import (
	"context"
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// Options configure the reconcilers.
type Options struct {
	// Owner keys every object in ipam-server; DefaultOwner when empty.
	Owner string
	// Resync is how often every resource is reconciled again;
	// DefaultResync when zero.
	Resync time.Duration
	// EventRecorderName names the events the reconcilers record; no events
	// when empty.
	EventRecorderName string
}

// Setup registers the NetworkInstance, IPPrefix and IPAllocation
// reconcilers, their watches and the network-instance field indexes with
// mgr. They call ipam through c.
func Setup(ctx context.Context, mgr ctrl.Manager, c ipamv1.IPAMClient, opts Options) error {
	if c == nil {
		return errors.New("controllers: an IPAM client is required")
	}
	base := reconciler{client: mgr.GetClient(), ipam: c, owner: opts.Owner, resync: opts.Resync, now: time.Now}
	if base.owner == "" {
		base.owner = DefaultOwner
	}
	if base.resync <= 0 {
		base.resync = DefaultResync
	}
	if opts.EventRecorderName != "" {
		base.recorder = mgr.GetEventRecorder(opts.EventRecorderName)
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &ipamv1alpha1.IPPrefix{}, indexNetworkInstance, indexByNetworkInstance); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &ipamv1alpha1.IPAllocation{}, indexNetworkInstance, indexByNetworkInstance); err != nil {
		return err
	}
	c8s := mgr.GetClient()
	waitingPrefixes := enqueueWaiting(c8s, func() *ipamv1alpha1.IPPrefixList { return &ipamv1alpha1.IPPrefixList{} }, prefixItems)
	waitingAllocations := enqueueWaiting(c8s, func() *ipamv1alpha1.IPAllocationList { return &ipamv1alpha1.IPAllocationList{} }, allocationItems)
	changed := builder.WithPredicates(stateChanged)
	forSpec := builder.WithPredicates(specChanged)

	if err := ctrl.NewControllerManagedBy(mgr).Named("networkinstance").
		For(&ipamv1alpha1.NetworkInstance{}, forSpec).
		Watches(&ipamv1alpha1.IPPrefix{}, enqueueNetworkInstance(c8s), changed).
		Watches(&ipamv1alpha1.IPAllocation{}, enqueueNetworkInstance(c8s), changed).
		Complete(&NetworkInstanceReconciler{base}); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("ipprefix").
		For(&ipamv1alpha1.IPPrefix{}, forSpec).
		Watches(&ipamv1alpha1.NetworkInstance{}, waitingPrefixes, changed).
		Watches(&ipamv1alpha1.IPPrefix{}, waitingPrefixes, changed).
		Watches(&ipamv1alpha1.IPAllocation{}, waitingPrefixes, changed).
		Complete(&IPPrefixReconciler{base}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("ipallocation").
		For(&ipamv1alpha1.IPAllocation{}, forSpec).
		Watches(&ipamv1alpha1.NetworkInstance{}, waitingAllocations, changed).
		Watches(&ipamv1alpha1.IPPrefix{}, waitingAllocations, changed).
		Watches(&ipamv1alpha1.IPAllocation{}, waitingAllocations, changed).
		Complete(&IPAllocationReconciler{base})
}
