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
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

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

// The controllers README's walk-through starts its ipam-server on this data
// directory, as printed; the test refuses to touch one it did not create.
const controllersDataDir = "/tmp/ipam-k8s"

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
	// on too.
	servertest.HoldMakeRunPorts(t)
	needPorts(t, "9091", "8082", "8081")
	if _, err := os.Stat(controllersDataDir); !errors.Is(err, os.ErrNotExist) {
		t.Skipf("SKIPPED: %s exists (%v); the walk-through's ipam-server stores its data there and the test does not touch data it did not write", controllersDataDir, err)
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
		t.Cleanup(func() { _ = os.RemoveAll(controllersDataDir) })
		home := t.TempDir()
		writeKubeconfig(t, filepath.Join(home, ".kube", "config"))
		return home
	}, file)
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
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
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
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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
