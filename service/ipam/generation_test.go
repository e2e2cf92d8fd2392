package ipam

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestSyncGeneration walks the owner generation of a package and its
// copy (same owner, same identity, as after cp -r): only a Sync that
// changes the owner's objects advances it; a stale package that would
// change them is refused and changes nothing, one that changes nothing
// is accepted; adopting skips the check; a request without the check
// (a controller's) is not refused but still advances a counted owner;
// a package ahead of the server (which lost the owner) keeps its
// generation.
func TestSyncGeneration(t *testing.T) {
	ctx := context.Background()
	j := &recordingJournal{}
	a := New(WithJournal(j))
	req := func(gen uint64, check, adopt bool, names ...string) SyncRequest {
		r := seedRequest()
		r.Identity, r.Generation, r.CheckGeneration, r.Adopt = "pkg-A", gen, check, adopt
		for _, n := range names {
			r.Allocations = append(r.Allocations, Allocation{Key: k(n), Kind: KindNetwork,
				Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}})
		}
		return r
	}
	for _, s := range []struct {
		name     string
		req      SyncRequest
		want     uint64 // the generation afterwards (for a refusal: the owner's)
		refused  bool
		released int
		records  bool // whether the Sync journals anything
	}{
		{name: "first render of an unknown owner", req: req(0, true, false, "alloc1"), want: 1, records: true},
		{name: "no-op re-render", req: req(1, true, false, "alloc1"), want: 1},
		{name: "stale no-op render is accepted", req: req(0, true, false, "alloc1"), want: 1},
		{name: "the copy drops alloc1 first", req: req(1, true, false), want: 2, released: 1, records: true},
		{name: "the original is refused", req: req(1, true, false, "alloc1"), want: 2, refused: true},
		{name: "the original without generation is refused", req: req(0, true, false, "alloc1"), want: 2, refused: true},
		{name: "the copy again, no-op", req: req(2, true, false), want: 2},
		{name: "adopting skips the check", req: req(1, true, true, "alloc1"), want: 3, records: true},
		{name: "unchecked request advances a counted owner", req: req(0, false, false, "alloc1", "alloc2"), want: 4, records: true},
		{name: "unchecked no-op", req: req(0, false, false, "alloc1", "alloc2"), want: 4},
		{name: "a package ahead of the server keeps its generation", req: req(10, true, false, "alloc1"), want: 10, released: 1, records: true},
	} {
		before, batches := dump(a), len(j.batches)
		res, err := a.Sync(ctx, s.req)
		if s.refused {
			var e *Error
			if !errors.Is(err, ErrInUse) || !errors.As(err, &e) || e.Field != "generation" || e.Key.Name != owner {
				t.Fatalf("%s: err = %v, want ErrInUse on field generation of Sync %s", s.name, err, owner)
			}
			for _, want := range []string{Quote(owner), fmt.Sprintf("generation %d", s.want), fmt.Sprintf("package at %d", s.req.Generation), "another copy"} {
				if !strings.Contains(e.Msg, want) {
					t.Errorf("%s: message %q does not say %q", s.name, e.Msg, want)
				}
			}
			if after := dump(a); after != before {
				t.Fatalf("%s: a refused Sync changed the state:\n%s\n---\n%s", s.name, before, after)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if g := a.OwnerOf(owner).Generation; g != s.want || !s.refused && res.Generation != s.want {
			t.Errorf("%s: owner generation %d, result %d, want %d", s.name, g, res.Generation, s.want)
		}
		if len(res.Released) != s.released {
			t.Errorf("%s: released %v, want %d", s.name, res.Released, s.released)
		}
		if got := len(j.batches) > batches; got != s.records {
			t.Errorf("%s: journaled %v, want %v", s.name, j.batches[batches:], s.records)
		}
	}
	// Each changing Sync journals the owner's generation once, with its
	// objects.
	var gens []uint64
	for _, r := range slices.Concat(j.batches...) {
		if r.Op == OpPutOwner {
			gens = append(gens, r.Owner.Generation)
		}
	}
	if !slices.Equal(gens, []uint64{1, 2, 3, 4, 10}) {
		t.Errorf("owner records carry generations %v, want [1 2 3 4 10]", gens)
	}

	// The generation survives a snapshot, also of an emptied owner (else
	// a stale copy could take it again after a restart).
	if res, err := a.Sync(ctx, SyncRequest{Owner: owner, Identity: "pkg-A", Generation: 10, CheckGeneration: true, Prune: true}); err != nil || res.Generation != 11 {
		t.Fatalf("emptying the owner: generation %d, %v", res.Generation, err)
	}
	restored := New()
	if err := restored.Apply(a.Snapshot(nil)); err != nil {
		t.Fatal(err)
	}
	if got := restored.OwnerOf(owner); got != (OwnerInfo{Generation: 11}) {
		t.Fatalf("restored owner %+v, want generation 11 only", got)
	}
	if _, err := restored.Sync(ctx, req(10, true, false, "alloc1")); !errors.Is(err, ErrInUse) {
		t.Fatalf("after restore a stale copy took the emptied owner: %v", err)
	}
}

// TestSyncGenerationUncounted: an owner that no checking Sync changed (a
// controller's, the Porch injector's) is not counted, and nothing about it
// is journaled; a checking Sync without generation may then start
// counting.
func TestSyncGenerationUncounted(t *testing.T) {
	j := &recordingJournal{}
	a := New(WithJournal(j))
	req := seedRequest()
	req.Allocations = []Allocation{{Key: k("c1"), Kind: KindNetwork, Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}}}
	for range 2 {
		if res, err := a.Sync(context.Background(), req); err != nil || res.Generation != 0 {
			t.Fatalf("generation %d, %v", res.Generation, err)
		}
	}
	for _, r := range slices.Concat(j.batches...) {
		if r.Op == OpPutOwner {
			t.Errorf("an unchecked Sync journaled %+v", r.Owner)
		}
	}
	if got := a.OwnerOf(owner); got != (OwnerInfo{}) {
		t.Errorf("owner %+v", got)
	}
	// The first checking Sync of such an owner (a package rendered by an
	// ipam-fn from before generations, now rendered by a new one: its
	// Kptfile has none) is accepted and starts counting.
	req.CheckGeneration = true
	req.Allocations = append(req.Allocations, Allocation{Key: k("c2"), Kind: KindNetwork, Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}})
	if res, err := a.Sync(context.Background(), req); err != nil || res.Generation != 1 {
		t.Fatalf("first checking Sync: generation %d, %v", res.Generation, err)
	}
}

// TestSyncGenerationLimit refuses a generation the owner could not move
// past.
func TestSyncGenerationLimit(t *testing.T) {
	req := seedRequest()
	req.Generation, req.CheckGeneration = MaxGeneration+1, true
	var e *Error
	if _, err := New().Sync(context.Background(), req); !errors.Is(err, ErrInvalid) || !errors.As(err, &e) || e.Field != "generation" {
		t.Fatalf("err = %v, want invalid generation", err)
	}
	req.Generation = MaxGeneration
	if res, err := New().Sync(context.Background(), req); err != nil || res.Generation != MaxGeneration {
		t.Fatalf("at the limit: generation %d, %v", res.Generation, err)
	}
}
