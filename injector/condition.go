package injector

import (
	"github.com/nephio-project/ipam/functions/engine"
)

// ConditionType is the Kptfile condition the injector sets on every Draft
// holding IPAM resources: True when all of them are allocated, False with
// the error otherwise. Name it in the Kptfile's info.readinessGates to keep
// a revision from being approved before its IPs are in it. The injector
// writes it with the package engine's one Kptfile condition writer
// (engine.SetKptfileCondition), which keeps the fields and conditions
// other tools wrote.
const ConditionType = "ipam.nephio.org.IPAllocation"

// Reasons of ConditionType.
const (
	// ReasonAllocated: every IPAM resource of the package is allocated.
	ReasonAllocated = "Allocated"
	// ReasonFailed: ipam-server refused or could not be reached; the
	// message says why and the resources are left as they were.
	ReasonFailed = "AllocationFailed"
)

// getCondition returns the ConditionType condition of resources' Kptfile
// and whether there is one.
func getCondition(resources map[string]string) (engine.Condition, bool) {
	p, err := parseFiles(map[string]string{"Kptfile": resources["Kptfile"]})
	if err != nil {
		return engine.Condition{}, false
	}
	kf := p.kptfile()
	if kf == nil {
		return engine.Condition{}, false
	}
	return engine.KptfileCondition(kf, ConditionType)
}
