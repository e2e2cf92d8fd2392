// Package cmd_test starts every binary the project ships, as a user would:
// built with go build, run as a subprocess. A test that calls a package's
// Run in process cannot catch a panic at flag registration or in main.
package cmd_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

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

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// build builds every main package once, with one go build, into a
// directory shared by the tests of this package.
func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root := servertest.ModuleRoot(t)
		binDir, buildErr = os.MkdirTemp("", "ipam-smoke-bin-")
		if buildErr != nil {
			return
		}
		var pkgs []string
		for _, p := range mainPackages(t, root) {
			pkgs = append(pkgs, "./"+p)
		}
		cmd := exec.Command("go", append([]string{"build", "-o", binDir + "/"}, pkgs...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New("go build " + strings.Join(pkgs, " ") + ": " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

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

// proc is a started binary whose combined output is collected.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	line chan string
	done chan error
}

// start runs bin with args; its stderr and stdout lines go to p.out and,
// until nobody reads them, to p.line.
func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), line: make(chan string, 1024), done: make(chan error, 1)}
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.line <- sc.Text():
			default:
			}
		}
	}()
	go func() { err := p.cmd.Wait(); w.Close(); p.done <- err }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitLine returns the first line containing want, failing if the process
// exits or the timeout passes first.
func (p *proc) waitLine(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-p.line:
			if strings.Contains(l, want) {
				return l
			}
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited (%v) before printing %q", p.cmd.Path, err, want)
		case <-deadline:
			t.Fatalf("%s printed no %q within %s", p.cmd.Path, want, timeout)
		}
	}
}

// stop sends SIGTERM and wants a clean exit 0.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("%s after SIGTERM: %v, want exit 0", filepath.Base(p.cmd.Path), err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30s of SIGTERM", filepath.Base(p.cmd.Path))
	}
}

// alive fails if the process exited, and waits d to see it stay up.
func (p *proc) alive(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		t.Fatalf("%s exited (%v); want it to keep running", filepath.Base(p.cmd.Path), err)
	case <-time.After(d):
	}
}

// TestServerCtlFunction starts ipam-server with the demo VRF and the web
// view, lists it with ipamctl and in the web view, allocates with ipam-fn
// over a ResourceList on stdin, finds the address in the web view, and
// stops the server with SIGTERM.
func TestServerCtlFunction(t *testing.T) {
	dir := build(t)
	srv := start(t, filepath.Join(dir, "ipam-server"), "--listen", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--demo", "--log-format", "json", "--web-addr", "127.0.0.1:0")
	var serving, webView struct{ Addr string }
	if err := json.Unmarshal([]byte(srv.waitLine(t, `"msg":"serving"`, 30*time.Second)), &serving); err != nil || serving.Addr == "" {
		t.Fatalf("the serving line has no addr: %v", err)
	}
	if err := json.Unmarshal([]byte(srv.waitLine(t, `"msg":"web"`, 30*time.Second)), &webView); err != nil || webView.Addr == "" {
		t.Fatalf("the web line has no addr: %v", err)
	}
	srv.waitLine(t, `"msg":"ready"`, 30*time.Second)
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
	srv.stop(t)
}

// kubeconfig starts a real kube-apiserver + etcd (envtest) with the ipam
// CRDs and writes a kubeconfig file for it.
func kubeconfig(t *testing.T) string {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("SKIPPED: KUBEBUILDER_ASSETS is not set (make test sets it after `make testbin` builds etcd and kube-apiserver)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths: []string{filepath.Join(servertest.ModuleRoot(t), "api", "ipam", "v1alpha1", "crds"),
			filepath.Join(servertest.ModuleRoot(t), "api", "capi", "crds"), filepath.Join(servertest.ModuleRoot(t), "api", "metal3", "v1alpha1", "crds"),
			filepath.Join(servertest.ModuleRoot(t), "api", "nvidia", "v1alpha1", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestControllerAndInjector start ipam-controller and ipam-injector against
// a real API server and ipam-server: both come up, stay up and exit 0 on
// SIGTERM. The API server has no Porch: the injector waits for the
// PackageRevision API (it logs that it cannot list them) without exiting.
func TestControllerAndInjector(t *testing.T) {
	dir := build(t)
	kc := kubeconfig(t)
	srv := start(t, filepath.Join(dir, "ipam-server"), "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	var serving struct{ Addr string }
	if err := json.Unmarshal([]byte(srv.waitLine(t, `"msg":"serving"`, 30*time.Second)), &serving); err != nil {
		t.Fatal(err)
	}
	srv.waitLine(t, `"msg":"ready"`, 30*time.Second)

	ctl := start(t, filepath.Join(dir, "ipam-controller"), "--kubeconfig", kc, "--server", serving.Addr,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:0", "--metal3", "--nvidia")
	ctl.waitLine(t, "Metal3 front on", 60*time.Second)
	ctl.waitLine(t, "NVIDIA front on", 60*time.Second)
	ctl.waitLine(t, "Cluster API front on", 60*time.Second)
	ctl.waitLine(t, "Starting workers", 60*time.Second)
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
	var addr []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		addr, _ = exec.Command("kubectl", "--kubeconfig", kc, "get", "ipaddresses.ipam.cluster.x-k8s.io", "smoke", "-n", "default",
			"-o", "jsonpath={.spec.address}").Output()
		if string(addr) == "10.40.0.10" {
			break
		}
	}
	if string(addr) != "10.40.0.10" {
		t.Fatalf("IPAddress smoke: address %q, want 10.40.0.10\n%s", addr, ctl.output())
	}
	ctl.alive(t, 2*time.Second)
	ctl.stop(t)

	inj := start(t, filepath.Join(dir, "ipam-injector"), "--kubeconfig", kc, "--server", serving.Addr,
		"--workers", "2", "--resync-interval", "1m", "--metrics-bind-address", "127.0.0.1:0")
	inj.alive(t, 5*time.Second)
	if panicked([]byte(inj.output())) {
		t.Fatalf("ipam-injector panicked:\n%s", inj.output())
	}
	inj.stop(t)
	srv.stop(t)
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
