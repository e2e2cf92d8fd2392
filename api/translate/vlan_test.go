package translate

import (
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/common/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

func TestParseVLANRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want VLANRange
		err  string
	}{
		{"100-200", VLANRange{First: 100, Last: 200}, ""},
		{"1-4094", VLANRange{First: 1, Last: 4094}, ""},
		{"7-7", VLANRange{First: 7, Last: 7}, ""},
		{"10", VLANRange{Size: 10}, ""},
		{"4094", VLANRange{Size: 4094}, ""},
		{"0", VLANRange{}, "size 0 is outside 1-4094"},
		{"4095", VLANRange{}, "size 4095 is outside 1-4094"},
		{"200-100", VLANRange{}, "first ID 200 is above last ID 100"},
		{"0-10", VLANRange{}, "first ID 0 is outside"},
		{"10-4095", VLANRange{}, "last ID 4095 is outside"},
		{"", VLANRange{}, `size "" is not a number`},
		{"-5", VLANRange{}, `first ID "" is not a number`},
		{"1-", VLANRange{}, `last ID "" is not a number`},
		{"1-2-3", VLANRange{}, `last ID "2-3" is not a number`},
		{"+5", VLANRange{}, `size "+5" is not a number`},
		{"00010", VLANRange{}, "not a number of 1 to 4 digits"},
		{" 10", VLANRange{}, "not a number"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseVLANRange(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseVLANRange(%q) = %v, %v; want error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseVLANRange(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			if got.String() != tc.in {
				t.Fatalf("%v.String() = %q, want %q", got, got.String(), tc.in)
			}
		})
	}
}

// FuzzParseVLANRange: whatever the input, a parsed range lies in 1-4094,
// is ordered, prints back to an input that parses the same, and an error
// message repeats no more of the input than vocab.Quote allows.
func FuzzParseVLANRange(f *testing.F) {
	for _, s := range []string{"100-200", "10", "0", "4094", "4095-1", "-", "1--2", "\x00", "99999-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseVLANRange(s)
		if err != nil {
			if len(err.Error()) > 400 { // vocab.Quote: 64 bytes, each escaped to at most 4
				t.Fatalf("error of %d bytes: %v", len(err.Error()), err)
			}
			return
		}
		switch {
		case r.Size > 0:
			if r.Size > MaxVLAN || r.First != 0 || r.Last != 0 {
				t.Fatalf("%q: %+v", s, r)
			}
		case r.First < MinVLAN || r.Last > MaxVLAN || r.First > r.Last:
			t.Fatalf("%q: %+v", s, r)
		}
		again, err := ParseVLANRange(r.String())
		if err != nil || again != r {
			t.Fatalf("%q: %+v prints %q, which parses to %+v, %v", s, r, r.String(), again, err)
		}
	})
}

func TestVLANAddr(t *testing.T) {
	for _, id := range []int{0, 1, 10, 255, 256, 4094, 4095} {
		a := VLANAddr(id)
		if !VLANNetwork.Contains(a) {
			t.Fatalf("VLANAddr(%d) = %s, outside %s", id, a, VLANNetwork)
		}
		got, err := VLANOf(a)
		if err != nil || got != id {
			t.Fatalf("VLANOf(VLANAddr(%d) = %s) = %d, %v", id, a, got, err)
		}
	}
	if VLANAddr(10).String() != "fd00::a" {
		t.Fatalf("VLANAddr(10) = %s", VLANAddr(10))
	}
	if _, err := VLANOf(netip.MustParseAddr("fd00::1:0")); err == nil {
		t.Fatal("an address outside the VLAN network has no ID")
	}
	if !VLANAggregate.Contains(VLANNetwork.Addr()) || VLANAggregate.Bits() >= VLANNetwork.Bits() {
		t.Fatalf("%s does not hold %s", VLANAggregate, VLANNetwork)
	}
}

func TestVLANClaim(t *testing.T) {
	claim := func(spec vlanv1alpha1.VLANClaimSpec) *vlanv1alpha1.VLANClaim {
		if spec.VLANIndex.Name == "" {
			spec.VLANIndex.Name = "cluster01"
		}
		return &vlanv1alpha1.VLANClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "n3"}, Spec: spec}
	}
	base := func(a *ipamv1.Allocation) *ipamv1.Allocation {
		a.Key = &ipamv1.Key{Owner: "o", Namespace: "ns", Name: "n3"}
		a.Kind, a.NetworkInstance, a.AddressFamily = "network", "vlan:cluster01", "ipv6"
		return a
	}
	for _, tc := range []struct {
		name string
		spec vlanv1alpha1.VLANClaimSpec
		want *ipamv1.Allocation
		err  string
	}{
		{"dynamic", vlanv1alpha1.VLANClaimSpec{}, base(&ipamv1.Allocation{}), ""},
		{"static", vlanv1alpha1.VLANClaimSpec{VLANID: ptr.To[uint16](100)}, base(&ipamv1.Allocation{Prefix: "fd00::64/116"}), ""},
		{"range", vlanv1alpha1.VLANClaimSpec{VLANRange: ptr.To("100-200")}, base(&ipamv1.Allocation{Prefix: "fd00::64/116", Count: 101}), ""},
		{"size", vlanv1alpha1.VLANClaimSpec{VLANRange: ptr.To("10")}, base(&ipamv1.Allocation{Count: 10}), ""},
		{"labels", vlanv1alpha1.VLANClaimSpec{ClaimLabels: commonv1alpha1.ClaimLabels{
			UserDefinedLabels: commonv1alpha1.UserDefinedLabels{Labels: map[string]string{"a": "b"}},
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"c": "d"}}}},
			base(&ipamv1.Allocation{Labels: map[string]string{"a": "b"}, Selector: map[string]string{"c": "d"}}), ""},
		{"id 0", vlanv1alpha1.VLANClaimSpec{VLANID: ptr.To[uint16](0)}, nil, "VLANClaim ns/n3: spec.vlanID: 0 is outside 1-4094"},
		{"id 4095", vlanv1alpha1.VLANClaimSpec{VLANID: ptr.To[uint16](4095)}, nil, "spec.vlanID: 4095 is outside 1-4094"},
		{"both", vlanv1alpha1.VLANClaimSpec{VLANID: ptr.To[uint16](5), VLANRange: ptr.To("10")}, nil, "spec.range: contradicts spec.vlanID"},
		{"bad range", vlanv1alpha1.VLANClaimSpec{VLANRange: ptr.To("a-b")}, nil, `spec.range: first ID "a" is not a number`},
		{"expressions", vlanv1alpha1.VLANClaimSpec{ClaimLabels: commonv1alpha1.ClaimLabels{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpExists}}}}}, nil, "spec.selector.matchExpressions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := VLANClaim("o", claim(tc.spec))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got.String() != tc.want.String() {
				t.Fatalf("got %v, %v\nwant %v", got, err, tc.want)
			}
		})
	}
}

func TestVLANResult(t *testing.T) {
	dyn := &vlanv1alpha1.VLANClaim{}
	rng := &vlanv1alpha1.VLANClaim{Spec: vlanv1alpha1.VLANClaimSpec{VLANRange: ptr.To("3")}}
	if id, r, err := VLANResult(dyn, &ipamv1.Result{Prefix: "fd00::a/116"}); err != nil || id != 10 || r != "" {
		t.Fatalf("dynamic: %d %q %v", id, r, err)
	}
	if id, r, err := VLANResult(rng, &ipamv1.Result{Prefix: "fd00::2/116", Last: "fd00::4"}); err != nil || id != 0 || r != "2-4" {
		t.Fatalf("range: %d %q %v", id, r, err)
	}
	if _, _, err := VLANResult(dyn, &ipamv1.Result{Prefix: "10.0.0.1/24"}); err == nil {
		t.Fatal("an IPv4 answer is no VLAN ID")
	}
}

func TestVLANIndex(t *testing.T) {
	x := &vlanv1alpha1.VLANIndex{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cluster01", Labels: map[string]string{"a": "b"}}}
	ni, p := VLANIndex("o", x)
	if ni.GetKey().GetName() != "vlan:cluster01" || p.GetNetworkInstance() != "vlan:cluster01" || p.GetPrefix() != "fd00::/116" ||
		ni.GetPrefixes()[0].GetPrefix() != "fd00::/112" || p.GetLabels()["a"] != "b" {
		t.Fatalf("%v %v", ni, p)
	}
}

func TestNephioMessage(t *testing.T) {
	for in, want := range map[string]string{
		`fd00::1 is already held by IPAllocation nephio-vlanclaim.upf-n3 of owner "o"`: `VLAN ID 1 is already held by VLANClaim upf-n3 of owner "o"`,
		`IPAllocation ns/nephio-ipclaim.n3: spec.selector: matches nothing`:            `IPClaim ns/n3: spec.selector: matches nothing`,
		`fd00::fff is a reserved address of fd00::/116 (rule 3)`:                       `VLAN ID 4095 is a reserved address of fd00::/116 (rule 3)`,
		`fd00::64/116 (count 101) does not fit in network instance vlan:cluster01`:     `VLAN ID 100 (count 101) does not fit in VLAN index cluster01`,
		`IPAllocation a: 10.0.0.1 is taken`:                                            `IPAllocation a: 10.0.0.1 is taken`,
	} {
		if got := NephioMessage(in); got != want {
			t.Errorf("NephioMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
