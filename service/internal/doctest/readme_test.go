package doctest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nephio-project/ipam/service/cluster/clusterkit"
	"github.com/nephio-project/ipam/service/internal/clustertest"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestReadme runs the walk-throughs of the top-level README and of
// service/README.md: each section from a fresh copy of the repository,
// every command of its fenced blocks exactly as printed, transcripts
// compared line by line (normalize lists what may differ). make run serves
// on the fixed ports 9090 and 8080: the test skips when they are taken.
func TestReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short (the walk-throughs build and run the binaries)")
	}
	servertest.HoldMakeRunPorts(t)
	needPorts(t, "9090", "8080")
	walk(t, servertest.ModuleRoot(t), func(t *testing.T, _ string) string { return t.TempDir() }, "README.md", "service/README.md")
}

// TestComponentReadmes runs the walk-throughs of the component READMEs
// that need no API server, as TestReadme does: the KRM function's (kpt fn
// render of the seed package in /tmp/seed against an ipam-server on the
// default port with its data in /tmp/ipam-kpt) and the etcd store's (three
// etcd members on 20379-22380 and three replicas on 9091-9093). Their
// fixed directories must not exist: the test does not touch data it did
// not write.
func TestComponentReadmes(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short (the walk-throughs build and run the binaries)")
	}
	if _, err := exec.LookPath("kpt"); err != nil {
		t.Skip("SKIPPED: kpt is not on PATH; the KRM function's walk-through runs it")
	}
	servertest.HoldMakeRunPorts(t)
	needPorts(t, "9090", "9091", "9092", "9093", "20379", "20380", "21379", "21380", "22379", "22380")
	for _, d := range fnReadmeDirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Skipf("SKIPPED: %s exists (%v); the KRM function's walk-through writes there", d, err)
		}
	}
	root := servertest.ModuleRoot(t)
	containerMode(t)
	etcd := filepath.Join(root, "bin", "k8s", "etcd")
	if _, err := os.Stat(etcd); err != nil {
		t.Skipf("SKIPPED: %s: %v (make testbin builds it)", etcd, err)
	}
	walk(t, root, func(t *testing.T, dir string) string {
		t.Cleanup(func() {
			for _, d := range fnReadmeDirs {
				_ = os.RemoveAll(d)
			}
		})
		// The copy is a fresh clone but for the tools make testbin built:
		// its `make testbin` finds them built at the pinned versions.
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(root, "bin", "k8s"), filepath.Join(dir, "bin", "k8s")); err != nil {
			t.Fatal(err)
		}
		return t.TempDir()
	}, "functions/ipamfn/README.md", "service/store/etcd/README.md")
}

// fnReadmeDirs are the fixed directories of the KRM function's walk-through.
var fnReadmeDirs = []string{"/tmp/seed", "/tmp/ipam-kpt"}

// The KRM function README's container mode: `make images`, said in its
// prose, then an ipam-server container on a docker network and volume of
// fixed names.
const (
	fnReadme  = "functions/ipamfn/README.md"
	fnSection = "ipam-fn: the KRM function"
)

var fnDocker = []string{
	"docker network create ipam && docker volume create ipam-data",
	"docker run -d --name ipam-server --network ipam -v ipam-data:/data ipam-server:dev",
	"docker inspect -f '{{.NetworkSettings.Networks.ipam.IPAddress}}' ipam-server",
}

// containerMode prepares the container-mode commands of the KRM function's
// walk-through: with docker, `make images` runs before the section and the
// container, network and volume are removed after it (the test skips when
// they exist: it does not touch what it did not make); without docker they
// are not run, and the test says so.
func containerMode(t *testing.T) {
	key := [2]string{fnReadme, fnSection}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		for _, c := range fnDocker {
			notRun[[2]string{fnReadme, c}] = "docker is not available here: " + strings.TrimSpace(string(out))
		}
		t.Cleanup(func() {
			for _, c := range fnDocker {
				delete(notRun, [2]string{fnReadme, c})
			}
		})
		return
	}
	for _, probe := range [][]string{{"container", "inspect", "ipam-server"}, {"network", "inspect", "ipam"}, {"volume", "inspect", "ipam-data"}} {
		if exec.Command("docker", probe...).Run() == nil {
			t.Skipf("SKIPPED: docker %s %s exists; the KRM function's walk-through creates it", probe[0], probe[2])
		}
	}
	given[key] = []string{"make images"}
	t.Cleanup(func() {
		delete(given, key)
		_ = exec.Command("docker", "rm", "-f", "ipam-server").Run()
		_ = exec.Command("docker", "network", "rm", "ipam").Run()
		_ = exec.Command("docker", "volume", "rm", "ipam-data").Run()
	})
}

// The controllers README's walk-through starts its ipam-server on this data
// directory, and its ipam-node with its socket, store and CNI files in
// nodeDir, as printed; the test refuses to touch them unless it created
// them.
const (
	controllersDataDir = "/tmp/ipam-k8s"
	nodeDir            = "/tmp/nv-ipam"
)

// given are the commands a README's prose says were run before a section
// ("With the CRDs installed (`kubectl apply -f ...`)"), by README and
// section heading: the test runs them first. Each must still be in its
// README, between backquotes.
var given = map[[2]string][]string{}

// continues are the sections that go on from the section above them, by
// README and heading: they run in its session (the same copy, API server
// and running servers), as a reader who keeps the same terminal.
var continues = map[[2]string]bool{
	{"service/fronts/controllers/README.md", "Fronts that turn on later"}:             true,
	{"service/fronts/controllers/README.md", "Use it as a Cluster API IPAM provider"}: true,
	{"service/fronts/controllers/README.md", "Use it as the Metal3 IPAM"}:             true,
	{"service/fronts/controllers/README.md", "An entry's prefix wins"}:                true,
	{"service/fronts/controllers/README.md", "Use it for NVIDIA per-node pools"}:      true,
	{"service/fronts/controllers/README.md", "Give pods addresses"}:                   true,
	{"blueprints/ipam/README.md", "Install"}:                                          true,
	{"blueprints/ipam/README.md", "Use it"}:                                           true,
	{"blueprints/ipam/README.md", "Remove it"}:                                        true,
}

// TestControllersReadme runs the walk-throughs of the controllers README
// as TestReadme does, each section against an API server of its own
// (envtest: etcd and kube-apiserver from KUBEBUILDER_ASSETS, no kubelet)
// that ~/.kube/config points at, with kubectl and kpt from PATH.
func TestControllersReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short (the walk-throughs build and run the binaries)")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("SKIPPED: KUBEBUILDER_ASSETS is not set (make test sets it after `make testbin` builds etcd and kube-apiserver)")
	}
	for _, tool := range []string{"kubectl", "kpt"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: %s is not on PATH; the walk-through runs it", tool)
		}
	}
	// ipam-server on 9091; ipam-controller's metrics and health probes on
	// their defaults, 127.0.0.1:8082 and :8081, which another test serves
	// on too; ipam-node's on its defaults, 127.0.0.1:8083 and :8084.
	servertest.HoldMakeRunPorts(t)
	needPorts(t, "9091", "8082", "8081", "8083", "8084")
	for _, d := range []string{controllersDataDir, nodeDir} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Skipf("SKIPPED: %s exists (%v); the walk-through's servers store their data there and the test does not touch data it did not write", d, err)
		}
	}
	const file = "service/fronts/controllers/README.md"
	root := servertest.ModuleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	for key, cmds := range given {
		for _, c := range cmds {
			if key[0] == file && !strings.Contains(string(readme), "`"+c+"`") {
				t.Errorf("%s no longer says `%s` (given before section %q): update given", file, c, key[1])
			}
		}
	}
	for key := range continues {
		if key[0] == file && !strings.Contains(string(readme), "# "+key[1]+"\n") {
			t.Errorf("%s no longer has the section %q (continues): update continues", file, key[1])
		}
	}
	walk(t, root, func(t *testing.T, dir string) string {
		t.Cleanup(func() { _ = os.RemoveAll(controllersDataDir); _ = os.RemoveAll(nodeDir) })
		home := t.TempDir()
		writeKubeconfig(t, filepath.Join(home, ".kube", "config"))
		return home
	}, file)
}

// TestBlueprintReadmes runs the install commands of the blueprints'
// READMEs as TestControllersReadme does, each README against an API server
// of its own.
func TestBlueprintReadmes(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short (the walk-throughs run kpt against an API server)")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("SKIPPED: KUBEBUILDER_ASSETS is not set (make test sets it after `make testbin` builds etcd and kube-apiserver)")
	}
	for _, tool := range []string{"kubectl", "kpt", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: %s is not on PATH; the walk-through runs it", tool)
		}
	}
	walk(t, servertest.ModuleRoot(t), func(t *testing.T, _ string) string {
		home := t.TempDir()
		writeKubeconfig(t, filepath.Join(home, ".kube", "config"))
		return home
	}, "blueprints/ipam-metal3/README.md", "blueprints/ipam-nvidia/README.md", "blueprints/ipam-nephio/README.md")
}

// TestBlueprintIPAMReadme runs the walk-throughs of service/cluster's and
// blueprints/ipam's READMEs on the project's cluster: make cluster finds it
// up, kpt installs the package, the seed gets its results from the
// controller pod, ipamctl runs as a Job, and kpt removes it all again. The
// fresh copy shares the cluster, and the tools it was built with, through
// links in its bin/; ~/.kube/config is the cluster's kubeconfig.
func TestBlueprintIPAMReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short (the walk-through installs the blueprint on the cluster)")
	}
	for _, tool := range []string{"kubectl", "kpt", "openssl", "docker"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: %s is not on PATH; the walk-through runs it", tool)
		}
	}
	c := clusterkit.Use(t)
	kubeconfig, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	walk(t, c.Root, func(t *testing.T, dir string) string {
		home := t.TempDir()
		if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".kube", "config"), kubeconfig, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"k8s", "cni", "cluster"} {
			if err := os.Symlink(filepath.Join(c.Root, "bin", d), filepath.Join(dir, "bin", d)); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			if t.Failed() { // what a walk-through that stopped half-way left
				_, _ = c.Kubectl("delete", "ipallocations.ipam.nephio.org,ipprefixes.ipam.nephio.org,networkinstances.ipam.nephio.org", "--all", "--timeout=60s")
				_, _ = c.Kpt("live", "destroy", filepath.Join(dir, "blueprints", "ipam"))
			}
			_, _ = c.Kubectl("wait", "--for=delete", "namespace/ipam-system", "--timeout=120s")
			c.FreeVolumes(t)
		})
		return home
	}, "service/cluster/README.md", "blueprints/ipam/README.md")
}

// writeKubeconfig starts an API server (envtest, no CRDs) for the test and
// writes a kubeconfig for it to path.
func writeKubeconfig(t *testing.T, path string) {
	t.Helper()
	logf.SetLogger(logr.Discard())
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	clustertest.WriteKubeconfig(t, cfg, path)
}

// walk runs the walk-throughs of files, a subtest per README and section:
// setup prepares a section in the fresh copy dir and returns the HOME its
// commands run with.
func walk(t *testing.T, root string, setup func(t *testing.T, dir string) string, files ...string) {
	path := filepath.Join(root, "bin") + ":" + os.Getenv("PATH")
	seen := map[[2]string]bool{}
	for _, file := range files {
		all, err := steps(root, file, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(file, func(t *testing.T) {
			for len(all) > 0 {
				n := 1
				for n < len(all) && (all[n].section == all[0].section || continues[[2]string{file, all[n].section}]) {
					n++
				}
				sec := all[:n]
				all = all[n:]
				t.Run(sec[0].section, func(t *testing.T) {
					dir := freshCopy(t, root)
					s := newSession(t, dir, commandEnv(t, dir, setup(t, dir)))
					for _, c := range given[[2]string{file, sec[0].section}] {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
						out, err := s.bash(ctx, c).CombinedOutput()
						cancel()
						if err != nil {
							t.Fatalf("%s, before section %q: %s: %v\n%s", file, sec[0].section, c, err, out)
						}
					}
					for _, st := range sec {
						s.run(st, seen)
					}
				})
			}
		})
	}
	for key, why := range notRun {
		for _, f := range files {
			if key[0] == f && !seen[key] {
				t.Errorf("%s no longer has %q, which the test does not run (%s): drop it from notRun", key[0], key[1], why)
			}
		}
	}
}
