package injector

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephio-project/ipam/service/cluster/clusterkit"
)

// startPorchOnCluster runs Porch and its function runner inside the
// network namespace of the cluster of make cluster and registers Porch as
// that API server's aggregated API, as a real cluster serves it: pods
// reach it through the kubernetes Service and the aggregation layer. All
// of it is removed when t ends.
func startPorchOnCluster(t *testing.T, c *clusterkit.Cluster) *porchEnv {
	t.Helper()
	root := repoRoot(t)
	crds := filepath.Join(root, "bin/porch/crds")
	for _, p := range []string{filepath.Join(root, "bin/porch/porch"), filepath.Join(root, "bin/porch/function-runner"), crds} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: run make porch-env", p)
		}
	}
	start := time.Now()
	e := &porchEnv{dir: t.TempDir(), netns: "/var/run/netns/" + clusterkit.Netns,
		kubeconfig: filepath.Join(root, "bin", "cluster", "pki", "admin.kubeconfig")}
	e.logs = filepath.Join(e.dir, "logs")
	must(t, os.MkdirAll(e.logs, 0o755))
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	must(t, err)
	scheme := k8sruntime.NewScheme()
	must(t, clientgoscheme.AddToScheme(scheme))
	must(t, porchv1alpha1.AddToScheme(scheme))
	e.cfg = cfg
	e.k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	must(t, err)

	// After Porch is stopped (cleanups run last first): its API, its
	// namespace and its CRDs, with whatever its finalizers still hold.
	t.Cleanup(func() {
		_, _ = c.Kubectl("delete", "apiservice", "v1alpha1.porch.kpt.dev", "--ignore-not-found")
		_, _ = c.Kubectl("delete", "namespace", "porch-system", "--ignore-not-found", "--wait=false")
		out, _ := c.Kubectl("get", "packagerevs.config.porch.kpt.dev,repositories.config.porch.kpt.dev", "-A", "-o", "name")
		for _, obj := range strings.Fields(out) {
			_, _ = c.Kubectl("-n", testNamespace, "patch", obj, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		}
		if out, err := c.Kubectl("delete", "-f", crds, "--ignore-not-found", "--timeout=60s"); err != nil {
			t.Errorf("delete Porch's CRDs: %v\n%s", err, out)
		}
		if t.Failed() {
			e.logTails(t)
		}
	})
	c.MustKubectl(t, "apply", "-f", crds)
	c.MustKubectl(t, "wait", "--for=condition=Established", "-f", crds)
	e.startServers(t, start)
	// Before Porch is stopped: the Repository, so that Porch lets go of it.
	t.Cleanup(func() {
		_, _ = c.Kubectl("-n", testNamespace, "delete", "packagerevisions.porch.kpt.dev", "--all", "--timeout=60s")
		_, _ = c.Kubectl("-n", testNamespace, "delete", "repositories.config.porch.kpt.dev", "--all", "--timeout=60s")
	})
	return e
}

// TestInjectorPodServesDraft installs blueprints/ipam on the cluster,
// whose ipam-injector pod waits, ready, for Porch; then starts Porch as the
// cluster's aggregated API. The injector pod starts serving by itself and
// fills a Draft's IPAllocations through ipam-server's Service, and the
// server holds them under the package's owner.
func TestInjectorPodServesDraft(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short (it installs the blueprint and runs Porch on the cluster)")
	}
	c := clusterkit.Use(t)
	b := clusterkit.InstallIPAM(t, c, nil)
	env := startPorchOnCluster(t, c)
	x := &e2e{t: t, env: env, ctx: context.Background()}

	v1 := x.createDraft("net-pkg", "v1", porchv1alpha1.Task{Type: porchv1alpha1.TaskTypeInit,
		Init: &porchv1alpha1.PackageInitTaskSpec{Description: "a package with IPs"}})
	x.edit(v1, func(r map[string]string) {
		r["Kptfile"] = strings.Replace(r["Kptfile"], "info:\n", "info:\n"+readinessGate, 1)
		r["ipam.yaml"] = ipamBase + allocYAML("alloc1") + allocYAML("alloc2")
	})
	got := x.waitAllocated(v1, "alloc1", "alloc2")
	if got["alloc1"] == got["alloc2"] {
		t.Fatalf("one address for two allocations: %v", got)
	}
	list := b.Ipamctl(t, "ipamctl-porch", "alloc", "list", "--owner", Owner(testRepo, "net-pkg"))
	for name, prefix := range got {
		if !strings.Contains(list, name) || !strings.Contains(list, prefix) {
			t.Errorf("ipam-server does not hold %s %s for the package:\n%s", name, prefix, list)
		}
	}
	logs := c.MustKubectl(t, "-n", clusterkit.IPAMNamespace, "logs", "deploy/ipam-injector")
	for _, want := range []string{"does not serve porch.kpt.dev/v1alpha1", "Porch's API is served: the injector starts"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the injector pod's log lacks %q:\n%s", want, logs)
		}
	}
}
