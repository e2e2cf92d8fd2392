package functions_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nephio-project/ipam/service/server/servertest"
)

// repoRoot is the module root, the parent of functions/.
func repoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binaries builds ipam-fn, ipam-server and the no-op function (as noop)
// once per test binary and returns the directory holding them.
func binaries(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "ipam-fn-test-bin-")
		if binErr != nil {
			return
		}
		// One build for all three: ipam-fn, ipam-server and noop.
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator),
			"./functions/cmd/ipam-fn", "./service/cmd/ipam-server", "./functions/internal/noop")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// kptPath is the kpt binary; the tests fail (never skip) without it.
func kptPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("kpt")
	if err != nil {
		t.Fatalf("kpt is not on PATH: these tests run the real `kpt fn render --allow-exec` (kpt 1.0.0-beta, see /work/shared/ENVIRONMENT.md): %v", err)
	}
	return p
}

// startServer runs a real ipam-server with a fresh data directory on a
// free loopback port until the test ends and returns its address.
func startServer(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(binaries(t), "ipam-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var log bytes.Buffer
	cmd := exec.Command(bin, "--listen", addr, "--data-dir", t.TempDir(), "--log-format", "text", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("ipam-server log:\n%s", log.String())
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	serving := make(chan error, 1)
	go func() { serving <- servertest.WaitServing(conn, 30*time.Second) }()
	select {
	case err := <-serving:
		if err != nil {
			t.Fatalf("ipam-server at %s: %v\n%s", addr, err, log.String())
		}
	case err := <-exited:
		t.Fatalf("ipam-server exited: %v\n%s", err, log.String())
	}
	return addr
}

// render runs `kpt fn render --allow-exec` on dir, writing the function
// results to resultsDir. It returns kpt's combined output and whether it
// succeeded. IPAM_SERVER is removed from the environment so that the
// package's functionConfig is what counts.
func render(t testing.TB, dir, resultsDir string) (string, bool) {
	t.Helper()
	return renderEnv(t, dir, resultsDir)
}

// renderEnv is render with env (KEY=value) added to the environment.
func renderEnv(t testing.TB, dir, resultsDir string, env ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kptPath(t), "fn", "render", "--allow-exec", "--truncate-output=false", "--results-dir", resultsDir, dir)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "IPAM_SERVER=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("kpt fn render %s: %v\n%s", dir, err, out)
	}
	return string(out), err == nil
}

// git runs git in dir and returns its output.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=ipam-fn test", "-c", "user.email=test@example.invalid",
		"-c", "commit.gpgsign=false", "-c", "core.autocrlf=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// commitAll records the package as it is now.
func commitAll(t testing.TB, dir, msg string) {
	t.Helper()
	git(t, dir, "add", "--all", ".")
	git(t, dir, "commit", "--quiet", "--allow-empty", "-m", msg)
}

var (
	indexLine = regexp.MustCompile(`(?m)^index [0-9a-f]+\.\.[0-9a-f]+( [0-7]+)?\n`)
	timestamp = regexp.MustCompile(`(lastTransitionTime: )"?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})"?`)
)

// diff is the package's change since the last commit as `git diff` shows
// it, with blob hashes dropped and condition times masked.
func diff(t testing.TB, dir string) string {
	t.Helper()
	d := git(t, dir, "diff", "--no-color", "--no-ext-diff")
	d = indexLine.ReplaceAllString(d, "")
	return timestamp.ReplaceAllString(d, `${1}"<masked>"`)
}

// copyPackage copies the package at src into dst, leaving out the
// expectations (.expected, .steps).
func copyPackage(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if d.Name() == ".expected" || d.Name() == ".steps" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The placeholders a golden package is written with: the exec path as run
// from the repository root after `make build`, and the server's default
// address.
const (
	execPlaceholder   = "exec: bin/ipam-fn"
	serverPlaceholder = "server: 127.0.0.1:9090"
)

// point rewrites the package's Kptfile and functionConfig to run fnBin
// against the server at addr.
func point(t testing.TB, dir, fnBin, addr string) {
	t.Helper()
	replaceIn(t, filepath.Join(dir, "Kptfile"), execPlaceholder, "exec: "+fnBin)
	replaceIn(t, filepath.Join(dir, "ipam-fn-config.yaml"), serverPlaceholder, "server: "+addr)
}

func replaceIn(t testing.TB, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s does not contain %q", file, old)
	}
	if err := os.WriteFile(file, bytes.ReplaceAll(b, []byte(old), []byte(new)), 0o644); err != nil {
		t.Fatal(err)
	}
}
