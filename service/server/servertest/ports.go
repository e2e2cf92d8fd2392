package servertest

import (
	"strings"
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
