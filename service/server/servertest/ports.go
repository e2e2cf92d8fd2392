package servertest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// portAttempts is how many times StartOnFreePorts tries.
const portAttempts = 3

// StartOnFreePorts starts a process that listens on ports the test picked
// free (closed again before the process binds them) and returns what try
// returns when it succeeds. A port can be taken meanwhile by a process of
// another test package; the process then exits saying "address already in
// use", and try is called again, picking other ports (three attempts in
// all). try returns the process's log with an error, and the test fails
// naming what and the log when the error is of another kind or the last
// attempt fails.
func StartOnFreePorts[T any](t testing.TB, what string, try func() (T, string, error)) T {
	t.Helper()
	for attempt := 1; ; attempt++ {
		v, log, err := try()
		if err == nil {
			return v
		}
		if attempt == portAttempts || !strings.Contains(log, "address already in use") {
			t.Fatalf("%s (attempt %d): %v\n--- its log ---\n%s", what, attempt, err, log)
		}
		t.Logf("%s: %v; a port was taken before it bound it, starting it again on other ports", what, err)
	}
}

// HoldMakeRunPorts keeps every other test that calls it waiting until t
// ends: the tests that serve on make run's fixed addresses
// (127.0.0.1:9090, 127.0.0.1:8080) or on ipam-controller's default ones
// (127.0.0.1:8082, :8081) call it before they check the ports, so that two
// test packages running at once never race for them. It is an
// exclusive flock on a file in the temporary directory, released with the
// file when t ends (or its process exits).
func HoldMakeRunPorts(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "ipam-make-run-ports.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("make run's ports: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		t.Fatalf("make run's ports: lock %s: %v", f.Name(), err)
	}
	t.Cleanup(func() { _ = f.Close() })
}
