package ipam

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// checkTable verifies a table against the model: the same keys, each
// found at its record, every used slot pointing at a distinct record.
func checkTable(t *testing.T, tb *allocTable, model map[nsName]uint64) {
	t.Helper()
	if tb.len() != len(model) {
		t.Fatalf("table holds %d records, model %d", tb.len(), len(model))
	}
	seen := map[uint32]bool{}
	for _, s := range tb.slots {
		if s == 0 {
			continue
		}
		i := s & indexMask
		if i == 0 || int(i) > tb.len() || seen[i] {
			t.Fatalf("slot points at record %d of %d (or twice)", i, tb.len())
		}
		seen[i] = true
	}
	if len(seen) != tb.len() {
		t.Fatalf("%d slots used for %d records", len(seen), tb.len())
	}
	for k, off := range model {
		r, ok := tb.get(k.ns, k.name)
		if !ok {
			t.Fatalf("%s/%s not found", k.ns, k.name)
		}
		if r.off != off || r.spec.req.Key.Namespace != k.ns {
			t.Fatalf("%s/%s holds offset %d of namespace %q, want %d", k.ns, k.name, r.off, r.spec.req.Key.Namespace, off)
		}
	}
	for i := range tb.len() {
		o := tb.at(i)
		if _, ok := model[nsName{o.spec.req.Key.Namespace, o.name}]; !ok {
			t.Fatalf("record %d (%s) is not in the model", i, o.name)
		}
	}
}

// TestAllocTableDifferential runs random puts, replacements and deletes
// against a map and checks the table after each step: backward-shift
// deletion, the move of the last record into a hole, growth and name
// compaction must keep every key findable.
func TestAllocTableDifferential(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			v := newVRF("v")
			os := &ownerState{name: "o"}
			tb := &allocTable{os: os, v: v}
			specs := map[string]*allocSpec{}
			spec := func(ns string) *allocSpec {
				if specs[ns] == nil {
					specs[ns] = &allocSpec{req: Allocation{Key: Key{Owner: "o", Namespace: ns}}, v: v}
				}
				return specs[ns]
			}
			model := map[nsName]uint64{}
			keySpace := 50 + rng.IntN(3000)
			key := func() nsName {
				i := rng.IntN(keySpace)
				// Names of many lengths, some long enough to span arena chunks.
				return nsName{ns: []string{"", "default", "kube-system"}[i%3], name: fmt.Sprintf("n%d-%s", i, strings.Repeat("x", i%97))}
			}
			for step := range 20_000 {
				k := key()
				switch rng.IntN(3) {
				case 0, 1:
					off := rng.Uint64()
					_, replaced := tb.put(k.name, allocRec{spec: spec(k.ns), off: off})
					if _, had := model[k]; had != replaced {
						t.Fatalf("step %d: put %v replaced=%v, model had=%v", step, k, replaced, had)
					}
					model[k] = off
				case 2:
					_, had := model[k]
					if got := tb.del(k.ns, k.name); got != had {
						t.Fatalf("step %d: del %v = %v, model had=%v", step, k, got, had)
					}
					delete(model, k)
				}
				if step%997 == 0 || step == 19_999 {
					checkTable(t, tb, model)
				}
			}
			// Drain: deleting everything empties the table.
			for k := range model {
				if !tb.del(k.ns, k.name) {
					t.Fatalf("drain: %v missing", k)
				}
			}
			if tb.len() != 0 || len(tb.slots) != 0 || len(tb.names.chunks) != 0 {
				t.Fatalf("drained table keeps %d records, %d slots, %d chunks", tb.len(), len(tb.slots), len(tb.names.chunks))
			}
			for ns, s := range specs {
				if s.refs != 0 {
					t.Fatalf("spec of %q counts %d users after the drain", ns, s.refs)
				}
			}
		})
	}
}

// TestAllocTableCompactsNames deletes most names of a table and checks
// that the arena shrinks and the survivors keep their names.
func TestAllocTableCompactsNames(t *testing.T) {
	v := newVRF("v")
	tb := &allocTable{os: &ownerState{name: "o"}, v: v}
	s := &allocSpec{req: Allocation{Key: Key{Owner: "o", Namespace: "ns"}}, v: v}
	const n = 20_000
	for i := range n {
		tb.put(fmt.Sprintf("allocation-%06d", i), allocRec{spec: s, off: uint64(i)})
	}
	before := tb.liveNameBytes()
	model := map[nsName]uint64{}
	for i := range n {
		name := fmt.Sprintf("allocation-%06d", i)
		if i%10 != 0 {
			tb.del("ns", name)
			continue
		}
		model[nsName{"ns", name}] = uint64(i)
	}
	checkTable(t, tb, model)
	total := 0
	for _, c := range tb.names.chunks {
		total += len(c)
	}
	if total > before/4 {
		t.Fatalf("arena holds %d bytes for %d live bytes (%d before the deletes)", total, tb.liveNameBytes(), before)
	}
}

// TestAllocationNameTooLong: names up to MaxNameLength are stored.
func TestAllocationNameTooLong(t *testing.T) {
	a := New()
	if _, err := a.Sync(context.Background(), seedRequest()); err != nil {
		t.Fatal(err)
	}
	sel := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}
	_, err := a.Allocate(context.Background(), Allocation{Key: k(strings.Repeat("n", MaxNameLength+1)), Selector: sel})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || e.Field != "metadata.name" {
		t.Fatalf("a name of %d bytes: %v, want ErrInvalid on metadata.name", MaxNameLength+1, err)
	}
	res, err := a.Allocate(context.Background(), Allocation{Key: k(strings.Repeat("n", MaxNameLength)), Selector: sel})
	if err != nil || res.Prefix != mustPrefix("10.0.1.2/24") {
		t.Fatalf("a name of %d bytes: %v, %v", MaxNameLength, res, err)
	}
	checkInvariants(t, a)
}

// TestAllocTablePageBoundary: a table whose size goes back and forth
// across a page boundary keeps its pages instead of allocating one per
// crossing.
func TestAllocTablePageBoundary(t *testing.T) {
	v := newVRF("v")
	tb := &allocTable{os: &ownerState{name: "o"}, v: v}
	s := &allocSpec{req: Allocation{Key: Key{Owner: "o", Namespace: "ns"}}, v: v}
	for i := range recPage {
		tb.put(fmt.Sprint("a", i), allocRec{spec: s})
	}
	tb.put("extra", allocRec{spec: s})
	tb.del("ns", "extra")
	allocs := testing.AllocsPerRun(100, func() {
		tb.put("extra", allocRec{spec: s})
		tb.del("ns", "extra")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per crossing of the page boundary", allocs)
	}
	if len(tb.pages) != 2 || tb.len() != recPage {
		t.Fatalf("%d pages for %d records", len(tb.pages), tb.len())
	}
}
