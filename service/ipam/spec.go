package ipam

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
)

// maxSpecs bounds the shared specs of a VRF; past it, a plain allocation
// whose request matches none of them gets a spec of its own.
const maxSpecs = 4096

// sameSpec reports whether two normalized requests ask for the same thing,
// names aside.
func sameSpec(a, b *Allocation) bool {
	return a.Key.Owner == b.Key.Owner && a.Key.Namespace == b.Key.Namespace && a.NetworkInstance == b.NetworkInstance &&
		a.Kind == b.Kind && a.PrefixLength == b.PrefixLength && a.Prefix == b.Prefix && a.AddressFamily == b.AddressFamily &&
		a.Count == b.Count && sameLabels(a.Selector, b.Selector) && sameLabels(a.Labels, b.Labels)
}

// sameLabels is maps.Equal, quick when both are one map (a decoder hands
// Apply the same map for equal labels).
func sameLabels(a, b Labels) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		return true
	}
	return maps.Equal(a, b)
}

// sharedSpec returns a shared spec of v for the normalized request r (its
// name is ignored). The spec keeps private copies of r's maps, which are
// never mutated afterwards. Specs in use by allocations are interned in
// v.specs (see allocTable.put and del), except requests of an explicit
// prefix, which no other allocation can share.
//
// With owned set the spec may keep r's maps (Apply owns its records).
func (v *vrf) sharedSpec(r *Allocation, owned bool) *allocSpec {
	if s := v.lastSpec; s != nil && sameSpec(&s.req, r) {
		return s
	}
	var key []byte
	if !r.Prefix.IsValid() {
		key = specKey(r)
		if s := v.specs[string(key)]; s != nil {
			v.lastSpec = s
			return s
		}
	}
	req := *r
	req.Key.Name = ""
	switch {
	case !owned:
		req.Selector, req.Labels = cloneLabels(r.Selector), cloneLabels(r.Labels)
	default:
		req.Selector, req.Labels = nilIfEmpty(r.Selector), nilIfEmpty(r.Labels)
	}
	s := &allocSpec{req: req, v: v, key: string(key)}
	v.lastSpec = s
	return s
}

// ref counts one more allocation using s, interning s when it is the
// first.
func (v *vrf) ref(s *allocSpec) {
	s.refs++
	if s.refs == 1 && s.key != "" && len(v.specs) < maxSpecs {
		if v.specs == nil {
			v.specs = make(map[string]*allocSpec)
		}
		if _, taken := v.specs[s.key]; !taken {
			v.specs[s.key] = s
		}
	}
}

// unref counts one allocation less using s, forgetting s when it was the
// last.
func (v *vrf) unref(s *allocSpec) {
	s.refs--
	if s.refs == 0 && s.key != "" && v.specs[s.key] == s {
		delete(v.specs, s.key)
	}
}

// ownSpec returns a spec of one allocation, sharing shared's maps.
func ownSpec(shared *allocSpec, name string) *allocSpec {
	s := &allocSpec{req: shared.req, v: shared.v, own: true}
	s.req.Key.Name = name
	return s
}

// cloneLabels copies l; an empty map becomes nil.
func cloneLabels(l Labels) Labels {
	if len(l) == 0 {
		return nil
	}
	return maps.Clone(l)
}

func nilIfEmpty(l Labels) Labels {
	if len(l) == 0 {
		return nil
	}
	return l
}

// specKey serializes every field sameSpec compares.
func specKey(r *Allocation) []byte {
	b := make([]byte, 0, 128)
	str := func(s string) { b = strconv.AppendInt(b, int64(len(s)), 10); b = append(b, ':'); b = append(b, s...) }
	str(r.Key.Owner)
	str(r.Key.Namespace)
	str(r.NetworkInstance)
	str(string(r.Kind))
	str(string(r.AddressFamily))
	b = strconv.AppendInt(b, int64(r.PrefixLength), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(r.Count), 10)
	b = append(b, '/')
	b = r.Prefix.AppendTo(b)
	for _, l := range []Labels{r.Selector, r.Labels} {
		b = append(b, '{')
		for _, k := range slices.Sorted(maps.Keys(l)) {
			str(k)
			str(l[k])
		}
		b = append(b, '}')
	}
	return b
}
