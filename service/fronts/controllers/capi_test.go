package controllers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	capicorev1beta2 "github.com/nephio-project/ipam/api/capi/core/v1beta2"
	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/service/fronts/controllers"
)

// capiWait bounds how long a claim may take to be served.
const capiWait = 30 * time.Second

// pool makes an InClusterIPPool.
func pool(ns, name string, spec ipamv1alpha1.InClusterIPPoolSpec) *ipamv1alpha1.InClusterIPPool {
	return &ipamv1alpha1.InClusterIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

// claim makes an IPAddressClaim of the pool of kind and name.
func claim(ns, name, kind, poolName string) *capiv1beta2.IPAddressClaim {
	return &capiv1beta2.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: capiv1beta2.IPAddressClaimSpec{PoolRef: capiv1beta2.IPPoolReference{
			APIGroup: ipamv1alpha1.Group, Kind: kind, Name: poolName}},
	}
}

// update applies mutate to the latest obj, retrying on conflicts.
func (s *suite) update(t *testing.T, obj client.Object, mutate func()) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate()
		return s.k8s.Update(context.Background(), obj)
	}))
}

// address waits for the IPAddress of a claim and returns it.
func (s *suite) address(t *testing.T, ns, name string) *capiv1beta2.IPAddress {
	t.Helper()
	return s.addressOn(t, s.k8s, ns, name)
}

// addressOn is address on the API server of k.
func (s *suite) addressOn(t *testing.T, k client.Client, ns, name string) *capiv1beta2.IPAddress {
	t.Helper()
	var a capiv1beta2.IPAddress
	eventually(t, capiWait, "IPAddress "+ns+"/"+name, func() error {
		return k.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &a)
	})
	return &a
}

// claimReady waits for a claim's Ready condition to have status and
// reason, and returns the claim.
func (s *suite) claimReady(t *testing.T, ns, name string, want metav1.ConditionStatus, reason string) *capiv1beta2.IPAddressClaim {
	t.Helper()
	var c capiv1beta2.IPAddressClaim
	eventually(t, capiWait, fmt.Sprintf("claim %s/%s Ready=%s %s", ns, name, want, reason), func() error {
		if err := s.k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &c); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, capiv1beta2.ConditionReady)
		if cond == nil || cond.Status != want || cond.Reason != reason {
			return fmt.Errorf("conditions %+v", c.Status.Conditions)
		}
		return nil
	})
	return &c
}

// poolReady waits for a pool to be Ready with the counts want.
func (s *suite) poolReady(t *testing.T, obj client.Object, want ipamv1alpha1.IPAddressStatusSummary) {
	t.Helper()
	s.poolReadyOn(t, s.k8s, obj, want)
}

// poolReadyOn is poolReady on the API server of k.
func (s *suite) poolReadyOn(t *testing.T, k client.Client, obj client.Object, want ipamv1alpha1.IPAddressStatusSummary) {
	t.Helper()
	eventually(t, capiWait, "pool "+obj.GetName()+" Ready", func() error {
		if err := k.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		var st ipamv1alpha1.InClusterIPPoolStatus
		switch p := obj.(type) {
		case *ipamv1alpha1.InClusterIPPool:
			st = p.Status
		case *ipamv1alpha1.GlobalInClusterIPPool:
			st = p.Status
		}
		if !meta.IsStatusConditionTrue(st.Conditions, ipamv1alpha1.ConditionTypeReady) || st.Addresses == nil || *st.Addresses != want {
			return fmt.Errorf("status %+v %+v", st.Conditions, st.Addresses)
		}
		return nil
	})
}

func TestCAPIClaimGetsFirstFreeAddress(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "capi-first")
	s.startControllers(t, s.cfg)
	ctx := context.Background()

	p := pool(ns, "nodes", ipamv1alpha1.InClusterIPPoolSpec{
		Addresses:         []string{"10.10.0.0/28", "10.10.0.40-10.10.0.41"},
		Prefix:            24,
		Gateway:           "10.10.0.1",
		ExcludedAddresses: []string{"10.10.0.2-10.10.0.3", "10.10.0.5"},
	})
	require.NoError(t, s.k8s.Create(ctx, p))
	// 16 + 2 addresses; .0 (the network's first), .1 (gateway), .2-.3 and .5 excluded.
	s.poolReady(t, p, ipamv1alpha1.IPAddressStatusSummary{Total: 13, Free: 13})

	c1 := claim(ns, "m1", ipamv1alpha1.KindInClusterIPPool, "nodes")
	c1.Labels = map[string]string{capicorev1beta2.ClusterNameLabel: "wl1"}
	require.NoError(t, s.k8s.Create(ctx, c1))
	// As the README does: m2 after m1 is served (claims waiting together
	// are served in no set order).
	a1 := s.address(t, ns, "m1")
	require.NoError(t, s.k8s.Create(ctx, claim(ns, "m2", ipamv1alpha1.KindInClusterIPPool, "nodes")))

	assert.Equal(t, "10.10.0.4", a1.Spec.Address, "first free: not the gateway, not excluded")
	assert.Equal(t, int32(24), ptr.Deref(a1.Spec.Prefix, 0))
	assert.Equal(t, "10.10.0.1", a1.Spec.Gateway)
	assert.Equal(t, "m1", a1.Spec.ClaimRef.Name)
	assert.Equal(t, capiv1beta2.IPPoolReference{APIGroup: ipamv1alpha1.Group, Kind: ipamv1alpha1.KindInClusterIPPool, Name: "nodes"}, a1.Spec.PoolRef)
	assert.Equal(t, "wl1", a1.Labels[capicorev1beta2.ClusterNameLabel])
	assert.Contains(t, a1.Finalizers, controllers.ProtectAddressFinalizer)
	require.Len(t, a1.OwnerReferences, 2)
	assert.Equal(t, capiv1beta2.KindIPAddressClaim, a1.OwnerReferences[0].Kind)
	assert.True(t, ptr.Deref(a1.OwnerReferences[0].Controller, false), "the claim controls its address")
	assert.Equal(t, ipamv1alpha1.KindInClusterIPPool, a1.OwnerReferences[1].Kind)
	assert.Equal(t, "10.10.0.6", s.address(t, ns, "m2").Spec.Address, ".5 is excluded")

	got := s.claimReady(t, ns, "m1", metav1.ConditionTrue, capiv1beta2.ReasonReady)
	assert.Equal(t, "m1", got.Status.AddressRef.Name)
	assert.Contains(t, got.Finalizers, controllers.ReleaseAddressFinalizer)
	s.poolReady(t, p, ipamv1alpha1.IPAddressStatusSummary{Total: 13, Used: 2, Free: 11})
	out := s.kubectl(t, "get", "inclusterippools,ipaddressclaims,ipaddresses", "-n", ns)
	t.Logf("kubectl get inclusterippools,ipaddressclaims,ipaddresses:\n%s", out)
	for _, want := range []string{"10.10.0.4", "10.10.0.6", "nodes", "True"} {
		assert.Contains(t, out, want)
	}

	// ipam-server holds the truth: the claim's allocation, under the
	// front's owner, in the pool's own network instance.
	res, err := s.ipam.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION,
		Key: &ipamv1.Key{Owner: translate.CAPIOwner(controllers.DefaultOwner), Namespace: ns, Name: "m1"}})
	require.NoError(t, err)
	assert.Equal(t, "10.10.0.4/24", res.GetObject().GetAllocation().GetResult().GetPrefix())

	// Release on deletion: the IPAddress goes, the address is free again.
	require.NoError(t, s.k8s.Delete(ctx, c1))
	eventually(t, capiWait, "m1 and its IPAddress gone", func() error {
		var a capiv1beta2.IPAddress
		if err := s.k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "m1"}, &a); !apierrors.IsNotFound(err) {
			return fmt.Errorf("IPAddress: %v", err)
		}
		var c capiv1beta2.IPAddressClaim
		if err := s.k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "m1"}, &c); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim: %v", err)
		}
		return nil
	})
	require.NoError(t, s.k8s.Create(ctx, claim(ns, "m3", ipamv1alpha1.KindInClusterIPPool, "nodes")))
	assert.Equal(t, "10.10.0.4", s.address(t, ns, "m3").Spec.Address, "the released address is the first free again")
}

func TestCAPIReservedAddressesAndFullPool(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "capi-full")
	s.startControllers(t, s.cfg)
	ctx := context.Background()

	small := pool(ns, "small", ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.11.0.0/30"}, Prefix: 30})
	opt := pool(ns, "opt-in", ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.12.0.0/30"}, Prefix: 30, AllocateReservedIPAddresses: true})
	require.NoError(t, s.k8s.Create(ctx, small))
	require.NoError(t, s.k8s.Create(ctx, opt))
	s.poolReady(t, small, ipamv1alpha1.IPAddressStatusSummary{Total: 2, Free: 2})
	s.poolReady(t, opt, ipamv1alpha1.IPAddressStatusSummary{Total: 4, Free: 4})

	require.NoError(t, s.k8s.Create(ctx, claim(ns, "r1", ipamv1alpha1.KindInClusterIPPool, "opt-in")))
	assert.Equal(t, "10.12.0.0", s.address(t, ns, "r1").Spec.Address, "reserved addresses opted in: the network's first")

	for _, n := range []string{"a", "b"} {
		require.NoError(t, s.k8s.Create(ctx, claim(ns, n, ipamv1alpha1.KindInClusterIPPool, "small")))
	}
	assert.Equal(t, "10.11.0.1", s.address(t, ns, "a").Spec.Address, "the network's first is reserved")
	assert.Equal(t, "10.11.0.2", s.address(t, ns, "b").Spec.Address)
	require.NoError(t, s.k8s.Create(ctx, claim(ns, "c", ipamv1alpha1.KindInClusterIPPool, "small")))
	waiting := s.claimReady(t, ns, "c", metav1.ConditionFalse, capiv1beta2.ReasonPoolExhausted)
	assert.Contains(t, meta.FindStatusCondition(waiting.Status.Conditions, capiv1beta2.ConditionReady).Message, "no free address")
	s.poolReady(t, small, ipamv1alpha1.IPAddressStatusSummary{Total: 2, Used: 2, Free: 0})

	// A release lets the waiting claim complete, without touching it.
	require.NoError(t, s.k8s.Delete(ctx, claim(ns, "a", "", "")))
	assert.Equal(t, "10.11.0.1", s.address(t, ns, "c").Spec.Address)
	s.claimReady(t, ns, "c", metav1.ConditionTrue, capiv1beta2.ReasonReady)

	// A pool with addresses cannot go; once its claims are gone, it can.
	require.NoError(t, s.k8s.Delete(ctx, small))
	eventually(t, capiWait, "deletion refused while addresses exist", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(small), small); err != nil {
			return err
		}
		c := meta.FindStatusCondition(small.Status.Conditions, ipamv1alpha1.ConditionTypeSynced)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "IPAddresses still use the pool") {
			return fmt.Errorf("conditions %+v", small.Status.Conditions)
		}
		return nil
	})
	for _, n := range []string{"b", "c"} {
		require.NoError(t, s.k8s.Delete(ctx, claim(ns, n, "", "")))
	}
	eventually(t, capiWait, "pool gone", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(small), small); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	_, err := s.ipam.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE,
		Key: &ipamv1.Key{Name: translate.PoolID(controllers.DefaultOwner, ipamv1alpha1.KindInClusterIPPool, ns, "small")}})
	assert.Error(t, err, "the pool's network instance is gone from ipam-server")
}

func TestCAPIPoolEditsAndValidation(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "capi-edit")
	s.startControllers(t, s.cfg)
	ctx := context.Background()

	p := pool(ns, "edit", ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.13.0.10-10.13.0.20"}, Prefix: 24, Gateway: "10.13.0.1"})
	require.NoError(t, s.k8s.Create(ctx, p))
	s.poolReady(t, p, ipamv1alpha1.IPAddressStatusSummary{Total: 11, Free: 11})
	require.NoError(t, s.k8s.Create(ctx, claim(ns, "e1", ipamv1alpha1.KindInClusterIPPool, "edit")))
	assert.Equal(t, "10.13.0.10", s.address(t, ns, "e1").Spec.Address)

	// Dropping the allocated address is refused by ipam-server: the pool
	// says why and the server keeps the pool as it was.
	s.update(t, p, func() { p.Spec.Addresses = []string{"10.13.0.11-10.13.0.20"} })
	eventually(t, capiWait, "edit refused", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, ipamv1alpha1.ConditionTypeReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != p.Generation || !strings.Contains(c.Message, "10.13.0.10") {
			return fmt.Errorf("conditions %+v", p.Status.Conditions)
		}
		return nil
	})
	// Growing it is fine, allocations stay.
	s.update(t, p, func() { p.Spec.Addresses = []string{"10.13.0.10-10.13.0.30"} })
	s.poolReady(t, p, ipamv1alpha1.IPAddressStatusSummary{Total: 21, Used: 1, Free: 20})

	// What the upstream webhooks refuse, the CRD's validation refuses.
	for name, spec := range map[string]ipamv1alpha1.InClusterIPPoolSpec{
		"mixed families":    {Addresses: []string{"10.14.0.0/28", "fd00::/120"}, Prefix: 24},
		"gateway family":    {Addresses: []string{"10.14.0.0/28"}, Prefix: 24, Gateway: "fd00::1"},
		"bad entry":         {Addresses: []string{"10.14.0.300"}, Prefix: 24},
		"v4 prefix":         {Addresses: []string{"10.14.0.0/28"}, Prefix: 33},
		"no addresses":      {Prefix: 24},
		"excluded family":   {Addresses: []string{"10.14.0.0/28"}, Prefix: 24, ExcludedAddresses: []string{"fd00::1"}},
		"gateway not an IP": {Addresses: []string{"10.14.0.0/28"}, Prefix: 24, Gateway: "router"},
	} {
		err := s.k8s.Create(ctx, pool(ns, "bad-"+strings.ReplaceAll(name, " ", "-"), spec))
		assert.True(t, apierrors.IsInvalid(err), "%s: want Invalid, got %v", name, err)
	}
	// What CEL cannot afford to check, the controller refuses, naming the
	// field; nothing reaches ipam-server.
	for name, tc := range map[string]struct {
		spec ipamv1alpha1.InClusterIPPoolSpec
		msg  string
	}{
		"gateway-outside": {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.14.0.0/28", "10.14.1.0/28"}, Prefix: 24, Gateway: "10.14.0.1"},
			"spec.gateway: 10.14.0.1 is not in the network 10.14.1.0/24 of spec.addresses[1]"},
		"reversed-range": {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.14.2.9-10.14.2.1"}, Prefix: 24},
			"spec.addresses[0]"},
	} {
		bad := pool(ns, name, tc.spec)
		require.NoError(t, s.k8s.Create(ctx, bad))
		eventually(t, capiWait, name+" refused", func() error {
			if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
				return err
			}
			c := meta.FindStatusCondition(bad.Status.Conditions, ipamv1alpha1.ConditionTypeReady)
			if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "InClusterIPPool "+ns+"/"+name+": "+tc.msg) {
				return fmt.Errorf("conditions %+v", bad.Status.Conditions)
			}
			return nil
		})
	}
}

func TestCAPIGlobalPoolAndNephioPools(t *testing.T) {
	s := testSuite(t)
	ns1, ns2 := s.namespace(t, "capi-global-1"), s.namespace(t, "capi-global-2")
	s.startControllers(t, s.cfg)
	ctx := context.Background()

	g := &ipamv1alpha1.GlobalInClusterIPPool{ObjectMeta: metav1.ObjectMeta{Name: "global-v6"},
		Spec: ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"fd00:10::10-fd00:10::ff"}, Prefix: 64, Gateway: "fd00:10::1"}}
	require.NoError(t, s.k8s.Create(ctx, g))
	s.poolReady(t, g, ipamv1alpha1.IPAddressStatusSummary{Total: 240, Free: 240})
	for _, ns := range []string{ns1, ns2} {
		require.NoError(t, s.k8s.Create(ctx, claim(ns, "same", ipamv1alpha1.KindGlobalInClusterIPPool, "global-v6")))
	}
	a1, a2 := s.address(t, ns1, "same"), s.address(t, ns2, "same")
	assert.NotEqual(t, a1.Spec.Address, a2.Spec.Address, "one claim name in two namespaces: two addresses")
	assert.ElementsMatch(t, []string{"fd00:10::10", "fd00:10::11"}, []string{a1.Spec.Address, a2.Spec.Address})
	assert.Equal(t, "fd00:10::1", a1.Spec.Gateway)
	assert.Equal(t, int32(64), ptr.Deref(a1.Spec.Prefix, 0))

	// An ipam.nephio.org IPPrefix or NetworkInstance is a pool too.
	for _, o := range []client.Object{
		&ipamv1alpha1.NetworkInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns1, Name: "capi-vrf"},
			Spec: ipamv1alpha1.NetworkInstanceSpec{Prefixes: []ipamv1alpha1.NetworkInstancePrefix{{Prefix: "10.20.0.0/16"}}}},
		&ipamv1alpha1.IPPrefix{ObjectMeta: metav1.ObjectMeta{Namespace: ns1, Name: "capi-net", Labels: map[string]string{ipamv1alpha1.LabelGateway: "true"}},
			Spec: ipamv1alpha1.IPPrefixSpec{NetworkInstance: "capi-vrf", Network: "nodes", Prefix: "10.20.1.1/24"}},
	} {
		require.NoError(t, s.k8s.Create(ctx, o))
	}
	require.NoError(t, s.k8s.Create(ctx, claim(ns1, "via-prefix", ipamv1alpha1.KindIPPrefix, "capi-net")))
	require.NoError(t, s.k8s.Create(ctx, claim(ns1, "via-vrf", ipamv1alpha1.KindNetworkInstance, "capi-vrf")))
	p := s.address(t, ns1, "via-prefix")
	v := s.address(t, ns1, "via-vrf")
	assert.ElementsMatch(t, []string{"10.20.1.2", "10.20.1.3"}, []string{p.Spec.Address, v.Spec.Address})
	assert.Equal(t, "10.20.1.1", p.Spec.Gateway)
	assert.Equal(t, int32(24), ptr.Deref(p.Spec.Prefix, 0))

	// A pool that does not exist: the claim waits, PoolNotReady.
	require.NoError(t, s.k8s.Create(ctx, claim(ns1, "nowhere", ipamv1alpha1.KindInClusterIPPool, "missing")))
	c := s.claimReady(t, ns1, "nowhere", metav1.ConditionFalse, capiv1beta2.ReasonPoolNotReady)
	assert.Contains(t, meta.FindStatusCondition(c.Status.Conditions, capiv1beta2.ConditionReady).Message, "InClusterIPPool capi-global-1/missing does not exist")

	// A claim of another provider's pool is not ours to touch.
	other := claim(ns1, "foreign", "InClusterIPPool", "x")
	other.Spec.PoolRef.APIGroup = "ipam.cluster.x-k8s.io"
	require.NoError(t, s.k8s.Create(ctx, other))
	time.Sleep(time.Second)
	require.NoError(t, s.k8s.Get(ctx, client.ObjectKeyFromObject(other), other))
	assert.Empty(t, other.Finalizers)
	assert.Empty(t, other.Status.Conditions)

	// A claim written at v1beta1 (older infrastructure providers) is served.
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ipam.cluster.x-k8s.io/v1beta1", "kind": "IPAddressClaim",
		"metadata": map[string]any{"namespace": ns2, "name": "old"},
		"spec":     map[string]any{"poolRef": map[string]any{"apiGroup": ipamv1alpha1.Group, "kind": ipamv1alpha1.KindGlobalInClusterIPPool, "name": "global-v6"}},
	}}
	require.NoError(t, s.k8s.Create(ctx, u))
	assert.Equal(t, "fd00:10::12", s.address(t, ns2, "old").Spec.Address)
}

func TestCAPIPausedCluster(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "capi-paused")
	run := s.startControllers(t, s.cfg)
	ctx := context.Background()

	p := pool(ns, "p", ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.16.0.10-10.16.0.20"}, Prefix: 24})
	require.NoError(t, s.k8s.Create(ctx, p))
	s.poolReady(t, p, ipamv1alpha1.IPAddressStatusSummary{Total: 11, Free: 11})
	cluster := &capicorev1beta2.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl"}, Spec: capicorev1beta2.ClusterSpec{Paused: ptr.To(true)}}
	require.NoError(t, s.k8s.Create(ctx, cluster))

	c := claim(ns, "node-0", ipamv1alpha1.KindInClusterIPPool, "p")
	c.Spec.ClusterName = "wl"
	require.NoError(t, s.k8s.Create(ctx, c))
	annotated := claim(ns, "node-1", ipamv1alpha1.KindInClusterIPPool, "p")
	annotated.Annotations = map[string]string{capicorev1beta2.PausedAnnotation: ""}
	require.NoError(t, s.k8s.Create(ctx, annotated))
	for _, n := range []string{"node-0", "node-1"} {
		key := types.NamespacedName{Namespace: ns, Name: n}
		eventually(t, capiWait, "claim reconciled", func() error {
			if run.reconciles.count(key) == 0 {
				return fmt.Errorf("not yet")
			}
			return nil
		})
		var a capiv1beta2.IPAddress
		assert.True(t, apierrors.IsNotFound(s.k8s.Get(ctx, key, &a)), "%s: nothing allocated while paused", n)
		assert.Zero(t, run.calls.count("Allocate "+ns+"/"+n))
	}

	s.update(t, cluster, func() { cluster.Spec.Paused = ptr.To(false) })
	assert.Equal(t, "10.16.0.10", s.address(t, ns, "node-0").Spec.Address)
	s.update(t, annotated, func() { delete(annotated.Annotations, capicorev1beta2.PausedAnnotation) })
	assert.Equal(t, "10.16.0.11", s.address(t, ns, "node-1").Spec.Address)

	// A cluster being deleted gets no new address.
	s.update(t, cluster, func() { cluster.Finalizers = []string{"test.ipam.nephio.org/hold"} })
	require.NoError(t, s.k8s.Delete(ctx, cluster))
	late := claim(ns, "node-2", ipamv1alpha1.KindInClusterIPPool, "p")
	late.Spec.ClusterName = "wl"
	require.NoError(t, s.k8s.Create(ctx, late))
	eventually(t, capiWait, "claim reconciled", func() error {
		if run.reconciles.count(client.ObjectKeyFromObject(late)) == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	assert.Zero(t, run.calls.count("Allocate "+ns+"/node-2"), "no address for a cluster being deleted")
	s.update(t, cluster, func() { cluster.Finalizers = nil })
}

func TestCAPIHundredClaimsAtOnce(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "capi-hundred")
	s.startControllers(t, s.cfg)
	ctx := context.Background()

	p := pool(ns, "big", ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.17.0.0/24"}, Prefix: 24, Gateway: "10.17.0.1"})
	require.NoError(t, s.k8s.Create(ctx, p))
	s.poolReady(t, p, ipamv1alpha1.IPAddressStatusSummary{Total: 253, Free: 253})
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.k8s.Create(ctx, claim(ns, fmt.Sprintf("c%03d", i), ipamv1alpha1.KindInClusterIPPool, "big"))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	seen := map[string]string{}
	for i := range n {
		a := s.address(t, ns, fmt.Sprintf("c%03d", i))
		if other, dup := seen[a.Spec.Address]; dup {
			t.Errorf("%s given to %s and %s", a.Spec.Address, other, a.Name)
		}
		seen[a.Spec.Address] = a.Name
		assert.NotEqual(t, "10.17.0.1", a.Spec.Address, "the gateway is never allocated")
	}
	s.poolReady(t, p, ipamv1alpha1.IPAddressStatusSummary{Total: 253, Used: n, Free: 253 - n})
}

// moveTarget is the management cluster of a clusterctl move: a second
// API server with the CRDs, a fresh ipam-server and controllers on them.
type moveTarget struct {
	k8s        client.Client
	cfg        *rest.Config
	kubeconfig string
	srv        *ipamServer
}

// newMoveTarget starts a moveTarget for the test, whose controllers talk
// to a fresh ipam-server, or to srv when one is given.
func (s *suite) newMoveTarget(t *testing.T, srv ...*ipamServer) *moveTarget {
	t.Helper()
	env := &envtest.Environment{CRDDirectoryPaths: []string{crdDir, capiCRDDir, metal3CRDDir, nvidiaCRDDir}, ErrorIfCRDPathMissing: true, Scheme: s.k8s.Scheme()}
	cfg, err := env.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	k, err := client.New(cfg, client.Options{Scheme: s.k8s.Scheme()})
	require.NoError(t, err)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, env.KubeConfig, 0o600))
	if len(srv) == 0 {
		fresh, err := startServer("127.0.0.1:0", filepath.Join(t.TempDir(), "ipam-data"), s.logFile)
		require.NoError(t, err)
		t.Cleanup(func() { _ = fresh.stop() })
		srv = append(srv, fresh)
	}
	s.startControllers(t, cfg, func(c *controllers.Config) { c.Server = srv[0].addr })
	return &moveTarget{k8s: k, cfg: cfg, kubeconfig: kubeconfig, srv: srv[0]}
}
