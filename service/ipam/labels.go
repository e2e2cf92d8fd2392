package ipam

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// labelPair is one key=value term of the selector index.
type labelPair struct{ k, v string }

// entry is a selectable thing of a VRF: a prefix node, a static host
// address or an IP range. Its labels are the system labels plus the user's.
type entry struct {
	order  orderKey
	labels Labels
	refs   []postingRef // its places in the label index
	node   *node        // a prefix node (aggregate, pool, loopback, network subnet, allocated sub-prefix)
	host   *hostEntry   // a static address declared by an IPPrefix
	rng    *ipRange     // an IP range
}

// orderKey sorts entries in prefix order.
type orderKey struct {
	pfx  netip.Prefix
	rank int // node < range < host at the same prefix
}

// matches reports whether e carries every term.
func (e *entry) matches(terms []labelPair) bool {
	for _, t := range terms {
		if v, ok := e.labels[t.k]; !ok || v != t.v {
			return false
		}
	}
	return true
}

// labelIndex maps every label pair to the entries carrying it, so a
// selector is answered from its rarest term instead of a scan. A posting
// is a slice, and each entry remembers its place in each of its postings
// (entry.refs): adding and removing an entry appends and swaps, without
// hashing it into sets of thousands (its networks' entries share most
// labels). Needed by BenchmarkBestFit in service/peerbench, whose every
// allocation adds a network's entry and whose release removes it.
type labelIndex struct {
	post map[labelPair]*posting
	gen  uint64 // changes whenever an entry is added or removed
}

// posting is the entries carrying one label pair, in no order.
type posting struct {
	pair    labelPair
	entries []*entry
}

// postingRef is an entry's place in one posting.
type postingRef struct {
	p *posting
	i int
}

func newLabelIndex() labelIndex {
	return labelIndex{post: make(map[labelPair]*posting)}
}

// add indexes e under its labels; e must not be indexed.
func (ix *labelIndex) add(e *entry) {
	ix.gen++
	e.refs = slices.Grow(e.refs[:0], len(e.labels))
	for k, v := range e.labels {
		lp := labelPair{k, v}
		p := ix.post[lp]
		if p == nil {
			p = &posting{pair: lp}
			ix.post[lp] = p
		}
		e.refs = append(e.refs, postingRef{p, len(p.entries)})
		p.entries = append(p.entries, e)
	}
}

// remove unindexes e, under the labels it was added with.
func (ix *labelIndex) remove(e *entry) {
	ix.gen++
	for _, r := range e.refs {
		p := r.p
		last := len(p.entries) - 1
		if moved := p.entries[last]; r.i != last {
			p.entries[r.i] = moved
			moved.movedIn(p, r.i)
		}
		p.entries[last] = nil
		p.entries = p.entries[:last]
		switch {
		case last == 0:
			delete(ix.post, p.pair)
		case cap(p.entries) > 64 && last < cap(p.entries)/4:
			p.entries = slices.Clone(p.entries) // give back what a big posting held
		}
	}
	clear(e.refs)
	e.refs = e.refs[:0]
}

// movedIn records that e is now at place i of posting p.
func (e *entry) movedIn(p *posting, i int) {
	for j := range e.refs {
		if e.refs[j].p == p {
			e.refs[j].i = i
			return
		}
	}
	panic("ipam: label index entry not in its posting")
}

// match returns the entries carrying every term, in prefix order, filtered
// by keep (nil keeps all). terms must not be empty.
func (ix *labelIndex) match(terms []labelPair, keep func(*entry) bool) []*entry {
	var smallest *posting
	for _, t := range terms {
		p := ix.post[t]
		if p == nil {
			return nil
		}
		if smallest == nil || len(p.entries) < len(smallest.entries) {
			smallest = p
		}
	}
	var out []*entry
	for _, e := range smallest.entries {
		if e.matches(terms) && (keep == nil || keep(e)) {
			out = append(out, e)
		}
	}
	if len(out) > 1 {
		slices.SortFunc(out, func(a, b *entry) int { return compareOrder(a.order, b.order) })
	}
	return out
}

func compareOrder(a, b orderKey) int {
	if c := comparePrefix(a.pfx, b.pfx); c != 0 {
		return c
	}
	return a.rank - b.rank
}

// terms turns a selector plus implicit system terms into index terms,
// appended to buf (callers pass a stack array to avoid allocating).
func terms(buf []labelPair, sel Labels, extra ...labelPair) []labelPair {
	out := buf[:0]
	for k, v := range sel {
		out = append(out, labelPair{k, v})
	}
	for _, e := range extra {
		if e.v == "" {
			continue
		}
		if v, ok := sel[e.k]; ok && v == e.v {
			continue
		}
		out = append(out, e)
	}
	return out
}

// formatSelector renders a selector as {k=v, ...} in key order.
func formatSelector(sel Labels) string {
	keys := slices.Sorted(maps.Keys(sel))
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(sel[k])
	}
	b.WriteByte('}')
	return b.String()
}

// systemLabels are the labels the core derives for a prefix; user labels
// may repeat them but not contradict them.
func systemLabels(vrf string, kind Kind, f Family, bits int, network string) Labels {
	l := Labels{
		LabelNetworkInstance: vrf,
		LabelPrefixKind:      string(kind),
		LabelAddressFamily:   string(f),
		LabelPrefixLength:    strconv.Itoa(bits),
	}
	if network != "" {
		l[LabelNetworkName] = network
	}
	return l
}

// mergeLabels returns system ∪ user (system itself when there is no user
// label), or the first user label that contradicts a system label.
func mergeLabels(system, user Labels) (Labels, string) {
	if len(user) == 0 {
		return system, ""
	}
	out := make(Labels, len(system)+len(user))
	for _, k := range slices.Sorted(maps.Keys(user)) {
		if sv, ok := system[k]; ok && sv != user[k] {
			return nil, k
		}
		out[k] = user[k]
	}
	maps.Copy(out, system)
	return out, ""
}
