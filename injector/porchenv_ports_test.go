package injector

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestServeOnFreePortSkipsATakenPort starts Porch's function runner on a
// port another process holds: it must exit, be started again on another
// port, and the port returned must be its own.
func TestServeOnFreePortSkipsATakenPort(t *testing.T) {
	runner := filepath.Join(repoRoot(t), "bin/porch/function-runner")
	if _, err := os.Stat(runner); err != nil {
		t.Fatalf("%s is missing: run make porch-env", runner)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port

	e := &porchEnv{dir: t.TempDir()}
	e.logs = filepath.Join(e.dir, "logs")
	must(t, os.MkdirAll(e.logs, 0o755))
	picks := 0
	e.ports = func(t testing.TB) int {
		picks++
		if picks == 1 {
			return takenPort
		}
		return freePort(t)
	}
	cfg := filepath.Join(e.dir, "runner-config.yaml")
	must(t, os.WriteFile(cfg, []byte("functions: []\n"), 0o644))
	port := e.serveOnFreePort(t, "function-runner", runner, func(port int) []string {
		return []string{"--disable-runtimes=pod", "--port", strconv.Itoa(port), "--functions", e.dir, "--config", cfg}
	})
	if picks != 2 || port == takenPort {
		t.Fatalf("served on port %d after %d picks; the taken port is %d", port, picks, takenPort)
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	must(t, err)
	c.Close()

	// The test process holds the taken port; a process that does not
	// listen there is not seen as listening.
	if ok, err := listensOn(os.Getpid(), takenPort); !ok || err != nil {
		t.Errorf("listensOn(this process, %d) = %v, %v; want true", takenPort, ok, err)
	}
	if ok, err := listensOn(os.Getpid(), port); ok || err != nil {
		t.Errorf("listensOn(this process, the runner's port %d) = %v, %v; want false", port, ok, err)
	}
}
