package ipam

import (
	"fmt"
	"net/netip"
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
		case r.Owner != nil:
			fmt.Fprintf(&b, " %v", *r.Owner)
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
				plain := map[uint64]bool{}
				plainAllocs := 0
				for _, tb := range v.tables {
					for i := range tb.Len() {
						if r := tb.At(i); r.node == n {
							plainAllocs++
							g, spanGW := n.blockGateway(r.count())
							for off := r.off; off < r.off+r.count(); off++ {
								if spanGW && off == g {
									continue // the gateway inside a block stays the gateway's
								}
								if plain[off] {
									t.Fatalf("%s: %s offset %d held by two plain allocations", name, p, off)
								}
								plain[off] = true
							}
						}
					}
				}
				if plainAllocs != n.plain {
					t.Fatalf("%s: %s counts %d plain allocations, has %d", name, p, n.plain, plainAllocs)
				}
				excluded := uint64(0)
				n.addrs.Ascend(0, n.addrs.Last(), func(off uint64) bool {
					_, held := n.holders[off]
					if held && plain[off] {
						t.Fatalf("%s: %s offset %d held by a plain allocation and %T", name, p, off, n.holders[off])
					}
					if !held && !plain[off] && !n.isReserved(off) {
						if n.excludedAt(off) == nil {
							t.Fatalf("%s: %s offset %d set but held by nothing", name, p, off)
						}
						excluded++
					}
					return true
				})
				if got, want := n.addrs.Len(), uint64(len(n.holders)+len(plain)+len(n.reserved))+excluded; got != want {
					t.Fatalf("%s: %s has %d set offsets, want %d", name, p, got, want)
				}
				for off := range plain {
					if !n.addrs.Has(off) {
						t.Fatalf("%s: %s plain allocation at free offset %d", name, p, off)
					}
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
					case *preAlloc:
						if h.claim != nil && h.claim.pre != h {
							t.Fatalf("%s: claim of pre-allocation %s does not point back", name, addr)
						}
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
		for lp, p := range v.index.post {
			if p.pair != lp || len(p.entries) == 0 {
				t.Fatalf("%s: posting %s=%s holds %v with %d entries", name, lp.k, lp.v, p.pair, len(p.entries))
			}
			for i, e := range p.entries {
				if e.labels[lp.k] != lp.v {
					t.Fatalf("%s: stale index %s=%s", name, lp.k, lp.v)
				}
				// The entry knows its place in the posting, once.
				places := 0
				for _, r := range e.refs {
					if r.p == p {
						places++
						if r.i != i {
							t.Fatalf("%s: entry %v at %d of %s=%s thinks it is at %d", name, e.order, i, lp.k, lp.v, r.i)
						}
					}
				}
				if places != 1 {
					t.Fatalf("%s: entry %v has %d places in %s=%s", name, e.order, places, lp.k, lp.v)
				}
				indexed[e] = true
			}
		}
		for e := range indexed {
			if len(e.refs) != len(e.labels) {
				t.Fatalf("%s: entry %v has %d labels and %d places in the index", name, e.order, len(e.labels), len(e.refs))
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
	// Allocation tables: every record is found by its key, specs count
	// their users, and the owner and VRF maps agree.
	refs := map[*allocSpec]int{}
	for _, os := range a.owners {
		for _, tb := range os.tables {
			v := tb.v
			if tb.os != os || os.table(v) != tb || v.tables[os] != tb {
				t.Fatalf("owner %s: table of VRF %s is not linked both ways", os.name, v.name)
			}
			if tb.Len() == 0 {
				t.Fatalf("owner %s: empty table kept in VRF %s", os.name, v.name)
			}
			if err := tb.Check(); err != nil {
				t.Fatalf("owner %s, VRF %s: %v", os.name, v.name, err)
			}
			for i := range tb.Len() {
				o := tb.at(i)
				if o.spec.v != v || o.spec.req.Key.Owner != os.name {
					t.Fatalf("owner %s: record %s has the spec of %s/%s", os.name, o.name, o.spec.req.Key.Owner, o.spec.v.name)
				}
				if o.spec.own {
					if o.node != nil || o.spec.req.Key.Name != o.name {
						t.Fatalf("owner %s: own spec of %s misplaced", os.name, o.name)
					}
				} else {
					refs[o.spec]++
					if o.node == nil || o.spec.req.Key.Name != "" {
						t.Fatalf("owner %s: shared spec of %s misplaced", os.name, o.name)
					}
				}
			}
		}
	}
	for s, n := range refs {
		if s.refs != n {
			t.Fatalf("spec %v counts %d users, has %d", s.req, s.refs, n)
		}
	}
	for _, v := range a.vrfs {
		for os, tb := range v.tables {
			if os.table(v) != tb {
				t.Fatalf("VRF %s: table of owner %s is not linked both ways", v.name, os.name)
			}
		}
		for k, s := range v.specs {
			if s.key != k || s.refs == 0 {
				t.Fatalf("VRF %s: interned spec %q (key %q) has %d users", v.name, k, s.key, s.refs)
			}
		}
	}
	// Allocations: results are distinct and inside their parents.
	type span struct{ lo, hi netip.Addr }
	byVRF := map[string][]span{}
	for _, os := range a.owners {
		for _, tb := range os.tables {
			for i := range tb.Len() {
				o := tb.at(i)
				res := o.result()
				lo, hi := res.Prefix.Addr(), res.Prefix.Addr()
				if sub := o.spec.sub; sub != nil {
					lo, hi = sub.prefix.Addr(), lastAddr(sub.prefix)
				} else if res.Last.IsValid() {
					hi = res.Last
				}
				if o.spec.sub == nil {
					for _, s := range byVRF[tb.v.name] {
						if !(hi.Less(s.lo) || s.hi.Less(lo)) {
							t.Fatalf("allocation %s (%s-%s) overlaps another (%s-%s)", o.key(), lo, hi, s.lo, s.hi)
						}
					}
					byVRF[tb.v.name] = append(byVRF[tb.v.name], span{lo, hi})
					if o.node != nil && (!o.node.prefix.Contains(lo) || !o.node.prefix.Contains(hi)) {
						t.Fatalf("allocation %s outside its network %s", o.key(), o.node.prefix)
					}
				}
			}
		}
	}
}
