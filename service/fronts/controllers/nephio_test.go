package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	commonv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/common/v1alpha1"
	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/service/fronts/controllers"
)

// nephioClaimed checks an IPClaim's status: Ready with prefix and gateway.
func nephioClaimed(prefix, gateway string) func(*nipamv1alpha1.IPClaim) error {
	return func(c *nipamv1alpha1.IPClaim) error {
		if err := ready(c.Status.Conditions); err != nil {
			return err
		}
		if ptr.Deref(c.Status.Prefix, "") != prefix || ptr.Deref(c.Status.Gateway, "") != gateway {
			return fmt.Errorf("status prefix %q gateway %q; want %q %q", ptr.Deref(c.Status.Prefix, ""), ptr.Deref(c.Status.Gateway, ""), prefix, gateway)
		}
		return nil
	}
}

// TestNephioClaims: with --nephio-resource, Nephio's IPClaims take from
// a VRF and network declared with ipam.nephio.org objects (one VRF for
// both APIs), an index picks the address at that offset, VLANClaims take
// IDs from their VLANIndex, and deleting a claim releases it.
func TestNephioClaims(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "nephio")
	s.startControllers(t, s.cfg, func(c *controllers.Config) { c.NephioResource = true })
	ctx := context.Background()
	labels := map[string]string{commonv1alpha1.LabelClusterName: "edge01"}
	create(t, s.k8s, networkInstance(ns, "nephio-vpc"),
		ipPrefix(ns, "agg", "nephio-vpc", ipamv1alpha1.PrefixKindAggregate, "10.61.0.0/16", "", nil),
		ipPrefix(ns, "n3", "nephio-vpc", ipamv1alpha1.PrefixKindNetwork, "10.61.1.0/24", "n3", labels),
		ipPrefix(ns, "n3-gw", "nephio-vpc", ipamv1alpha1.PrefixKindNetwork, "10.61.1.1/24", "n3", map[string]string{ipamv1alpha1.LabelGateway: "true"}))
	waitFor(t, s.k8s, ns, "n3-gw", recorded("10.61.1.1/24", "10.61.1.1"))

	claim := func(name string, index *uint32) *nipamv1alpha1.IPClaim {
		return &nipamv1alpha1.IPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: nipamv1alpha1.IPClaimSpec{
			Kind: nipamv1alpha1.PrefixKindNetwork, NetworkInstance: commonv1alpha1.ObjectReference{Name: "nephio-vpc"}, Index: index,
			ClaimLabels: commonv1alpha1.ClaimLabels{Selector: &metav1.LabelSelector{MatchLabels: labels}}}}
	}
	n3 := claim("upf-n3", nil)
	create(t, s.k8s, n3, claim("upf-n3-fixed", ptr.To[uint32](7)))
	waitFor(t, s.k8s, ns, "upf-n3", nephioClaimed("10.61.1.2/24", "10.61.1.1"))
	waitFor(t, s.k8s, ns, "upf-n3-fixed", nephioClaimed("10.61.1.7/24", "10.61.1.1"))
	out := s.kubectl(t, "get", "ipclaims.ipam.resource.nephio.org", "-n", ns)
	for _, col := range []string{"SYNC", "STATUS", "NETWORK-INSTANCE", "KIND", "PREFIX-ALLOC", "GATEWAY", "10.61.1.2/24"} {
		require.Contains(t, out, col, "kubectl get ipclaims prints Nephio's columns")
	}

	create(t, s.k8s, &vlanv1alpha1.VLANIndex{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge01"}})
	vclaim := func(name string, rng *string) *vlanv1alpha1.VLANClaim {
		return &vlanv1alpha1.VLANClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: vlanv1alpha1.VLANClaimSpec{VLANIndex: commonv1alpha1.ObjectReference{Name: "edge01"}, VLANRange: rng}}
	}
	create(t, s.k8s, vclaim("n3", nil))
	waitFor(t, s.k8s, ns, "n3", func(c *vlanv1alpha1.VLANClaim) error {
		if err := ready(c.Status.Conditions); err != nil {
			return err
		}
		if ptr.Deref(c.Status.VLANID, 0) != 1 {
			return fmt.Errorf("vlanID %v", c.Status.VLANID)
		}
		return nil
	})
	create(t, s.k8s, vclaim("trunk", ptr.To("100-109")))
	waitFor(t, s.k8s, ns, "trunk", func(c *vlanv1alpha1.VLANClaim) error {
		if ptr.Deref(c.Status.VLANRange, "") != "100-109" {
			return fmt.Errorf("vlanRange %v, conditions %v", c.Status.VLANRange, c.Status.Conditions)
		}
		return nil
	})
	bad := vclaim("bad", nil)
	bad.Spec.VLANID = ptr.To[uint16](4095)
	err := s.k8s.Create(ctx, bad)
	require.Error(t, err, "the CRD refuses VLAN ID 4095")
	require.True(t, strings.Contains(err.Error(), "spec.vlanID"), err.Error())

	// Release on deletion: the allocation leaves ipam-server and the
	// address is free for the next claim.
	del(t, s.k8s, n3)
	waitGone[nipamv1alpha1.IPClaim](t, s.k8s, ns, "upf-n3")
	_, err = s.ipam.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION,
		Key: &ipamv1.Key{Owner: controllers.DefaultOwner, Namespace: ns, Name: translate.NephioIPClaimName("upf-n3")}})
	require.Error(t, err, "the claim's allocation is released")
	create(t, s.k8s, claim("upf-n6", nil))
	waitFor(t, s.k8s, ns, "upf-n6", nephioClaimed("10.61.1.2/24", "10.61.1.1"))
}

// TestNephioInfraCRs: Nephio's own NetworkInstance and IPPrefix CRs (as
// Nephio's management cluster holds them) declare the VRF and network
// that IPClaims take from; a network written 10.62.1.1/24 with the
// gateway label gives .2 with gateway .1, as in Nephio. A prefix with a
// claim in it is not deleted until the claim goes.
func TestNephioInfraCRs(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "nephio-infra")
	s.startControllers(t, s.cfg, func(c *controllers.Config) { c.NephioResource = true })
	ni := &nipamv1alpha1.NetworkInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vpc-infra"},
		Spec: nipamv1alpha1.NetworkInstanceSpec{Prefixes: []nipamv1alpha1.Prefix{{Prefix: "10.62.0.0/16"}}}}
	net := &nipamv1alpha1.IPPrefix{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge02-n3"}, Spec: nipamv1alpha1.IPPrefixSpec{
		Kind: nipamv1alpha1.PrefixKindNetwork, NetworkInstance: commonv1alpha1.ObjectReference{Name: "vpc-infra"}, Prefix: "10.62.1.1/24",
		UserDefinedLabels: commonv1alpha1.UserDefinedLabels{Labels: map[string]string{commonv1alpha1.LabelClusterName: "edge02", commonv1alpha1.LabelGateway: "true"}}}}
	claim := &nipamv1alpha1.IPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upf-n3"}, Spec: nipamv1alpha1.IPClaimSpec{
		NetworkInstance: commonv1alpha1.ObjectReference{Name: "vpc-infra"},
		ClaimLabels:     commonv1alpha1.ClaimLabels{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{commonv1alpha1.LabelClusterName: "edge02"}}}}}
	create(t, s.k8s, claim, net, ni) // in any order
	waitFor(t, s.k8s, ns, "vpc-infra", func(ni *nipamv1alpha1.NetworkInstance) error {
		if err := ready(ni.Status.Conditions); err != nil {
			return err
		}
		if len(ni.Status.Prefixes) != 1 || ni.Status.Prefixes[0].Prefix != "10.62.0.0/16" {
			return fmt.Errorf("status.prefixes %v", ni.Status.Prefixes)
		}
		return nil
	})
	waitFor(t, s.k8s, ns, "edge02-n3", func(p *nipamv1alpha1.IPPrefix) error {
		if err := ready(p.Status.Conditions); err != nil {
			return err
		}
		if ptr.Deref(p.Status.Prefix, "") != "10.62.1.1/24" {
			return fmt.Errorf("status.prefix %v", p.Status.Prefix)
		}
		return nil
	})
	waitFor(t, s.k8s, ns, "upf-n3", nephioClaimed("10.62.1.2/24", "10.62.1.1"))

	del(t, s.k8s, net)
	waitFor(t, s.k8s, ns, "edge02-n3", func(p *nipamv1alpha1.IPPrefix) error {
		return condIs(p.Status.Conditions, ipamv1alpha1.ConditionTypeSynced, metav1.ConditionFalse, ipamv1alpha1.ReasonReconcileFailure, "deletion refused by ipam-server")
	})
	del(t, s.k8s, claim)
	waitGone[nipamv1alpha1.IPClaim](t, s.k8s, ns, "upf-n3")
	waitGone[nipamv1alpha1.IPPrefix](t, s.k8s, ns, "edge02-n3")
	del(t, s.k8s, ni)
	waitGone[nipamv1alpha1.NetworkInstance](t, s.k8s, ns, "vpc-infra")
}
