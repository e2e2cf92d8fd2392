package ipam

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestSyncIdentity walks the binding of an owner to the package that
// holds its objects: a second package under the same owner is refused
// and changes nothing, adopting takes the owner over once, a request
// without identity is not checked, an emptied owner accepts anyone, a
// failed Sync keeps the binding, and the binding survives a snapshot.
func TestSyncIdentity(t *testing.T) {
	ctx := context.Background()
	a := New()
	withAlloc := func(id string, adopt bool, names ...string) SyncRequest {
		req := seedRequest()
		req.Identity, req.Adopt = id, adopt
		for _, n := range names {
			req.Allocations = append(req.Allocations, Allocation{Key: k(n), Kind: KindNetwork,
				Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}})
		}
		return req
	}
	type step struct {
		name    string
		req     SyncRequest
		wantErr error
		adopted string
		bound   string // the identity a refused request sees afterwards
	}
	for _, s := range []step{
		{name: "first package binds the owner", req: withAlloc("pkg-A", false, "a1")},
		{name: "same package again", req: withAlloc("pkg-A", false, "a1", "a2")},
		{name: "a copy is refused", req: withAlloc("pkg-B", false), wantErr: ErrInUse, bound: "pkg-A"},
		{name: "the copy adopts", req: withAlloc("pkg-B", true, "b1"), adopted: "pkg-A"},
		{name: "the original is now refused", req: withAlloc("pkg-A", false, "a1"), wantErr: ErrInUse, bound: "pkg-B"},
		{name: "no identity: not checked", req: withAlloc("", false, "b1", "b2")},
		{name: "binding kept", req: withAlloc("pkg-A", false), wantErr: ErrInUse, bound: "pkg-B"},
		{name: "adopting again is a no-op for the bound package", req: withAlloc("pkg-B", true, "b1")},
	} {
		before := dump(a)
		res, err := a.Sync(ctx, s.req)
		if s.wantErr != nil {
			var e *Error
			if !errors.Is(err, s.wantErr) || !errors.As(err, &e) || e.Field != "identity" || e.Key.Name != owner {
				t.Fatalf("%s: err = %v, want %v on field identity of Sync %s", s.name, err, s.wantErr, owner)
			}
			if want := Quote(s.bound); !strings.Contains(e.Msg, want) {
				t.Fatalf("%s: message %q does not name the bound identity %s", s.name, e.Msg, want)
			}
			if after := dump(a); after != before {
				t.Fatalf("%s: a refused Sync changed the state:\n%s\n---\n%s", s.name, before, after)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if res.Adopted != s.adopted {
			t.Fatalf("%s: Adopted = %q, want %q", s.name, res.Adopted, s.adopted)
		}
	}

	// A failed adopting Sync (an unknown VRF) keeps the binding.
	bad := withAlloc("pkg-C", true, "b1")
	bad.Allocations = append(bad.Allocations, Allocation{Key: k("lost"), NetworkInstance: "nowhere", Kind: KindNetwork})
	if _, err := a.Sync(ctx, bad); !errors.Is(err, ErrNotFound) {
		t.Fatalf("sync into a missing VRF: %v", err)
	}
	if _, err := a.Sync(ctx, withAlloc("pkg-C", false)); !errors.Is(err, ErrInUse) {
		t.Fatalf("a failed adoption bound the owner: %v", err)
	}

	// The binding survives a snapshot and restore.
	restored := New()
	if err := restored.Apply(a.Snapshot(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := restored.Sync(ctx, withAlloc("pkg-A", false, "a1")); !errors.Is(err, ErrInUse) {
		t.Fatalf("after restore: %v, want the binding to pkg-B", err)
	}

	// Pruning everything empties the owner: any package may take it, and
	// a snapshot no longer carries the binding.
	empty := SyncRequest{Owner: owner, Identity: "pkg-B", Prune: true}
	if _, err := a.Sync(ctx, empty); err != nil {
		t.Fatal(err)
	}
	for _, r := range a.Snapshot(nil) {
		if r.Op == OpPutOwner {
			t.Fatalf("snapshot of an empty owner carries %+v", r.Owner)
		}
	}
	res, err := a.Sync(ctx, withAlloc("pkg-D", false, "d1"))
	if err != nil || res.Adopted != "" {
		t.Fatalf("an emptied owner refused a new package: %v, adopted %q", err, res.Adopted)
	}
}

// TestSyncIdentityLimits checks the identity like any other text field.
func TestSyncIdentityLimits(t *testing.T) {
	for name, id := range map[string]string{
		"too long": string(make([]byte, MaxNameLength+1)),
		"control":  "pkg\x1b[31m",
	} {
		req := seedRequest()
		req.Identity = id
		var e *Error
		if _, err := New().Sync(context.Background(), req); !errors.Is(err, ErrInvalid) || !errors.As(err, &e) || e.Field != "identity" {
			t.Errorf("%s: err = %v, want invalid identity", name, err)
		}
	}
}

// TestSyncIdentityJournal checks that a new binding is journaled as an
// owner record, once.
func TestSyncIdentityJournal(t *testing.T) {
	j := &recordingJournal{}
	a := New(WithJournal(j))
	req := seedRequest()
	req.Identity = "pkg-A"
	for range 2 {
		if _, err := a.Sync(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, r := range slices.Concat(j.batches...) {
		if r.Op == OpPutOwner {
			n++
			if r.Key != (Key{Owner: owner}) || r.Owner == nil || r.Owner.Identity != "pkg-A" {
				t.Fatalf("owner record %+v %+v", r.Key, r.Owner)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d owner records, want 1", n)
	}
}
