package functions_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nephio-project/ipam/functions/internal/pkgtest"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestNephioPipeline renders Nephio-shaped packages (testdata/nephio) with
// the real kpt and the real ipam-fn against one real ipam-server, as
// Nephio's pipeline does: the infra package (NetworkInstance, IPPrefixes
// and a VLANIndex of Nephio's resource API) first, then each workload
// package, whose IPClaims and VLANClaims select from it. Each package
// then goes through its .steps; every render is checked as TestGolden
// checks it (diff, results, and a second render that changes no byte).
func TestNephioPipeline(t *testing.T) {
	root := filepath.Join(pkgtest.ModuleRoot(t), "testdata", "nephio")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	cases := []string{"infra"}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "infra" {
			cases = append(cases, e.Name())
		}
	}
	for _, want := range []string{"claim_network_prefix", "claim_loopback", "claim_pool", "missing_ipclaim", "workload"} {
		if !slices.Contains(cases, want) {
			t.Errorf("testdata/nephio/%s is missing", want)
		}
	}
	fnBin := filepath.Join(binaries(t), "ipam-fn")
	kptPath(t)
	addr := startServer(t)
	for _, name := range cases {
		ok := t.Run(name, func(t *testing.T) {
			caseDir := filepath.Join(root, name)
			pkg := filepath.Join(t.TempDir(), name)
			pkgtest.CopyPackage(t, caseDir, pkg)
			point(t, pkg, fnBin, addr)
			pkgtest.Git(t, pkg, "init", "--quiet")
			for _, s := range steps(t, caseDir) {
				if s.overlay != "" && overlay(t, s.overlay, pkg) {
					pkgtest.ReplaceIn(t, filepath.Join(pkg, "Kptfile"), execPlaceholder, "exec: "+fnBin)
				}
				pkgtest.CommitAll(t, pkg, "input of "+s.name)
				runStep(t, s, pkg)
			}
		})
		if !ok && name == "infra" {
			t.Fatal("the infra package did not render; the workload packages select from it")
		}
	}
}

// runServer runs the ipam-server binary on addr with its file store in
// dataDir until stop is called (or the test ends).
func runServer(t *testing.T, addr, dataDir string) (stop func()) {
	t.Helper()
	var log servertest.LogBuffer
	cmd := exec.Command(filepath.Join(binaries(t), "ipam-server"), "--listen", addr, "--data-dir", dataDir, "--log-format", "text", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("ipam-server log:\n%s", log.String())
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := servertest.WaitServingOrExit(conn, 30*time.Second, exited); err != nil {
		t.Fatalf("ipam-server at %s: %v\n%s", addr, err, log.String())
	}
	return stop
}

// TestNephioRestart: Nephio's claims survive a restart of ipam-server on
// its file store. The infra and workload packages rendered before it
// render again to the same bytes after it, and a VLANClaim added then
// gets the next free ID, not one the restored claims hold.
func TestNephioRestart(t *testing.T) {
	root := filepath.Join(pkgtest.ModuleRoot(t), "testdata", "nephio")
	fnBin := filepath.Join(binaries(t), "ipam-fn")
	kptPath(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dataDir := t.TempDir()
	stop := runServer(t, addr, dataDir)
	pkgs := map[string]string{}
	for _, name := range []string{"infra", "workload"} {
		pkg := filepath.Join(t.TempDir(), name)
		pkgtest.CopyPackage(t, filepath.Join(root, name), pkg)
		point(t, pkg, fnBin, addr)
		pkgtest.Git(t, pkg, "init", "--quiet")
		pkgtest.CommitAll(t, pkg, "input")
		if out, ok := render(t, pkg, t.TempDir()); !ok {
			t.Fatalf("render %s: %s", name, out)
		}
		pkgtest.CommitAll(t, pkg, "rendered")
		pkgs[name] = pkg
	}

	stop()
	runServer(t, addr, dataDir)
	for _, name := range []string{"infra", "workload"} {
		if out, ok := render(t, pkgs[name], t.TempDir()); !ok {
			t.Fatalf("render %s after the restart: %s", name, out)
		}
		if st := pkgtest.Git(t, pkgs[name], "status", "--porcelain"); st != "" {
			t.Errorf("%s renders differently after the restart:\n%s", name, pkgtest.Git(t, pkgs[name], "diff"))
		}
	}
	f := filepath.Join(pkgs["workload"], "vlanclaim.yaml")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, []byte("---\napiVersion: vlan.resource.nephio.org/v1alpha1\nkind: VLANClaim\nmetadata:\n  name: upf-cluster01-n9\nspec:\n  vlanIndex:\n    name: cluster01\n")...)
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, ok := render(t, pkgs["workload"], t.TempDir()); !ok {
		t.Fatalf("render with a new VLANClaim: %s", out)
	}
	if diff := pkgtest.Git(t, pkgs["workload"], "diff", "vlanclaim.yaml"); !strings.Contains(diff, "+  vlanID: 6") {
		t.Errorf("the new VLANClaim did not get ID 6 (1, 2-5 and 100-109 are held):\n%s", diff)
	}
}

// TestNephioAudit: ipamctl audit of a checkout of Nephio's packages finds
// nothing after a render (every VRF, prefix, VLAN index and claim is
// declared), and a VLAN ID edited by hand is drift.
func TestNephioAudit(t *testing.T) {
	bin := binaries(t)
	kptPath(t)
	addr := startServer(t)
	repo := t.TempDir()
	pkgtest.Git(t, repo, "init", "--quiet")
	root := filepath.Join(pkgtest.ModuleRoot(t), "testdata", "nephio")
	for _, name := range []string{"infra", "workload", "claim_pool"} {
		pkg := filepath.Join(repo, name)
		pkgtest.CopyPackage(t, filepath.Join(root, name), pkg)
		point(t, pkg, filepath.Join(bin, "ipam-fn"), addr)
		if out, ok := render(t, pkg, t.TempDir()); !ok {
			t.Fatalf("render %s:\n%s", name, out)
		}
	}
	pkgtest.CommitAll(t, repo, "rendered")
	audit := func() (string, error) {
		out, err := exec.Command(filepath.Join(bin, "ipamctl"), "--server", addr, "audit", repo).CombinedOutput()
		return string(out), err
	}
	if out, err := audit(); err != nil || !strings.Contains(out, "no findings") {
		t.Fatalf("a freshly rendered checkout: %v\n%s", err, out)
	}
	pkgtest.ReplaceIn(t, filepath.Join(repo, "workload", "vlanclaim.yaml"), "vlanID: 1\n", "vlanID: 7\n")
	out, err := audit()
	if err == nil || !strings.Contains(out, "VLANClaim upf-cluster01-n3") || !strings.Contains(out, "Git says VLAN ID 7, the server holds VLAN ID 1") {
		t.Fatalf("a VLAN ID edited by hand: %v\n%s", err, out)
	}
	t.Logf("ipamctl audit:\n%s", out)
}
