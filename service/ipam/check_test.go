package ipam

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// dump renders the whole observable state: every record of a snapshot and
// every VRF tree with its utilization.
func dump(a *Allocator) string {
	var b strings.Builder
	for _, r := range a.Snapshot(nil) {
		fmt.Fprintf(&b, "%s %s", r.Op, r.Key)
		switch {
		case r.NetworkInstance != nil:
			fmt.Fprintf(&b, " %v", *r.NetworkInstance)
		case r.Prefix != nil:
			fmt.Fprintf(&b, " %v", *r.Prefix)
		case r.Range != nil:
			fmt.Fprintf(&b, " %v", *r.Range)
		case r.Allocation != nil:
			fmt.Fprintf(&b, " %v", *r.Allocation)
		}
		b.WriteByte('\n')
	}
	for _, ni := range a.ListNetworkInstances(Filter{}) {
		tree, _ := a.Tree(ni.Key.Name)
		for _, n := range tree {
			fmt.Fprintf(&b, "%s %*s%s %s %s used=%d\n", ni.Key.Name, n.Depth*2, "", n.Prefix, n.Kind, n.Name, n.Used)
		}
	}
	return b.String()
}

// checkInvariants verifies the internal structure against itself: every
// node lies in its parent and is taken there, every held address is inside
// its node and held by one holder, the index holds exactly the entries.
func checkInvariants(t testing.TB, a *Allocator) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, v := range a.vrfs {
		entries := map[*entry]bool{}
		children := map[*node]int{}
		for p, n := range v.nodes {
			if n.prefix != p || p.Masked() != p {
				t.Fatalf("%s: node key %s holds %s", name, p, n.prefix)
			}
			if !containsPrefix(n.parent.prefix, p) || n.parent.prefix == p {
				t.Fatalf("%s: %s not inside its parent %s", name, p, n.parent.prefix)
			}
			if n.parent.space.IsFree(p) {
				t.Fatalf("%s: %s is free in its parent %s", name, p, n.parent.prefix)
			}
			if !allowedParent(n.kind, n.parent.kind) {
				t.Fatalf("%s: %s %s under %s %s", name, n.kind, p, n.parent.kind, n.parent.prefix)
			}
			children[n.parent]++
			entries[n.entry] = true
			if n.decl == nil && n.alloc == nil && len(n.refs) == 0 {
				t.Fatalf("%s: node %s is kept alive by nothing", name, p)
			}
			if n.isBitmap() {
				excluded := uint64(0)
				n.addrs.Ascend(0, n.addrs.Last(), func(off uint64) bool {
					if _, held := n.holders[off]; !held && !n.isReserved(off) {
						if n.excludedAt(off) == nil {
							t.Fatalf("%s: %s offset %d set but held by nothing", name, p, off)
						}
						excluded++
					}
					return true
				})
				if got, want := n.addrs.Len(), uint64(len(n.holders)+len(n.reserved))+excluded; got != want {
					t.Fatalf("%s: %s has %d set offsets, want %d", name, p, got, want)
				}
				for off, h := range n.holders {
					if !n.addrs.Has(off) {
						t.Fatalf("%s: %s holder at free offset %d", name, p, off)
					}
					addr := addOffset(n.prefix.Addr(), off)
					switch h := h.(type) {
					case *hostEntry:
						entries[h.entry] = true
						if h.claim != nil && h.claim.host != h {
							t.Fatalf("%s: claim of %s does not point back", name, addr)
						}
					case *allocObj:
						if h.node != n || off < h.off || off >= h.off+h.n {
							t.Fatalf("%s: %s held by allocation placed elsewhere", name, addr)
						}
					case *preAlloc:
					default:
						t.Fatalf("%s: %s held by %T", name, addr, h)
					}
				}
				for _, r := range n.ranges {
					entries[r.entry] = true
				}
			}
		}
		for p, n := range v.nodes {
			if children[n] != n.children {
				t.Fatalf("%s: %s counts %d children, has %d", name, p, n.children, children[n])
			}
		}
		indexed := map[*entry]bool{}
		for lp, set := range v.index.post {
			for e := range set {
				if e.labels[lp.k] != lp.v {
					t.Fatalf("%s: stale index %s=%s", name, lp.k, lp.v)
				}
				indexed[e] = true
			}
		}
		for e := range entries {
			if len(e.labels) > 0 && !indexed[e] {
				t.Fatalf("%s: entry %v not indexed", name, e.order)
			}
		}
		for e := range indexed {
			if !entries[e] {
				t.Fatalf("%s: index holds a dead entry %v", name, e.order)
			}
		}
	}
	// Allocations: results are distinct and inside their parents.
	type span struct{ lo, hi netip.Addr }
	byVRF := map[string][]span{}
	for _, os := range a.owners {
		for _, o := range slices.Collect(maps.Values(os.allocs)) {
			lo := o.result().Prefix.Addr()
			hi := lo
			if o.sub != nil {
				lo, hi = o.sub.prefix.Addr(), lastAddr(o.sub.prefix)
			} else if o.result().Last.IsValid() {
				hi = o.result().Last
			}
			for _, s := range byVRF[o.v.name] {
				if !(hi.Less(s.lo) || s.hi.Less(lo)) && o.sub == nil {
					t.Fatalf("allocation %s (%s-%s) overlaps another (%s-%s)", o.req.Key, lo, hi, s.lo, s.hi)
				}
			}
			if o.sub == nil {
				byVRF[o.v.name] = append(byVRF[o.v.name], span{lo, hi})
				if !o.node.prefix.Contains(lo) || !o.node.prefix.Contains(hi) {
					t.Fatalf("allocation %s outside its network %s", o.req.Key, o.node.prefix)
				}
			}
		}
	}
}
