package cmd_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/internal/clustertest"
	"github.com/nephio-project/ipam/service/internal/proctest"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// makeRunAddrs are the addresses `make run` serves on, read from the
// Makefile's run recipe: its ipam-server's --listen and --web-addr.
func makeRunAddrs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(servertest.ModuleRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?m)^run:.*\n((?:\t.*\n)+)`).FindSubmatch(data)
	if recipe == nil {
		t.Fatal("Makefile: no run target")
	}
	var addrs []string
	for _, flag := range []string{"--listen", "--web-addr"} {
		m := regexp.MustCompile(`bin/ipam-server .*` + flag + `[ =](\S+)`).FindSubmatch(recipe[1])
		if m == nil {
			t.Fatalf("Makefile: the run recipe's ipam-server has no %s:\n%s", flag, recipe[1])
		}
		addrs = append(addrs, string(m[1]))
	}
	return addrs
}

// flagDefault is the default of flag name as `bin --help` prints it.
func flagDefault(t *testing.T, help, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(name) + `( \S+)?\n[ \t]+.*\(default "([^"]*)"\)$`).FindStringSubmatch(help)
	if m == nil {
		t.Fatalf("--help prints no default for -%s:\n%s", name, help)
	}
	return m[2]
}

// collide reports whether listening on a and on b at once fails: the same
// port, on the same host or on a wildcard one.
func collide(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return wild(ha) || wild(hb) || ha == hb
}

func TestCollide(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{":8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"0.0.0.0:9090", "127.0.0.1:9090", true},
		{"127.0.0.1:8082", "127.0.0.1:8080", false},
		{"127.0.0.2:8080", "127.0.0.1:8080", false},
		{"127.0.0.1:0", "127.0.0.1:0", false},
		{"0", "127.0.0.1:8080", false},
	} {
		if got := collide(c.a, c.b); got != c.want {
			t.Errorf("collide(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestControllerBesideMakeRun: ipam-controller's default metrics and
// health addresses do not collide with what `make run` serves (read from
// the Makefile), and the two really run side by side on this machine:
// ipam-server started with make run's addresses, ipam-controller with its
// defaults pointed at it, both serving. The second half is skipped when
// another process holds one of those ports.
func TestControllerBesideMakeRun(t *testing.T) {
	dir := build(t)
	runAddrs := makeRunAddrs(t)
	help, _ := exec.Command(filepath.Join(dir, "ipam-controller"), "--help").CombinedOutput()
	ctlAddrs := []string{flagDefault(t, string(help), "metrics-bind-address"), flagDefault(t, string(help), "health-probe-bind-address")}
	for _, c := range ctlAddrs {
		for _, r := range runAddrs {
			if collide(c, r) {
				t.Errorf("ipam-controller's default address %s collides with make run's %s: the controller would exit with `bind: address already in use`", c, r)
			}
		}
	}
	if t.Failed() {
		return
	}
	servertest.HoldMakeRunPorts(t)
	for _, a := range append(append([]string{}, runAddrs...), ctlAddrs...) {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Skipf("the defaults do not collide; not starting them side by side, %s is taken on this machine: %v", a, err)
		}
		_ = l.Close()
	}

	kc, _ := clustertest.APIServer(t)
	srv := proctest.Start(t, filepath.Join(dir, "ipam-server"), "--listen", runAddrs[0], "--web-addr", runAddrs[1], "--data-dir", t.TempDir(), "--demo")
	srv.WaitLine(t, "ready", 30*time.Second)
	ctl := proctest.Start(t, filepath.Join(dir, "ipam-controller"), "--kubeconfig", kc, "--server", runAddrs[0])
	ctl.WaitLine(t, "Starting workers", 60*time.Second)
	ctl.Alive(t, 2*time.Second)
	for _, u := range []string{"http://" + runAddrs[1] + "/", "http://" + ctlAddrs[0] + "/metrics", "http://" + loopback(ctlAddrs[1]) + "/healthz"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", u, resp.Status)
		}
	}
	ctl.Stop(t)
	srv.Stop(t)
}

// loopback is addr with an empty host replaced by 127.0.0.1.
func loopback(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return fmt.Sprintf("127.0.0.1%s", addr)
	}
	return addr
}
