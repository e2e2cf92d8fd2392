package ipamfn

import (
	"fmt"
	"time"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// Condition types, statuses and reasons written into status.conditions,
// shaped like metav1.Condition.
const (
	// ConditionSynced is True when the IPAM service processed the resource.
	ConditionSynced = "Synced"
	// ConditionReady is True when the resource's prefix or allocation is made.
	ConditionReady = "Ready"
	// ReasonReconcileSuccess is the Synced reason after a successful Sync.
	ReasonReconcileSuccess = "ReconcileSuccess"
	// ReasonReady is the Ready reason when the request is fulfilled.
	ReasonReady = "Ready"
)

// condition is the desired state of one condition.
type condition struct {
	typ, status, reason, message string
}

// desiredConditions are the conditions of a resource the server accepted.
func desiredConditions(kind string) []condition {
	ready := "prefix recorded"
	if kind == KindIPAllocation {
		ready = "prefix allocated"
	}
	return []condition{
		{typ: ConditionSynced, status: "True", reason: ReasonReconcileSuccess, message: "synced with ipam-server"},
		{typ: ConditionReady, status: "True", reason: ReasonReady, message: ready},
	}
}

// writeResults writes each result of resp into the status of its
// IPAllocation or IPPrefix. Changes are made on copies and swapped in only
// when all of them succeeded, so a failure changes no item.
func writeResults(cfg Config, objs []*object, resp *ipamv1.SyncResponse) (bool, fn.Results, error) {
	now := cfg.now().UTC().Truncate(time.Second).Format(time.RFC3339)
	type swap struct{ item, next *fn.KubeObject }
	var swaps []swap
	var results fn.Results
	for _, o := range objs {
		var res *ipamv1.Result
		switch o.kind {
		case KindIPPrefix:
			res = resp.GetPrefixes()[o.index]
		case KindIPAllocation:
			res = resp.GetAllocations()[o.index]
		default:
			continue
		}
		next := o.item.Copy()
		changed, err := writeStatus(next, res.GetPrefix(), res.GetGateway(), desiredConditions(o.kind), now)
		if err != nil {
			results = append(results, objectResult(o, "status", err.Error(), ""))
			continue
		}
		if changed {
			swaps = append(swaps, swap{o.item, next})
		}
	}
	if len(results) > 0 {
		return false, results, failed(results)
	}
	for _, s := range swaps {
		*s.item = *s.next
	}
	return len(swaps) > 0, summary(objs, len(swaps), resp), nil
}

// objectKinds names the kinds of released objects as users know them.
var objectKinds = map[ipamv1.ObjectKind]string{
	ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE: KindNetworkInstance,
	ipamv1.ObjectKind_OBJECT_KIND_PREFIX:           KindIPPrefix,
	ipamv1.ObjectKind_OBJECT_KIND_RANGE:            "IPRange",
	ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION:       KindIPAllocation,
}

// summary is what a successful run reports: one line with the counts,
// and one line per object the prune released, so that a reviewer of the
// render sees every release.
func summary(objs []*object, written int, resp *ipamv1.SyncResponse) fn.Results {
	rel := resp.GetReleased()
	statuses := 0
	for _, o := range objs {
		if o.kind != KindNetworkInstance {
			statuses++
		}
	}
	results := fn.Results{{Severity: fn.Info, Message: fmt.Sprintf(
		"ipam-fn: synced %d resources with ipam-server: %d statuses written, %d up to date, %d released by prune",
		len(objs), written, statuses-written, len(rel))}}
	for _, r := range rel {
		kind := objectKinds[r.GetKind()]
		k := r.GetKey()
		id := k.GetName()
		if k.GetNamespace() != "" {
			id = k.GetNamespace() + "/" + id
		}
		results = append(results, &fn.Result{Severity: fn.Info,
			Message:     fmt.Sprintf("ipam-fn: released %s %s of owner %s: the package no longer declares it", kind, id, k.GetOwner()),
			ResourceRef: &fn.ResourceRef{APIVersion: APIVersion, Kind: kind, Name: k.GetName(), Namespace: k.GetNamespace()}})
	}
	return results
}

// writeStatus sets status.prefix, status.gateway (removed when empty) and
// the conditions of o, touching only what differs. A condition keeps its
// lastTransitionTime unless its status changes; conditions of other types
// are left alone. It reports whether anything changed.
func writeStatus(o *fn.KubeObject, prefix, gateway string, conds []condition, now string) (bool, error) {
	changed := false
	set := func(sub *fn.SubObject, v string, fields ...string) error {
		cur, found, err := sub.NestedString(fields...)
		if found && err == nil && cur == v {
			return nil
		}
		changed = true
		return sub.SetNestedString(v, fields...)
	}
	if err := set(&o.SubObject, prefix, "status", "prefix"); err != nil {
		return false, err
	}
	if gateway != "" {
		if err := set(&o.SubObject, gateway, "status", "gateway"); err != nil {
			return false, err
		}
	} else if _, found, _ := o.NestedString("status", "gateway"); found {
		if _, err := o.RemoveNestedField("status", "gateway"); err != nil {
			return false, err
		}
		changed = true
	}
	list, _, err := o.NestedSlice("status", "conditions")
	if err != nil {
		return false, fmt.Errorf("status.conditions must be a list of conditions: %w", err)
	}
	added := false
	for _, c := range conds {
		var cur *fn.SubObject
		for _, e := range list {
			if t, _, _ := e.NestedString("type"); t == c.typ {
				cur = e
				break
			}
		}
		if cur == nil {
			n := fn.NewEmptyKubeObject()
			for _, kv := range [][2]string{{"type", c.typ}, {"status", c.status}, {"reason", c.reason}, {"message", c.message}, {"lastTransitionTime", now}} {
				if err := n.SetNestedString(kv[1], kv[0]); err != nil {
					return false, err
				}
			}
			list = append(list, &n.SubObject)
			added = true
			continue
		}
		if s, _, _ := cur.NestedString("status"); s != c.status {
			if err := set(cur, now, "lastTransitionTime"); err != nil {
				return false, err
			}
		}
		for _, kv := range [][2]string{{"status", c.status}, {"reason", c.reason}, {"message", c.message}} {
			if err := set(cur, kv[1], kv[0]); err != nil {
				return false, err
			}
		}
	}
	if added {
		changed = true
		if err := o.UpsertMap("status").SetSlice(list, "conditions"); err != nil {
			return false, err
		}
	}
	return changed, nil
}
