package ipam

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestLabelKeySyntax and TestLabelValueSyntax: Kubernetes label syntax
// (FuzzLabelKey and FuzzLabelValue in package k8sdiff compare them with
// apimachinery itself).
func TestLabelKeySyntax(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"a", true}, {"nephio.org/network-name", true}, {"A_b.C-9", true},
		{strings.Repeat("p", 253) + "/" + strings.Repeat("n", 63), true},
		{"", false}, {" a", false}, {" ", false}, {"a ", false}, {"a b", false},
		{strings.Repeat("k", 300), false}, // 300 bytes and no '/'
		{strings.Repeat("n", 64), false}, {"-a", false}, {"a-", false}, {"/a", false}, {"a/", false},
		{"a/b/c", false}, {"Nephio.org/a", false}, {"nephio..org/a", false}, {"nephio.org/ a", false},
		{strings.Repeat("p", 254) + "/a", false}, {"ü", false},
	} {
		if got := LabelKeySyntax(tc.key) == ""; got != tc.ok {
			t.Errorf("LabelKeySyntax(%q) = %q, want ok=%v", tc.key, LabelKeySyntax(tc.key), tc.ok)
		}
	}
}

func TestLabelValueSyntax(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		{"", true}, {"true", true}, {"vpc-1", true}, {"a.b_c-D", true}, {strings.Repeat("v", 63), true},
		{" a", false}, {" ", false}, {"a b", false}, {"-a", false}, {"a.", false}, {strings.Repeat("v", 64), false},
		{"a/b", false}, {"ü", false}, {"0000:3b:00.0", false},
	} {
		if got := IsLabelValue(tc.v); got != tc.ok {
			t.Errorf("IsLabelValue(%q) = %v (%s), want %v", tc.v, got, LabelValueSyntax(tc.v), tc.ok)
		}
	}
}

// TestNewWritesFollowTheNameRules: every object written with a label key or
// value outside Kubernetes label syntax, a network name or a
// pre-allocation name that is blank or padded, is refused with ErrInvalid
// naming the object and field, and changes nothing.
func TestNewWritesFollowTheNameRules(t *testing.T) {
	ctx := context.Background()
	sel := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}
	long := strings.Repeat("k", 300)
	rng := func(mod func(*IPRange)) func(*Allocator) error {
		return func(a *Allocator) error {
			r := IPRange{Key: k("r"), NetworkInstance: "vpc-1", Start: mustAddr("10.0.1.100"), End: mustAddr("10.0.1.110")}
			mod(&r)
			return a.CreateRange(ctx, r)
		}
	}
	for _, tc := range []struct {
		name, obj, field string
		call             func(*Allocator) error
	}{
		{"allocation label key of 300 bytes without '/'", ObjAllocation, "spec.labels", func(a *Allocator) error {
			_, err := a.Allocate(ctx, Allocation{Key: k("x"), Selector: sel, Labels: Labels{long: "v"}})
			return err
		}},
		{"allocation label key padded", ObjAllocation, "spec.labels", func(a *Allocator) error {
			_, err := a.Allocate(ctx, Allocation{Key: k("x"), Selector: sel, Labels: Labels{" a": "v"}})
			return err
		}},
		{"allocation label value padded", ObjAllocation, `spec.labels["k"]`, func(a *Allocator) error {
			_, err := a.Allocate(ctx, Allocation{Key: k("x"), Selector: sel, Labels: Labels{"k": " "}})
			return err
		}},
		{"selector value with a slash", ObjAllocation, `spec.selector["nephio.org/interface"]`, func(a *Allocator) error {
			_, err := a.Allocate(ctx, Allocation{Key: k("x"), Selector: Labels{LabelNetworkInstance: "vpc-1", "nephio.org/interface": "n/3"}})
			return err
		}},
		{"selector network name padded", ObjAllocation, `spec.selector["nephio.org/network-name"]`, func(a *Allocator) error {
			_, err := a.Allocate(ctx, Allocation{Key: k("x"), Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1 "}})
			return err
		}},
		{"prefix label key upper-case prefix", ObjPrefix, "metadata.labels", func(a *Allocator) error {
			_, err := a.CreatePrefix(ctx, Prefix{Key: k("p"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.2.0/24"), Labels: Labels{"Nephio.org/x": "v"}})
			return err
		}},
		{"prefix network padded", ObjPrefix, "spec.network", func(a *Allocator) error {
			_, err := a.CreatePrefix(ctx, Prefix{Key: k("p"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.2.0/24"), Network: " a"})
			return err
		}},
		{"prefix network blank", ObjPrefix, "spec.network", func(a *Allocator) error {
			_, err := a.CreatePrefix(ctx, Prefix{Key: k("p"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.2.0/24"), Network: " "})
			return err
		}},
		{"network instance label", ObjNetworkInstance, "metadata.labels", func(a *Allocator) error {
			return a.CreateNetworkInstance(ctx, NetworkInstance{Key: Key{Owner: owner, Name: "vpc-2"}, Labels: Labels{"a b": "v"}})
		}},
		{"network instance prefix label value", ObjNetworkInstance, `spec.prefixes[0].labels["k"]`, func(a *Allocator) error {
			return a.CreateNetworkInstance(ctx, NetworkInstance{Key: Key{Owner: owner, Name: "vpc-2"},
				Prefixes: []VRFPrefix{{Prefix: mustPrefix("10.0.0.0/8"), Labels: Labels{"k": "v-"}}}})
		}},
		{"range label", ObjRange, "metadata.labels", func(a *Allocator) error {
			return rng(func(r *IPRange) { r.Labels = Labels{"/k": "v"} })(a)
		}},
		{"pre-allocation name padded", ObjRange, "spec.preAllocations", func(a *Allocator) error {
			return rng(func(r *IPRange) { r.PreAllocations = map[string]netip.Addr{" a": mustAddr("10.0.1.101")} })(a)
		}},
		{"pre-allocation name blank", ObjRange, "spec.preAllocations", func(a *Allocator) error {
			return rng(func(r *IPRange) { r.PreAllocations = map[string]netip.Addr{" ": mustAddr("10.0.1.101")} })(a)
		}},
		{"pre-allocation name empty", ObjRange, "spec.preAllocations", func(a *Allocator) error {
			return rng(func(r *IPRange) { r.PreAllocations = map[string]netip.Addr{"": mustAddr("10.0.1.101")} })(a)
		}},
		{"in a Sync", ObjPrefix, "spec.network", func(a *Allocator) error {
			req := seedRequest()
			req.Prefixes[0].Network = "net1 "
			_, err := a.Sync(ctx, req)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New()
			if _, err := a.Sync(ctx, seedRequest()); err != nil {
				t.Fatal(err)
			}
			before := snapshotOf(a)
			err := tc.call(a)
			var e *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &e) || e.Object != tc.obj || e.Field != tc.field {
				t.Fatalf("got %v (%+v), want ErrInvalid on %s %s", err, e, tc.obj, tc.field)
			}
			if len(err.Error()) > 400 {
				t.Errorf("message of %d bytes repeats the value: %.200q", len(err.Error()), err.Error())
			}
			if snapshotOf(a) != before {
				t.Error("a refused request changed the state")
			}
		})
	}
}

// TestSelectorNamesAreNames: a selector names a network by its name,
// which may hold characters a label value may not.
func TestSelectorNamesAreNames(t *testing.T) {
	ctx := context.Background()
	a := New()
	if _, err := a.Sync(ctx, seedRequest()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePrefix(ctx, Prefix{Key: k("p"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.2.0/24"), Network: "net 2/a"}); err != nil {
		t.Fatal(err)
	}
	res, err := a.Allocate(ctx, Allocation{Key: k("x"), Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net 2/a"}})
	if err != nil || res.Prefix != mustPrefix("10.0.2.1/24") {
		t.Fatalf("Allocate: %v, %v", res, err)
	}
}

// TestOldRecordsStayReadable: records written before the rules (a padded
// network name, labels outside Kubernetes syntax, a padded pre-allocation
// name) are restored, read, selected and deleted.
func TestOldRecordsStayReadable(t *testing.T) {
	ctx := context.Background()
	a := New()
	if _, err := a.Sync(ctx, seedRequest()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePrefix(ctx, Prefix{Key: k("p"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.2.0/24"), Network: "old"}); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateRange(ctx, IPRange{Key: k("r"), NetworkInstance: "vpc-1", Start: mustAddr("10.0.1.100"), End: mustAddr("10.0.1.110"),
		PreAllocations: map[string]netip.Addr{"pre": mustAddr("10.0.1.101")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(ctx, Allocation{Key: k("x"), Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}, Labels: Labels{"ok": "v"}}); err != nil {
		t.Fatal(err)
	}
	// The records as an older version stored them.
	old := Labels{strings.Repeat("k", 300): " v", " a": "a b"}
	recs := a.Snapshot(nil)
	for _, r := range recs {
		switch {
		case r.Prefix != nil && r.Key.Name == "p":
			r.Prefix.Network, r.Prefix.Labels = " a", old
		case r.Range != nil:
			r.Range.Labels = old
			r.Range.PreAllocations = map[string]netip.Addr{" pre": mustAddr("10.0.1.101")}
		case r.Allocation != nil && r.Key.Name == "x":
			r.Allocation.Allocation.Labels = old
		}
	}
	b := New()
	if err := b.Apply(recs); err != nil {
		t.Fatalf("restoring old records: %v", err)
	}
	if p, err := b.GetPrefix(k("p")); err != nil || p.Prefix.Network != " a" {
		t.Fatalf("GetPrefix: %+v, %v", p, err)
	}
	if got := b.ListPrefixes(Filter{Labels: Labels{" a": "a b"}}); len(got) != 1 {
		t.Errorf("a selector of old labels lists %d prefixes, want 1", len(got))
	}
	if got := b.ListAllocations(Filter{Labels: Labels{" a": "a b"}}); len(got) != 1 {
		t.Errorf("a selector of old labels lists %d allocations, want 1", len(got))
	}
	if err := CheckLabels("request", Key{}, "labels", old); err != nil {
		t.Errorf("a query's selector of old labels: %v", err)
	}
	if r, err := b.GetRange(k("r")); err != nil || r.PreAllocations[" pre"] != mustAddr("10.0.1.101") {
		t.Fatalf("GetRange: %+v, %v", r, err)
	}
	if err := b.Release(ctx, k("x")); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := b.DeletePrefix(ctx, k("p")); err != nil {
		t.Fatalf("DeletePrefix: %v", err)
	}
	if err := b.DeleteRange(ctx, k("r")); err != nil {
		t.Fatalf("DeleteRange: %v", err)
	}
	checkInvariants(t, b)
}
