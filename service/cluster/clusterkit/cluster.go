package clusterkit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/server/servertest"
)

// The project's single-node cluster (make cluster): its network namespace
// and where make cluster keeps its state.
const (
	// Netns is the network namespace the whole cluster runs in.
	Netns = "ipam-cluster"
	// NodeName is the name of the cluster's one node.
	NodeName = "ipam-node-1"
	// RequiredEnv, set to 1 (make test sets it after make cluster), makes
	// a test that needs the cluster fail instead of skip when it is not up.
	RequiredEnv = "IPAM_CLUSTER_REQUIRED"
)

// Cluster is the running single-node cluster of make cluster, held by one
// test at a time (see Use).
type Cluster struct {
	// Root is the repository's root.
	Root string
	// Kubeconfig is the admin kubeconfig that works from the machine's
	// shell (bin/cluster/kubeconfig).
	Kubeconfig string
}

// Use returns the cluster make cluster started, and holds it for t: tests
// of every package that use it run one after another (an exclusive lock on
// a file of its state, released when t ends), since they install the same
// blueprints. It skips t when the cluster is not up, or fails it when
// RequiredEnv is set.
func Use(t testing.TB) *Cluster {
	t.Helper()
	root := servertest.ModuleRoot(t)
	c := &Cluster{Root: root, Kubeconfig: filepath.Join(root, "bin", "cluster", "kubeconfig")}
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv(RequiredEnv) == "1" {
			t.Fatalf("the cluster is not up: %s (make test starts it with make cluster)", msg)
		}
		t.Skipf("SKIPPED: the cluster is not up: %s (make cluster starts it)", msg)
	}
	if _, err := os.Stat(c.Kubeconfig); err != nil {
		unavailable("%v", err)
	}
	lock, err := os.OpenFile(filepath.Join(root, "bin", "cluster", "test.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		unavailable("%v", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		_ = lock.Close()
		t.Fatalf("lock the cluster: %v", err)
	}
	t.Cleanup(func() { _ = lock.Close() })
	if out, err := c.Kubectl("get", "--raw", "/readyz"); err != nil {
		unavailable("kubectl get --raw /readyz: %v: %s", err, out)
	}
	return c
}

// Env is the environment of a command run against the cluster: the
// test's, with KUBECONFIG set to the cluster's.
func (c *Cluster) Env() []string {
	return append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
}

// Kubectl runs kubectl against the cluster and returns its combined
// output.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	return c.run(nil, "kubectl", args...)
}

// KubectlIn runs kubectl with stdin.
func (c *Cluster) KubectlIn(stdin string, args ...string) (string, error) {
	return c.run(strings.NewReader(stdin), "kubectl", args...)
}

// MustKubectl runs kubectl and fails t when it fails.
func (c *Cluster) MustKubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.Kubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Apply applies manifests with kubectl and fails t when it fails.
func (c *Cluster) Apply(t testing.TB, manifests string) {
	t.Helper()
	if out, err := c.KubectlIn(manifests, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, manifests)
	}
}

// Kpt runs kpt against the cluster.
func (c *Cluster) Kpt(args ...string) (string, error) {
	return c.run(nil, "kpt", args...)
}

// Run runs a program against the cluster (KUBECONFIG set) from the
// repository's root.
func (c *Cluster) Run(name string, args ...string) (string, error) {
	return c.run(nil, name, args...)
}

func (c *Cluster) run(stdin *strings.Reader, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.Root
	cmd.Env = c.Env()
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// InNetns runs a program inside the cluster's network namespace (nsenter
// --net), where pod and Service addresses exist: never address them from
// the machine's own namespace, where a packet to them would leave the
// machine.
func (c *Cluster) InNetns(name string, args ...string) (string, error) {
	return c.run(nil, "nsenter", append([]string{"--net=/var/run/netns/" + Netns, name}, args...)...)
}

// Eventually runs f every half second until it returns nil or timeout
// passes, and fails t with f's last error.
func Eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// FreeVolumes makes the cluster's local PersistentVolumes that a deleted
// claim released available again, with their directories emptied: the
// next test starts from empty volumes.
func (c *Cluster) FreeVolumes(t testing.TB) {
	t.Helper()
	out := c.MustKubectl(t, "get", "pv", "-l", "ipam.nephio.org/cluster-pv=true", "-o",
		`jsonpath={range .items[?(@.status.phase=="Released")]}{.metadata.name} {.spec.local.path}{"\n"}{end}`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, path, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if !strings.HasPrefix(path, filepath.Join(c.Root, "bin", "cluster", "pv")+"/") {
			t.Fatalf("PersistentVolume %s: path %s is not one of the cluster's", name, path)
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(path, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		c.MustKubectl(t, "patch", "pv", name, "--type=json", `-p=[{"op":"remove","path":"/spec/claimRef"}]`)
	}
}
