package proctest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/internal/proctest"
)

// TestProc runs sh scripts: WaitLine finds lines in order, also those
// printed just before the exit; Stop wants exit 0 on SIGTERM; Kill9 ends
// a process that ignores SIGTERM; Output holds stderr and stdout.
func TestProc(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		end          func(t *testing.T, p *proctest.Proc)
	}{
		{"stop", `trap 'echo bye; exit 0' TERM; echo one; echo two >&2; echo ready; while :; do sleep 0.05; done`,
			func(t *testing.T, p *proctest.Proc) { p.Alive(t, 100*time.Millisecond); p.Stop(t) }},
		{"kill9", `trap '' TERM; echo one; echo two >&2; echo ready; while :; do sleep 0.05; done`,
			func(t *testing.T, p *proctest.Proc) { p.Kill9(t) }},
		{"exited", `echo one; echo two >&2; echo ready`,
			func(*testing.T, *proctest.Proc) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := proctest.Start(t, "sh", "-c", tc.script)
			if l := p.WaitLine(t, "o", 10*time.Second); l != "one" {
				t.Fatalf("first line with o: %q, want one", l)
			}
			if l := p.WaitLine(t, "o", 10*time.Second); l != "two" {
				t.Fatalf("second line with o: %q, want two", l)
			}
			if tc.name == "exited" {
				// Ended before WaitLine reads the line it printed.
				for !strings.Contains(p.Output(), "ready") {
					time.Sleep(10 * time.Millisecond)
				}
				p.Kill9(t)
			}
			p.WaitLine(t, "ready", 10*time.Second)
			tc.end(t, p)
			if out := p.Output(); !strings.HasPrefix(out, "one\ntwo\nready\n") {
				t.Fatalf("output %q", out)
			}
		})
	}
}
