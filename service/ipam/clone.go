package ipam

import (
	"maps"
	"slices"
)

// The core keeps private copies of what callers hand it, so a caller that
// reuses its maps cannot change stored objects; stored objects are never
// mutated in place, so records may share them.

func clonePrefix(p Prefix) *Prefix {
	p.Labels = maps.Clone(p.Labels)
	p.Exclusions = slices.Clone(p.Exclusions)
	return &p
}

func cloneNI(ni NetworkInstance) NetworkInstance {
	ni.Labels = maps.Clone(ni.Labels)
	ni.Prefixes = slices.Clone(ni.Prefixes)
	for i := range ni.Prefixes {
		ni.Prefixes[i].Labels = maps.Clone(ni.Prefixes[i].Labels)
	}
	return ni
}

func cloneRange(r IPRange) *IPRange {
	r.Labels = maps.Clone(r.Labels)
	r.Exclusions = slices.Clone(r.Exclusions)
	r.PreAllocations = maps.Clone(r.PreAllocations)
	return &r
}

func cloneAlloc(r Allocation) Allocation {
	r.Selector = maps.Clone(r.Selector)
	r.Labels = maps.Clone(r.Labels)
	return r
}
