package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/api/vocab"
)

// Condition is the desired state of one condition: the four fields the
// engine owns. Writers set only these, leaving every other field of the
// condition (lastTransitionTime, observedGeneration, ...) and every other
// condition as they are. The engine writes no lastTransitionTime: two
// people rendering the same package must get the same bytes, and a
// package has no clock that both share.
type Condition struct {
	// Type is the condition type, its key in the list.
	Type string
	// Status is "True", "False" or "Unknown".
	Status string
	// Reason is a CamelCase word; empty removes the field.
	Reason string
	// Message says why, for people; empty removes the field.
	Message string
}

// desiredConditions are the conditions of a resource the server accepted
// with res.
func desiredConditions(kind string, res *ipamv1.Result) []Condition {
	return []Condition{
		{Type: ipamv1alpha1.ConditionTypeSynced, Status: "True", Reason: ipamv1alpha1.ReasonReconcileSuccess},
		{Type: ipamv1alpha1.ConditionTypeReady, Status: "True", Reason: ipamv1alpha1.ReasonReady, Message: translate.ReadyMessage(kind, res)},
	}
}

// KptfileConditionType is the type of the root Kptfile's condition for the
// claim of kind named name, as Nephio's specializer writes it: a readiness
// gate on it waits until the claim is allocated.
func KptfileConditionType(kind, name string) string {
	return ipamv1alpha1.Group + "." + kind + "." + name
}

// writeResults writes each result of resp into the status of its
// IPAllocation or IPPrefix, the claims' conditions and the package
// identity into the root Kptfile, and each IPAddressClaim's answer into
// its status and IPAddress. Changes are made on copies and swapped in
// (new IPAddresses added to items, stale ones removed) only when all of
// them succeeded, so a failure changes no item.
func writeResults(objs []*object, idn identity, resp *ipamv1.SyncResponse, items *fn.KubeObjects) (bool, fn.Results, error) {
	type swap struct{ item, next *fn.KubeObject }
	var swaps []swap
	var added, replaced fn.KubeObjects
	var results fn.Results
	var claims []Condition
	for _, o := range objs {
		if o.nres != nil {
			if !o.isNephioClaim() {
				continue // VRFs, prefixes and VLAN indexes are left as they are
			}
			next, changed, err := writeNephioClaim(o, resp.GetAllocations()[o.index])
			if err != nil {
				results = append(results, objectResult(o, "status", err.Error(), ""))
				continue
			}
			if changed {
				swaps = append(swaps, swap{o.item, next})
			}
			claims = append(claims, nephioCondition(idn.kptfile, o))
			continue
		}
		var res *ipamv1.Result
		switch o.kind {
		case capiv1beta2.KindIPAddressClaim, metal3v1alpha1.KindIPClaim:
			if o.claim == nil || o.claim.capi == nil && o.claim.m3 == nil {
				continue
			}
			out, changed, err := writeAnyClaim(o, resp.GetAllocations()[o.index])
			if err != nil {
				results = append(results, objectResult(o, "status", err.Error(), ""))
				continue
			}
			if changed {
				swaps = append(swaps, swap{o.item, out.claim})
				switch {
				case !out.added:
					swaps = append(swaps, swap{o.claim.addr, out.addr})
				case o.claim.addr != nil: // the address moved: a new name
					replaced = append(replaced, o.claim.addr)
					added = append(added, out.addr)
				default:
					added = append(added, out.addr)
				}
			}
			continue
		case ipamv1alpha1.KindIPPrefix:
			res = resp.GetPrefixes()[o.index]
		case ipamv1alpha1.KindIPAllocation:
			res = resp.GetAllocations()[o.index]
			claims = append(claims, Condition{Type: KptfileConditionType(o.kind, o.name), Status: "True",
				Reason: ipamv1alpha1.ReasonReady, Message: translate.ReadyMessage(o.kind, res)})
		default:
			continue
		}
		next := o.item.Copy()
		changed, err := writeStatus(next, res.GetPrefix(), res.GetGateway(), desiredConditions(o.kind, res))
		if err != nil {
			results = append(results, objectResult(o, "status", err.Error(), ""))
			continue
		}
		if changed {
			swaps = append(swaps, swap{o.item, next})
		}
	}
	if k := idn.kptfile; k != nil {
		next := k.Copy()
		changed, err := writeKptfileConditions(next, claims)
		if err != nil {
			results = append(results, kptfileResult(k, "status.conditions", err.Error(), ""))
		}
		idChanged, err := idn.write(next, resp.GetGeneration())
		if err != nil {
			results = append(results, kptfileResult(k, "metadata.annotations", err.Error(), ""))
		}
		if changed || idChanged {
			swaps = append(swaps, swap{k, next})
		}
	}
	if len(results) > 0 {
		return false, results, failed(results)
	}
	for _, s := range swaps {
		*s.item = *s.next
	}
	stale := append(staleAddresses(*items, objs), replaced...)
	if len(stale) > 0 {
		*items = slices.DeleteFunc(*items, func(it *fn.KubeObject) bool { return slices.Contains(stale, it) })
	}
	*items = append(*items, added...)
	written := len(swaps) + len(added) + len(stale)
	return written > 0, summary(objs, written, resp), nil
}

// summary is what a successful run reports: one line with the counts,
// and one line per object the prune released, so that a reviewer of the
// render sees every release.
func summary(objs []*object, written int, resp *ipamv1.SyncResponse) fn.Results {
	rel := resp.GetReleased()
	results := fn.Results{{Severity: fn.Info, Message: fmt.Sprintf(
		"ipam-fn: synced %s with ipam-server: %s written, %d released by prune",
		count(len(objs), "resource"), count(written, "item"), len(rel))}}
	if from := resp.GetAdopted(); from != "" {
		results = append(results, &fn.Result{Severity: fn.Info, Message: fmt.Sprintf(
			"ipam-fn: adopted the owner's objects from the package with identity %s", vocab.Quote(from))})
	}
	for _, r := range rel {
		kind, apiVersion := ipamv1.KindName(r.GetKind()), ipamv1alpha1.APIVersion
		k := r.GetKey()
		name := k.GetName()
		if r.GetKind() == ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION {
			if claim, ok := strings.CutPrefix(name, translate.PackageClaimName("")); ok {
				kind, apiVersion, name = capiv1beta2.KindIPAddressClaim, capiv1beta2.GroupVersion.String(), claim
			} else if claim, ok := strings.CutPrefix(name, translate.PackageMetal3ClaimName("")); ok {
				kind, apiVersion, name = metal3v1alpha1.KindIPClaim, metal3v1alpha1.GroupVersion.String(), claim
			} else if claim, ok := strings.CutPrefix(name, NephioIPClaimName("")); ok {
				kind, apiVersion, name = nipamv1alpha1.KindIPClaim, nipamv1alpha1.APIVersion, claim
			} else if claim, ok := strings.CutPrefix(name, NephioVLANClaimName("")); ok {
				kind, apiVersion, name = vlanv1alpha1.KindVLANClaim, vlanv1alpha1.APIVersion, claim
			}
		}
		results = append(results, &fn.Result{Severity: fn.Info,
			Message: fmt.Sprintf("ipam-fn: released %s %s of owner %s: the package no longer declares it",
				kind, translate.ID(k.GetNamespace(), name), k.GetOwner()),
			ResourceRef: &fn.ResourceRef{APIVersion: apiVersion, Kind: kind, Name: name, Namespace: k.GetNamespace()}})
	}
	return results
}

// setter sets string fields of sub-objects, touching only what differs,
// and records whether anything changed.
type setter struct{ changed bool }

func (s *setter) set(sub *fn.SubObject, v string, fields ...string) error {
	cur, found, err := sub.NestedString(fields...)
	if found && err == nil && cur == v {
		return nil
	}
	s.changed = true
	return sub.SetNestedString(v, fields...)
}

// fieldValue is a string value and the path of its field.
type fieldValue struct {
	v      string
	fields []string
}

// addressSpec sets the string fields of an IPAddress (Cluster API or
// Metal3), its spec.prefix, and its spec.gateway (removed when empty).
func (s *setter) addressSpec(a *fn.SubObject, values []fieldValue, prefix int, gateway string) error {
	for _, f := range values {
		if err := s.set(a, f.v, f.fields...); err != nil {
			return err
		}
	}
	if cur, found, _ := a.NestedInt64("spec", "prefix"); !found || cur != int64(prefix) {
		s.changed = true
		if err := a.SetNestedInt(prefix, "spec", "prefix"); err != nil {
			return err
		}
	}
	if gateway != "" {
		return s.set(a, gateway, "spec", "gateway")
	}
	return s.remove(a, "spec", "gateway")
}

// remove deletes a field of sub if it is there.
func (s *setter) remove(sub *fn.SubObject, fields ...string) error {
	removed, err := sub.RemoveNestedField(fields...)
	s.changed = s.changed || removed
	return err
}

// writeStatus sets status.prefix, status.gateway (removed when empty) and
// the conditions of o, touching only what differs; conditions of other
// types are left alone. It reports whether anything changed.
func writeStatus(o *fn.KubeObject, prefix, gateway string, conds []Condition) (bool, error) {
	var s setter
	if err := s.set(&o.SubObject, prefix, "status", "prefix"); err != nil {
		return false, err
	}
	if gateway != "" {
		if err := s.set(&o.SubObject, gateway, "status", "gateway"); err != nil {
			return false, err
		}
	} else if err := s.remove(&o.SubObject, "status", "gateway"); err != nil {
		return false, err
	}
	if err := s.conditions(o.UpsertMap("status"), conds, false); err != nil {
		return false, err
	}
	return s.changed, nil
}

// writeKptfileConditions sets one condition per claim in the Kptfile's
// status.conditions and removes the conditions of claims the package no
// longer holds (of a Nephio claim: unless its reason names the function
// that owns it); conditions of other producers are left alone.
func writeKptfileConditions(k *fn.KubeObject, claims []Condition) (bool, error) {
	var s setter
	list, _, err := k.NestedSlice("status", "conditions")
	if err != nil {
		return false, fmt.Errorf("must be a list of conditions: %w", err)
	}
	want := map[string]bool{}
	for _, c := range claims {
		want[c.Type] = true
	}
	prefix := KptfileConditionType(ipamv1alpha1.KindIPAllocation, "")
	kept := list[:0:0]
	for _, e := range list {
		t, _, _ := e.NestedString("type")
		if strings.HasPrefix(t, prefix) && !want[t] || staleNephioCondition(e, want) {
			s.changed = true
			continue
		}
		kept = append(kept, e)
	}
	if len(claims) == 0 && !s.changed {
		return false, nil
	}
	status := k.UpsertMap("status")
	if s.changed {
		if err := status.SetSlice(kept, "conditions"); err != nil {
			return false, err
		}
	}
	if err := s.conditions(status, claims, true); err != nil {
		return false, err
	}
	return s.changed, nil
}

// SetKptfileCondition sets c in the status.conditions of the Kptfile k:
// the engine's one writer of Kptfile conditions, which every client uses.
// It writes only the four fields Condition owns, touching only those that
// differ; the other fields of that condition (lastTransitionTime, fields
// other tools wrote) and the other conditions are kept as they are, in
// their order. A second condition of c's type is removed (conditions are
// a map keyed by type). It reports whether anything changed.
func SetKptfileCondition(k *fn.KubeObject, c Condition) (bool, error) {
	var s setter
	if err := s.conditions(k.UpsertMap("status"), []Condition{c}, true); err != nil {
		return false, err
	}
	return s.changed, nil
}

// KptfileCondition returns the owned fields of the condition of type typ
// in the status.conditions of the Kptfile k, and whether there is one.
func KptfileCondition(k *fn.KubeObject, typ string) (Condition, bool) {
	list, _, err := k.NestedSlice("status", "conditions")
	if err != nil {
		return Condition{}, false
	}
	for _, e := range list {
		if e.GetString("type") == typ {
			return Condition{Type: typ, Status: e.GetString("status"), Reason: e.GetString("reason"), Message: e.GetString("message")}, true
		}
	}
	return Condition{}, false
}

// conditions writes conds into status.conditions, one condition per
// type: a later duplicate of a type it writes is removed. An empty reason
// or message is left out; lastTransitionTime is removed unless keepTime
// (it is not deterministic). Other fields and other conditions are kept.
func (s *setter) conditions(status *fn.SubObject, conds []Condition, keepTime bool) error {
	list, _, err := status.NestedSlice("conditions")
	if err != nil {
		return fmt.Errorf("status.conditions must be a list of conditions: %w", err)
	}
	rewrite := false
	for _, c := range conds {
		var cur *fn.SubObject
		list = slices.DeleteFunc(list, func(e *fn.SubObject) bool {
			if t, _, _ := e.NestedString("type"); t != c.Type {
				return false
			}
			if cur == nil {
				cur = e
				return false
			}
			rewrite = true // a duplicate
			return true
		})
		if cur == nil {
			cur = &fn.NewEmptyKubeObject().SubObject
			list = append(list, cur)
			rewrite = true
		}
		for _, kv := range [][2]string{{"type", c.Type}, {"status", c.Status}, {"reason", c.Reason}, {"message", c.Message}} {
			var err error
			if kv[1] == "" {
				err = s.remove(cur, kv[0])
			} else {
				err = s.set(cur, kv[1], kv[0])
			}
			if err != nil {
				return err
			}
		}
		if !keepTime {
			if err := s.remove(cur, "lastTransitionTime"); err != nil {
				return err
			}
		}
	}
	if rewrite {
		s.changed = true
		return status.SetSlice(list, "conditions")
	}
	return nil
}

// count is n noun, plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
