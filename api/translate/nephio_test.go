package translate

import (
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/common/v1alpha1"
	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

func TestIPClaim(t *testing.T) {
	sel := commonv1alpha1.ClaimLabels{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{commonv1alpha1.LabelClusterName: "cluster01"}}}
	vpc := commonv1alpha1.ObjectReference{Name: "vpc"}
	key := &ipamv1.Key{Owner: "o", Namespace: "ns", Name: "c"}
	for _, tc := range []struct {
		name string
		spec nipamv1alpha1.IPClaimSpec
		want *ipamv1.Allocation
		err  string
	}{
		{"network address by selector", nipamv1alpha1.IPClaimSpec{NetworkInstance: vpc, ClaimLabels: sel},
			&ipamv1.Allocation{Key: key, Kind: "network", NetworkInstance: "vpc", Selector: map[string]string{commonv1alpha1.LabelClusterName: "cluster01"}}, ""},
		{"loopback", nipamv1alpha1.IPClaimSpec{Kind: "loopback", NetworkInstance: vpc},
			&ipamv1.Allocation{Key: key, Kind: "loopback", NetworkInstance: "vpc"}, ""},
		{"pool of a length", nipamv1alpha1.IPClaimSpec{Kind: "pool", NetworkInstance: vpc, PrefixLength: ptr.To[uint8](8)},
			&ipamv1.Allocation{Key: key, Kind: "pool", NetworkInstance: "vpc", PrefixLength: 8}, ""},
		{"address ignores the length", nipamv1alpha1.IPClaimSpec{NetworkInstance: vpc, PrefixLength: ptr.To[uint8](24)},
			&ipamv1.Allocation{Key: key, Kind: "network", NetworkInstance: "vpc"}, ""},
		{"createPrefix", nipamv1alpha1.IPClaimSpec{NetworkInstance: vpc, PrefixLength: ptr.To[uint8](28), CreatePrefix: ptr.To(true)},
			&ipamv1.Allocation{Key: key, Kind: "network", NetworkInstance: "vpc", PrefixLength: 28}, ""},
		{"static with family", nipamv1alpha1.IPClaimSpec{NetworkInstance: vpc, Prefix: ptr.To("10.0.0.7/24"), AddressFamily: ptr.To[nipamv1alpha1.AddressFamily]("ipv4")},
			&ipamv1.Allocation{Key: key, Kind: "network", NetworkInstance: "vpc", Prefix: "10.0.0.7/24", AddressFamily: "ipv4"}, ""},
		{"index", nipamv1alpha1.IPClaimSpec{NetworkInstance: vpc, Index: ptr.To[uint32](7)},
			&ipamv1.Allocation{Key: key, Kind: "network", NetworkInstance: "vpc"}, ""},
		{"no network instance", nipamv1alpha1.IPClaimSpec{}, nil, "IPClaim ns/c: spec.networkInstance.name: a network instance is required"},
		{"aggregate", nipamv1alpha1.IPClaimSpec{Kind: "aggregate", NetworkInstance: vpc}, nil, "spec.kind: aggregate is not claimed here"},
		{"unknown kind", nipamv1alpha1.IPClaimSpec{Kind: "subnet", NetworkInstance: vpc}, nil, `spec.kind: unknown kind "subnet"`},
		{"createPrefix without length", nipamv1alpha1.IPClaimSpec{NetworkInstance: vpc, CreatePrefix: ptr.To(true)}, nil, "spec.prefixLength: required with createPrefix"},
		{"index of a pool", nipamv1alpha1.IPClaimSpec{Kind: "pool", NetworkInstance: vpc, PrefixLength: ptr.To[uint8](8), Index: ptr.To[uint32](1)}, nil, "spec.index: picks an address"},
		{"index and prefix", nipamv1alpha1.IPClaimSpec{NetworkInstance: vpc, Prefix: ptr.To("10.0.0.7/24"), Index: ptr.To[uint32](1)}, nil, "spec.index: contradicts spec.prefix"},
		{"matchExpressions", nipamv1alpha1.IPClaimSpec{NetworkInstance: vpc, ClaimLabels: commonv1alpha1.ClaimLabels{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpExists}}}}}, nil, "spec.selector.matchExpressions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &nipamv1alpha1.IPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Spec: tc.spec}
			got, err := IPClaim("o", c)
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

func TestNephioPrefix(t *testing.T) {
	p := &nipamv1alpha1.IPPrefix{ObjectMeta: metav1.ObjectMeta{Name: "n3", Labels: map[string]string{"m": "1"}},
		Spec: nipamv1alpha1.IPPrefixSpec{Kind: "network", NetworkInstance: commonv1alpha1.ObjectReference{Name: "vpc"}, Prefix: "10.0.0.1/24",
			UserDefinedLabels: commonv1alpha1.UserDefinedLabels{Labels: map[string]string{commonv1alpha1.LabelNetworkName: "n3", commonv1alpha1.LabelGateway: "true"}}}}
	got, err := NephioPrefix("infra", p)
	if err != nil || len(got) != 2 {
		t.Fatalf("%v %v", got, err)
	}
	net, host := got[0], got[1]
	if net.GetKey().GetName() != "n3" || net.GetNetworkInstance() != "vpc" || net.GetNetwork() != "n3" || net.GetPrefix() != "10.0.0.0/24" ||
		net.GetLabels()["m"] != "1" || net.GetLabels()[commonv1alpha1.LabelGateway] != "" || net.GetKind() != "network" {
		t.Fatalf("network %v", net)
	}
	if host.GetKey().GetName() != "n3.host" || host.GetPrefix() != "10.0.0.1/24" || host.GetLabels()[commonv1alpha1.LabelGateway] != "true" ||
		host.GetLabels()["m"] != "1" || host.GetNetwork() != "n3" {
		t.Fatalf("address %v", host)
	}
	p.Spec.Prefix = "10.0.0.0/24"
	if got, err := NephioPrefix("infra", p); err != nil || len(got) != 1 || got[0].GetPrefix() != "10.0.0.0/24" {
		t.Fatalf("a network without a host part: %v %v", got, err)
	}
	p.Spec.NetworkInstance.Name = ""
	if _, err := NephioPrefix("infra", p); err == nil || !strings.Contains(err.Error(), "IPPrefix n3: spec.networkInstance.name") {
		t.Fatalf("no network instance: %v", err)
	}
}

func TestIndexAddress(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		index  uint32
		want   string
	}{
		{"10.0.0.0/24", 7, "10.0.0.7/24"},
		{"10.0.0.1/24", 7, "10.0.0.7/24"},
		{"10.0.0.0/24", 255, "10.0.0.255/24"},
		{"10.0.0.0/16", 300, "10.0.1.44/16"},
		{"2001:db8::/64", 65536, "2001:db8::1:0/64"},
		{"2001:db8::/64", 1<<32 - 1, "2001:db8::ffff:ffff/64"},
		{"10.0.0.0/24", 256, ""},
		{"10.0.0.5/32", 1, ""},
	} {
		got, err := IndexAddress(netip.MustParsePrefix(tc.prefix), tc.index)
		if tc.want == "" {
			if err == nil {
				t.Errorf("IndexAddress(%s, %d) = %s, want an error", tc.prefix, tc.index, got)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("IndexAddress(%s, %d) = %s, %v; want %s", tc.prefix, tc.index, got, err, tc.want)
		}
	}
}
