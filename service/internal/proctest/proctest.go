// Package proctest runs a binary the test built as a subprocess, as a user
// or a node would run it, and lets the test read its output, wait for a
// line of it, signal it and check how it exits.
package proctest

import (
	"bufio"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/server/servertest"
)

// lineBacklog is how many lines a Proc keeps for WaitLine; a line printed
// while as many wait unread is left out of WaitLine (but not of Output).
const lineBacklog = 4096

// maxLine is the longest line WaitLine sees; the output past a longer
// line still goes to Output.
const maxLine = 1 << 20

// exitTimeout is how long Stop and Kill9 wait for the process to exit.
const exitTimeout = 60 * time.Second

// Proc is a started binary whose combined stdout and stderr the test
// reads.
type Proc struct {
	name string
	cmd  *exec.Cmd
	out  servertest.LogBuffer
	line chan string
	done chan struct{} // closed when the process exited and its output is read
	err  error         // cmd.Wait's error, set before done is closed
}

// Start runs bin with args (and the test's environment); it is killed, if
// still running, when t ends.
func Start(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	return StartCmd(t, t, exec.Command(bin, args...))
}

// StartCmd starts cmd, whose Stdout and Stderr must be unset (set its Env
// or Dir as needed). It is killed, if still running, when owner ends,
// which may outlive t: a subtest t may restart a daemon that its parent
// owner goes on using. If owner failed, the process's output is logged
// then.
func StartCmd(t, owner testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{name: filepath.Base(cmd.Path), cmd: cmd, line: make(chan string, lineBacklog), done: make(chan struct{})}
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	read := make(chan struct{})
	go func() { p.read(r); close(read) }()
	go func() {
		p.err = cmd.Wait()
		_ = w.Close()
		<-read
		close(p.done)
	}()
	owner.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if owner.Failed() {
			owner.Logf("%s output:\n%s", p.name, p.Output())
		}
	})
	return p
}

// read copies the output into p.out, and its lines into p.line while
// there is room.
func (p *Proc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		l := sc.Text()
		_, _ = p.out.Write([]byte(l + "\n"))
		select {
		case p.line <- l:
		default:
		}
	}
	// A line too long for the scanner: keep the rest of the output (and
	// the process from blocking on a full pipe).
	_, _ = io.Copy(&p.out, r)
}

// Output returns all the process printed so far.
func (p *Proc) Output() string {
	return p.out.String()
}

// WaitLine returns the first line not returned by an earlier WaitLine
// that contains want, failing the test if the process exits or timeout
// passes first.
func (p *Proc) WaitLine(t testing.TB, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-p.line:
			if strings.Contains(l, want) {
				return l
			}
		case <-p.done:
			// The lines printed before the exit may still be queued.
			for len(p.line) > 0 {
				if l := <-p.line; strings.Contains(l, want) {
					return l
				}
			}
			t.Fatalf("%s exited (%v) before printing %q", p.cmd.Path, p.err, want)
		case <-deadline:
			t.Fatalf("%s printed no %q within %s", p.cmd.Path, want, timeout)
		}
	}
}

// Stop sends SIGTERM and fails the test unless the process exits 0
// within exitTimeout (it is killed then).
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("%s after SIGTERM: %v, want exit 0", p.name, err)
	}
}

// Kill9 sends SIGKILL and waits for the process to exit.
func (p *Proc) Kill9(t testing.TB) {
	t.Helper()
	_ = p.signal(t, syscall.SIGKILL)
}

// signal sends sig and returns the process's exit error, failing the test
// (and killing the process) if it does not exit within exitTimeout.
func (p *Proc) signal(t testing.TB, sig syscall.Signal) error {
	t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return p.err
	case <-time.After(exitTimeout):
		_ = p.cmd.Process.Kill()
		t.Fatalf("%s did not exit within %s of %s", p.name, exitTimeout, sig)
		return nil
	}
}

// Alive fails the test if the process exits within d.
func (p *Proc) Alive(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("%s exited (%v); want it to keep running", p.name, p.err)
	case <-time.After(d):
	}
}
