package doctest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serverCommands are the commands of the walk-throughs that keep running
// (a terminal of their own, or a trailing "&"), and what each prints once
// it serves; the next command runs only then. Everything else runs to its
// end.
var serverCommands = []struct {
	match *regexp.Regexp
	ready string
}{
	{regexp.MustCompile(`^make (run|demo)$`), `"msg":"ready"`},
	{regexp.MustCompile(`^bin/ipam-server\s`), `"msg":"ready"`},
	{regexp.MustCompile(`^bin/ipam-controller\s`), `Starting workers`},
	{regexp.MustCompile(`^bin/ipam-node\s`), `"msg":"block set"`},
	// etcd logs nothing at --log-level error: ready once its client port
	// takes connections.
	{regexp.MustCompile(`^bin/k8s/etcd\s`), readyListening},
}

// readyListening, as a server command's ready text, waits for the port of
// the command's listen address (see listenAddr) to take connections.
const readyListening = "<listening>"

// listenFlag finds where a server command listens: ipam-server's --listen,
// etcd's --listen-client-urls.
var listenFlag = regexp.MustCompile(`--listen(?:-client-urls)?[ =](?:https?://)?([^\s,]+)`)

// listenAddr is the address the server command c listens on, or "" when
// it names none (it listens on its defaults).
func listenAddr(c string) string {
	if m := listenFlag.FindStringSubmatch(c); m != nil {
		return m[1]
	}
	return ""
}

// notRun are the commands the tests do not run, by README and command, with
// the reason. Every entry must still be in its README.
var notRun = map[[2]string]string{
	{"README.md", "make test"}: "it runs every test of the repository, this one included (tens of minutes)",
}

// wantExit are the commands expected to exit with a status other than 0
// in the tests' environment, by README and command, with the reason.
var wantExit = map[[2]string]struct {
	code int
	why  string
}{
	{"service/fronts/controllers/README.md", "kpt live init blueprints/ipam-nvidia && kpt live apply blueprints/ipam-nvidia --reconcile-timeout=2m"}: {3, noKubeletNode},
	{"blueprints/ipam-nvidia/README.md", "kpt live init blueprints/ipam-nvidia && kpt live apply blueprints/ipam-nvidia --reconcile-timeout=2m"}:     {3, noKubeletNode},
}

const noKubeletNode = "the test's API server has no kubelet and no controller-manager: every object is applied, but the ipam-node DaemonSet never rolls out, so kpt waits the 2m and exits 3 (reconcile timeout)"

// eventually matches the commands that read a state controllers are still
// converging to, or that one replica reads of another's changes (a
// reader types them seconds later; an etcd replica follows the others by
// a watch): their transcript is compared again until it matches, for up
// to eventuallyFor.
var eventually = regexp.MustCompile(`^(kubectl get\s|bin/ipamctl --server \S+ alloc list$)`)

const eventuallyFor = 30 * time.Second

// normalizers rewrite what truly varies between two runs of the same
// command, in the README's output and in the command's alike: nothing else
// is forgiven.
var normalizers = []struct {
	re   *regexp.Regexp
	repl string
}{
	// Log timestamps.
	{regexp.MustCompile(`"time":"[^"]*"`), `"time":"<time>"`},
	// Durations the server logs.
	{regexp.MustCompile(`"(duration|restore_duration)":"[^"]*"`), `"$1":"<duration>"`},
	// The version make stamps into the binaries (git describe of the checkout).
	{regexp.MustCompile(`(ctl|ipamfn)\.Version=[^' ]*`), `$1.Version=<version>`},
	// How long kpt says a function ran (before the AGE column's, which would take " in 0s").
	{regexp.MustCompile(`^(\[PASS\] .*) in [0-9.]+(µs|ms|s|m)$`), `$1 in <duration>`},
	// The AGE column of kubectl's tables, its last.
	{regexp.MustCompile(`(\s)\d+[smhd](\d+[smh])?$`), `$1<age>`},
}

func normalize(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		l = strings.TrimRight(l, " \t")
		for _, n := range normalizers {
			l = n.re.ReplaceAllString(l, n.repl)
		}
		out[i] = l
	}
	return out
}

// bare is a command without its trailing comment and "&", for matching.
func bare(cmd string) string {
	if i := strings.Index(cmd, " #"); i >= 0 && !strings.Contains(cmd, "\n") {
		cmd = cmd[:i]
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(cmd), "&"))
}

// program is the first word of a command: what it runs.
func program(cmd string) string {
	if f := strings.Fields(bare(cmd)); len(f) > 0 {
		return f[0]
	}
	return ""
}

// needPorts skips the test unless every loopback port is free: the
// walk-throughs use fixed ports.
func needPorts(t *testing.T, ports ...string) {
	t.Helper()
	for _, p := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:"+p)
		if err != nil {
			t.Skipf("SKIPPED: port %s is in use (%v); the walk-through serves on it", p, err)
		}
		l.Close()
	}
}

// freshCopy copies the repository's files — tracked, or untracked and not
// ignored, as they are in the work tree — into a new directory: what a
// fresh clone holds (no bin/, no data), with the changes not committed yet.
func freshCopy(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("SKIPPED: git ls-files in %s: %v (the test copies the repository's files)", root, err)
	}
	dst := filepath.Join(t.TempDir(), "ipam")
	for _, rel := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if rel == "bin" || strings.HasPrefix(rel, "bin/") {
			continue
		}
		src := filepath.Join(root, rel)
		st, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if st.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// commandEnv is the environment the README's commands run in: the test's,
// with bin/ of dir first on PATH, HOME set to home (the Go caches kept where
// they are) and no IPAM_SERVER or KUBECONFIG, nor the variables of a make
// the test runs under (make test): a reader's make is not a sub-make, which
// would print "Entering directory".
func commandEnv(t *testing.T, dir, home string) []string {
	t.Helper()
	goenv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	g := strings.Split(strings.TrimSpace(string(goenv)), "\n")
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "PATH", "HOME", "IPAM_SERVER", "KUBECONFIG", "GOCACHE", "GOMODCACHE", "GOPATH",
			"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEFILES", "MAKE_TERMOUT", "MAKE_TERMERR":
			continue
		}
		env = append(env, kv)
	}
	// A reader's git knows who commits (git commit in the KRM function's
	// walk-through); the test's HOME has no .gitconfig.
	return append(env, "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"), "HOME="+home,
		"GOCACHE="+g[0], "GOMODCACHE="+g[1], "GOPATH="+g[2],
		"GIT_AUTHOR_NAME=Reader", "GIT_AUTHOR_EMAIL=reader@example.com",
		"GIT_COMMITTER_NAME=Reader", "GIT_COMMITTER_EMAIL=reader@example.com")
}

// session runs the commands of one README section in order, in its own
// copy of the repository, as a reader at a terminal would.
type session struct {
	t       *testing.T
	dir     string
	env     []string
	servers []*server
	// cwd is where the reader's shell is: the copy's root until a command
	// changes directory (cd /tmp/seed && kpt fn render), and there after.
	cwd string
	// cwdFiles are where the commands started so far write the directory
	// they end in; follow reads the last one.
	cwdFiles []string
}

// follow moves the reader's shell to the directory the last command that
// ended in the foreground left it in.
func (s *session) follow() {
	if len(s.cwdFiles) == 0 {
		return
	}
	if data, err := os.ReadFile(s.cwdFiles[len(s.cwdFiles)-1]); err == nil {
		if d := strings.TrimSpace(string(data)); d != "" {
			s.cwd = d
		}
	}
}

// shellQuote quotes s for bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// server is a command that keeps running, started by a step.
type server struct {
	step    step
	cmd     *exec.Cmd
	out     string // the file its stdout and stderr go to
	stopped bool
}

// newSession prepares a session in dir; the servers it starts are stopped
// when the test ends.
func newSession(t *testing.T, dir string, env []string) *session {
	s := &session{t: t, dir: dir, env: env, cwd: dir}
	t.Cleanup(func() {
		for i := len(s.servers) - 1; i >= 0; i-- {
			s.stop(s.servers[i])
		}
	})
	return s
}

// bash returns the command running c in bash from the reader's current
// directory, in a process group of its own (what a terminal's Ctrl-C
// reaches). The directory c ends in is where the next command runs.
func (s *session) bash(ctx context.Context, c string) *exec.Cmd {
	cwdFile := filepath.Join(s.t.TempDir(), "cwd")
	script := c + "\n__doctest_status=$?\npwd >" + shellQuote(cwdFile) + "\nexit $__doctest_status"
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = s.cwd
	s.cwdFiles = append(s.cwdFiles, cwdFile)
	cmd.Env = s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs st as printed.
func (s *session) run(st step, seen map[[2]string]bool) {
	t := s.t
	key := [2]string{st.file, bare(st.cmd)}
	if why, ok := notRun[key]; ok {
		seen[key] = true
		t.Logf("%s: not run: %s: %s", st.where(), st.cmd, why)
		return
	}
	for _, sc := range serverCommands {
		if sc.match.MatchString(bare(st.cmd)) {
			s.start(st, sc.ready)
			return
		}
	}
	t.Logf("%s: $ %s", st.where(), st.cmd)
	for deadline := time.Now().Add(eventuallyFor); ; {
		out, err := s.output(st.cmd)
		s.follow()
		out = bytes.ReplaceAll(out, []byte(s.dir), []byte(readerRoot))
		if !st.checked {
			s.checkExit(st, key, err, out)
			return
		}
		got := trimBlank(strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"))
		if match(normalize(st.want), normalize(got)) {
			return
		}
		if eventually.MatchString(st.cmd) && time.Now().Before(deadline) {
			time.Sleep(time.Second)
			continue
		}
		t.Errorf("%s: %s: the README prints\n%s\nthe command printed (%v)\n%s", st.where(), st.cmd,
			strings.Join(st.want, "\n"), exitStatus(err), string(out))
		return
	}
}

// output runs c to its end (at most 5 minutes) and returns what it printed.
func (s *session) output(c string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return s.bash(ctx, c).CombinedOutput()
}

// checkExit fails the test unless the script command st exited as
// expected: 0, or what wantExit says.
func (s *session) checkExit(st step, key [2]string, err error, out []byte) {
	want, ok := wantExit[key]
	var ee *exec.ExitError
	switch {
	case ok && errors.As(err, &ee) && ee.ExitCode() == want.code:
		s.t.Logf("%s: exit status %d, as expected here: %s", st.where(), want.code, want.why)
	case ok:
		s.t.Errorf("%s: %s: %v, want exit status %d (%s)\n%s", st.where(), st.cmd, exitStatus(err), want.code, want.why, out)
	case err != nil:
		s.t.Errorf("%s: %s: %v\n%s", st.where(), st.cmd, err, out)
	}
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// readerRoot is where a transcript shows the reader's checkout: the test's
// copy of the repository is printed as this path.
const readerRoot = "/home/me/ipam"

// elided is a transcript line that stands for any number of lines the
// README leaves out.
const elided = "..."

// match reports whether got is what want shows, elided lines standing for
// any run of lines (none included).
func match(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == elided {
		for i := 0; i <= len(got); i++ {
			if match(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && want[0] == got[0] && match(want[1:], got[1:])
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// start starts the server command of st and waits until it prints ready.
// The same program still running from an earlier step on the same listen
// address (the same command, or one with other flags) is stopped first,
// as the reader's Ctrl-C before starting it again; replicas on other
// addresses (three etcd members) run side by side.
func (s *session) start(st step, ready string) {
	t := s.t
	for _, old := range s.servers {
		if !old.stopped && program(old.step.cmd) == program(st.cmd) && listenAddr(old.step.cmd) == listenAddr(st.cmd) {
			s.stop(old)
		}
	}
	t.Logf("%s: $ %s  (keeps running; waiting for %s)", st.where(), st.cmd, ready)
	out := filepath.Join(t.TempDir(), "server.out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := s.bash(context.Background(), st.cmd)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %s: %v", st.where(), st.cmd, err)
	}
	srv := &server{step: st, cmd: cmd, out: out}
	s.servers = append(s.servers, srv)
	go func() { _ = cmd.Wait() }() // a trailing "&" returns at once; the group lives on
	deadline := time.Now().Add(2 * time.Minute)
	for {
		data, _ := os.ReadFile(out)
		if ready == readyListening {
			if c, err := net.DialTimeout("tcp", listenAddr(st.cmd), time.Second); err == nil {
				c.Close()
				return
			}
		} else if bytes.Contains(data, []byte(ready)) {
			return
		}
		if !alive(cmd.Process.Pid) {
			t.Fatalf("%s: %s exited before printing %s:\n%s", st.where(), st.cmd, ready, data)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s did not print %s within 2m:\n%s", st.where(), st.cmd, ready, data)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// alive reports whether a process of the group pgid is left.
func alive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// stop stops srv as Ctrl-C does (SIGINT to its process group; SIGKILL if
// it is still there after 20 s) and compares its output with the
// transcript: the README shows the lines it printed first.
func (s *session) stop(srv *server) {
	if srv.stopped {
		return
	}
	srv.stopped = true
	pgid := srv.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGINT)
	for end := time.Now().Add(20 * time.Second); alive(pgid) && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pgid) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		s.t.Errorf("%s: %s did not stop within 20s of SIGINT", srv.step.where(), srv.step.cmd)
	}
	data, err := os.ReadFile(srv.out)
	if err != nil && !errors.Is(err, io.EOF) {
		s.t.Fatal(err)
	}
	if !srv.step.checked {
		return
	}
	got := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	want := normalize(srv.step.want)
	if len(got) > len(want) {
		got = got[:len(want)]
	}
	if !equal(want, normalize(got)) {
		s.t.Errorf("%s: %s: the README prints\n%s\nthe server printed first\n%s", srv.step.where(), srv.step.cmd,
			strings.Join(srv.step.want, "\n"), data)
	}
}
