package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/cluster/clusterkit"
)

// TestBlueprintMetal3AndCAPI installs blueprints/ipam with its metal3
// setter on, blueprints/ipam-metal3 beside it, and Cluster API's IPAM CRDs
// (as clusterctl init installs them), and checks that the controller pods
// serve a Metal3 IPPool's IPClaim and an InClusterIPPool's IPAddressClaim.
func TestBlueprintMetal3AndCAPI(t *testing.T) {
	c := clusterkit.Use(t)
	b := clusterkit.InstallIPAM(t, c, func(pkg string) { setFlag(t, pkg, "--metal3") })
	metal3 := clusterkit.CopyPackage(t, c, "ipam-metal3", t.TempDir())
	b.Kpt(t, "live", "init", metal3)
	b.Kpt(t, "live", "apply", metal3, "--reconcile-timeout=2m")
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
		clusterkit.Eventually(t, 90*time.Second, w.obj+" served by the controller pod", func() error {
			out, err := c.Kubectl("-n", "default", "get", w.obj, "-o", "jsonpath="+w.path)
			if err != nil || out != w.want {
				return fmt.Errorf("%q (%v), want %q", out, err, w.want)
			}
			return nil
		})
	}
}

// TestBlueprintNephio installs blueprints/ipam with its nephio-resource
// setter on and blueprints/ipam-nephio beside it, and checks that the
// controller pods serve Nephio's own objects: a NetworkInstance and an
// IPPrefix of ipam.resource.nephio.org, an IPClaim selecting by
// nephio.org/cluster-name (the address with the network's gateway, and
// the one at index 7), and a VLANClaim of a VLANIndex.
func TestBlueprintNephio(t *testing.T) {
	c := clusterkit.Use(t)
	b := clusterkit.InstallIPAM(t, c, func(pkg string) { setFlag(t, pkg, "--nephio-resource") })
	nephio := clusterkit.CopyPackage(t, c, "ipam-nephio", t.TempDir())
	b.Kpt(t, "live", "init", nephio)
	b.Kpt(t, "live", "apply", nephio, "--reconcile-timeout=2m")
	t.Cleanup(func() {
		_, _ = c.Kubectl("delete", "ipclaims.ipam.resource.nephio.org,vlanclaims.vlan.resource.nephio.org", "--all", "-n", "default", "--timeout=60s")
		_, _ = c.Kubectl("delete", "vlanindices.vlan.resource.nephio.org,ipprefixes.ipam.resource.nephio.org", "--all", "-n", "default", "--timeout=60s")
		_, _ = c.Kubectl("delete", "networkinstances.ipam.resource.nephio.org", "--all", "-n", "default", "--timeout=60s")
		if out, err := c.Kpt("live", "destroy", nephio); err != nil {
			t.Errorf("kpt live destroy %s: %v\n%s", nephio, err, out)
		}
	})
	c.Apply(t, `apiVersion: ipam.resource.nephio.org/v1alpha1
kind: NetworkInstance
metadata: {name: vpc, namespace: default}
spec:
  prefixes:
    - prefix: 10.0.0.0/8
---
apiVersion: ipam.resource.nephio.org/v1alpha1
kind: IPPrefix
metadata: {name: cluster01-n3, namespace: default}
spec:
  kind: network
  networkInstance: {name: vpc}
  prefix: 10.0.0.1/24
  labels: {nephio.org/cluster-name: cluster01, nephio.org/network-name: n3, nephio.org/gateway: "true"}
---
apiVersion: ipam.resource.nephio.org/v1alpha1
kind: IPClaim
metadata: {name: upf-n3, namespace: default}
spec:
  kind: network
  networkInstance: {name: vpc}
  selector: {matchLabels: {nephio.org/cluster-name: cluster01, nephio.org/network-name: n3}}
---
apiVersion: ipam.resource.nephio.org/v1alpha1
kind: IPClaim
metadata: {name: upf-n3-fixed, namespace: default}
spec:
  kind: network
  index: 7
  networkInstance: {name: vpc}
  selector: {matchLabels: {nephio.org/cluster-name: cluster01, nephio.org/network-name: n3}}
---
apiVersion: vlan.resource.nephio.org/v1alpha1
kind: VLANIndex
metadata: {name: cluster01, namespace: default}
---
apiVersion: vlan.resource.nephio.org/v1alpha1
kind: VLANClaim
metadata: {name: upf-n3, namespace: default}
spec:
  vlanIndex: {name: cluster01}
`)
	for _, w := range []struct{ obj, path, want string }{
		{"ipclaim.ipam.resource.nephio.org/upf-n3", "{.status.prefix} {.status.gateway}", "10.0.0.2/24 10.0.0.1"},
		{"ipclaim.ipam.resource.nephio.org/upf-n3-fixed", "{.status.prefix} {.status.gateway}", "10.0.0.7/24 10.0.0.1"},
		{"vlanclaim.vlan.resource.nephio.org/upf-n3", "{.status.vlanID}", "1"},
	} {
		clusterkit.Eventually(t, 90*time.Second, w.obj+" served by the controller pod", func() error {
			out, err := c.Kubectl("-n", "default", "get", w.obj, "-o", "jsonpath="+w.path)
			if err != nil || out != w.want {
				return fmt.Errorf("%q (%v), want %q", out, err, w.want)
			}
			return nil
		})
	}
}

// setFlag turns a boolean flag of the controller's Deployment on in the
// package copy pkg, at its kpt-set field (as a user edits it by hand:
// apply-setters needs its image).
func setFlag(t *testing.T, pkg, flag string) {
	t.Helper()
	f := filepath.Join(pkg, "ipam-controller.yaml")
	y, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	on := strings.Replace(string(y), "- "+flag+"=false # kpt-set:", "- "+flag+"=true # kpt-set:", 1)
	if on == string(y) {
		t.Fatalf("%s: no %s=false setter field", f, flag)
	}
	if err := os.WriteFile(f, []byte(on), 0o644); err != nil {
		t.Fatal(err)
	}
}
