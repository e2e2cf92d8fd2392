// Package cmd_test starts every binary the project ships, as a user would:
// built with go build, run as a subprocess. A test that calls a package's
// Run in process cannot catch a panic at flag registration or in main.
package cmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/internal/clustertest"
	"github.com/nephio-project/ipam/service/internal/proctest"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// binaries are the shipped binaries and what their --help must name (their
// key flags, or for ipam-fn its functionConfig keys).
// TestEveryBinaryIsCovered fails when a main package is not listed here.
var binaries = map[string][]string{
	"ipam-server": {"-listen", "-data-dir", "-store", "-etcd-endpoints", "-tls-cert", "-tls-key", "-client-ca", "-metrics-addr",
		"-authz-policy", "-recover-truncated", "-web-addr", "-web-insecure", "-max-inflight-bytes", "-inflight-wait",
		"-max-watches-per-conn", "-max-watches-per-identity", "-durable-reads"},
	"ipamctl":         {"-server", "-token-file"},
	"ipam-fn":         {"server", "owner", "prune", "tlsCA", "tokenFile", "source", "--allow-network"},
	"ipam-controller": {"-kubeconfig", "-server", "-tls-ca", "-token-file", "-metal3", "-nvidia", "-front-check-interval"},
	"ipam-injector":   {"-kubeconfig", "-server", "-namespace", "-token-file", "-workers", "-resync-interval", "-gc-interval", "-metrics-bind-address"},
	// nv-ipam is a CNI plugin: without CNI_COMMAND it says what it is.
	"nv-ipam": {"nv-ipam CNI IPAM plugin", "CNI protocol versions supported"},
	"ipam-node": {"-node-name", "-ippools-namespace", "-bind-address", "-store-file", "-cleanup-interval", "-cni-bin-dir",
		"-cni-conf-dir", "-cni-nv-ipam-bin-file", "-cni-skip-nv-ipam-binary-copy", "-cni-skip-nv-ipam-config-creation",
		"-cni-daemon-socket", "-cni-daemon-call-timeout", "-cni-log-file", "-cni-log-level", "-cni-force-pool-name",
		"-health-probe-bind-address", "-metrics-bind-address", "-kubeconfig"},
}

// mainPackages lists the main packages the Makefile builds into bin/, as
// paths relative to root: <component>/cmd/<binary> for service, functions
// and injector.
func mainPackages(t testing.TB, root string) []string {
	t.Helper()
	var pkgs []string
	for _, comp := range []string{"service", "functions", "injector"} {
		mains, err := filepath.Glob(filepath.Join(root, comp, "cmd", "*", "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mains {
			rel, err := filepath.Rel(root, filepath.Dir(m))
			if err != nil {
				t.Fatal(err)
			}
			pkgs = append(pkgs, filepath.ToSlash(rel))
		}
	}
	slices.Sort(pkgs)
	return pkgs
}

// build builds every main package (with one go build, proctest.Build)
// and returns the directory of the binaries.
func build(t *testing.T) string {
	t.Helper()
	var pkgs []string
	for _, p := range mainPackages(t, servertest.ModuleRoot(t)) {
		pkgs = append(pkgs, "./"+p)
	}
	return proctest.Build(t, pkgs...)
}

func TestMain(m *testing.M) { proctest.Main(m) }

// TestEveryBinaryIsCovered: every main package under <component>/cmd is a
// shipped binary, and this package starts each of them.
func TestEveryBinaryIsCovered(t *testing.T) {
	var got, want []string
	for _, p := range mainPackages(t, servertest.ModuleRoot(t)) {
		got = append(got, path.Base(p))
	}
	slices.Sort(got)
	for name := range binaries {
		want = append(want, name)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("main packages %v, smoke-tested binaries %v: add the new binary to `binaries` and start it in a test", got, want)
	}
}

// panicked reports whether a Go program's output shows a panic (the word
// alone is a log level of the CNI plugin, in ipam-node's help).
func panicked(out []byte) bool {
	return bytes.Contains(out, []byte("panic: ")) || bytes.Contains(out, []byte("goroutine 1 ["))
}

// TestHelp: `BIN --help` exits 0 and names the binary's key flags.
func TestHelp(t *testing.T) {
	dir := build(t)
	for name, flags := range binaries {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, filepath.Join(dir, name), "--help").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --help: %v\n%s", name, err, out)
			}
			if panicked(out) {
				t.Fatalf("%s --help panicked:\n%s", name, out)
			}
			for _, f := range flags {
				if !bytes.Contains(out, []byte(f)) {
					t.Errorf("%s --help does not name %s:\n%s", name, f, out)
				}
			}
		})
	}
}

// TestServerCtlFunction starts ipam-server with the demo VRF and the web
// view, lists it with ipamctl and in the web view, allocates with ipam-fn
// over a ResourceList on stdin, finds the address in the web view, and
// stops the server with SIGTERM.
func TestServerCtlFunction(t *testing.T) {
	dir := build(t)
	srv := proctest.Start(t, filepath.Join(dir, "ipam-server"), "--listen", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--demo", "--log-format", "json", "--web-addr", "127.0.0.1:0")
	var serving, webView struct{ Addr string }
	if err := json.Unmarshal([]byte(srv.WaitLine(t, `"msg":"serving"`, 30*time.Second)), &serving); err != nil || serving.Addr == "" {
		t.Fatalf("the serving line has no addr: %v", err)
	}
	if err := json.Unmarshal([]byte(srv.WaitLine(t, `"msg":"web"`, 30*time.Second)), &webView); err != nil || webView.Addr == "" {
		t.Fatalf("the web line has no addr: %v", err)
	}
	srv.WaitLine(t, `"msg":"ready"`, 30*time.Second)
	page := func(path string) string {
		resp, err := http.Get("http://" + webView.Addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("web view %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	if p := page("/"); !strings.Contains(p, `<a href="/vrf/vpc-1">vpc-1</a>`) {
		t.Fatalf("the web view does not list vpc-1:\n%s", p)
	}

	out, err := exec.Command(filepath.Join(dir, "ipamctl"), "--server", serving.Addr, "vrf", "list").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("vpc-1")) {
		t.Fatalf("ipamctl vrf list: %v\n%s", err, out)
	}

	fn := exec.Command(filepath.Join(dir, "ipam-fn"))
	fn.Stdin = strings.NewReader(`apiVersion: config.kubernetes.io/v1
kind: ResourceList
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata: {name: ipam-fn-config}
  data: {server: "` + serving.Addr + `", owner: smoke}
items:
- apiVersion: ipam.nephio.org/v1alpha1
  kind: IPAllocation
  metadata:
    name: alloc1
    namespace: default
    annotations: {config.kubernetes.io/path: alloc1.yaml}
  spec:
    kind: network
    selector:
      matchLabels:
        nephio.org/network-instance: vpc-1
        nephio.org/network-name: net1
`)
	out, err = fn.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("prefix: 10.0.1.2/24")) {
		t.Fatalf("ipam-fn: %v, want status.prefix 10.0.1.2/24\n%s", err, out)
	}
	if p := page("/search?q=10.0.1.2"); !strings.Contains(p, "default/alloc1 of") {
		t.Fatalf("the web view does not find alloc1 at 10.0.1.2:\n%s", p)
	}
	srv.Stop(t)
}

// TestControllerAndInjector start ipam-controller and ipam-injector against
// a real API server and ipam-server: both come up, stay up and exit 0 on
// SIGTERM. The API server has no Porch: the injector waits for the
// PackageRevision API (it logs that it cannot list them) without exiting.
func TestControllerAndInjector(t *testing.T) {
	dir := build(t)
	kc, _ := clustertest.APIServer(t)
	srv, addr := clustertest.StartServer(t, filepath.Join(dir, "ipam-server"))

	ctl := proctest.Start(t, filepath.Join(dir, "ipam-controller"), "--kubeconfig", kc, "--server", addr,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:0", "--metal3", "--nvidia")
	ctl.WaitLine(t, "Metal3 front on", 60*time.Second)
	ctl.WaitLine(t, "NVIDIA front on", 60*time.Second)
	ctl.WaitLine(t, "Cluster API front on", 60*time.Second)
	ctl.WaitLine(t, "Starting workers", 60*time.Second)
	// The binary serves a Cluster API claim end to end.
	apply := exec.Command("kubectl", "--kubeconfig", kc, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(`apiVersion: ipam.nephio.org/v1alpha1
kind: InClusterIPPool
metadata: {name: smoke, namespace: default}
spec: {addresses: [10.40.0.10-10.40.0.20], prefix: 24, gateway: 10.40.0.1}
---
apiVersion: ipam.cluster.x-k8s.io/v1beta2
kind: IPAddressClaim
metadata: {name: smoke, namespace: default}
spec:
  poolRef: {apiGroup: ipam.nephio.org, kind: InClusterIPPool, name: smoke}
`)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	var got []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		got, _ = exec.Command("kubectl", "--kubeconfig", kc, "get", "ipaddresses.ipam.cluster.x-k8s.io", "smoke", "-n", "default",
			"-o", "jsonpath={.spec.address}").Output()
		if string(got) == "10.40.0.10" {
			break
		}
	}
	if string(got) != "10.40.0.10" {
		t.Fatalf("IPAddress smoke: address %q, want 10.40.0.10\n%s", got, ctl.Output())
	}
	ctl.Alive(t, 2*time.Second)
	ctl.Stop(t)

	inj := proctest.Start(t, filepath.Join(dir, "ipam-injector"), "--kubeconfig", kc, "--server", addr,
		"--workers", "2", "--resync-interval", "1m", "--metrics-bind-address", "127.0.0.1:0")
	inj.Alive(t, 5*time.Second)
	if panicked([]byte(inj.Output())) {
		t.Fatalf("ipam-injector panicked:\n%s", inj.Output())
	}
	inj.Stop(t)
	srv.Stop(t)
}

// TestImages builds every image with `make images` and runs each with
// --help (skipped where docker is not available).
func TestImages(t *testing.T) {
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: docker not available: %v: %s", err, bytes.TrimSpace(out))
	}
	root := servertest.ModuleRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "images", "IMAGES_DIR="+t.TempDir())
	cmd.Dir = root
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MAKEFLAGS=") && !strings.HasPrefix(e, "MFLAGS=") && !strings.HasPrefix(e, "MAKELEVEL=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make images: %v\n%s", err, out)
	}
	for name := range binaries {
		if name == "ipamctl" || name == "nv-ipam" {
			continue // a CLI, and the CNI plugin inside the ipam-node image (below)
		}
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command("docker", "run", "--rm", "--network", "none", name+":dev", "--help").CombinedOutput()
			if err != nil {
				t.Fatalf("docker run %s:dev --help: %v\n%s", name, err, out)
			}
			if panicked(out) {
				t.Fatalf("%s:dev --help panicked:\n%s", name, out)
			}
		})
	}
	// The ipam-node image carries the CNI plugin it installs on the node.
	t.Run("nv-ipam", func(t *testing.T) {
		out, err := exec.Command("docker", "run", "--rm", "--network", "none", "-e", "CNI_COMMAND=VERSION",
			"--entrypoint", "/nv-ipam", "ipam-node:dev").CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte(`"supportedVersions"`)) {
			t.Fatalf("docker run --entrypoint /nv-ipam ipam-node:dev with CNI_COMMAND=VERSION: %v\n%s", err, out)
		}
	})
}
