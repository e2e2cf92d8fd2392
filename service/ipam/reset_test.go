package ipam

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// recordingJournal keeps every batch it is given.
type recordingJournal struct {
	mu      sync.Mutex
	batches [][]Record
}

func (j *recordingJournal) Append(recs []Record) func() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.batches = append(j.batches, recs)
	return nil
}

func (j *recordingJournal) len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.batches)
}

// randomOps runs n random fuzz operations on a.
func randomOps(a *Allocator, seed uint64, n int) {
	r := rand.New(rand.NewPCG(seed, 1))
	for range n {
		fuzzOp(a, byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()))
	}
}

// TestResetReplacesTheState: after Reset with another allocator's
// snapshot, an allocator is indistinguishable from that one (state, and
// the results of the same operations afterwards), owners only it had are
// empty, it keeps its journal and Reset itself journals nothing.
func TestResetReplacesTheState(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			want := fuzzBase(t)
			randomOps(want, seed, 300)
			j := &recordingJournal{}
			got := New(WithJournal(j))
			if _, err := got.Sync(context.Background(), SyncRequest{Owner: "only-here", NetworkInstances: []NetworkInstance{{Key: Key{Name: "w"},
				Prefixes: []VRFPrefix{{Prefix: mustPrefix("192.168.0.0/16")}}}}}); err != nil {
				t.Fatal(err)
			}
			randomOps(got, seed+100, 50) // fails: no VRF v; leaves nothing
			before := j.len()
			if err := got.Reset(want.Snapshot(nil)); err != nil {
				t.Fatal(err)
			}
			if j.len() != before {
				t.Fatalf("Reset journaled %d batches", j.len()-before)
			}
			checkInvariants(t, got)
			if d, w := dump(got), dump(want); d != w {
				t.Fatalf("after Reset:\n%s\nwant\n%s", d, w)
			}
			if l := got.ListNetworkInstances(Filter{Owner: "only-here"}); len(l) != 0 {
				t.Fatalf("owner only-here still has %v", l)
			}
			randomOps(got, seed+200, 300)
			randomOps(want, seed+200, 300)
			checkInvariants(t, got)
			if d, w := dump(got), dump(want); d != w {
				t.Fatalf("after the same operations:\n%s\nwant\n%s", d, w)
			}
			if j.len() == before {
				t.Fatal("the journal was dropped by Reset")
			}
		})
	}
}

// TestResetErrorKeepsTheState: records Apply refuses leave the state as
// it was.
func TestResetErrorKeepsTheState(t *testing.T) {
	a := fuzzBase(t)
	randomOps(a, 7, 200)
	want := dump(a)
	bad := append(a.Snapshot(nil), Record{Op: OpDeletePrefix, Key: Key{Owner: "nobody", Name: "missing"}})
	if err := a.Reset(bad); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Reset with a bad record: %v, want ErrNotFound", err)
	}
	if got := dump(a); got != want {
		t.Fatalf("state changed by a failed Reset:\n%s\nwant\n%s", got, want)
	}
}

// TestResetUnderConcurrentMutations: Resets racing with mutations and
// reads of every owner (-race) leave a consistent allocator: the
// invariants hold, and after releasing the allocations the trees'
// utilization is the one the remaining objects rebuild.
func TestResetUnderConcurrentMutations(t *testing.T) {
	a := fuzzBase(t)
	states := make([][]Record, 4)
	for i := range states {
		s := fuzzBase(t)
		randomOps(s, uint64(i), 200)
		states[i] = s.Snapshot(nil)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			randomOps(a, uint64(1000+g), 500)
			a.ListAllocations(Filter{})
		})
	}
	wg.Go(func() {
		for i := range 40 {
			if err := a.Reset(states[i%len(states)]); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	checkInvariants(t, a)
	// Release what can be released; a sub-prefix allocation holding
	// another allocation's sub-prefix goes in a later pass, after its
	// child, and one holding an IPPrefix stays (rule 9).
	for left := a.ListAllocations(Filter{}); len(left) > 0; {
		var inUse []AllocationRecord
		for _, r := range left {
			if err := a.Release(context.Background(), r.Allocation.Key); errors.Is(err, ErrInUse) {
				inUse = append(inUse, r)
			} else if err != nil {
				t.Fatalf("release %s: %v", r.Allocation.Key, err)
			}
		}
		if len(inUse) == len(left) {
			break
		}
		left = inUse
	}
	rebuilt := New()
	if err := rebuilt.Apply(a.Snapshot(nil)); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(a), dump(rebuilt); got != want {
		t.Fatalf("trees disagree with the objects after releasing everything:\n%s\nwant\n%s", got, want)
	}
	checkInvariants(t, a)
}

// TestReadSettledAcrossAReset: a read during which the state is Reset
// (a replica reloading after a failed transaction, between the read and
// its Settle) is made again, so that ReadSettled never answers with what
// the Reset discarded.
func TestReadSettledAcrossAReset(t *testing.T) {
	a := fuzzBase(t)
	clean := a.Snapshot(nil)
	randomOps(a, 3, 100)
	dirty := dump(a)
	if dirty == dump(fuzzBaseState(t, clean)) {
		t.Fatal("the operations changed nothing: the test shows nothing")
	}
	var reads int
	var seen string
	if err := a.ReadSettled(func() {
		reads++
		seen = dump(a)
		if reads == 1 {
			if err := a.Reset(clean); err != nil { // the changes read fail
				t.Fatal(err)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if reads != 2 || seen == dirty {
		t.Fatalf("ReadSettled read %d times and answered the state before the Reset: %v", reads, seen == dirty)
	}
}

// fuzzBaseState is an allocator holding recs.
func fuzzBaseState(t *testing.T, recs []Record) *Allocator {
	t.Helper()
	a := New()
	if err := a.Apply(recs); err != nil {
		t.Fatal(err)
	}
	return a
}
