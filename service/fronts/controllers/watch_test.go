package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
)

func TestNetworkInstanceOf(t *testing.T) {
	sel := func(m map[string]string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: m} }
	for _, tc := range []struct {
		name string
		obj  client.Object
		want string
	}{
		{"network instance", &ipamv1alpha1.NetworkInstance{ObjectMeta: metav1.ObjectMeta{Name: "vpc-1"}}, "vpc-1"},
		{"prefix", &ipamv1alpha1.IPPrefix{Spec: ipamv1alpha1.IPPrefixSpec{NetworkInstance: "vpc-2"}}, "vpc-2"},
		{"allocation by field", &ipamv1alpha1.IPAllocation{Spec: ipamv1alpha1.IPAllocationSpec{NetworkInstance: "vpc-3",
			Selector: sel(map[string]string{ipamv1alpha1.LabelNetworkInstance: "other"})}}, "vpc-3"},
		{"allocation by selector", &ipamv1alpha1.IPAllocation{Spec: ipamv1alpha1.IPAllocationSpec{
			Selector: sel(map[string]string{ipamv1alpha1.LabelNetworkInstance: "vpc-4"})}}, "vpc-4"},
		{"allocation without", &ipamv1alpha1.IPAllocation{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := networkInstanceOf(tc.obj); got != tc.want {
				t.Fatalf("networkInstanceOf = %q; want %q", got, tc.want)
			}
		})
	}
}

func TestNeedsAttention(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s}
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name     string
		conds    []metav1.Condition
		deleting bool
		want     bool
	}{
		{"new", nil, false, true},
		{"ready", []metav1.Condition{cond("Synced", "True"), cond("Ready", "True")}, false, false},
		{"waiting", []metav1.Condition{cond("Synced", "True"), cond("Ready", "False")}, false, true},
		{"deletion refused", []metav1.Condition{cond("Synced", "False"), cond("Ready", "True")}, false, true},
		{"deleting", []metav1.Condition{cond("Synced", "True"), cond("Ready", "True")}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &ipamv1alpha1.IPPrefix{Status: ipamv1alpha1.IPPrefixStatus{Conditions: tc.conds}}
			if tc.deleting {
				p.DeletionTimestamp = &now
			}
			if got := needsAttention(p); got != tc.want {
				t.Fatalf("needsAttention = %v; want %v", got, tc.want)
			}
		})
	}
}
