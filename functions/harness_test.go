package functions_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nephio-project/ipam/functions/internal/pkgtest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nephio-project/ipam/service/server/servertest"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binaries builds ipam-fn, ipam-server, ipamctl and the no-op function
// (as noop) once per test binary and returns the directory holding them.
func binaries(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "ipam-fn-test-bin-")
		if binErr != nil {
			return
		}
		// One build for all four: ipam-fn, ipam-server, ipamctl and noop.
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator),
			"./functions/cmd/ipam-fn", "./service/cmd/ipam-server", "./service/cmd/ipamctl", "./functions/internal/noop")
		cmd.Dir = pkgtest.ModuleRoot(t)
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
		t.Fatalf("kpt is not on PATH: these tests run the real `kpt fn render --allow-exec` (kpt 1.0.0-beta): %v", err)
	}
	return p
}

// startServer runs a real ipam-server with a fresh data directory on a
// free loopback port until the test ends and returns its address. The
// port was free a moment before the server binds it; when another test's
// process took it meanwhile, the server starts again on another (three
// attempts).
func startServer(t testing.TB) string {
	t.Helper()
	return servertest.StartOnFreePorts(t, "ipam-server", func() (string, string, error) { return tryStartServer(t) })
}

// tryStartServer is one attempt of startServer: the address, the log so
// far and why the server at that address is not serving, if it is not.
func tryStartServer(t testing.TB) (string, string, error) {
	t.Helper()
	bin := filepath.Join(binaries(t), "ipam-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var log servertest.LogBuffer
	cmd := exec.Command(bin, "--listen", addr, "--data-dir", t.TempDir(), "--log-format", "text", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error // set before exited is closed
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := servertest.WaitServingOrExit(conn, 30*time.Second, exited); err != nil {
		stop()
		if errors.Is(err, servertest.ErrExited) {
			err = fmt.Errorf("%w: %v", err, waitErr)
		}
		return addr, log.String(), fmt.Errorf("at %s: %w", addr, err)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("ipam-server log:\n%s", log.String())
		}
	})
	return addr, "", nil
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
	pkgtest.ReplaceIn(t, filepath.Join(dir, "Kptfile"), execPlaceholder, "exec: "+fnBin)
	pkgtest.ReplaceIn(t, filepath.Join(dir, "ipam-fn-config.yaml"), serverPlaceholder, "server: "+addr)
}
