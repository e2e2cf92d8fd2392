package functions_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nephio-project/ipam/functions/internal/pkgtest"
)

// writePackage writes a package named name with the given resources
// (file → content) whose pipeline runs fnBin with a functionConfig whose
// data is data, commits it and returns its directory.
func writePackage(t testing.TB, parent, name, fnBin string, data map[string]string, resources map[string]string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Kptfile": fmt.Sprintf(`apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: %s
pipeline:
  mutators:
    - exec: %s
      configPath: ipam-fn-config.yaml
`, name, fnBin),
		"ipam-fn-config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ipam-fn-config\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\n",
	}
	if len(data) > 0 {
		files["ipam-fn-config.yaml"] += "data:\n"
		for k, v := range data {
			files["ipam-fn-config.yaml"] += fmt.Sprintf("  %s: %q\n", k, v)
		}
	}
	for f, c := range resources {
		files[f] = c
	}
	for f, c := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkgtest.Git(t, dir, "init", "--quiet")
	pkgtest.CommitAll(t, dir, "input")
	return dir
}

func allocation(name, vrf, network string) string {
	return fmt.Sprintf(`apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata:
  name: %s
spec:
  kind: network
  selector:
    matchLabels:
      nephio.org/network-instance: %s
      nephio.org/network-name: %s
`, name, vrf, network)
}

// oneResult returns the message of the only result of a failed render.
func oneResult(t *testing.T, resultsDir string) string {
	t.Helper()
	_, list := readResults(t, resultsDir)
	if len(list.Items) != 1 || len(list.Items[0].Results) != 1 {
		t.Fatalf("want one result, got %+v", list)
	}
	r := list.Items[0].Results[0]
	if r.Severity != "error" {
		t.Errorf("severity %q", r.Severity)
	}
	return r.Message
}

// TestRenderServerUnreachable: a server address nobody listens on gives one
// error result naming the address and what to set, within the timeout, and
// the package is left alone.
func TestRenderServerUnreachable(t *testing.T) {
	fnBin := filepath.Join(binaries(t), "ipam-fn")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	pkg := writePackage(t, t.TempDir(), "unreachable", fnBin, map[string]string{"server": addr, "timeout": "2s"},
		map[string]string{"resources.yaml": allocation("alloc1", "vpc-1", "net1")})
	resultsDir := t.TempDir()
	start := time.Now()
	out, ok := render(t, pkg, resultsDir)
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("render took %s with data.timeout 2s", d)
	}
	if ok {
		t.Fatalf("render succeeded without a server:\n%s", out)
	}
	want := "ipam-fn: cannot reach ipam-server at " + addr + " (set data.server (host:port) in the functionConfig or the IPAM_SERVER environment variable): "
	if msg := oneResult(t, resultsDir); !strings.HasPrefix(msg, want) {
		t.Errorf("result %q\nwant prefix %q", msg, want)
	}
	if st := pkgtest.Git(t, pkg, "status", "--porcelain"); st != "" {
		t.Errorf("package changed:\n%s", st)
	}
}

// TestRenderWithoutServerConfig: IPAM resources and no server configured
// gives a result that says what to set; a package without IPAM resources
// renders without any server.
func TestRenderWithoutServerConfig(t *testing.T) {
	fnBin := filepath.Join(binaries(t), "ipam-fn")
	parent := t.TempDir()
	pkg := writePackage(t, parent, "no-server", fnBin, nil,
		map[string]string{"resources.yaml": allocation("alloc1", "vpc-1", "net1")})
	resultsDir := t.TempDir()
	if out, ok := render(t, pkg, resultsDir); ok {
		t.Fatalf("render succeeded without a server:\n%s", out)
	}
	if msg := oneResult(t, resultsDir); !strings.Contains(msg, "set data.server") || !strings.Contains(msg, "IPAM_SERVER") {
		t.Errorf("result %q does not say what to set", msg)
	}

	plain := writePackage(t, parent, "no-ipam", fnBin, nil, map[string]string{"app.yaml": "# just an app\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  k: v\n"})
	if out, ok := render(t, plain, t.TempDir()); !ok {
		t.Fatalf("a package without IPAM resources failed:\n%s", out)
	}
	if st := pkgtest.Git(t, plain, "status", "--porcelain"); st != "" {
		t.Errorf("package changed:\n%s", st)
	}
}

// TestRenderRaceForLastAddress: two packages render at the same time and
// both want the last free address of a network. Exactly one gets it; the
// other render fails with an error result naming its allocation and
// writes nothing.
func TestRenderRaceForLastAddress(t *testing.T) {
	fnBin := filepath.Join(binaries(t), "ipam-fn")
	addr := startServer(t)
	parent := t.TempDir()
	// 10.9.0.0/30: .0 and .3 are reserved, .1 is the gateway; .2 is the
	// only free address.
	infra := writePackage(t, parent, "race-infra", fnBin, map[string]string{"server": addr}, map[string]string{"resources.yaml": `apiVersion: ipam.nephio.org/v1alpha1
kind: NetworkInstance
metadata:
  name: vpc-race
spec:
  prefixes:
  - prefix: 10.9.0.0/16
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: last-one
  labels:
    nephio.org/gateway: "true"
spec:
  prefix: 10.9.0.1/30
  network: last-one
  networkInstance: vpc-race
`})
	if out, ok := render(t, infra, t.TempDir()); !ok {
		t.Fatalf("infra render failed:\n%s", out)
	}
	names := []string{"race-a", "race-b"}
	pkgs := make([]string, len(names))
	resultsDirs := make([]string, len(names))
	for i, n := range names {
		pkgs[i] = writePackage(t, parent, n, fnBin, map[string]string{"server": addr},
			map[string]string{"resources.yaml": allocation(n+"-alloc", "vpc-race", "last-one")})
		resultsDirs[i] = t.TempDir()
	}
	oks := make([]bool, len(names))
	outs := make([]string, len(names))
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() { outs[i], oks[i] = render(t, pkgs[i], resultsDirs[i]) })
	}
	wg.Wait()
	if oks[0] == oks[1] {
		t.Fatalf("want exactly one render to succeed, got %v\n%s\n%s", oks, outs[0], outs[1])
	}
	winner, loser := 0, 1
	if !oks[0] {
		winner, loser = 1, 0
	}
	if d := pkgtest.Git(t, pkgs[winner], "diff"); !strings.Contains(d, "+  prefix: 10.9.0.2/30") {
		t.Errorf("%s did not get 10.9.0.2/30:\n%s", names[winner], d)
	}
	if st := pkgtest.Git(t, pkgs[loser], "status", "--porcelain"); st != "" {
		t.Errorf("%s failed but changed:\n%s", names[loser], st)
	}
	_, list := readResults(t, resultsDirs[loser])
	if len(list.Items) != 1 || len(list.Items[0].Results) != 1 {
		t.Fatalf("%s: want one result, got %+v", names[loser], list)
	}
	r := list.Items[0].Results[0]
	if r.Severity != "error" || r.ResourceRef["kind"] != "IPAllocation" || r.ResourceRef["name"] != names[loser]+"-alloc" ||
		r.File["path"] != "resources.yaml" || !strings.Contains(r.Message, "no free address") {
		t.Errorf("%s: result %+v", names[loser], r)
	}
}

// TestRenderServerFromEnvironment: kpt passes its environment to exec
// functions, so IPAM_SERVER works when the functionConfig names no server.
func TestRenderServerFromEnvironment(t *testing.T) {
	fnBin := filepath.Join(binaries(t), "ipam-fn")
	addr := startServer(t)
	pkg := writePackage(t, t.TempDir(), "from-env", fnBin, nil, map[string]string{"resources.yaml": `apiVersion: ipam.nephio.org/v1alpha1
kind: NetworkInstance
metadata:
  name: vpc-env
spec:
  prefixes:
  - prefix: 10.7.0.0/16
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: net-env
spec:
  prefix: 10.7.1.0/24
  network: net-env
  networkInstance: vpc-env
---
` + allocation("alloc-env", "vpc-env", "net-env")})
	if out, ok := renderEnv(t, pkg, t.TempDir(), "IPAM_SERVER="+addr); !ok {
		t.Fatalf("render with IPAM_SERVER=%s failed:\n%s", addr, out)
	}
	if d := pkgtest.Git(t, pkg, "diff"); !strings.Contains(d, "+  prefix: 10.7.1.1/24") {
		t.Errorf("alloc-env did not get 10.7.1.1/24:\n%s", d)
	}
}
