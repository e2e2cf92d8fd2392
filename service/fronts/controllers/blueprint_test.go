package controllers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	"github.com/nephio-project/ipam/service/fronts/controllers"
)

// blueprintDir is the kpt package that installs IPAM into a cluster;
// metal3BlueprintDir the optional one that adds the Metal3 front.
var (
	blueprintDir       = filepath.Join("..", "..", "..", "blueprints", "ipam")
	metal3BlueprintDir = filepath.Join("..", "..", "..", "blueprints", "ipam-metal3")
	nvidiaBlueprintDir = filepath.Join("..", "..", "..", "blueprints", "ipam-nvidia")
)

// TestBlueprintCRDsUpToDate fails when the blueprint's copies of the CRDs
// differ from the generated ones. The copies are in the form kpt writes
// (so that kpt live init leaves a checkout clean): they are compared as
// YAML values, not bytes.
func TestBlueprintCRDsUpToDate(t *testing.T) {
	for src, dst := range map[string]string{crdDir: blueprintDir, metal3CRDDir: metal3BlueprintDir, nvidiaCRDDir: nvidiaBlueprintDir} {
		want, err := os.ReadDir(src)
		require.NoError(t, err)
		got, err := os.ReadDir(filepath.Join(dst, "crds"))
		require.NoError(t, err)
		names := func(es []os.DirEntry) (out []string) {
			for _, e := range es {
				out = append(out, e.Name())
			}
			return out
		}
		require.Equal(t, names(want), names(got), "%s/crds is stale: run `make blueprint-crds`", dst)
		for _, e := range want {
			a, err := os.ReadFile(filepath.Join(src, e.Name()))
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(dst, "crds", e.Name()))
			require.NoError(t, err)
			var av, bv any
			require.NoError(t, yaml.Unmarshal(a, &av))
			require.NoError(t, yaml.Unmarshal(b, &bv))
			require.Equal(t, av, bv, "%s/crds/%s is stale: run `make blueprint-crds`", dst, e.Name())
		}
	}
}

// blueprintObjects reads the resources of the blueprint that kpt applies
// (everything but local-config).
func blueprintObjects(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if len(u.Object) == 0 || u.GetAnnotations()["config.kubernetes.io/local-config"] == "true" {
				continue
			}
			out = append(out, u)
		}
	})
	require.NoError(t, err)
	return out
}

// kpt runs the real kpt against the envtest API server.
func (s *suite) kpt(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("kpt", append(args, "--kubeconfig", s.kubeconfig)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestBlueprintLiveInitKeepsCheckoutClean runs the real `kpt live init`
// on a copy of each blueprint: every file it writes or changes (the
// inventory, resourcegroup.yaml) is one git ignores at the blueprint's
// place in the repository, so a checkout stays clean.
func TestBlueprintLiveInitKeepsCheckoutClean(t *testing.T) {
	s := testSuite(t)
	for _, dir := range []string{blueprintDir, metal3BlueprintDir, nvidiaBlueprintDir} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			pkg := filepath.Join(t.TempDir(), filepath.Base(dir))
			require.NoError(t, os.CopyFS(pkg, os.DirFS(dir)))
			out, err := s.kpt(t, "live", "init", pkg)
			require.NoError(t, err, out)
			written := 0
			err = filepath.WalkDir(pkg, func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, err := filepath.Rel(pkg, path)
				if err != nil {
					return err
				}
				after, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if before, err := os.ReadFile(filepath.Join(dir, rel)); err == nil && bytes.Equal(before, after) {
					return nil
				}
				written++
				check := exec.Command("git", "check-ignore", "-q", filepath.Join(dir, rel))
				if err := check.Run(); err != nil {
					t.Errorf("kpt live init writes %s into blueprints/%s, which git does not ignore (git check-ignore: %v)", rel, filepath.Base(dir), err)
				}
				return nil
			})
			require.NoError(t, err)
			require.NotZero(t, written, "kpt live init wrote no inventory")
		})
	}
}

// TestBlueprintLiveApply installs blueprints/ipam with the real `kpt live
// init` and `kpt live apply` into the envtest API server (no kubelet, so
// pods stay pending), checks what kpt reports, and then runs the
// controllers as the blueprint's ServiceAccount to show that its RBAC is
// enough for the seed walk-through and no more.
func TestBlueprintLiveApply(t *testing.T) {
	s := testSuite(t)
	ctx := context.Background()
	pkg := filepath.Join(t.TempDir(), "ipam")
	require.NoError(t, os.CopyFS(pkg, os.DirFS(blueprintDir)))
	objs := blueprintObjects(t, pkg)

	out, err := s.kpt(t, "live", "init", pkg)
	require.NoError(t, err, out)
	// kpt 1.0 writes the inventory into resourcegroup.yaml (older kpt: the
	// Kptfile's inventory section).
	inv, err := os.ReadFile(filepath.Join(pkg, "resourcegroup.yaml"))
	if err != nil {
		inv, err = os.ReadFile(filepath.Join(pkg, "Kptfile"))
		require.NoError(t, err)
	}
	require.Contains(t, string(inv), "namespace: ipam-system", "kpt live init: inventory not in the package's namespace")

	// The CRDs exist already (envtest installed them): adopt them.
	// No kubelet and no controller-manager: Deployments and the PVC never
	// become Current, so apply waits briefly and reports them as not
	// reconciled.
	start := time.Now()
	out, applyErr := s.kpt(t, "live", "apply", pkg, "--inventory-policy=adopt", "--reconcile-timeout=5s", "--output=json")
	t.Logf("kpt live apply (%s, err %v):\n%s", time.Since(start).Round(time.Millisecond), applyErr, out)
	// Exit status 3 is kpt's "timeout": every object applied, four (the
	// three Deployments and the PVC) never reconciled.
	var exitErr *exec.ExitError
	require.True(t, errors.As(applyErr, &exitErr) && exitErr.ExitCode() == 3, "kpt live apply: %v; want exit status 3 (reconcile timeout)", applyErr)
	events := kptEvents(t, out)
	applied, timedOut := map[string]bool{}, map[string]bool{}
	for _, e := range events {
		id := fmt.Sprintf("%s/%s/%s", e["kind"], e["namespace"], e["name"])
		switch {
		case e["type"] == "apply" && e["status"] == "Successful":
			applied[id] = true
		case e["type"] == "wait" && e["status"] == "Timeout":
			timedOut[id] = true
		case e["type"] == "summary" && e["action"] == "Apply":
			require.EqualValues(t, len(objs), e["successful"], "kpt live apply summary: %v", e)
			require.EqualValues(t, 0, e["failed"], "kpt live apply summary: %v", e)
		}
	}
	require.Equal(t, map[string]bool{
		"Deployment/ipam-system/ipam-server": true, "Deployment/ipam-system/ipam-controller": true,
		"Deployment/ipam-system/ipam-injector": true, "PersistentVolumeClaim/ipam-system/ipam-server-data": true,
	}, timedOut, "kpt live apply: resources that did not reconcile")
	for _, o := range objs {
		id := fmt.Sprintf("%s/%s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		require.True(t, applied[id], "kpt live apply did not apply %s", id)
	}
	require.Len(t, applied, len(objs))

	// Every object is in the cluster, owned by the package's inventory.
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		require.NoError(t, s.k8s.Get(ctx, client.ObjectKeyFromObject(o), got), "%s %s", o.GetKind(), o.GetName())
		require.NotEmpty(t, got.GetAnnotations()["config.k8s.io/owning-inventory"], "%s %s has no owning inventory", o.GetKind(), o.GetName())
		if o.GetKind() == "CustomResourceDefinition" {
			require.True(t, established(got), "CRD %s is not Established", o.GetName())
		}
	}

	// kpt live status: everything Current but what needs a kubelet or a
	// volume provisioner.
	out, err = s.kpt(t, "live", "status", pkg, "--output=json", "--timeout=20s")
	require.NoError(t, err, out)
	human, err := s.kpt(t, "live", "status", pkg, "--timeout=20s")
	require.NoError(t, err, human)
	t.Logf("kpt live status:\n%s", human)
	statuses := map[string]string{}
	for _, e := range kptEvents(t, out) {
		statuses[fmt.Sprintf("%s/%s", e["kind"], e["name"])] = fmt.Sprint(e["status"])
	}
	require.Len(t, statuses, len(objs))
	for id, st := range statuses {
		want := "Current"
		switch {
		case strings.HasPrefix(id, "Deployment/"), strings.HasPrefix(id, "PersistentVolumeClaim/"):
			want = "InProgress"
		}
		require.Equal(t, want, st, "kpt live status %s", id)
	}

	// The optional Metal3 and NVIDIA packages, applied next to it.
	for _, dir := range []string{metal3BlueprintDir, nvidiaBlueprintDir} {
		opt := filepath.Join(t.TempDir(), filepath.Base(dir))
		require.NoError(t, os.CopyFS(opt, os.DirFS(dir)))
		out, err = s.kpt(t, "live", "init", opt)
		require.NoError(t, err, out)
		out, err = s.kpt(t, "live", "apply", opt, "--inventory-policy=adopt", "--reconcile-timeout=30s")
		if dir == nvidiaBlueprintDir {
			// Its ipam-node DaemonSet never rolls out without a kubelet
			// and a controller-manager: kpt applies everything and exits
			// 3 (reconcile timeout).
			var exitErr *exec.ExitError
			require.True(t, errors.As(err, &exitErr) && exitErr.ExitCode() == 3, "kpt live apply blueprints/ipam-nvidia: %v; want exit status 3 (reconcile timeout)\n%s", err, out)
			require.Contains(t, out, "daemonset.apps/ipam-node", "kpt live apply blueprints/ipam-nvidia did not apply the DaemonSet")
		} else {
			require.NoError(t, err, out)
		}
		t.Logf("kpt live apply blueprints/%s:\n%s", filepath.Base(dir), out)
	}

	// The controllers as the blueprint's ServiceAccount, with leader election.
	const sa = "system:serviceaccount:ipam-system:ipam-controller"
	const node = "system:serviceaccount:kube-system:ipam-node"
	asSA := rest.CopyConfig(s.cfg)
	asSA.Impersonate = rest.ImpersonationConfig{UserName: sa}
	saClient, err := client.New(asSA, client.Options{Scheme: s.k8s.Scheme()})
	require.NoError(t, err)
	s.startControllers(t, asSA, func(c *controllers.Config) {
		c.LeaderElect, c.LeaderElectionNamespace = true, "ipam-system"
	})
	ns := s.namespace(t, "blueprint")
	seedFlow(t, s, s.k8s, ns, "vpc-blueprint")
	// And the Cluster API front: a pool and a claim get an IPAddress.
	bp := pool(ns, "bp-pool", ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.19.0.10-10.19.0.20"}, Prefix: 24, Gateway: "10.19.0.1"})
	require.NoError(t, s.k8s.Create(ctx, bp))
	require.NoError(t, s.k8s.Create(ctx, claim(ns, "bp-claim", ipamv1alpha1.KindInClusterIPPool, "bp-pool")))
	require.Equal(t, "10.19.0.10", s.address(t, ns, "bp-claim").Spec.Address)
	s.poolReady(t, bp, ipamv1alpha1.IPAddressStatusSummary{Total: 11, Used: 1, Free: 10})
	// And the Metal3 front, with the optional package's RBAC.
	require.NoError(t, s.k8s.Create(ctx, m3(t, ns, "metadata: {name: m3}\nspec: {pools: [{subnet: 10.19.1.0/24}], prefix: 24}\n", &metal3v1alpha1.IPPool{})))
	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "m3-claim", "m3")))
	require.Equal(t, "m3-10-19-1-1", s.m3Served(t, s.k8s, ns, "m3-claim").Name)
	// And the NVIDIA front, with its package's RBAC (nodes read-only).
	s.node(t, "bp-node", map[string]string{"bp-node": "yes"})
	nv := m3(t, ns, "metadata: {name: nv}\nspec: {subnet: 10.19.2.0/24, perNodeBlockSize: 8, nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: bp-node, operator: Exists}]}]}}\n", &nvv1alpha1.IPPool{})
	require.NoError(t, s.k8s.Create(ctx, nv))
	s.nvAllocations(t, nv, map[string]string{"bp-node": "10.19.2.1-10.19.2.8"})

	// It took the lease and recorded events in the resources' namespace.
	lease := &coordinationv1.Lease{}
	require.NoError(t, s.k8s.Get(ctx, client.ObjectKey{Namespace: "ipam-system", Name: controllers.LeaderElectionID}, lease))
	eventually(t, 30*time.Second, "events recorded by ipam-controller", func() error {
		var evs eventsv1.EventList
		if err := s.k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.ReportingController == controllers.Name && e.Regarding.Name == "alloc1" && e.Reason == ipamv1alpha1.ReasonReady {
				return nil
			}
		}
		return fmt.Errorf("no Ready event for alloc1 among %d events", len(evs.Items))
	})

	// Nothing beyond the RBAC: the same identity cannot read Secrets,
	// write ConfigMaps or delete what it reconciles.
	var secrets corev1.SecretList
	require.True(t, apierrors.IsForbidden(saClient.List(ctx, &secrets)), "listing Secrets as %s is not forbidden", sa)
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = ns, "x"
	require.True(t, apierrors.IsForbidden(saClient.Create(ctx, cm)), "creating a ConfigMap as %s is not forbidden", sa)
	alloc := &ipamv1alpha1.IPAllocation{}
	alloc.Namespace, alloc.Name = ns, "alloc1"
	require.True(t, apierrors.IsForbidden(saClient.Delete(ctx, alloc)), "deleting an IPAllocation as %s is not forbidden", sa)

	// What each ServiceAccount may do, as the API server's authorizer says.
	for _, tc := range []struct {
		user                           string
		group, resource, sub, verb, ns string
		allowed                        bool
	}{
		{sa, "ipam.nephio.org", "ipallocations", "", "watch", "", true},
		{sa, "ipam.nephio.org", "ipprefixes", "status", "patch", "any", true},
		{sa, "ipam.nephio.org", "networkinstances", "finalizers", "update", "any", true},
		{sa, "ipam.nephio.org", "ipprefixes", "", "delete", "any", false},
		{sa, "ipam.nephio.org", "ipallocations", "", "create", "any", false},
		{sa, "events.k8s.io", "events", "", "create", "any", true},
		{sa, "coordination.k8s.io", "leases", "", "update", "ipam-system", true},
		{sa, "coordination.k8s.io", "leases", "", "update", "default", false},
		{sa, "", "secrets", "", "get", "ipam-system", false},
		{sa, "porch.kpt.dev", "packagerevisions", "", "get", "any", false},
		{sa, "ipam.cluster.x-k8s.io", "ipaddresses", "", "create", "any", true},
		{sa, "ipam.cluster.x-k8s.io", "ipaddressclaims", "status", "patch", "any", true},
		{sa, "ipam.cluster.x-k8s.io", "ipaddressclaims", "", "delete", "any", false},
		{sa, "ipam.nephio.org", "globalinclusterippools", "status", "patch", "", true},
		{sa, "ipam.nephio.org", "inclusterippools", "", "delete", "any", false},
		{sa, "cluster.x-k8s.io", "clusters", "", "watch", "", true},
		{sa, "cluster.x-k8s.io", "clusters", "", "update", "any", false},
		{sa, "ipam.metal3.io", "ipaddresses", "", "create", "any", true},
		{sa, "ipam.metal3.io", "ipclaims", "status", "patch", "any", true},
		{sa, "ipam.metal3.io", "ippools", "", "delete", "any", false},
		{sa, "", "nodes", "", "watch", "", true},
		{sa, "", "nodes", "", "update", "", false},
		{sa, "nv-ipam.nvidia.com", "ippools", "status", "patch", "any", true},
		{"system:serviceaccount:ipam-system:ipam-injector", "porch.kpt.dev", "packagerevisions", "", "watch", "", true},
		{"system:serviceaccount:ipam-system:ipam-injector", "porch.kpt.dev", "packagerevisionresources", "", "update", "any", true},
		{"system:serviceaccount:ipam-system:ipam-injector", "porch.kpt.dev", "packagerevisions", "", "delete", "any", false},
		{"system:serviceaccount:ipam-system:ipam-injector", "", "events", "", "create", "any", true},
		{"system:serviceaccount:ipam-system:ipam-injector", "config.porch.kpt.dev", "repositories", "", "list", "", true},
		{"system:serviceaccount:ipam-system:ipam-injector", "config.porch.kpt.dev", "repositories", "", "update", "any", false},
		{"system:serviceaccount:ipam-system:ipam-injector", "ipam.nephio.org", "ipallocations", "", "list", "", false},
		{"system:serviceaccount:ipam-system:ipam-injector", "", "secrets", "", "list", "", false},
		{"system:serviceaccount:ipam-system:ipam-server", "", "configmaps", "", "get", "ipam-system", false},
		// ipam-node reads the pools of kube-system and the pods, records
		// events there, and nothing more.
		{node, "nv-ipam.nvidia.com", "ippools", "", "watch", "kube-system", true},
		{node, "nv-ipam.nvidia.com", "cidrpools", "", "list", "kube-system", true},
		{node, "nv-ipam.nvidia.com", "ippools", "", "watch", "default", false},
		{node, "nv-ipam.nvidia.com", "ippools", "status", "patch", "kube-system", false},
		{node, "", "pods", "", "list", "", true},
		{node, "", "pods", "", "delete", "any", false},
		{node, "", "events", "", "create", "kube-system", true},
		{node, "", "secrets", "", "get", "kube-system", false},
		{node, "", "nodes", "", "list", "", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   tc.user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ipam-system", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: tc.group, Resource: tc.resource,
				Subresource: tc.sub, Verb: tc.verb, Namespace: tc.ns},
		}}
		require.NoError(t, s.k8s.Create(ctx, sar))
		require.Equal(t, tc.allowed, sar.Status.Allowed, "%s %s %s/%s.%s in %q", tc.user, tc.verb, tc.resource, tc.sub, tc.group, tc.ns)
	}
}

// kptEvents parses kpt's --output=json lines.
func kptEvents(t *testing.T, out string) []map[string]any {
	t.Helper()
	var events []map[string]any
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		events = append(events, e)
	}
	return events
}

// established reports whether a CRD has condition Established=True.
func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	return slices.ContainsFunc(conds, func(c any) bool {
		m, _ := c.(map[string]any)
		return m["type"] == "Established" && m["status"] == "True"
	})
}
