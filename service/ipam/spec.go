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

// asks reports whether the normalized request r asks for what the shared
// spec s does, names aside.
func (s *allocSpec) asks(r *Allocation) bool {
	a := &s.req
	return a.Key.Owner == r.Key.Owner && a.Key.Namespace == r.Key.Namespace && a.NetworkInstance == r.NetworkInstance &&
		a.Kind == r.Kind && a.PrefixLength == r.PrefixLength && a.Prefix == r.Prefix && a.AddressFamily == r.AddressFamily &&
		a.Count == r.Count && sameLabels(r.Selector, a.Selector, s.selector) && sameLabels(r.Labels, a.Labels, s.labels)
}

// sameLabels reports whether m holds exactly the pairs of l (whose pairs
// are pairs). It looks m up rather than iterating it, and is quicker still
// when m is l itself (a decoder hands Apply one map for equal labels).
func sameLabels(m, l Labels, pairs []labelPair) bool {
	if len(m) != len(pairs) {
		return false
	}
	if len(m) == 0 || reflect.ValueOf(m).UnsafePointer() == reflect.ValueOf(l).UnsafePointer() {
		return true
	}
	for _, p := range pairs {
		if v, ok := m[p.k]; !ok || v != p.v {
			return false
		}
	}
	return true
}

// pairsOf lists the pairs of l.
func pairsOf(l Labels) []labelPair {
	if len(l) == 0 {
		return nil
	}
	out := make([]labelPair, 0, len(l))
	for k, v := range l {
		out = append(out, labelPair{k, v})
	}
	return out
}

// sharedSpec returns a shared spec of v for the normalized request r (its
// name is ignored). The spec keeps private copies of r's maps, which are
// never mutated afterwards. Specs in use by allocations are interned in
// v.specs (see allocTable.put and del), except requests of an explicit
// prefix, which no other allocation can share. Needed by
// BenchmarkW6HeapBytesPerAlloc: a spec per allocation would cost more
// than the 64-byte budget alone.
//
// With owned set the spec may keep r's maps (Apply owns its records).
func (v *vrf) sharedSpec(r *Allocation, owned bool) *allocSpec {
	if s := v.lastSpec; s != nil && s.asks(r) {
		return s
	}
	return v.findSpec(r, owned)
}

// findSpec is sharedSpec past its last spec.
func (v *vrf) findSpec(r *Allocation, owned bool) *allocSpec {
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
	s := &allocSpec{req: req, v: v, key: string(key), selector: pairsOf(req.Selector), labels: pairsOf(req.Labels)}
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

// specKey serializes every field asks compares.
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
