package ipam

import (
	"context"
	"errors"
	"testing"
)

// spareSetup returns an allocator with a /24 network in VRF v and the
// selector of its addresses.
func spareSetup(t *testing.T) (*Allocator, Labels) {
	t.Helper()
	a := New()
	if _, err := a.Sync(context.Background(), SyncRequest{Owner: "infra",
		NetworkInstances: []NetworkInstance{{Key: Key{Name: "v"}, Prefixes: []VRFPrefix{{Prefix: mustPrefix("10.0.0.0/8")}}}},
		Prefixes:         []Prefix{{Key: Key{Name: "n"}, NetworkInstance: "v", Prefix: mustPrefix("10.1.0.0/24"), Network: "n"}},
	}); err != nil {
		t.Fatal(err)
	}
	return a, Labels{LabelNetworkInstance: "v", LabelNetworkName: "n"}
}

// TestOneNameChurn: an owner that allocates and releases one name in turn
// links its emptied allocation table again instead of making one each
// time; only the two calls' own objects are allocated.
func TestOneNameChurn(t *testing.T) {
	a, sel := spareSetup(t)
	ctx := context.Background()
	r := Allocation{Key: Key{Owner: "o", Name: "x"}, Selector: sel}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := a.Allocate(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx, r.Key); err != nil {
			t.Fatal(err)
		}
	})
	// The calls' own objects: two, a third under the race detector.
	if allocs > 3 {
		t.Fatalf("%v allocations per Allocate and Release of one name", allocs)
	}
	os := a.owners["o"]
	if os.spare == nil || len(os.tables) != 0 {
		t.Fatalf("after the release: spare %v, %d tables linked", os.spare, len(os.tables))
	}
	spare := os.spare
	if _, err := a.Allocate(ctx, r); err != nil {
		t.Fatal(err)
	}
	if len(os.tables) != 1 || os.tables[0] != spare || os.spare != nil {
		t.Fatalf("the allocation went to a new table, not the spare one")
	}
	checkInvariants(t, a)
}

// TestSpareTableUndo: a Sync that empties an owner's table (its only
// allocation goes) and then fails on a new one, which would take the
// emptied table again, gives the old allocation back in its table.
func TestSpareTableUndo(t *testing.T) {
	a, sel := spareSetup(t)
	ctx := context.Background()
	res, err := a.Allocate(ctx, Allocation{Key: Key{Owner: "o", Name: "old"}, Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Sync(ctx, SyncRequest{Owner: "o", Allocations: []Allocation{
		{Key: Key{Name: "new"}, Selector: sel},
		{Key: Key{Name: "bad"}, Selector: Labels{LabelNetworkInstance: "v", LabelNetworkName: "none"}},
	}})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Sync: %v, want a not-found error", err)
	}
	checkInvariants(t, a)
	again, err := a.Allocate(ctx, Allocation{Key: Key{Owner: "o", Name: "old"}, Selector: sel})
	if err != nil || again.Prefix != res.Prefix {
		t.Fatalf("old allocation after the failed Sync: %v, %v; want %v", again, err, res.Prefix)
	}
	if _, err := a.Allocate(ctx, Allocation{Key: Key{Owner: "o", Name: "new"}, Selector: sel}); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, Key{Owner: "o", Name: "old"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, Key{Owner: "o", Name: "new"}); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, a)
}
