package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/internal/clustertest"
)

// TestBlueprintMetal3AndCAPI installs blueprints/ipam with its metal3
// setter on, blueprints/ipam-metal3 beside it, and Cluster API's IPAM CRDs
// (as clusterctl init installs them), and checks that the controller pods
// serve a Metal3 IPPool's IPClaim and an InClusterIPPool's IPAddressClaim.
func TestBlueprintMetal3AndCAPI(t *testing.T) {
	c := clustertest.Use(t)
	b := installIPAM(t, c, func(pkg string) {
		f := filepath.Join(pkg, "ipam-controller.yaml")
		y, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		on := strings.Replace(string(y), "- --metal3=false # kpt-set:", "- --metal3=true # kpt-set:", 1)
		if on == string(y) {
			t.Fatalf("%s: no --metal3=false setter field", f)
		}
		if err := os.WriteFile(f, []byte(on), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	metal3 := copyPackage(t, c, "ipam-metal3", t.TempDir())
	b.kpt(t, "live", "init", metal3)
	b.kpt(t, "live", "apply", metal3, "--reconcile-timeout=2m")
	crds := filepath.Join(c.Root, "api", "capi", "crds")
	c.MustKubectl(t, "apply", "-f", crds)
	t.Cleanup(func() {
		_, _ = c.Kubectl("delete", "ipaddressclaims.ipam.cluster.x-k8s.io,inclusterippools.ipam.nephio.org,ipclaims.ipam.metal3.io,ippools.ipam.metal3.io", "--all", "-n", "default", "--timeout=60s")
		_, _ = c.Kubectl("delete", "-f", crds, "--timeout=60s")
		if out, err := c.Kpt("live", "destroy", metal3); err != nil {
			t.Errorf("kpt live destroy %s: %v\n%s", metal3, err, out)
		}
	})
	c.MustKubectl(t, "wait", "--for=condition=Established", "-f", crds)

	c.Apply(t, `apiVersion: ipam.metal3.io/v1alpha1
kind: IPPool
metadata: {name: pool1, namespace: default}
spec:
  pools:
    - {start: 192.168.0.10, end: 192.168.0.30, prefix: 25, gateway: 192.168.0.1}
  prefix: 24
  gateway: 192.168.1.1
  preAllocations: {claim2: 192.168.0.12}
---
apiVersion: ipam.metal3.io/v1alpha1
kind: IPClaim
metadata: {name: claim2, namespace: default}
spec:
  pool: {name: pool1}
---
apiVersion: ipam.nephio.org/v1alpha1
kind: InClusterIPPool
metadata: {name: nodes, namespace: default}
spec:
  addresses: [10.10.0.0/28]
  prefix: 24
  gateway: 10.10.0.1
---
apiVersion: ipam.cluster.x-k8s.io/v1beta2
kind: IPAddressClaim
metadata: {name: m1, namespace: default}
spec:
  poolRef: {apiGroup: ipam.nephio.org, kind: InClusterIPPool, name: nodes}
`)
	for _, w := range []struct{ obj, path, want string }{
		{"ipclaim.ipam.metal3.io/claim2", "{.status.address.name}", "pool1-192-168-0-12"},
		{"ipaddress.ipam.metal3.io/pool1-192-168-0-12", "{.spec.address} {.spec.prefix} {.spec.gateway}", "192.168.0.12 25 192.168.0.1"},
		{"ipaddress.ipam.cluster.x-k8s.io/m1", "{.spec.address} {.spec.prefix} {.spec.gateway}", "10.10.0.2 24 10.10.0.1"},
	} {
		clustertest.Eventually(t, 90*time.Second, w.obj+" served by the controller pod", func() error {
			out, err := c.Kubectl("-n", "default", "get", w.obj, "-o", "jsonpath="+w.path)
			if err != nil || out != w.want {
				return fmt.Errorf("%q (%v), want %q", out, err, w.want)
			}
			return nil
		})
	}
}
