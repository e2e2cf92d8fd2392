package controllers_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	capicorev1beta2 "github.com/nephio-project/ipam/api/capi/core/v1beta2"
	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/service/fronts/controllers"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// capiDir is where `make clusterctl` builds Cluster API's clusterctl, with
// the CRD of clusterctl's provider inventory next to it.
func capiDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(servertest.ModuleRoot(t), "bin", "capi")
	for _, f := range []string{"clusterctl", "clusterctl-api.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Skipf("SKIPPED: %s is not built (run `make clusterctl`; make test does): %v", filepath.Join(dir, f), err)
		}
	}
	return dir
}

// clusterctl runs the real clusterctl with args and returns its output.
func clusterctl(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "clusterctl"), args...)
	cmd.Env = append(os.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME="+t.TempDir())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("clusterctl %s (%s):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out)
	require.NoError(t, err, "clusterctl %s", strings.Join(args, " "))
	return string(out)
}

// Versions of the providers in the test's clusterctl inventory.
const (
	coreProviderVersion = "v1.11.3"
	ipamProviderVersion = "v0.1.0"
)

// managementCluster makes the API server cfg points at look like one
// clusterctl init set up with Cluster API and this provider, as
// clusterctl's own tests do: the Cluster API CRDs carry the labels init
// puts on the core provider's components, clusterctl's inventory CRD is
// installed and holds the core and the IPAM provider.
func managementCluster(t *testing.T, dir string, cfg *rest.Config, k client.Client) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{"clusters.cluster.x-k8s.io", "ipaddressclaims.ipam.cluster.x-k8s.io", "ipaddresses.ipam.cluster.x-k8s.io"} {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		crd.SetName(name)
		require.NoError(t, k.Patch(ctx, crd, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"clusterctl.cluster.x-k8s.io":"","cluster.x-k8s.io/provider":"cluster-api"}}}`))))
	}
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join(dir, "clusterctl-api.yaml")}, ErrorIfPathMissing: true})
	require.NoError(t, err)
	for _, p := range []struct{ ns, name, providerName, typ, version string }{
		{"capi-system", "cluster-api", "cluster-api", "CoreProvider", coreProviderVersion},
		{"ipam-system", "ipam-nephio", "nephio", "IPAMProvider", ipamProviderVersion},
	} {
		ensureNamespace(t, k, p.ns)
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Provider",
			"metadata": map[string]any{"namespace": p.ns, "name": p.name, "labels": map[string]any{
				"clusterctl.cluster.x-k8s.io": "", "clusterctl.cluster.x-k8s.io/core": "inventory", "cluster.x-k8s.io/provider": p.name}},
			"providerName": p.providerName, "type": p.typ, "version": p.version,
		}}
		if err := k.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
}

// provisionedCluster creates a Cluster whose infrastructure and control
// plane are up, as clusterctl move requires, and returns it.
func provisionedCluster(t *testing.T, k client.Client, ns, name string) *capicorev1beta2.Cluster {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": capicorev1beta2.GroupVersion.String(), "kind": capicorev1beta2.KindCluster,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"clusterNetwork":       map[string]any{"pods": map[string]any{"cidrBlocks": []any{"192.168.0.0/16"}}},
			"controlPlaneEndpoint": map[string]any{"host": "wl.example", "port": int64(6443)},
		},
	}}
	require.NoError(t, k.Create(ctx, u))
	u.Object["status"] = map[string]any{
		"initialization": map[string]any{"infrastructureProvisioned": true, "controlPlaneInitialized": true},
		"conditions": []any{map[string]any{"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized",
			"message": "", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
	}
	require.NoError(t, k.Status().Update(ctx, u))
	var c capicorev1beta2.Cluster
	require.NoError(t, k.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &c))
	return &c
}

// ensureNamespace creates namespace ns unless it exists.
func ensureNamespace(t *testing.T, k client.Client, ns string) {
	t.Helper()
	err := k.Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// ownedByCluster is the owner reference an infrastructure provider puts on
// the claims of a cluster's machines (through its machines; here the
// Cluster itself), which clusterctl move follows.
func ownedByCluster(c *capicorev1beta2.Cluster) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: capicorev1beta2.GroupVersion.String(), Kind: capicorev1beta2.KindCluster,
		Name: c.Name, UID: c.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

// gone waits until none of objs exists on k.
func gone(t *testing.T, k client.Client, what string, objs ...client.Object) {
	t.Helper()
	eventually(t, capiWait, what+" gone", func() error {
		for _, o := range objs {
			if err := k.Get(context.Background(), client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s: %v", o, o.GetName(), err)
			}
		}
		return nil
	})
}

// TestCAPIMove runs the real clusterctl move of a namespace with a
// provisioned Cluster, an InClusterIPPool, three claims of the cluster and
// their IPAddresses, and a Metal3 pool and claim of the cluster, from the
// suite's API server to a second one whose controllers talk to a fresh
// ipam-server, or to the same one. clusterctl finds the pools by their
// CRDs' labels (the InClusterIPPool with the IPAddresses it owns, the
// Metal3 pool through its Cluster owner) and the claims through their
// owner; on the target the moved addresses are adopted as they are (or
// found held already), and a new claim gets none of them.
func TestCAPIMove(t *testing.T) {
	dir := capiDir(t)
	s := testSuite(t)
	s.startControllers(t, s.cfg)
	managementCluster(t, dir, s.cfg, s.k8s)
	for _, tc := range []struct {
		name, ns string
		shared   bool
	}{
		{"fresh ipam-server", "capi-move", false},
		{"same ipam-server", "capi-move-shared", true},
	} {
		t.Run(tc.name, func(t *testing.T) { s.testMove(t, dir, s.namespace(t, tc.ns), tc.shared) })
	}
}

// testMove is one move of TestCAPIMove from namespace ns; with shared, the
// target's controllers use the source's ipam-server.
func (s *suite) testMove(t *testing.T, dir, ns string, shared bool) {
	ctx := context.Background()

	cluster := provisionedCluster(t, s.k8s, ns, "wl")
	p := pool(ns, "move", ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.18.0.10-10.18.0.30"}, Prefix: 24, Gateway: "10.18.0.1"})
	require.NoError(t, s.k8s.Create(ctx, p))
	s.poolReady(t, p, ipamv1alpha1.IPAddressStatusSummary{Total: 21, Free: 21})
	var moved []*capiv1beta2.IPAddress
	for i := range 3 {
		c := claim(ns, fmt.Sprintf("node-%d", i), ipamv1alpha1.KindInClusterIPPool, "move")
		c.Spec.ClusterName, c.OwnerReferences = "wl", ownedByCluster(cluster)
		require.NoError(t, s.k8s.Create(ctx, c))
		moved = append(moved, s.address(t, ns, c.Name))
	}
	assert.Equal(t, []string{"10.18.0.10", "10.18.0.11", "10.18.0.12"}, []string{moved[0].Spec.Address, moved[1].Spec.Address, moved[2].Spec.Address})

	m3Pool := m3(t, ns, `metadata: {name: bmh}
spec:
  clusterName: wl
  pools: [{start: 10.19.0.10, end: 10.19.0.20, gateway: 10.19.0.1}]
  prefix: 24
`, &metal3v1alpha1.IPPool{})
	require.NoError(t, s.k8s.Create(ctx, m3Pool))
	eventually(t, capiWait, "Metal3 pool owned by its Cluster", func() error {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(m3Pool), m3Pool); err != nil {
			return err
		}
		for _, o := range m3Pool.OwnerReferences {
			if o.Kind == capicorev1beta2.KindCluster && o.UID == cluster.UID {
				return nil
			}
		}
		return fmt.Errorf("owners %+v", m3Pool.OwnerReferences)
	})
	m3c := m3Claim(ns, "bmh-0", "bmh")
	m3c.OwnerReferences = ownedByCluster(cluster)
	require.NoError(t, s.k8s.Create(ctx, m3c))
	m3Moved := s.m3Served(t, s.k8s, ns, "bmh-0")
	assert.Equal(t, metal3v1alpha1.IPAddressStr("10.19.0.10"), m3Moved.Spec.Address)

	// The target: its own API server, set up by clusterctl init as the
	// source was, and a fresh ipam-server or the source's.
	var tgt *moveTarget
	if shared {
		tgt = s.newMoveTarget(t, &ipamServer{addr: s.serverAddr, client: s.ipam})
	} else {
		tgt = s.newMoveTarget(t)
	}
	k2, srv2 := tgt.k8s, tgt.srv
	managementCluster(t, dir, tgt.cfg, k2)

	out := clusterctl(t, dir, "move", "--kubeconfig", s.kubeconfig, "--to-kubeconfig", tgt.kubeconfig, "--namespace", ns)
	assert.Contains(t, out, "Moving Cluster API objects")

	// Gone from the source, the pools included.
	srcObjs := []client.Object{
		&capicorev1beta2.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl"}},
		pool(ns, "move", ipamv1alpha1.InClusterIPPoolSpec{}),
		&metal3v1alpha1.IPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bmh"}},
		m3Moved.DeepCopy(), m3Claim(ns, "bmh-0", ""),
	}
	for _, a := range moved {
		srcObjs = append(srcObjs, a.DeepCopy(), claim(ns, a.Name, "", ""))
	}
	gone(t, s.k8s, "the moved objects on the source", srcObjs...)
	if shared {
		// The source let its pool go without pruning it from the server
		// the target uses: the pool's ranges and claims are still held.
		_, err := s.ipam.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE,
			Key: &ipamv1.Key{Name: translate.PoolID(controllers.DefaultOwner, ipamv1alpha1.KindInClusterIPPool, ns, "move")}})
		require.NoError(t, err, "the pool's network instance is still in ipam-server")
	}

	// On the target the cluster runs again: a new claim gets an address
	// none of the moved claims has.
	var c2 capicorev1beta2.Cluster
	require.NoError(t, k2.Get(ctx, types.NamespacedName{Namespace: ns, Name: "wl"}, &c2))
	assert.False(t, ptr.Deref(c2.Spec.Paused, false), "clusterctl unpauses the moved cluster")
	require.NoError(t, k2.Create(ctx, claim(ns, "new", ipamv1alpha1.KindInClusterIPPool, "move")))
	fresh := s.addressOn(t, k2, ns, "new")
	assert.Equal(t, "10.18.0.13", fresh.Spec.Address, "the moved .10-.12 are adopted before anything new is handed out")

	for _, a := range moved {
		var got capiv1beta2.IPAddressClaim
		eventually(t, capiWait, "moved claim "+a.Name+" Ready", func() error {
			if err := k2.Get(ctx, types.NamespacedName{Namespace: ns, Name: a.Name}, &got); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(got.Status.Conditions, capiv1beta2.ConditionReady) {
				return fmt.Errorf("conditions %+v", got.Status.Conditions)
			}
			return nil
		})
		assert.Equal(t, c2.UID, got.OwnerReferences[0].UID, "the claim points at the moved Cluster")
		now := s.addressOn(t, k2, ns, a.Name)
		assert.Equal(t, a.Spec.Address, now.Spec.Address, "moved address unchanged")
		assert.True(t, metav1.IsControlledBy(now, &got), "the IPAddress is controlled by the moved claim")
		res, err := srv2.client.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION,
			Key: &ipamv1.Key{Owner: translate.CAPIOwner(controllers.DefaultOwner), Namespace: ns, Name: a.Name}})
		require.NoError(t, err)
		assert.Equal(t, a.Spec.Address+"/24", res.GetObject().GetAllocation().GetResult().GetPrefix(), "the fresh ipam-server holds it")
	}
	require.NoError(t, k2.Create(ctx, claim(ns, "after", ipamv1alpha1.KindInClusterIPPool, "move")))
	assert.Equal(t, "10.18.0.14", s.addressOn(t, k2, ns, "after").Spec.Address)
	p2 := pool(ns, "move", ipamv1alpha1.InClusterIPPoolSpec{})
	s.poolReadyOn(t, k2, p2, ipamv1alpha1.IPAddressStatusSummary{Total: 21, Used: 5, Free: 16})

	// The Metal3 claim keeps its address; a new one gets the next.
	assert.Equal(t, m3Moved.Spec.Address, s.m3Served(t, k2, ns, "bmh-0").Spec.Address)
	require.NoError(t, k2.Create(ctx, m3Claim(ns, "bmh-1", "bmh")))
	assert.Equal(t, metal3v1alpha1.IPAddressStr("10.19.0.11"), s.m3Served(t, k2, ns, "bmh-1").Spec.Address)
}

// TestCAPIBackupRestore backs a namespace up with the real clusterctl
// (move --to-directory) and restores it (move --from-directory) on a
// second API server with a fresh ipam-server, as after losing the first
// management cluster: the restored claims keep their addresses and a new
// claim gets none of them.
func TestCAPIBackupRestore(t *testing.T) {
	dir := capiDir(t)
	s := testSuite(t)
	ns := s.namespace(t, "capi-backup")
	s.startControllers(t, s.cfg)
	ctx := context.Background()
	managementCluster(t, dir, s.cfg, s.k8s)

	cluster := provisionedCluster(t, s.k8s, ns, "wl")
	p := pool(ns, "backup", ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.21.0.0/29"}, Prefix: 24, Gateway: "10.21.0.1"})
	require.NoError(t, s.k8s.Create(ctx, p))
	s.poolReady(t, p, ipamv1alpha1.IPAddressStatusSummary{Total: 6, Free: 6})
	var saved []*capiv1beta2.IPAddress
	for i := range 2 {
		c := claim(ns, fmt.Sprintf("cp-%d", i), ipamv1alpha1.KindInClusterIPPool, "backup")
		c.Spec.ClusterName, c.OwnerReferences = "wl", ownedByCluster(cluster)
		require.NoError(t, s.k8s.Create(ctx, c))
		saved = append(saved, s.address(t, ns, c.Name))
	}

	backup := t.TempDir()
	clusterctl(t, dir, "move", "--kubeconfig", s.kubeconfig, "--to-directory", backup, "--namespace", ns)
	files, err := filepath.Glob(filepath.Join(backup, "*.yaml"))
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	t.Logf("backup: %v", names)
	for _, want := range []string{"InClusterIPPool_" + ns + "_backup.yaml", "IPAddressClaim_" + ns + "_cp-0.yaml", "IPAddress_" + ns + "_cp-1.yaml", "Cluster_" + ns + "_wl.yaml"} {
		assert.Contains(t, names, want)
	}
	var src capicorev1beta2.Cluster
	require.NoError(t, s.k8s.Get(ctx, client.ObjectKeyFromObject(cluster), &src))
	assert.False(t, ptr.Deref(src.Spec.Paused, false), "the source runs on after a backup")

	tgt := s.newMoveTarget(t)
	managementCluster(t, dir, tgt.cfg, tgt.k8s)
	clusterctl(t, dir, "move", "--from-directory", backup, "--to-kubeconfig", tgt.kubeconfig)
	require.NoError(t, tgt.k8s.Create(ctx, claim(ns, "new", ipamv1alpha1.KindInClusterIPPool, "backup")))
	assert.Equal(t, "10.21.0.4", s.addressOn(t, tgt.k8s, ns, "new").Spec.Address, "the restored .2 and .3 are adopted first")
	for _, a := range saved {
		var got capiv1beta2.IPAddressClaim
		eventually(t, capiWait, "restored claim "+a.Name+" Ready", func() error {
			if err := tgt.k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: a.Name}, &got); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(got.Status.Conditions, capiv1beta2.ConditionReady) {
				return fmt.Errorf("conditions %+v", got.Status.Conditions)
			}
			return nil
		})
		assert.Equal(t, a.Spec.Address, s.addressOn(t, tgt.k8s, ns, a.Name).Spec.Address, "restored address unchanged")
	}
}

// TestCAPIDeletedForMove: what clusterctl move deletes from the source
// (marked clusterctl.cluster.x-k8s.io/delete-for-move) is moving, not
// going: a pool so deleted leaves its ranges in ipam-server and a claim so
// deleted keeps its allocation, for the target that may share the server.
func TestCAPIDeletedForMove(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "capi-delete-for-move")
	s.startControllers(t, s.cfg)
	ctx := context.Background()
	forMove := map[string]string{controllers.DeleteForMoveAnnotation: ""}

	p := pool(ns, "moving", ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.22.0.10-10.22.0.20"}, Prefix: 24})
	require.NoError(t, s.k8s.Create(ctx, p))
	s.poolReady(t, p, ipamv1alpha1.IPAddressStatusSummary{Total: 11, Free: 11})
	c := claim(ns, "c0", ipamv1alpha1.KindInClusterIPPool, "moving")
	require.NoError(t, s.k8s.Create(ctx, c))
	assert.Equal(t, "10.22.0.10", s.address(t, ns, "c0").Spec.Address)

	// As clusterctl does: annotate, delete, and (here, after the
	// controller had its turn) drop what finalizers are left.
	s.update(t, c, func() { c.Annotations = forMove })
	require.NoError(t, s.k8s.Delete(ctx, c))
	var a capiv1beta2.IPAddress
	require.NoError(t, s.k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "c0"}, &a))
	for _, o := range []client.Object{c, &a} {
		time.Sleep(time.Second)
		s.update(t, o, func() { o.SetFinalizers(nil) })
		require.NoError(t, client.IgnoreNotFound(s.k8s.Delete(ctx, o)))
	}
	s.update(t, p, func() { p.Annotations = forMove })
	require.NoError(t, s.k8s.Delete(ctx, p))
	gone(t, s.k8s, "the pool (its finalizer let go)", p)

	ni := translate.PoolID(controllers.DefaultOwner, ipamv1alpha1.KindInClusterIPPool, ns, "moving")
	_, err := s.ipam.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE, Key: &ipamv1.Key{Name: ni}})
	require.NoError(t, err, "the pool's ranges stay in ipam-server")
	res, err := s.ipam.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION,
		Key: &ipamv1.Key{Owner: translate.CAPIOwner(controllers.DefaultOwner), Namespace: ns, Name: "c0"}})
	require.NoError(t, err, "the claim's allocation stays in ipam-server")
	assert.Equal(t, "10.22.0.10/24", res.GetObject().GetAllocation().GetResult().GetPrefix())
}
