package controllers

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
)

// indexNetworkInstance indexes IPPrefixes and IPAllocations by the network
// instance they live in.
const indexNetworkInstance = "ipam.nephio.org/network-instance"

// networkInstanceOf names the network instance (VRF) obj lives in: its own
// name for a NetworkInstance, spec.networkInstance for an IPPrefix, and
// spec.networkInstance or the selector's nephio.org/network-instance label
// for an IPAllocation.
func networkInstanceOf(obj client.Object) string {
	switch o := obj.(type) {
	case *ipamv1alpha1.NetworkInstance:
		return o.Name
	case *ipamv1alpha1.IPPrefix:
		return o.Spec.NetworkInstance
	case *ipamv1alpha1.IPAllocation:
		if o.Spec.NetworkInstance != "" {
			return o.Spec.NetworkInstance
		}
		if o.Spec.Selector != nil {
			return o.Spec.Selector.MatchLabels[ipamv1alpha1.LabelNetworkInstance]
		}
	}
	return ""
}

// indexByNetworkInstance is the indexer of indexNetworkInstance.
func indexByNetworkInstance(obj client.Object) []string {
	if name := networkInstanceOf(obj); name != "" {
		return []string{name}
	}
	return nil
}

// state is what other resources of a network instance care about: whether
// a resource holds something in the service, and whether it is going away.
type state struct {
	ready, synced, deleting bool
	prefix                  string
}

func stateOf(obj client.Object) state {
	s := state{deleting: !obj.GetDeletionTimestamp().IsZero()}
	var conds []metav1.Condition
	switch o := obj.(type) {
	case *ipamv1alpha1.NetworkInstance:
		conds = o.Status.Conditions
	case *ipamv1alpha1.IPPrefix:
		conds, s.prefix = o.Status.Conditions, o.Status.Prefix
	case *ipamv1alpha1.IPAllocation:
		conds, s.prefix = o.Status.Conditions, o.Status.Prefix
	}
	s.ready, s.synced = isReady(conds), isSynced(conds)
	return s
}

// needsAttention reports whether a resource waits for others: it is not
// Ready, not Synced (a refused deletion), or being deleted.
func needsAttention(obj client.Object) bool {
	s := stateOf(obj)
	return !s.ready || !s.synced || s.deleting
}

// stateChanged passes the events after which waiting resources of the same
// network instance may go ahead: a resource appears or goes away, turns
// Ready or not, or gets another result.
var stateChanged = predicate.Funcs{
	UpdateFunc:  func(e event.UpdateEvent) bool { return stateOf(e.ObjectOld) != stateOf(e.ObjectNew) },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// specChanged passes the events that need a resource itself reconciled:
// creation, deletion, and changes of its spec (generation), labels or
// deletion state. Its own status writes do not come back as work.
var specChanged = predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{})

// enqueueWaiting maps an event of a network instance's resource to the
// resources of list's kind in the same network instance that wait for
// something (see needsAttention), in every namespace.
func enqueueWaiting[L client.ObjectList](c client.Client, newList func() L, items func(L) []client.Object) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		name := networkInstanceOf(obj)
		if name == "" {
			return nil
		}
		list := newList()
		if err := c.List(ctx, list, client.MatchingFields{indexNetworkInstance: name}); err != nil {
			log.FromContext(ctx).Error(err, "listing resources of network instance", "networkInstance", name)
			return nil
		}
		var reqs []reconcile.Request
		for _, o := range items(list) {
			if o.GetUID() == obj.GetUID() || !needsAttention(o) {
				continue
			}
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
		}
		return reqs
	})
}

// enqueueNetworkInstance maps an event of a prefix or allocation to the
// NetworkInstances of that name, whose utilization it changes.
func enqueueNetworkInstance(c client.Client) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		name := networkInstanceOf(obj)
		if name == "" {
			return nil
		}
		var list ipamv1alpha1.NetworkInstanceList
		if err := c.List(ctx, &list); err != nil {
			log.FromContext(ctx).Error(err, "listing network instances")
			return nil
		}
		var reqs []reconcile.Request
		for _, ni := range list.Items {
			if ni.Name == name {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ni.Namespace, Name: ni.Name}})
			}
		}
		return reqs
	})
}

func prefixItems(l *ipamv1alpha1.IPPrefixList) []client.Object {
	out := make([]client.Object, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out
}

func allocationItems(l *ipamv1alpha1.IPAllocationList) []client.Object {
	out := make([]client.Object, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out
}
