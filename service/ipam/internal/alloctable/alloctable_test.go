package alloctable

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// rec is a test record: a namespace and a value.
type rec struct {
	ns  string
	val uint64
}

func (r *rec) Namespace() string { return r.ns }

type table = Table[rec, *rec]

type key struct{ ns, name string }

// check verifies t against the model: the same keys, each found at its
// record, every used slot pointing at a distinct record.
func check(t *testing.T, tb *table, model map[key]uint64) {
	t.Helper()
	if tb.Len() != len(model) {
		t.Fatalf("table holds %d records, model %d", tb.Len(), len(model))
	}
	seen := map[uint32]bool{}
	for _, s := range tb.slots {
		if s == 0 {
			continue
		}
		i := s & indexMask
		if i == 0 || int(i) > tb.Len() || seen[i] {
			t.Fatalf("slot points at record %d of %d (or twice)", i, tb.Len())
		}
		seen[i] = true
	}
	if err := tb.Check(); err != nil {
		t.Fatal(err)
	}
	for k, v := range model {
		r, ok := tb.Get(k.ns, k.name)
		if !ok || r.val != v || r.ns != k.ns {
			t.Fatalf("%s/%s: %v, %v; want value %d", k.ns, k.name, r, ok, v)
		}
	}
	for i := range tb.Len() {
		if _, ok := model[key{tb.At(i).ns, string(tb.Name(i))}]; !ok {
			t.Fatalf("record %d (%s) is not in the model", i, tb.Name(i))
		}
	}
}

// TestDifferential runs random puts, replacements and deletes against a
// map and checks the table after each step: backward-shift deletion, the
// move of the last record into a hole, growth and name compaction must
// keep every key findable.
func TestDifferential(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			var tb table
			model := map[key]uint64{}
			keySpace := 50 + rng.IntN(3000)
			next := func() key {
				i := rng.IntN(keySpace)
				// Names of many lengths, some long enough to span arena chunks.
				return key{ns: []string{"", "default", "kube-system"}[i%3], name: fmt.Sprintf("n%d-%s", i, strings.Repeat("x", i%97))}
			}
			for step := range 20_000 {
				k := next()
				switch rng.IntN(3) {
				case 0, 1:
					v := rng.Uint64()
					prev, replaced := tb.Put(k.ns, k.name, rec{ns: k.ns, val: v})
					if old, had := model[k]; had != replaced || had && prev.val != old {
						t.Fatalf("step %d: Put %v replaced=%v (%d), model had=%v (%d)", step, k, replaced, prev.val, had, old)
					}
					model[k] = v
				case 2:
					old, had := model[k]
					if got, ok := tb.Delete(k.ns, k.name); ok != had || had && got.val != old {
						t.Fatalf("step %d: Delete %v = %v %v, model had=%v", step, k, got, ok, had)
					}
					delete(model, k)
				}
				if step%997 == 0 || step == 19_999 {
					check(t, &tb, model)
				}
			}
			// Drain: deleting everything empties the table.
			for k := range model {
				if _, ok := tb.Delete(k.ns, k.name); !ok {
					t.Fatalf("drain: %v missing", k)
				}
			}
			if tb.Len() != 0 || len(tb.slots) != 0 || len(tb.names.chunks) != 0 {
				t.Fatalf("drained table keeps %d records, %d slots, %d chunks", tb.Len(), len(tb.slots), len(tb.names.chunks))
			}
		})
	}
}

// TestCompactsNames deletes most names of a table and checks that the
// arena shrinks and the survivors keep their names.
func TestCompactsNames(t *testing.T) {
	var tb table
	const n = 20_000
	for i := range n {
		tb.Put("ns", fmt.Sprintf("allocation-%06d", i), rec{ns: "ns", val: uint64(i)})
	}
	before := tb.NameBytes()
	model := map[key]uint64{}
	for i := range n {
		name := fmt.Sprintf("allocation-%06d", i)
		if i%10 != 0 {
			tb.Delete("ns", name)
			continue
		}
		model[key{"ns", name}] = uint64(i)
	}
	check(t, &tb, model)
	if total := tb.NameBytes(); total > before/4 {
		t.Fatalf("arena holds %d bytes for %d live bytes (%d before the deletes)", total, tb.liveNameBytes(), before)
	}
}

// TestPageBoundary: a table whose size goes back and forth across a page
// boundary keeps its pages instead of allocating one per crossing.
func TestPageBoundary(t *testing.T) {
	var tb table
	for i := range recPage {
		tb.Put("ns", fmt.Sprint("a", i), rec{ns: "ns"})
	}
	tb.Put("ns", "extra", rec{ns: "ns"})
	tb.Delete("ns", "extra")
	allocs := testing.AllocsPerRun(100, func() {
		tb.Put("ns", "extra", rec{ns: "ns"})
		tb.Delete("ns", "extra")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per crossing of the page boundary", allocs)
	}
	if len(tb.pages) != 2 || tb.Len() != recPage {
		t.Fatalf("%d pages for %d records", len(tb.pages), tb.Len())
	}
}

// TestEmptied: a small table that empties keeps its buffers, so that one
// record put and deleted in turn allocates nothing; a table that held
// many records gives their memory back when it empties.
func TestEmptied(t *testing.T) {
	var small table
	allocs := testing.AllocsPerRun(100, func() {
		small.Put("ns", "probe", rec{ns: "ns"})
		small.Delete("ns", "probe")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per put and delete of one record", allocs)
	}
	check(t, &small, map[key]uint64{})
	small.Put("ns", "again", rec{ns: "ns", val: 7})
	check(t, &small, map[key]uint64{{"ns", "again"}: 7})

	var big table
	for i := range 1000 {
		big.Put("ns", fmt.Sprint("a", i), rec{ns: "ns"})
	}
	for i := range 1000 {
		big.Delete("ns", fmt.Sprint("a", i))
	}
	if big.slots != nil || big.pages != nil || big.names.chunks != nil {
		t.Fatalf("an emptied table of 1000 records keeps %d slots, %d pages, %d name chunks", len(big.slots), len(big.pages), len(big.names.chunks))
	}
	check(t, &big, map[key]uint64{})
}

// TestRecordSize: a record of three words takes 32 bytes with its name
// and hash; the memory target depends on it.
func TestRecordSize(t *testing.T) {
	var e entry[[3]uint64]
	if got := fmt.Sprint(sizeof(e)); got != "32" {
		t.Fatalf("entry of a 24-byte record takes %s bytes", got)
	}
}

func sizeof[T any](v T) uintptr { return unsafe.Sizeof(v) }
