package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capicorev1beta2 "github.com/nephio-project/ipam/api/capi/core/v1beta2"
	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/service/fronts/controllers"
)

// m3 parses a Metal3 object written as in Metal3's documents.
func m3[T client.Object](t *testing.T, ns, doc string, into T) T {
	t.Helper()
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), into))
	into.SetNamespace(ns)
	return into
}

// m3Claim makes an IPClaim of pool.
func m3Claim(ns, name, pool string) *metal3v1alpha1.IPClaim {
	c := &metal3v1alpha1.IPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Spec.Pool.Name = pool
	return c
}

// m3Served waits until claim ns/name points at an IPAddress and returns it.
func (s *suite) m3Served(t *testing.T, c client.Client, ns, name string) *metal3v1alpha1.IPAddress {
	t.Helper()
	var claim metal3v1alpha1.IPClaim
	eventually(t, capiWait, "IPClaim "+name+" served", func() error {
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &claim); err != nil {
			return err
		}
		if claim.Status.Address == nil {
			return fmt.Errorf("error %q", ptr.Deref(claim.Status.ErrorMessage, ""))
		}
		return nil
	})
	var a metal3v1alpha1.IPAddress
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: claim.Status.Address.Name}, &a))
	return &a
}

// m3Error waits until claim ns/name has status.errorMessage containing want.
func (s *suite) m3Error(t *testing.T, ns, name, want string) {
	t.Helper()
	eventually(t, capiWait, "IPClaim "+name+" error "+want, func() error {
		var claim metal3v1alpha1.IPClaim
		if err := s.k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &claim); err != nil {
			return err
		}
		if claim.Status.ErrorMessage == nil || !strings.Contains(*claim.Status.ErrorMessage, want) {
			return fmt.Errorf("status %+v", claim.Status)
		}
		return nil
	})
}

// The blog's pool ("Introducing the Metal3 IP Address Manager").
const blogPool = `apiVersion: ipam.metal3.io/v1alpha1
kind: IPPool
metadata:
  name: pool1
spec:
  clusterName: cluster1
  pools:
    - start: 192.168.0.10
      end: 192.168.0.30
      prefix: 25
      gateway: 192.168.0.1
    - subnet: 192.168.1.1/26
    - subnet: 192.168.1.128/25
  prefix: 24
  gateway: 192.168.1.1
  preAllocations:
    claim2: 192.168.0.12
`

// TestMetal3BlogExample reproduces the blog's example: with 192.168.0.10
// and .11 taken out of the pool by hand (IPAddresses without a claim,
// Metal3's way of keeping addresses out), claim1 gets pool1-192-168-0-13
// while claim2 holds its pre-allocation .12, and the pool's status lists
// both. The prefix is the entry's 25 (Metal3's code; the blog's 24 is a
// slip of its text).
func TestMetal3BlogExample(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "metal3-blog")
	s.startControllers(t, s.cfg)
	ctx := context.Background()

	pool := m3(t, ns, blogPool, &metal3v1alpha1.IPPool{})
	require.NoError(t, s.k8s.Create(ctx, pool))
	for _, ip := range []string{"192.168.0.10", "192.168.0.11"} {
		a := &metal3v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken-" + ip}}
		a.Spec.Pool.Name, a.Spec.Address = "pool1", metal3v1alpha1.IPAddressStr(ip)
		require.NoError(t, s.k8s.Create(ctx, a))
	}
	for _, ip := range []string{"192.168.0.10", "192.168.0.11"} {
		eventually(t, capiWait, "ipam-server holds "+ip+" taken by hand", func() error {
			_, err := s.ipam.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: &ipamv1.Key{
				Owner: translate.Metal3PoolID(controllers.DefaultOwner, ns, "pool1"), Namespace: ns, Name: "ipaddress.taken-" + ip}})
			return err
		})
	}
	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "claim2", "pool1")))
	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "claim1", "pool1")))
	c2 := s.m3Served(t, s.k8s, ns, "claim2")
	c1 := s.m3Served(t, s.k8s, ns, "claim1")
	assert.Equal(t, "pool1-192-168-0-12", c2.Name)
	assert.Equal(t, "pool1-192-168-0-13", c1.Name)
	assert.Equal(t, metal3v1alpha1.IPAddressStr("192.168.0.13"), c1.Spec.Address)
	assert.Equal(t, 25, c1.Spec.Prefix)
	assert.Equal(t, "192.168.0.1", string(ptr.Deref(c1.Spec.Gateway, "")))
	assert.Equal(t, corev1.ObjectReference{Name: "pool1", Namespace: ns}, c1.Spec.Pool)
	assert.Equal(t, corev1.ObjectReference{Name: "claim1", Namespace: ns}, c1.Spec.Claim)
	require.Len(t, c1.OwnerReferences, 2)
	assert.Equal(t, []string{"IPPool", "IPClaim"}, []string{c1.OwnerReferences[0].Kind, c1.OwnerReferences[1].Kind})
	assert.Contains(t, c1.Finalizers, metal3v1alpha1.IPAddressFinalizer)
	eventually(t, capiWait, "status.indexes", func() error {
		var p metal3v1alpha1.IPPool
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(pool), &p); err != nil {
			return err
		}
		want := map[string]metal3v1alpha1.IPAddressStr{"claim1": "192.168.0.13", "claim2": "192.168.0.12"}
		if fmt.Sprint(p.Status.Allocations) != fmt.Sprint(want) || p.Status.LastUpdated == nil {
			return fmt.Errorf("status %+v", p.Status)
		}
		return nil
	})

	out := s.kubectl(t, "get", "ippools.ipam.metal3.io,ipclaims.ipam.metal3.io,ipaddresses.ipam.metal3.io", "-n", ns)
	t.Logf("kubectl get ippools,ipclaims,ipaddresses (ipam.metal3.io):\n%s", out)
	assert.Contains(t, out, "pool1-192-168-0-13")

	// The next claims fill the first entry, then the subnets: after .30
	// comes 192.168.1.2 (the subnet written 192.168.1.1/26 starts after
	// .1), with the pool's prefix and gateway.
	var last *metal3v1alpha1.IPAddress
	for i := range 18 { // .14 to .30 (17), then 192.168.1.2
		name := fmt.Sprintf("fill-%02d", i)
		require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, name, "pool1")))
		last = s.m3Served(t, s.k8s, ns, name)
	}
	assert.Equal(t, "pool1-192-168-1-2", last.Name)
	assert.Equal(t, 24, last.Spec.Prefix)
	assert.Equal(t, "192.168.1.1", string(ptr.Deref(last.Spec.Gateway, "")))

	// Deleting a claim releases its address and deletes its IPAddress.
	require.NoError(t, s.k8s.Delete(ctx, m3Claim(ns, "claim1", "")))
	eventually(t, capiWait, "claim1's IPAddress gone", func() error {
		var a metal3v1alpha1.IPAddress
		if err := s.k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pool1-192-168-0-13"}, &a); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "again", "pool1")))
	assert.Equal(t, "pool1-192-168-0-13", s.m3Served(t, s.k8s, ns, "again").Name)
}

// The README's pool (the Metal3 IP Address Manager's README).
const readmePool = `apiVersion: ipam.metal3.io/v1alpha1
kind: IPPool
metadata:
  name: pool1
  namespace: default
spec:
  clusterName: cluster1
  namePrefix: test1-prov
  pools:
    - start: 192.168.0.10
      end: 192.168.0.30
      prefix: 25
      gateway: 192.168.0.1
    - subnet: 192.168.1.1/26
    - subnet: 192.168.1.128/25
  prefix: 24
  gateway: 192.168.1.1
  preAllocations:
    claim1: 192.168.0.12
`

// TestMetal3ReadmeExample: the README's pool names addresses with its
// namePrefix; the claim with the ipAddress annotation gets that address,
// with its entry's prefix 25 and gateway (the README prints 24);
// a taken one is "Requested IP not available"; the pre-allocated claim1
// gets .12.
func TestMetal3ReadmeExample(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "metal3-readme")
	s.startControllers(t, s.cfg)
	ctx := context.Background()

	require.NoError(t, s.k8s.Create(ctx, m3(t, ns, readmePool, &metal3v1alpha1.IPPool{})))
	c := m3Claim(ns, "test1-controlplane-template-0-pool1", "pool1")
	c.Annotations = map[string]string{metal3v1alpha1.AnnotationIPAddress: "192.168.0.13"}
	require.NoError(t, s.k8s.Create(ctx, c))
	a := s.m3Served(t, s.k8s, ns, c.Name)
	assert.Equal(t, "test1-prov-192-168-0-13", a.Name)
	assert.Equal(t, metal3v1alpha1.IPAddressStr("192.168.0.13"), a.Spec.Address)
	assert.Equal(t, 25, a.Spec.Prefix, "the entry's prefix, not the pool's 24 that Metal3's example prints")
	assert.Equal(t, "192.168.0.1", string(ptr.Deref(a.Spec.Gateway, "")))

	taken := m3Claim(ns, "wants-13", "pool1")
	taken.Annotations = map[string]string{metal3v1alpha1.AnnotationIPAddress: "192.168.0.13"}
	require.NoError(t, s.k8s.Create(ctx, taken))
	s.m3Error(t, ns, "wants-13", metal3v1alpha1.ErrRequestedNotAvailable)

	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "claim1", "pool1")))
	assert.Equal(t, "test1-prov-192-168-0-12", s.m3Served(t, s.k8s, ns, "claim1").Name)
	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "other", "pool1")))
	assert.Equal(t, "test1-prov-192-168-0-10", s.m3Served(t, s.k8s, ns, "other").Name)

	// namePrefix is immutable.
	var p metal3v1alpha1.IPPool
	require.NoError(t, s.k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pool1"}, &p))
	p.Spec.NamePrefix = "renamed"
	err := s.k8s.Update(ctx, &p)
	assert.True(t, apierrors.IsInvalid(err), "namePrefix change: %v", err)

	// Shrinking an entry below an allocated address is refused: the pool
	// says so and ipam-server keeps it as it was.
	end := metal3v1alpha1.IPAddressStr("192.168.0.12")
	s.update(t, &p, func() { p.Spec.Pools[0].End = &end })
	eventually(t, capiWait, "shrink refused", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(&p), &p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, "Ready")
		if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != p.Generation || !strings.Contains(c.Message, "192.168.0.13") {
			return fmt.Errorf("conditions %+v", p.Status.Conditions)
		}
		return nil
	})
}

// TestMetal3ExhaustionAndBounds: a full pool is "Exhausted IP Pools" and
// completes after a release; a pre-allocation outside every entry is
// "Pre-allocated IP out of bounds"; IPv6 addresses are named with dashes.
func TestMetal3ExhaustionAndBounds(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "metal3-full")
	s.startControllers(t, s.cfg)
	ctx := context.Background()

	require.NoError(t, s.k8s.Create(ctx, m3(t, ns, `metadata: {name: tiny}
spec:
  pools: [{start: 10.60.0.1, end: 10.60.0.2}]
  prefix: 24
  preAllocations: {outside: 10.61.0.1}
`, &metal3v1alpha1.IPPool{})))
	for _, n := range []string{"a", "b"} {
		require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, n, "tiny")))
	}
	got := map[string]bool{}
	for _, n := range []string{"a", "b"} {
		got[string(s.m3Served(t, s.k8s, ns, n).Spec.Address)] = true
	}
	assert.Equal(t, map[string]bool{"10.60.0.1": true, "10.60.0.2": true}, got)
	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "c", "tiny")))
	s.m3Error(t, ns, "c", metal3v1alpha1.ErrExhausted)
	require.NoError(t, s.k8s.Delete(ctx, m3Claim(ns, "a", "")))
	s.m3Served(t, s.k8s, ns, "c")

	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "outside", "tiny")))
	s.m3Error(t, ns, "outside", metal3v1alpha1.ErrPreAllocatedOutOfBounds)

	require.NoError(t, s.k8s.Create(ctx, m3(t, ns, `metadata: {name: v6}
spec:
  pools:
    - start: 2001:0db8:85a3:0000:0000:8a2e::10
      end: 2001:0db8:85a3:0000:0000:8a2e:ffff:fff0
      prefix: 96
    - subnet: 2001:0db8:85a3:0000:0000:8a2d::/96
  prefix: 96
  gateway: 2001:0db8:85a3:0000:0000:8a2d::1
`, &metal3v1alpha1.IPPool{})))
	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "v6-claim", "v6")))
	a := s.m3Served(t, s.k8s, ns, "v6-claim")
	assert.Equal(t, "v6-2001-db8-85a3--8a2e-0-10", a.Name)
	assert.Equal(t, 96, a.Spec.Prefix)
}

// TestMetal3CAPIClaimAndMove: a Cluster API claim on a Metal3 pool gets
// a CAPI IPAddress; a paused cluster's pool serves nothing; after a move
// to a second API server with a fresh ipam-server the IPAddresses are
// adopted and a new claim gets none of their addresses.
func TestMetal3CAPIClaimAndMove(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "metal3-move")
	run := s.startControllers(t, s.cfg)
	ctx := context.Background()

	poolDoc := `metadata: {name: nodes}
spec:
  clusterName: wl
  pools: [{start: 10.70.0.10, end: 10.70.0.30, gateway: 10.70.0.1}]
  prefix: 24
`
	cluster := &capicorev1beta2.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl"}, Spec: capicorev1beta2.ClusterSpec{Paused: ptr.To(true)}}
	require.NoError(t, s.k8s.Create(ctx, cluster))
	require.NoError(t, s.k8s.Create(ctx, m3(t, ns, poolDoc, &metal3v1alpha1.IPPool{})))
	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "m0", "nodes")))
	eventually(t, capiWait, "paused claim reconciled", func() error {
		if run.reconciles.count(types.NamespacedName{Namespace: ns, Name: "m0"}) == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	assert.Zero(t, run.calls.count("Allocate "+ns+"/m0"), "nothing allocated while the pool's cluster is paused")
	s.update(t, cluster, func() { cluster.Spec.Paused = ptr.To(false) })
	moved := []*metal3v1alpha1.IPAddress{s.m3Served(t, s.k8s, ns, "m0")}
	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "m1", "nodes")))
	moved = append(moved, s.m3Served(t, s.k8s, ns, "m1"))
	assert.Equal(t, []metal3v1alpha1.IPAddressStr{"10.70.0.10", "10.70.0.11"}, []metal3v1alpha1.IPAddressStr{moved[0].Spec.Address, moved[1].Spec.Address})

	// A Cluster API claim on the Metal3 pool.
	require.NoError(t, s.k8s.Create(ctx, &capiv1beta2.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "capi-0"},
		Spec: capiv1beta2.IPAddressClaimSpec{PoolRef: capiv1beta2.IPPoolReference{APIGroup: metal3v1alpha1.Group, Kind: metal3v1alpha1.KindIPPool, Name: "nodes"}}}))
	ca := s.address(t, ns, "capi-0")
	assert.Equal(t, "10.70.0.12", ca.Spec.Address)
	assert.Equal(t, int32(24), ptr.Deref(ca.Spec.Prefix, 0))
	assert.Equal(t, "10.70.0.1", ca.Spec.Gateway)

	// clusterctl move: pause, copy pool, claims and IPAddresses to a
	// second API server whose controllers use a fresh ipam-server.
	s.update(t, cluster, func() { cluster.Spec.Paused = ptr.To(true) })
	k2 := s.newMoveTarget(t).k8s
	require.NoError(t, k2.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	c2 := &capicorev1beta2.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl"}, Spec: capicorev1beta2.ClusterSpec{Paused: ptr.To(true)}}
	require.NoError(t, k2.Create(ctx, c2))
	p2 := m3(t, ns, poolDoc, &metal3v1alpha1.IPPool{})
	require.NoError(t, k2.Create(ctx, p2))
	for _, a := range moved {
		cl := m3Claim(ns, a.Spec.Claim.Name, "nodes")
		cl.Finalizers = []string{metal3v1alpha1.IPClaimFinalizer}
		require.NoError(t, k2.Create(ctx, cl))
		cp := &metal3v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.Name, Finalizers: a.Finalizers,
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: metal3v1alpha1.GroupVersion.String(), Kind: metal3v1alpha1.KindIPPool, Name: "nodes", UID: p2.UID},
				{APIVersion: metal3v1alpha1.GroupVersion.String(), Kind: metal3v1alpha1.KindIPClaim, Name: cl.Name, UID: cl.UID}}},
			Spec: a.Spec}
		require.NoError(t, k2.Create(ctx, cp))
	}
	var cl2 capicorev1beta2.Cluster
	require.NoError(t, k2.Get(ctx, client.ObjectKeyFromObject(c2), &cl2))
	cl2.Spec.Paused = ptr.To(false)
	require.NoError(t, k2.Update(ctx, &cl2))
	require.NoError(t, k2.Create(ctx, m3Claim(ns, "m2", "nodes")))
	fresh := s.m3Served(t, k2, ns, "m2")
	assert.Equal(t, metal3v1alpha1.IPAddressStr("10.70.0.12"), fresh.Spec.Address, "after the moved .10 and .11 (the CAPI claim's .12 was not moved)")
	for _, a := range moved {
		got := s.m3Served(t, k2, ns, a.Spec.Claim.Name)
		assert.Equal(t, a.Name, got.Name, "moved claim keeps its IPAddress")
	}
}
