package ipam

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestLimits: every string and list of a request is accepted at its limit
// and refused one past it, with ErrInvalid naming the object and field,
// and the refusal changes nothing.
func TestLimits(t *testing.T) {
	n := func(c int) string { return strings.Repeat("n", c) }
	labels := func(c int) Labels {
		m := Labels{}
		for i := range c {
			m["l"+strconv.Itoa(i)] = "v"
		}
		return m
	}
	sel := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}
	type mk func(at bool) error
	alloc := func(a *Allocator, mod func(r *Allocation, at bool)) mk {
		return func(at bool) error {
			r := Allocation{Key: k("x"), Selector: maps.Clone(sel)}
			mod(&r, at)
			_, err := a.Allocate(context.Background(), r)
			return err
		}
	}
	pick := func(at bool, ok, over int) int {
		if at {
			return ok
		}
		return over
	}
	for _, tc := range []struct {
		name, obj, field string
		call             func(a *Allocator) mk
	}{
		{"name", ObjAllocation, "metadata.name", func(a *Allocator) mk {
			return alloc(a, func(r *Allocation, at bool) { r.Key.Name = n(pick(at, MaxNameLength, MaxNameLength+1)) })
		}},
		{"namespace", ObjAllocation, "metadata.namespace", func(a *Allocator) mk {
			return alloc(a, func(r *Allocation, at bool) { r.Key.Namespace = n(pick(at, MaxNamespaceLength, MaxNamespaceLength+1)) })
		}},
		{"owner", ObjAllocation, "owner", func(a *Allocator) mk {
			return alloc(a, func(r *Allocation, at bool) { r.Key.Owner = n(pick(at, MaxNameLength, MaxNameLength+1)) })
		}},
		{"label count", ObjAllocation, "spec.labels", func(a *Allocator) mk {
			return alloc(a, func(r *Allocation, at bool) { r.Labels = labels(pick(at, MaxLabels, MaxLabels+1)) })
		}},
		{"label key", ObjAllocation, "spec.labels", func(a *Allocator) mk {
			return alloc(a, func(r *Allocation, at bool) {
				// A key at the limit: a 253-byte prefix, "/", a 63-byte name.
				r.Labels = Labels{n(MaxLabelPrefixLength) + "/" + n(pick(at, MaxLabelNameLength, MaxLabelNameLength+1)): "v"}
			})
		}},
		{"label value", ObjAllocation, `spec.labels["k"]`, func(a *Allocator) mk {
			return alloc(a, func(r *Allocation, at bool) {
				r.Labels = Labels{"k": n(pick(at, MaxLabelValueLength, MaxLabelValueLength+1))}
			})
		}},
		{"selector value", ObjAllocation, `spec.selector["nephio.org/network-name"]`, func(a *Allocator) mk {
			return alloc(a, func(r *Allocation, at bool) {
				if !at {
					r.Selector[LabelNetworkName] = n(MaxLabelValueLength + 1)
				}
			})
		}},
		{"bidi in a name", ObjAllocation, "metadata.name", func(a *Allocator) mk {
			return alloc(a, func(r *Allocation, at bool) {
				r.Key.Name = map[bool]string{true: "ünïcode-ok", false: "a\u202eb"}[at]
			})
		}},
		{"zero-width in a label", ObjAllocation, `spec.labels["k"]`, func(a *Allocator) mk {
			return alloc(a, func(r *Allocation, at bool) {
				r.Labels = Labels{"k": map[bool]string{true: "a.b", false: "a\u200bb"}[at]}
			})
		}},
		{"invalid UTF-8 in the namespace", ObjAllocation, "metadata.namespace", func(a *Allocator) mk {
			return alloc(a, func(r *Allocation, at bool) { r.Key.Namespace = map[bool]string{true: "ns", false: "n\xffs"}[at] })
		}},
		{"prefix network name", ObjPrefix, "spec.network", func(a *Allocator) mk {
			return func(at bool) error {
				_, err := a.CreatePrefix(context.Background(), Prefix{Key: k("p"), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.2.0/24"), Network: n(pick(at, MaxNameLength, MaxNameLength+1))})
				return err
			}
		}},
		{"network instance labels", ObjNetworkInstance, "metadata.labels", func(a *Allocator) mk {
			return func(at bool) error {
				return a.CreateNetworkInstance(context.Background(), NetworkInstance{Key: Key{Owner: owner, Name: "vpc-2"}, Labels: labels(pick(at, MaxLabels, MaxLabels+1))})
			}
		}},
		{"range pre-allocation name", ObjRange, "spec.preAllocations", func(a *Allocator) mk {
			return func(at bool) error {
				return a.CreateRange(context.Background(), IPRange{Key: k("r"), NetworkInstance: "vpc-1", Start: netip.MustParseAddr("10.0.1.100"), End: netip.MustParseAddr("10.0.1.110"),
					PreAllocations: map[string]netip.Addr{n(pick(at, MaxNameLength, MaxNameLength+1)): netip.MustParseAddr("10.0.1.101")}})
			}
		}},
		{"sync owner", "Sync", "owner", func(a *Allocator) mk {
			return func(at bool) error {
				_, err := a.Sync(context.Background(), SyncRequest{Owner: n(pick(at, MaxNameLength, MaxNameLength+1))})
				return err
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New()
			if _, err := a.Sync(context.Background(), seedRequest()); err != nil {
				t.Fatal(err)
			}
			before := snapshotOf(a)
			err := tc.call(a)(false)
			var e *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &e) || e.Object != tc.obj || e.Field != tc.field {
				t.Fatalf("past the limit: %v (%+v), want ErrInvalid on %s %s", err, e, tc.obj, tc.field)
			}
			if len(err.Error()) > 400 {
				t.Errorf("message of %d bytes repeats the value: %.200q", len(err.Error()), err.Error())
			}
			if after := snapshotOf(a); after != before {
				t.Error("a refused request changed the state")
			}
			if err := tc.call(a)(true); err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			checkInvariants(t, a)
		})
	}
}

// snapshotOf renders the state for comparison.
func snapshotOf(a *Allocator) string {
	var b strings.Builder
	for _, r := range a.ListAllocations(Filter{}) {
		b.WriteString(r.Allocation.Key.String() + " " + r.Result.Prefix.String() + "\n")
	}
	for _, r := range a.ListPrefixes(Filter{}) {
		b.WriteString(r.Prefix.Key.String() + " " + r.Prefix.Prefix.String() + "\n")
	}
	for _, r := range a.ListRanges(Filter{}) {
		b.WriteString(r.Key.String() + "\n")
	}
	for _, r := range a.ListNetworkInstances(Filter{}) {
		b.WriteString(r.Key.String() + "\n")
	}
	return b.String()
}

// FuzzPrintable: printable agrees with a rune-by-rune reference, and Quote
// is valid UTF-8 of bounded length for any input.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "vpc-1", "a\u202eb", "\xff", "ü", "a\nb", "\u2066x\u2069", strings.Repeat("é", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := utf8.ValidString(s)
		for _, r := range s {
			if !unicode.IsPrint(r) && r != ' ' {
				want = false
			}
		}
		if got := printable(s); got != want {
			t.Fatalf("printable(%q) = %v, want %v", s, got, want)
		}
		q := Quote(s)
		if !utf8.ValidString(q) || len(q) > 4*MaxQuoted+40 {
			t.Fatalf("Quote(%q) = %q (%d bytes)", s, q, len(q))
		}
	})
}

// TestLimitsSpareRecords: records are restored as they were stored, so a
// data directory written before the limits (a 300-byte name) still opens.
func TestLimitsSpareRecords(t *testing.T) {
	long := Key{Owner: owner, Namespace: "default", Name: strings.Repeat("p", 300)}
	a := New()
	if _, err := a.Sync(context.Background(), seedRequest()); err != nil {
		t.Fatal(err)
	}
	p := Prefix{Key: long, NetworkInstance: "vpc-1", Kind: KindPool, Prefix: mustPrefix("10.9.0.0/16")}
	if _, err := a.CreatePrefix(context.Background(), p); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a request with a 300-byte name: %v, want ErrInvalid", err)
	}
	if err := a.Apply([]Record{{Op: OpPutPrefix, Key: long, Prefix: &p}}); err != nil {
		t.Fatalf("restoring a record with a 300-byte name: %v", err)
	}
	if _, err := a.GetPrefix(long); err != nil {
		t.Fatal(err)
	}
}

// TestPaddedNames: a name, namespace, owner or identity that is blank or
// starts or ends with a space is refused where objects are written, with
// ErrInvalid naming the field; a space inside is fine. Objects stored
// with such names before are restored, read and deleted.
func TestPaddedNames(t *testing.T) {
	sel := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}
	ctx := context.Background()
	for _, tc := range []struct {
		name, obj, field string
		call             func(a *Allocator, s string) error
	}{
		{"allocation name", ObjAllocation, "metadata.name", func(a *Allocator, s string) error {
			_, err := a.Allocate(ctx, Allocation{Key: k(s), Selector: sel})
			return err
		}},
		{"allocation namespace", ObjAllocation, "metadata.namespace", func(a *Allocator, s string) error {
			_, err := a.Allocate(ctx, Allocation{Key: Key{Owner: owner, Namespace: s, Name: "a"}, Selector: sel})
			return err
		}},
		{"allocation owner", ObjAllocation, "owner", func(a *Allocator, s string) error {
			_, err := a.Allocate(ctx, Allocation{Key: Key{Owner: s, Name: "a"}, Selector: sel})
			return err
		}},
		{"prefix name", ObjPrefix, "metadata.name", func(a *Allocator, s string) error {
			_, err := a.CreatePrefix(ctx, Prefix{Key: k(s), NetworkInstance: "vpc-1", Prefix: mustPrefix("10.0.2.0/24")})
			return err
		}},
		{"range name", ObjRange, "metadata.name", func(a *Allocator, s string) error {
			return a.CreateRange(ctx, IPRange{Key: k(s), NetworkInstance: "vpc-1", Start: netip.MustParseAddr("10.0.1.100"), End: netip.MustParseAddr("10.0.1.110")})
		}},
		{"network instance name", ObjNetworkInstance, "metadata.name", func(a *Allocator, s string) error {
			return a.CreateNetworkInstance(ctx, NetworkInstance{Key: Key{Owner: owner, Name: s}})
		}},
		{"sync owner", "Sync", "owner", func(a *Allocator, s string) error {
			_, err := a.Sync(ctx, SyncRequest{Owner: s})
			return err
		}},
		{"sync identity", "Sync", "identity", func(a *Allocator, s string) error {
			_, err := a.Sync(ctx, SyncRequest{Owner: "pkg", Identity: s})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New()
			if _, err := a.Sync(ctx, seedRequest()); err != nil {
				t.Fatal(err)
			}
			for value, msg := range map[string]string{
				" x": `" x" starts or ends with a space`,
				"x ": `"x " starts or ends with a space`,
				"  ": `"  " is blank`,
			} {
				err := tc.call(a, value)
				var e *Error
				if !errors.Is(err, ErrInvalid) || !errors.As(err, &e) || e.Object != tc.obj || e.Field != tc.field || e.Msg != msg {
					t.Errorf("%q: %v, want ErrInvalid of %s at %s: %s", value, err, tc.obj, tc.field, msg)
				}
			}
			if err := tc.call(a, "x y"); err != nil {
				t.Errorf(`"x y": %v`, err)
			}
		})
	}

	// Stored before the rule: restored, looked up and deleted.
	a := New()
	if _, err := a.Sync(ctx, seedRequest()); err != nil {
		t.Fatal(err)
	}
	padded := Key{Owner: " old-owner", Namespace: "default ", Name: " "}
	p := Prefix{Key: padded, NetworkInstance: "vpc-1", Kind: KindPool, Prefix: mustPrefix("10.9.0.0/16")}
	if err := a.Apply([]Record{{Op: OpPutPrefix, Key: padded, Prefix: &p}}); err != nil {
		t.Fatalf("restoring a prefix keyed %q: %v", padded, err)
	}
	if err := CheckKey(ObjPrefix, padded); err != nil {
		t.Errorf("a lookup of %q: %v", padded, err)
	}
	if _, err := a.GetPrefix(padded); err != nil {
		t.Fatal(err)
	}
	if got := a.ListPrefixes(Filter{Owner: " old-owner"}); len(got) != 1 {
		t.Errorf("listing the padded owner: %d prefixes, want 1", len(got))
	}
	if err := a.DeletePrefix(ctx, padded); err != nil {
		t.Fatalf("deleting %q: %v", padded, err)
	}
}
