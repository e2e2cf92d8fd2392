package containertest_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nephio-project/ipam/functions/internal/pkgtest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// The images the test builds with `make images` and runs. The pipeline
// names the function image in full: kpt 1.0.0-beta rewrites a bare
// `ipam-fn:dev` to `gcr.io/kpt-fn/ipam-fn:dev`, which cannot be pulled.
const (
	fnImage     = "docker.io/library/ipam-fn:dev"
	serverImage = "ipam-server:dev"
)

// imageSpecs is the part of the Makefile's IMAGES the test needs
// (name:main-package:Dockerfile), so that it does not build the others.
var imageSpecs = []string{
	"ipam-fn:./functions/cmd/ipam-fn:functions/Dockerfile.local",
	"ipam-server:./service/cmd/ipam-server:service/Dockerfile.local",
}

// TestContainerMode renders the seed package in kpt container mode against
// ipam-server running as a container: first without --allow-network (a
// clear error naming the flag, the package unchanged), then with it (the
// same diff as the exec-mode golden test), then, after a restart of the
// server container on its volume, again with a byte-identical result.
func TestContainerMode(t *testing.T) {
	start := time.Now()
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: docker not available: %v: %s", err, bytes.TrimSpace(out))
	}
	kpt, err := exec.LookPath("kpt")
	if err != nil {
		t.Fatalf("kpt is not on PATH: this test runs the real `kpt fn render` in container mode (kpt 1.0.0-beta): %v", err)
	}
	root := pkgtest.ModuleRoot(t)
	buildImages(t, root)
	for _, img := range []string{fnImage, serverImage} {
		checkImage(t, img)
	}

	id := randomID(t)
	network := "ipam-e2e-" + id
	volume := "ipam-e2e-data-" + id
	server := "ipam-e2e-server-" + id
	docker(t, "network", "create", "--label", "ipam-e2e="+id, network)
	t.Cleanup(func() { dockerQuiet(t, "network", "rm", network) })
	docker(t, "volume", "create", "--label", "ipam-e2e="+id, volume)
	t.Cleanup(func() { dockerQuiet(t, "volume", "rm", "-f", volume) })
	docker(t, "run", "-d", "--name", server, "--label", "ipam-e2e="+id,
		"--network", network, "-v", volume+":/data", serverImage, "--listen=0.0.0.0:9090", "--data-dir=/data", "--log-format=text")
	// Registered after the network and volume: cleanups run last first,
	// so the container goes before what it uses.
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", server).CombinedOutput()
			t.Logf("ipam-server container log:\n%s", out)
		}
		dockerQuiet(t, "rm", "-f", "-v", server)
	})

	// kpt 1.0.0-beta starts function containers with `--network host` under
	// --allow-network (and `--network none` without it), so the function
	// reaches the server at its address on the private network.
	addr := serverAddr(t, server, network) + ":9090"
	waitServing(t, addr)

	pkg := filepath.Join(t.TempDir(), "seed")
	pkgtest.CopyPackage(t, filepath.Join(root, "testdata", "seed"), pkg)
	pkgtest.ReplaceIn(t, filepath.Join(pkg, "Kptfile"), "exec: bin/ipam-fn", "image: "+fnImage)
	pkgtest.ReplaceIn(t, filepath.Join(pkg, "ipam-fn-config.yaml"), "server: 127.0.0.1:9090", "server: "+addr)
	pkgtest.Git(t, pkg, "init", "--quiet")
	pkgtest.CommitAll(t, pkg, "seed, container mode")

	// 1. Without --allow-network: the function has no network; the result
	// says what to add, and no file changes.
	out, results, ok := render(t, kpt, pkg)
	if ok {
		t.Fatalf("kpt fn render without --allow-network succeeded:\n%s", out)
	}
	const hint = "kpt fn render needs --allow-network"
	if !strings.Contains(results, hint) || !strings.Contains(out, hint) {
		t.Errorf("render without --allow-network: want %q in the output and results.yaml\n--- kpt output\n%s\n--- results.yaml\n%s", hint, out, results)
	}
	t.Logf("without --allow-network, kpt says:\n%s", out)
	if d := pkgtest.Diff(t, pkg); d != "" {
		t.Fatalf("a failed render changed the package:\n%s", d)
	}

	// 2. With --allow-network: the same diff as the exec-mode golden test.
	out, results, ok = render(t, kpt, pkg, "--allow-network")
	if !ok {
		t.Fatalf("kpt fn render --allow-network failed:\n%s\n--- results.yaml\n%s", out, results)
	}
	got := pkgtest.Diff(t, pkg)
	want, err := os.ReadFile(filepath.Join(root, "testdata", "seed", ".expected", "diff.patch"))
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("container-mode render differs from testdata/seed/.expected/diff.patch (the exec-mode golden)\n--- got\n%s\n--- want\n%s\n--- kpt output\n%s", got, want, out)
	}
	for _, v := range []string{"+  prefix: 10.0.1.2/24\n+  gateway: 10.0.1.1\n", "+  prefix: 10.0.1.10/24\n", "+  prefix: 10.1.0.0/16\n"} {
		if !strings.Contains(got, v) {
			t.Errorf("rendered package lacks %q", v)
		}
	}
	pkgtest.CommitAll(t, pkg, "rendered")
	rendered := readTree(t, pkg)

	// 3. Restart the server container: it restores its state from the
	// volume, and a render changes nothing, byte for byte.
	docker(t, "restart", "--time", "20", server)
	if again := serverAddr(t, server, network) + ":9090"; again != addr {
		t.Fatalf("ipam-server came back at %s, not %s", again, addr)
	}
	waitServing(t, addr)
	if got, want := allocations(t, addr, "seed"), []string{"10.0.1.10/24", "10.0.1.2/24", "10.1.0.0/16"}; !slices.Equal(got, want) {
		t.Fatalf("after the restart ipam-server holds allocations %v of owner seed, want %v (restored from the volume)", got, want)
	}
	out, results, ok = render(t, kpt, pkg, "--allow-network")
	if !ok {
		t.Fatalf("kpt fn render --allow-network after the restart failed:\n%s\n--- results.yaml\n%s", out, results)
	}
	if after := readTree(t, pkg); !maps(rendered, after) {
		t.Fatalf("the render after the restart changed the package:\n%s", pkgtest.Git(t, pkg, "diff"))
	}
	t.Logf("container mode end to end in %s (image build included)", time.Since(start).Round(time.Second))
}

// buildImages runs `make images` (the same commands users run) for the
// images the test needs, in a build directory of its own; docker's build
// cache keeps the image IDs when the binaries did not change.
func buildImages(t *testing.T, root string) {
	t.Helper()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "images",
		"IMAGES="+strings.Join(imageSpecs, " "), "IMAGES_DIR="+t.TempDir())
	cmd.Dir = root
	for _, e := range os.Environ() {
		// Run as a make of its own, not as a sub-make of `make test`.
		if !strings.HasPrefix(e, "MAKEFLAGS=") && !strings.HasPrefix(e, "MFLAGS=") && !strings.HasPrefix(e, "MAKELEVEL=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make images: %v\n%s", err, out)
	}
	t.Logf("make images (%s):\n%s", time.Since(began).Round(time.Second), out)
}

// checkImage checks that img runs as a non-root numeric user and has no
// shell.
func checkImage(t *testing.T, img string) {
	t.Helper()
	user := strings.TrimSpace(docker(t, "image", "inspect", "--format", "{{.Config.User}}", img))
	if user != "65532:65532" {
		t.Errorf("%s runs as user %q, want 65532:65532", img, user)
	}
	if out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", img, "-c", "true").CombinedOutput(); err == nil {
		t.Errorf("%s has a shell:\n%s", img, out)
	}
}

// render runs kpt fn render on pkg with extra flags and returns its output,
// the results.yaml it wrote and whether it succeeded.
func render(t *testing.T, kpt, pkg string, flags ...string) (string, string, bool) {
	t.Helper()
	resultsDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append([]string{"fn", "render", "--truncate-output=false", "--results-dir", resultsDir}, flags...)
	cmd := exec.CommandContext(ctx, kpt, append(args, pkg)...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "IPAM_SERVER=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("kpt fn render: %v\n%s", err, out)
	}
	results, rerr := os.ReadFile(filepath.Join(resultsDir, "results.yaml"))
	if rerr != nil {
		t.Fatalf("kpt fn render wrote no results.yaml: %v\n%s", rerr, out)
	}
	return string(out), string(results), err == nil
}

// serverAddr is the IP address of container on network.
func serverAddr(t *testing.T, container, network string) string {
	t.Helper()
	ip := strings.TrimSpace(docker(t, "inspect", "--format",
		`{{(index .NetworkSettings.Networks "`+network+`").IPAddress}}`, container))
	if ip == "" {
		t.Fatalf("container %s has no address on network %s", container, network)
	}
	return ip
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// waitServing waits for the health service of the server at addr.
func waitServing(t *testing.T, addr string) {
	t.Helper()
	if err := servertest.WaitServing(dial(t, addr), 60*time.Second); err != nil {
		t.Fatalf("ipam-server container at %s: %v", addr, err)
	}
}

// allocations lists the allocated prefixes of owner, sorted.
func allocations(t *testing.T, addr, owner string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := ipamv1.NewIPAMClient(dial(t, addr)).List(ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Owner: owner})
	if err != nil {
		t.Fatalf("List allocations of %s: %v", owner, err)
	}
	var out []string
	for _, o := range resp.GetObjects() {
		out = append(out, o.GetAllocation().GetResult().GetPrefix())
	}
	slices.Sort(out)
	return out
}

// docker runs docker and returns its output; it fails the test on error.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// dockerQuiet runs docker for a cleanup and only logs a failure.
func dockerQuiet(t *testing.T, args ...string) {
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Logf("cleanup: docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func randomID(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// readTree reads every file of the package but .git.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[path] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
