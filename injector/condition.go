package injector

import (
	"github.com/kptdev/krm-functions-sdk/go/fn"
)

// ConditionType is the Kptfile condition the injector sets on every Draft
// holding IPAM resources: True when all of them are allocated, False with
// the error otherwise. Name it in the Kptfile's info.readinessGates to keep
// a revision from being approved before its IPs are in it.
const ConditionType = "ipam.nephio.org.IPAllocation"

// Reasons of ConditionType.
const (
	// ReasonAllocated: every IPAM resource of the package is allocated.
	ReasonAllocated = "Allocated"
	// ReasonFailed: ipam-server refused or could not be reached; the
	// message says why and the resources are left as they were.
	ReasonFailed = "AllocationFailed"
)

// condition is one entry of a Kptfile's status.conditions.
type condition struct {
	Type, Status, Reason, Message string
}

// setCondition sets c in the status.conditions of kptfile, keeping the
// other conditions and their order. It reports whether anything changed.
func setCondition(kptfile *fn.KubeObject, c condition) (bool, error) {
	conds, _, err := kptfile.NestedSlice("status", "conditions")
	if err != nil {
		return false, err
	}
	var list []any
	found, changed := false, false
	for _, sc := range conds {
		e := condition{Type: sc.GetString("type"), Status: sc.GetString("status"), Reason: sc.GetString("reason"), Message: sc.GetString("message")}
		if e.Type == c.Type {
			if found {
				changed = true // a duplicate: drop it
				continue
			}
			found = true
			if e != c {
				changed = true
			}
			e = c
		}
		list = append(list, e.asMap())
	}
	if !found {
		list = append(list, c.asMap())
		changed = true
	}
	if !changed {
		return false, nil
	}
	return true, kptfile.SetNestedField(list, "status", "conditions")
}

func (c condition) asMap() map[string]any {
	m := map[string]any{"type": c.Type, "status": c.Status}
	if c.Reason != "" {
		m["reason"] = c.Reason
	}
	if c.Message != "" {
		m["message"] = c.Message
	}
	return m
}

// getCondition returns the ConditionType condition of resources' Kptfile
// and whether there is one.
func getCondition(resources map[string]string) (condition, bool) {
	p, err := parseFiles(map[string]string{"Kptfile": resources["Kptfile"]})
	if err != nil {
		return condition{}, false
	}
	kf := p.kptfile()
	if kf == nil {
		return condition{}, false
	}
	conds, _, _ := kf.NestedSlice("status", "conditions")
	for _, sc := range conds {
		if sc.GetString("type") == ConditionType {
			return condition{Type: ConditionType, Status: sc.GetString("status"), Reason: sc.GetString("reason"), Message: sc.GetString("message")}, true
		}
	}
	return condition{}, false
}
