package translate_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/api/vocab"
)

func TestAllocation(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "default", Name: "a", Labels: map[string]string{"app": "x", "tier": "meta"}}
	key := &ipamv1.Key{Owner: "k8s", Namespace: "default", Name: "a"}
	for _, tc := range []struct {
		name    string
		spec    ipamv1alpha1.IPAllocationSpec
		want    *ipamv1.Allocation
		wantErr string
	}{
		{"pool by labels, spec labels win",
			ipamv1alpha1.IPAllocationSpec{Kind: ipamv1alpha1.PrefixKindPool, PrefixLength: ptr.To(int32(16)),
				AddressFamily: ipamv1alpha1.AddressFamilyIPv4, Labels: map[string]string{"tier": "spec"},
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{ipamv1alpha1.LabelNetworkInstance: "vpc-1"}}},
			&ipamv1.Allocation{Key: key, Kind: "pool", PrefixLength: 16, AddressFamily: "ipv4",
				Selector: map[string]string{ipamv1alpha1.LabelNetworkInstance: "vpc-1"},
				Labels:   map[string]string{"app": "x", "tier": "spec"}}, ""},
		{"static prefix in a named VRF, no selector",
			ipamv1alpha1.IPAllocationSpec{Kind: ipamv1alpha1.PrefixKindNetwork, NetworkInstance: "vpc-2", Prefix: "10.0.0.5/24"},
			&ipamv1.Allocation{Key: key, Kind: "network", NetworkInstance: "vpc-2", Prefix: "10.0.0.5/24",
				Labels: map[string]string{"app": "x", "tier": "meta"}}, ""},
		{"empty selector selects by nothing",
			ipamv1alpha1.IPAllocationSpec{Selector: &metav1.LabelSelector{}},
			&ipamv1.Allocation{Key: key, Labels: map[string]string{"app": "x", "tier": "meta"}}, ""},
		{"matchExpressions are refused, not dropped",
			ipamv1alpha1.IPAllocationSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpExists}}}},
			nil, "IPAllocation default/a: spec.selector.matchExpressions: not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := translate.Allocation("k8s", &ipamv1alpha1.IPAllocation{ObjectMeta: meta, Spec: tc.spec})
			if tc.wantErr != "" {
				var fe *translate.FieldError
				if !errors.As(err, &fe) || fe.Field != "spec.selector.matchExpressions" || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want a FieldError starting %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !proto.Equal(got, tc.want) {
				t.Fatalf("Allocation = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestPrefixAndNetworkInstance(t *testing.T) {
	p := &ipamv1alpha1.IPPrefix{
		ObjectMeta: metav1.ObjectMeta{Name: "net1", Labels: map[string]string{ipamv1alpha1.LabelGateway: "true"}},
		Spec: ipamv1alpha1.IPPrefixSpec{Kind: ipamv1alpha1.PrefixKindNetwork, NetworkInstance: "vpc-1", Network: "n1",
			Prefix: "10.0.1.1/24", Labels: map[string]string{"site": "a"}},
	}
	wantP := &ipamv1.Prefix{Key: &ipamv1.Key{Owner: "o", Name: "net1"}, Kind: "network", NetworkInstance: "vpc-1",
		Network: "n1", Prefix: "10.0.1.1/24", Labels: map[string]string{ipamv1alpha1.LabelGateway: "true", "site": "a"}}
	if got := translate.Prefix("o", p); !proto.Equal(got, wantP) {
		t.Errorf("Prefix = %v; want %v", got, wantP)
	}
	ni := &ipamv1alpha1.NetworkInstance{ObjectMeta: metav1.ObjectMeta{Name: "vpc-1"},
		Spec: ipamv1alpha1.NetworkInstanceSpec{Prefixes: []ipamv1alpha1.NetworkInstancePrefix{
			{Prefix: "10.0.0.0/8", Labels: map[string]string{"tier": "core"}}, {Prefix: "fd00::/48"}}}}
	wantNI := &ipamv1.NetworkInstance{Key: &ipamv1.Key{Owner: "o", Name: "vpc-1"}, Prefixes: []*ipamv1.VRFPrefix{
		{Prefix: "10.0.0.0/8", Labels: map[string]string{"tier": "core"}}, {Prefix: "fd00::/48"}}}
	if got := translate.NetworkInstance("o", ni); !proto.Equal(got, wantNI) {
		t.Errorf("NetworkInstance = %v; want %v", got, wantNI)
	}
}

func TestDecodeSpec(t *testing.T) {
	for _, tc := range []struct {
		name, kind, spec string
		into             any
		wantErr, warning string
	}{
		{"string for an integer", "IPAllocation", `{"prefixLength":"sixteen"}`, &ipamv1alpha1.IPAllocationSpec{},
			"IPAllocation ns/x: spec.prefixLength: must be an integer in range", ""},
		{"integer out of int32", "IPAllocation", `{"prefixLength":99999999999}`, &ipamv1alpha1.IPAllocationSpec{},
			"spec.prefixLength: must be an integer in range", ""},
		{"label value not a string", "IPAllocation", `{"selector":{"matchLabels":{"a":1}}}`, &ipamv1alpha1.IPAllocationSpec{},
			"spec.selector.matchLabels: must map keys to string values", ""},
		{"selector a list", "IPAllocation", `{"selector":[]}`, &ipamv1alpha1.IPAllocationSpec{},
			"spec.selector: must be a map", ""},
		{"list index is named", "NetworkInstance", `{"prefixes":[{"prefix":"10.0.0.0/8"},{"prefix":3}]}`, &ipamv1alpha1.NetworkInstanceSpec{},
			"spec.prefixes[1].prefix: must be a string", ""},
		{"typo is a warning", "IPAllocation", `{"kind":"network","prefixLenght":24}`, &ipamv1alpha1.IPAllocationSpec{},
			"", `IPAllocation ns/x: spec: unknown field "prefixLenght" is ignored`},
		{"known fields are decoded", "IPPrefix", `{"kind":"pool","prefix":"10.0.0.0/16"}`, &ipamv1alpha1.IPPrefixSpec{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := translate.DecodeSpec(tc.kind, "ns", "x", []byte(tc.spec), tc.into)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v; want %q", err, tc.wantErr)
			}
			if tc.warning == "" && len(w) > 0 || tc.warning != "" && (len(w) != 1 || w[0].Error() != tc.warning) {
				t.Fatalf("warnings = %v; want %q", w, tc.warning)
			}
		})
	}
}

// ItemKind prefers the typed kind and falls back to the string that
// servers before ItemError.kind sent alone.
func TestItemKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		it   *ipamv1.ItemError
		want string
	}{
		{"both", &ipamv1.ItemError{Object: vocab.ObjPrefix, Kind: ipamv1.ObjectKind_OBJECT_KIND_PREFIX}, vocab.ObjPrefix},
		{"typed only", &ipamv1.ItemError{Kind: ipamv1.ObjectKind_OBJECT_KIND_RANGE}, vocab.ObjRange},
		{"typed wins", &ipamv1.ItemError{Object: "Allocation", Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION}, vocab.ObjAllocation},
		{"old server", &ipamv1.ItemError{Object: vocab.ObjNetworkInstance}, vocab.ObjNetworkInstance},
		{"the request itself", &ipamv1.ItemError{Object: vocab.ObjSync}, vocab.ObjSync},
		{"nil", nil, ""},
	} {
		if got := translate.ItemKind(tc.it); got != tc.want {
			t.Errorf("%s: ItemKind = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestKindNameAndReadyMessage(t *testing.T) {
	if got := ipamv1.KindName(ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION); got != ipamv1alpha1.KindIPAllocation {
		t.Errorf("KindName = %q", got)
	}
	if got := translate.ReadyMessage(ipamv1alpha1.KindIPAllocation, &ipamv1.Result{Prefix: "10.0.1.2/24"}); got != "allocated 10.0.1.2/24" {
		t.Errorf("ReadyMessage = %q", got)
	}
}
