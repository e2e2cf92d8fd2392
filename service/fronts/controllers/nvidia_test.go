package controllers_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/service/fronts/controllers"
)

// node makes a node with labels.
func (s *suite) node(t *testing.T, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	require.NoError(t, s.k8s.Create(context.Background(), n))
	t.Cleanup(func() { _ = s.k8s.Delete(context.Background(), n) })
	return n
}

// nvAllocations waits until the pool's status.allocations equal want
// (node -> start-end) and returns the pool.
func (s *suite) nvAllocations(t *testing.T, pool *nvv1alpha1.IPPool, want map[string]string) *nvv1alpha1.IPPool {
	t.Helper()
	eventually(t, capiWait, "IPPool "+pool.Name+" allocations", func() error {
		if err := s.k8s.Get(context.Background(), client.ObjectKeyFromObject(pool), pool); err != nil {
			return err
		}
		got := map[string]string{}
		for _, a := range pool.Status.Allocations {
			got[a.NodeName] = a.StartIP + "-" + a.EndIP
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("allocations %v", got)
		}
		return nil
	})
	return pool
}

// The NVIDIA document's example pool.
const nvDocPool = `metadata: {name: pool1}
spec:
  subnet: 192.168.0.0/16
  perNodeBlockSize: 24
  gateway: 192.168.0.1
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions:
        - key: kubernetes.io/role
          operator: In
          values:
            - worker
`

// TestNVIDIADocExample reproduces the NVIDIA IPAM document's example:
// four worker nodes get host-a .1-.24, host-b .25-.48, host-c .49-.72 and
// k8s-master .73-.96 (the gateway .1 inside the first block, as NVIDIA's
// are). A node that stops matching gives its block back, the next node
// gets the lowest free block, and the blocks survive a controller
// restart; a node-local plugin reads its blocks with one List call.
func TestNVIDIADocExample(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "nvidia-doc")
	run := s.startControllers(t, s.cfg)
	ctx := context.Background()

	worker := map[string]string{"kubernetes.io/role": "worker"}
	for _, n := range []string{"k8s-master", "host-c", "host-a", "host-b"} {
		s.node(t, n, worker)
	}
	s.node(t, "host-other", map[string]string{"kubernetes.io/role": "storage"})
	pool := m3(t, ns, nvDocPool, &nvv1alpha1.IPPool{})
	require.NoError(t, s.k8s.Create(ctx, pool))
	doc := map[string]string{
		"host-a":     "192.168.0.1-192.168.0.24",
		"host-b":     "192.168.0.25-192.168.0.48",
		"host-c":     "192.168.0.49-192.168.0.72",
		"k8s-master": "192.168.0.73-192.168.0.96",
	}
	s.nvAllocations(t, pool, doc)
	out := s.kubectl(t, "get", "ippools.nv-ipam.nvidia.com", "-n", ns, "-o",
		`jsonpath={range .items[*]}{.metadata.name}{"\n"} {range .status.allocations[*]}{"\t"}{.nodeName} => Start IP: {.startIP} End IP: {.endIP}{"\n"}{end}{"\n"}{end}`)
	t.Logf("the document's debugging command:\n%s", out)
	assert.Contains(t, out, "host-a => Start IP: 192.168.0.1 End IP: 192.168.0.24")

	// The node-side read path: one call, the node's blocks.
	resp, err := s.ipam.List(ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION,
		Owner: translate.NVIDIAOwner(controllers.DefaultOwner), Labels: map[string]string{nvv1alpha1.LabelNode: "host-b"}})
	require.NoError(t, err)
	require.Len(t, resp.GetObjects(), 1)
	assert.Equal(t, "192.168.0.25/16", resp.GetObjects()[0].GetAllocation().GetResult().GetPrefix())
	assert.Equal(t, "192.168.0.48", resp.GetObjects()[0].GetAllocation().GetResult().GetLast())

	// host-b stops matching: its block goes back; host-d gets it.
	var hb corev1.Node
	require.NoError(t, s.k8s.Get(ctx, client.ObjectKey{Name: "host-b"}, &hb))
	s.update(t, &hb, func() { hb.Labels["kubernetes.io/role"] = "storage" })
	s.node(t, "host-d", worker)
	want := map[string]string{"host-a": doc["host-a"], "host-c": doc["host-c"], "k8s-master": doc["k8s-master"], "host-d": doc["host-b"]}
	s.nvAllocations(t, pool, want)

	// A deleted node gives its block back.
	require.NoError(t, s.k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "host-c"}}))
	delete(want, "host-c")
	s.nvAllocations(t, pool, want)

	// A restart keeps every block; a pool edit that keeps them valid too.
	run.stop()
	s.startControllers(t, s.cfg)
	s.update(t, pool, func() { pool.Spec.Routes = []nvv1alpha1.Route{{Dst: "10.0.0.0/8"}} })
	s.nvAllocations(t, pool, want)
}

// TestNVIDIAExhaustionAndScale: a full pool turns Ready False with a
// Warning event; 200 nodes at once get 200 blocks that do not overlap.
func TestNVIDIAExhaustionAndScale(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "nvidia-scale")
	s.startControllers(t, s.cfg)
	ctx := context.Background()

	// What NVIDIA's webhook refuses: the CRD (CEL) or the controller.
	for _, bad := range []string{
		"metadata: {name: tiny-block}\nspec: {subnet: 10.79.0.0/24, perNodeBlockSize: 1}\n",
		"metadata: {name: far-gateway}\nspec: {subnet: 10.79.0.0/24, perNodeBlockSize: 4, gateway: 10.78.0.1}\n",
		"metadata: {name: no-subnet}\nspec: {subnet: 10.79.0.0, perNodeBlockSize: 4}\n",
	} {
		err := s.k8s.Create(ctx, m3(t, ns, bad, &nvv1alpha1.IPPool{}))
		assert.True(t, apierrors.IsInvalid(err), "%s: %v", bad, err)
	}
	huge := m3(t, ns, "metadata: {name: huge-block}\nspec: {subnet: 10.79.0.0/24, perNodeBlockSize: 300}\n", &nvv1alpha1.IPPool{})
	require.NoError(t, s.k8s.Create(ctx, huge))
	eventually(t, capiWait, "block larger than the subnet refused", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(huge), huge); err != nil {
			return err
		}
		c := meta.FindStatusCondition(huge.Status.Conditions, "Ready")
		if c == nil || c.Status != metav1.ConditionFalse || c.Message != "IPPool "+ns+"/huge-block: spec.perNodeBlockSize: 300 does not fit in 10.79.0.0/24 (254 usable addresses)" {
			return fmt.Errorf("conditions %+v", huge.Status.Conditions)
		}
		return nil
	})

	small := m3(t, ns, `metadata: {name: small}
spec:
  subnet: 10.80.0.0/27
  perNodeBlockSize: 16
  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: nv-scale-small, operator: Exists}]}]}
`, &nvv1alpha1.IPPool{})
	require.NoError(t, s.k8s.Create(ctx, small))
	s.node(t, "small-a", map[string]string{"nv-scale-small": ""})
	s.node(t, "small-b", map[string]string{"nv-scale-small": ""})
	eventually(t, capiWait, "PoolExhausted", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(small), small); err != nil {
			return err
		}
		c := meta.FindStatusCondition(small.Status.Conditions, "Ready")
		if c == nil || c.Reason != nvv1alpha1.ReasonPoolExhausted || len(small.Status.Allocations) != 1 {
			return fmt.Errorf("status %+v", small.Status)
		}
		assert.Contains(t, c.Message, "small-b")
		return nil
	})
	eventually(t, capiWait, "Warning event", func() error {
		var evs corev1.EventList
		if err := s.k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == nvv1alpha1.ReasonPoolExhausted && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no PoolExhausted event among %d", len(evs.Items))
	})

	big := m3(t, ns, `metadata: {name: big}
spec:
  subnet: 10.81.0.0/16
  perNodeBlockSize: 8
  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: nv-scale, operator: In, values: ["yes"]}]}]}
`, &nvv1alpha1.IPPool{})
	require.NoError(t, s.k8s.Create(ctx, big))
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nd := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%03d", i), Labels: map[string]string{"nv-scale": "yes"}}}
			assert.NoError(t, s.k8s.Create(ctx, nd))
			t.Cleanup(func() { _ = s.k8s.Delete(context.Background(), nd) })
		}()
	}
	wg.Wait()
	eventually(t, capiWait, "200 blocks", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(big), big); err != nil {
			return err
		}
		if len(big.Status.Allocations) != n {
			return fmt.Errorf("%d allocations", len(big.Status.Allocations))
		}
		return nil
	})
	seen := map[netip.Addr]string{}
	for _, a := range big.Status.Allocations {
		start, end := netip.MustParseAddr(a.StartIP), netip.MustParseAddr(a.EndIP)
		for ip := start; !end.Less(ip); ip = ip.Next() {
			if other, dup := seen[ip]; dup {
				t.Fatalf("%s is in the blocks of %s and %s", ip, other, a.NodeName)
			}
			seen[ip] = a.NodeName
		}
	}
	assert.Len(t, seen, n*8)
}

// TestNVIDIACIDRPool: nodes get prefixes of perNodeNetworkPrefix, a
// static allocation first, with the gateway at gatewayIndex; a full pool
// is PoolExhausted; a static prefix outside the CIDR is refused.
func TestNVIDIACIDRPool(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "nvidia-cidr")
	s.startControllers(t, s.cfg)
	ctx := context.Background()

	for _, n := range []string{"cidr-a", "cidr-b", "cidr-c"} {
		s.node(t, n, map[string]string{"nv-cidr": "yes"})
	}
	pool := m3(t, ns, `metadata: {name: pods}
spec:
  cidr: 10.90.0.0/16
  perNodeNetworkPrefix: 24
  gatewayIndex: 1
  staticAllocations: [{nodeName: cidr-b, prefix: 10.90.0.0/24}]
  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: nv-cidr, operator: Exists}]}]}
`, &nvv1alpha1.CIDRPool{})
	require.NoError(t, s.k8s.Create(ctx, pool))
	want := "[{cidr-a 10.90.1.0/24 10.90.1.1} {cidr-b 10.90.0.0/24 10.90.0.1} {cidr-c 10.90.2.0/24 10.90.2.1}]"
	eventually(t, capiWait, "CIDRPool allocations", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return err
		}
		if got := fmt.Sprint(pool.Status.Allocations); got != want {
			return fmt.Errorf("allocations %s", got)
		}
		return nil
	})

	small := m3(t, ns, `metadata: {name: small}
spec:
  cidr: 10.91.0.0/23
  perNodeNetworkPrefix: 24
  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: nv-cidr, operator: Exists}]}]}
`, &nvv1alpha1.CIDRPool{})
	require.NoError(t, s.k8s.Create(ctx, small))
	eventually(t, capiWait, "CIDRPool exhausted", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(small), small); err != nil {
			return err
		}
		c := meta.FindStatusCondition(small.Status.Conditions, "Ready")
		if c == nil || c.Reason != nvv1alpha1.ReasonPoolExhausted || len(small.Status.Allocations) != 2 || c.Message != "no /24 prefix left for 1 node(s): cidr-c" {
			return fmt.Errorf("status %+v", small.Status)
		}
		return nil
	})

	bad := m3(t, ns, `metadata: {name: bad}
spec:
  cidr: 10.92.0.0/16
  perNodeNetworkPrefix: 24
  staticAllocations: [{nodeName: cidr-a, prefix: 10.93.0.0/24}]
`, &nvv1alpha1.CIDRPool{})
	require.NoError(t, s.k8s.Create(ctx, bad))
	eventually(t, capiWait, "static prefix outside refused", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
			return err
		}
		c := meta.FindStatusCondition(bad.Status.Conditions, "Ready")
		if c == nil || c.Status != metav1.ConditionFalse || c.Message != `CIDRPool `+ns+`/bad: spec.staticAllocations[0].prefix: "10.93.0.0/24" is not a /24 of 10.92.0.0/16` {
			return fmt.Errorf("conditions %+v", bad.Status.Conditions)
		}
		return nil
	})
}
