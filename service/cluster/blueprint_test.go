package cluster_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/cluster/clusterkit"
	"github.com/nephio-project/ipam/service/cluster/load"
)

// seed is the seed example of the controllers README, in one apply.
const seed = `apiVersion: ipam.nephio.org/v1alpha1
kind: NetworkInstance
metadata: {name: vpc-1, namespace: default}
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata: {name: aggregate0, namespace: default}
spec: {kind: aggregate, prefix: 10.0.0.0/8, networkInstance: vpc-1}
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: net1-prefix1
  namespace: default
  labels: {nephio.org/gateway: "true"}
spec: {prefix: 10.0.1.1/24, network: net1, networkInstance: vpc-1}
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: net1-prefix10
  namespace: default
  labels: {nephio.org/interface: n3}
spec: {prefix: 10.0.1.10/24, network: net1, networkInstance: vpc-1}
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata: {name: alloc1, namespace: default}
spec:
  kind: network
  selector: {matchLabels: {nephio.org/network-instance: vpc-1, nephio.org/network-name: net1}}
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata: {name: alloc2-n3, namespace: default}
spec:
  kind: network
  selector: {matchLabels: {nephio.org/network-instance: vpc-1, nephio.org/network-name: net1, nephio.org/interface: n3}}
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata: {name: alloc-pool1, namespace: default}
spec:
  kind: pool
  prefixLength: 16
  selector: {matchLabels: {nephio.org/network-instance: vpc-1}}
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata: {name: load-net, namespace: default}
spec: {prefix: 10.2.0.0/16, network: load, networkInstance: vpc-1}
`

// seedResults are the seed's results, as the controllers README prints
// them, by kind/name: status.prefix and status.gateway.
var seedResults = map[string]string{
	"ipallocation/alloc1":      "10.0.1.2/24 10.0.1.1",
	"ipallocation/alloc2-n3":   "10.0.1.10/24 10.0.1.1",
	"ipallocation/alloc-pool1": "10.1.0.0/16 ",
	"ipprefix/net1-prefix1":    "10.0.1.1/24 10.0.1.1",
	"ipprefix/load-net":        "10.2.0.0/16 ",
}

func waitSeed(t *testing.T, c *clusterkit.Cluster) {
	t.Helper()
	for obj, want := range seedResults {
		clusterkit.Eventually(t, 60*time.Second, obj+" Ready with the seed's result", func() error {
			kind, name, _ := strings.Cut(obj, "/")
			out, err := c.Kubectl("-n", "default", "get", kind+".ipam.nephio.org/"+name, "-o",
				`jsonpath={.status.prefix} {.status.gateway}|{.status.conditions[?(@.type=="Ready")].status}`)
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			if out != want+"|True" {
				return fmt.Errorf("status %q, want %q", out, want+"|True")
			}
			return nil
		})
	}
}

// TestBlueprintIPAM installs blueprints/ipam on the cluster and uses it as
// a user does: the seed through the controller pod, ipamctl in a pod
// through the Service's DNS name with the blueprint's mTLS identities, the
// server pod deleted (a new one on the same volume keeps every
// allocation), and a rollout restart of the server under a stream of
// allocations from a pod (none acknowledged is lost or doubled), which the
// controller and injector ride out.
func TestBlueprintIPAM(t *testing.T) {
	c := clusterkit.Use(t)
	b := clusterkit.InstallIPAM(t, c, nil)

	c.Apply(t, seed)
	waitSeed(t, c)

	list := b.Ipamctl(t, "ipamctl-list", "alloc", "list", "--vrf", "vpc-1")
	for _, want := range []string{"alloc1", "10.0.1.2/24", "alloc2-n3", "10.0.1.10/24", "alloc-pool1", "10.1.0.0/16"} {
		if !strings.Contains(list, want) {
			t.Fatalf("ipamctl alloc list in a pod lacks %s:\n%s", want, list)
		}
	}

	// A new server pod on the same volume holds every allocation.
	old := c.MustKubectl(t, "-n", clusterkit.IPAMNamespace, "get", "pods", "-l", "app.kubernetes.io/name=ipam-server", "-o", "jsonpath={.items[0].metadata.name}")
	c.MustKubectl(t, "-n", clusterkit.IPAMNamespace, "delete", "pod", old)
	c.MustKubectl(t, "-n", clusterkit.IPAMNamespace, "rollout", "status", "deploy/ipam-server", "--timeout=2m")
	c.MustKubectl(t, "-n", clusterkit.IPAMNamespace, "wait", "--for=condition=Available", "deploy/ipam-server", "--timeout=2m")
	if again := b.Ipamctl(t, "ipamctl-list-2", "alloc", "list", "--vrf", "vpc-1"); again != list {
		t.Fatalf("after the server pod was replaced, ipamctl alloc list says\n%s\nwant\n%s", again, list)
	}

	// A rollout restart under load: ipam-load allocates from a pod while
	// the server is replaced (Recreate: it is down for a while), retrying
	// Unavailable.
	const clients = 8
	c.Apply(t, loadJob("load", "--clients", fmt.Sprint(clients), "--duration", "30s", "--interval", "20ms"))
	t.Cleanup(func() {
		// The load's addresses go before their network's IPPrefix can.
		_, _ = c.Kubectl("-n", clusterkit.IPAMNamespace, "delete", "job", "load", "--wait=false")
		c.Apply(t, loadJob("load-release", "--release", "--clients", "8"))
		b.WaitJob(t, "load-release", 2*time.Minute)
		_, _ = c.Kubectl("-n", clusterkit.IPAMNamespace, "delete", "job", "load-release", "--wait=false")
	})
	clusterkit.Eventually(t, 2*time.Minute, "ipam-load acknowledges allocations", func() error {
		out, _ := c.Kubectl("-n", clusterkit.IPAMNamespace, "logs", "job/load")
		if n := strings.Count(out, `"prefix"`); n < 50 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	c.MustKubectl(t, "-n", clusterkit.IPAMNamespace, "rollout", "restart", "deploy/ipam-server")
	c.MustKubectl(t, "-n", clusterkit.IPAMNamespace, "rollout", "status", "deploy/ipam-server", "--timeout=3m")
	b.WaitJob(t, "load", 5*time.Minute)
	acks, sum := readAcks(t, c.MustKubectl(t, "-n", clusterkit.IPAMNamespace, "logs", "job/load"))
	t.Logf("ipam-load: %d acknowledged, %d retried calls, %.0f/s", sum.Acked, sum.Retries, sum.PerSec)
	if len(acks) != sum.Acked || len(acks) < 1000 || sum.Failed != 0 || !sum.Finished {
		t.Fatalf("ipam-load printed %d acknowledgements, its summary says %d (failed %d, finished %v)", len(acks), sum.Acked, sum.Failed, sum.Finished)
	}
	if sum.Retries == 0 {
		t.Errorf("no call was retried: the restart did not happen under load")
	}
	held := serverAllocations(t, b.Ipamctl(t, "ipamctl-load", "alloc", "list", "--owner", "k8s.load", "-o", "json"))
	seen := map[string]string{}
	for name, prefix := range acks {
		if got := held[name]; got != prefix {
			t.Errorf("allocation %s: acknowledged %s, the server holds %q", name, prefix, got)
		}
		if other, dup := seen[prefix]; dup {
			t.Errorf("%s acknowledged to both %s and %s", prefix, other, name)
		}
		seen[prefix] = name
	}
	if len(held) != len(acks) {
		t.Errorf("the server holds %d allocations of owner k8s.load, %d were acknowledged", len(held), len(acks))
	}

	// The controller and the injector reconnected on their own: a new
	// claim is served, and neither restarted.
	c.Apply(t, `apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata: {name: after-restart, namespace: default}
spec:
  kind: network
  selector: {matchLabels: {nephio.org/network-instance: vpc-1, nephio.org/network-name: net1}}
`)
	clusterkit.Eventually(t, 60*time.Second, "after-restart served", func() error {
		out, _ := c.Kubectl("-n", "default", "get", "ipallocation.ipam.nephio.org/after-restart", "-o", "jsonpath={.status.prefix}")
		if out != "10.0.1.3/24" {
			return fmt.Errorf("status.prefix %q", out)
		}
		return nil
	})
	for _, d := range []string{"ipam-controller", "ipam-injector"} {
		restarts := c.MustKubectl(t, "-n", clusterkit.IPAMNamespace, "get", "pods", "-l", "app.kubernetes.io/name="+d, "-o", "jsonpath={.items[*].status.containerStatuses[*].restartCount}")
		for _, r := range strings.Fields(restarts) {
			if r != "0" {
				t.Errorf("%s restarted (%s) while the server was replaced", d, restarts)
			}
		}
		c.MustKubectl(t, "-n", clusterkit.IPAMNamespace, "wait", "--for=condition=Available", "deploy/"+d, "--timeout=60s")
	}
}

// loadJob is ipam-load as a Job with the controller's identity (owner
// k8s.load), allocating from network load of vpc-1, with more args.
func loadJob(name string, args ...string) string {
	return clusterkit.JobManifest(name, "ipam-load:dev", "ipam-controller-tls", append([]string{
		"--server", "ipam-server.ipam-system.svc:9090", "--tls-ca", "/tls/ca.crt", "--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key",
		"--owner", "k8s.load", "--selector", "nephio.org/network-instance=vpc-1", "--selector", "nephio.org/network-name=load"}, args...)...)
}

// readAcks parses ipam-load's output: the acknowledged allocations by
// name, and the summary.
func readAcks(t *testing.T, out string) (map[string]string, load.Summary) {
	t.Helper()
	acks := map[string]string{}
	var sum load.Summary
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var line struct {
			load.Ack
			Summary *load.Summary `json:"summary"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("ipam-load printed %q: %v", sc.Text(), err)
		}
		if line.Summary != nil {
			sum = *line.Summary
			continue
		}
		if prev, dup := acks[line.Name]; dup {
			t.Fatalf("ipam-load acknowledged %s twice (%s, %s)", line.Name, prev, line.Prefix)
		}
		acks[line.Name] = line.Prefix
	}
	return acks, sum
}

// serverAllocations parses ipamctl alloc list -o json: prefix by name.
func serverAllocations(t *testing.T, out string) map[string]string {
	t.Helper()
	var list []struct {
		Allocation struct {
			Key struct{ Name string }
		}
		Result struct{ Prefix string }
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("ipamctl -o json: %v\n%.2000s", err, out)
	}
	held := map[string]string{}
	for _, it := range list {
		held[it.Allocation.Key.Name] = it.Result.Prefix
	}
	return held
}
