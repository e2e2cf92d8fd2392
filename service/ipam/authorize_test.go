package ipam

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestAuthorizer: every mutation asks the Authorizer of its context
// about each network instance a change takes from and releases in, found
// by the core (not by what the request names). A refusal fails with an
// *Error wrapping ErrDenied and the Authorizer's message, changes nothing
// and journals nothing; a change allowed at both ends is made.
func TestAuthorizer(t *testing.T) {
	ctx := context.Background()
	ok := func(o, name string) Key { return Key{Owner: o, Namespace: "default", Name: name} }
	addr := func(name, vrf string) Allocation {
		return Allocation{Key: ok("o", name), Selector: Labels{LabelNetworkInstance: vrf, LabelNetworkName: "net1"}}
	}
	prefix := func(name, vrf string) Prefix {
		return Prefix{Key: ok("o", name), NetworkInstance: vrf, Prefix: mustPrefix("10.0.2.0/24"), Network: "net2"}
	}
	rng := func(name, vrf string) IPRange {
		return IPRange{Key: ok("o", name), NetworkInstance: vrf, Start: mustAddr("10.0.1.100"), End: mustAddr("10.0.1.110")}
	}
	// setup: networks net1 in va and vb (owner admin); owner o, bound to
	// identity pkg-a, holds x1, p1 and r1 in va and the network
	// instance vo.
	setup := func(t *testing.T, j Journal) *Allocator {
		t.Helper()
		a := New(WithJournal(j))
		for _, vrf := range []string{"va", "vb"} {
			_, err := a.Sync(ctx, SyncRequest{Owner: "admin-" + vrf,
				NetworkInstances: []NetworkInstance{{Key: Key{Name: vrf}, Prefixes: []VRFPrefix{{Prefix: mustPrefix("10.0.0.0/8")}}}},
				Prefixes:         []Prefix{{Key: ok("", "net1"), NetworkInstance: vrf, Prefix: mustPrefix("10.0.1.0/24"), Network: "net1"}}})
			if err != nil {
				t.Fatal(err)
			}
		}
		_, err := a.Sync(ctx, SyncRequest{Owner: "o", Identity: "pkg-a",
			NetworkInstances: []NetworkInstance{{Key: Key{Name: "vo"}}},
			Allocations:      []Allocation{addr("x1", "va")}, Prefixes: []Prefix{prefix("p1", "va")}, Ranges: []IPRange{rng("r1", "va")}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	sync := func(req SyncRequest) func(context.Context, *Allocator) error {
		return func(ctx context.Context, a *Allocator) error { _, err := a.Sync(ctx, req); return err }
	}
	for _, tc := range []struct {
		name   string
		do     func(context.Context, *Allocator) error
		allow  []string // the network instances o may change
		denied string   // the one refused; "": the change is made
		asked  []string // the network instances asked about, in order
	}{
		{name: "Allocate moving x1 is refused in va, where it releases",
			do:    func(ctx context.Context, a *Allocator) error { _, err := a.Allocate(ctx, addr("x1", "vb")); return err },
			allow: []string{"vb"}, denied: "va", asked: []string{"vb", "va"}},
		{name: "Allocate moving x1 where both ends are allowed",
			do:    func(ctx context.Context, a *Allocator) error { _, err := a.Allocate(ctx, addr("x1", "vb")); return err },
			allow: []string{"va", "vb"}, asked: []string{"vb", "va"}},
		{name: "Allocate keeping x1 asks about va",
			do:    func(ctx context.Context, a *Allocator) error { _, err := a.Allocate(ctx, addr("x1", "va")); return err },
			allow: []string{"vb"}, denied: "va", asked: []string{"va"}},
		{name: "Release of x1",
			do:    func(ctx context.Context, a *Allocator) error { return a.Release(ctx, ok("o", "x1")) },
			allow: []string{"vb"}, denied: "va", asked: []string{"va"}},
		{name: "CreatePrefix moving p1",
			do: func(ctx context.Context, a *Allocator) error {
				_, err := a.CreatePrefix(ctx, prefix("p1", "vb"))
				return err
			},
			allow: []string{"vb"}, denied: "va", asked: []string{"vb", "va"}},
		{name: "DeletePrefix of p1",
			do:    func(ctx context.Context, a *Allocator) error { return a.DeletePrefix(ctx, ok("o", "p1")) },
			allow: []string{"vb"}, denied: "va", asked: []string{"va"}},
		{name: "CreateRange moving r1",
			do:    func(ctx context.Context, a *Allocator) error { return a.CreateRange(ctx, rng("r1", "vb")) },
			allow: []string{"vb"}, denied: "va", asked: []string{"vb", "va"}},
		{name: "DeleteRange of r1",
			do:    func(ctx context.Context, a *Allocator) error { return a.DeleteRange(ctx, ok("o", "r1")) },
			allow: []string{"vb"}, denied: "va", asked: []string{"va"}},
		{name: "CreateNetworkInstance",
			do: func(ctx context.Context, a *Allocator) error {
				return a.CreateNetworkInstance(ctx, NetworkInstance{Key: Key{Owner: "o", Name: "vc"}})
			},
			allow: []string{"vb"}, denied: "vc", asked: []string{"vc"}},
		{name: "DeleteNetworkInstance",
			do: func(ctx context.Context, a *Allocator) error {
				return a.DeleteNetworkInstance(ctx, Key{Owner: "o", Name: "vo"})
			},
			allow: []string{"vb"}, denied: "vo", asked: []string{"vo"}},
		{name: "Sync without prune moving x1, p1 and r1 is refused in va for each",
			do: sync(SyncRequest{Owner: "o", NetworkInstances: []NetworkInstance{{Key: Key{Name: "vo"}}},
				Allocations: []Allocation{addr("x1", "vb"), addr("y1", "vb")}, Prefixes: []Prefix{prefix("p1", "vb")}, Ranges: []IPRange{rng("r1", "vb")}}),
			allow: []string{"vb", "vo"}, denied: "va", asked: []string{"vo", "vb", "va", "va", "va"}},
		{name: "Sync without prune moving x1, p1 and r1 where both ends are allowed",
			do: sync(SyncRequest{Owner: "o", NetworkInstances: []NetworkInstance{{Key: Key{Name: "vo"}}},
				Allocations: []Allocation{addr("x1", "vb"), addr("y1", "vb")}, Prefixes: []Prefix{prefix("p1", "vb")}, Ranges: []IPRange{rng("r1", "vb")}}),
			allow: []string{"va", "vb", "vo"}, asked: []string{"vo", "vb", "va"}},
		{name: "Sync that prunes releases in va",
			do:    sync(SyncRequest{Owner: "o", Prune: true, NetworkInstances: []NetworkInstance{{Key: Key{Name: "vo"}}}}),
			allow: []string{"vb", "vo"}, denied: "va", asked: []string{"va", "va", "va", "vo"}},
		{name: "Sync adopting the owner",
			do:    sync(SyncRequest{Owner: "o", Identity: "pkg-b", Adopt: true}),
			allow: []string{"vb", "vo"}, denied: "va", asked: []string{"va"}},
		{name: "Sync adopting the owner where all of it is allowed",
			do:    sync(SyncRequest{Owner: "o", Identity: "pkg-b", Adopt: true}),
			allow: []string{"va", "vo"}, asked: []string{"va", "vo"}},
		{name: "Sync of many items asks once per network instance",
			do: func(ctx context.Context, a *Allocator) error {
				req := SyncRequest{Owner: "o"}
				for i := range 50 {
					req.Allocations = append(req.Allocations, addr(fmt.Sprint("z", i), "vb"))
				}
				_, err := a.Sync(ctx, req)
				return err
			},
			allow: []string{"vb"}, asked: []string{"vb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &recordingJournal{}
			a := setup(t, j)
			before, batches := a.Snapshot(nil), j.len()
			var asked []string
			az := func(o, vrf string) error {
				if o != "o" {
					t.Errorf("asked about owner %q", o)
				}
				asked = append(asked, vrf)
				if !slices.Contains(tc.allow, vrf) {
					return fmt.Errorf("%w: owner %q may not change network instance %q", ErrDenied, o, vrf)
				}
				return nil
			}
			err := tc.do(WithAuthorizer(ctx, az), a)
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("asked about %q, want %q", asked, tc.asked)
			}
			if tc.denied == "" {
				if err != nil {
					t.Fatal(err)
				}
				if j.len() == batches {
					t.Error("an allowed change journaled nothing")
				}
				return
			}
			var oe *Error
			if !errors.Is(err, ErrDenied) || !errors.As(err, &oe) || !strings.Contains(err.Error(), fmt.Sprintf("may not change network instance %q", tc.denied)) {
				t.Fatalf("got %v, want an *Error wrapping ErrDenied naming %s", err, tc.denied)
			}
			if after := a.Snapshot(nil); !reflect.DeepEqual(after, before) {
				t.Errorf("a refused change changed the state:\n%v\nwas\n%v", after, before)
			}
			if j.len() != batches {
				t.Errorf("a refused change journaled %d batches", j.len()-batches)
			}
		})
	}
}
