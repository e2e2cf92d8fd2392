package functions_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nephio-project/ipam/functions/internal/pkgtest"
)

// sitePackage writes a package named name declaring the VRF vrf of
// <net16>.0.0/16, its network <vrf>-net <net16>.1.0/24 with the gateway
// .1, and the allocations allocs, in resources.yaml.
func sitePackage(t *testing.T, parent, name, fnBin, addr, vrf, net16 string, allocs ...string) string {
	t.Helper()
	res := fmt.Sprintf(`apiVersion: ipam.nephio.org/v1alpha1
kind: NetworkInstance
metadata:
  name: %[1]s
spec:
  prefixes:
  - prefix: %[2]s.0.0/16
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: %[1]s-net
  labels:
    nephio.org/gateway: "true"
spec:
  prefix: %[2]s.1.1/24
  network: %[1]s-net
  networkInstance: %[1]s
`, vrf, net16)
	for _, a := range allocs {
		res += "---\n" + allocation(a, vrf, vrf+"-net")
	}
	return writePackage(t, parent, name, fnBin, map[string]string{"server": addr}, map[string]string{"resources.yaml": res})
}

// statusPrefix is status.prefix of the IPAllocation name in the package
// at dir ("" when it has none).
func statusPrefix(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "resources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range pkgtest.Items(t, "resources.yaml", string(b)) {
		if o.GetKind() == "IPAllocation" && o.GetName() == name {
			return pkgtest.Str(t, o, "status", "prefix")
		}
	}
	return ""
}

// dropAllocation removes the IPAllocation name from the package at dir.
func dropAllocation(t *testing.T, dir, name string) {
	t.Helper()
	file := filepath.Join(dir, "resources.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	var keep []string
	for _, d := range docs {
		if !strings.Contains(d, "kind: IPAllocation\nmetadata:\n  name: "+name+"\n") {
			keep = append(keep, d)
		}
	}
	if len(keep) == len(docs) {
		t.Fatalf("%s declares no IPAllocation %s", file, name)
	}
	out := strings.TrimSuffix(strings.Join(keep, "\n---\n"), "\n") + "\n"
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renderOK renders dir, fails the test when the render fails, and
// commits the result.
func renderOK(t *testing.T, dir string) {
	t.Helper()
	if out, ok := render(t, dir, t.TempDir()); !ok {
		t.Fatalf("render of %s failed:\n%s", filepath.Base(dir), out)
	}
	pkgtest.CommitAll(t, dir, "render")
}

// cpR copies the package at src to dst as `cp -r` does: the Kptfile (its
// name, identity and generation) and the Git history come along.
func cpR(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -r: %v\n%s", err, out)
	}
}

// wantStaleRefusal checks that the render of dir failed on the owner
// generation of its Kptfile with a message that says what happened and how
// to fork on purpose, and that it wrote nothing.
func wantStaleRefusal(t *testing.T, dir, owner string, out string, ok bool, resultsDir string) {
	t.Helper()
	if ok {
		t.Fatalf("render of the stale %s succeeded:\n%s\n%s", filepath.Base(dir), out, pkgtest.Git(t, dir, "diff"))
	}
	_, list := readResults(t, resultsDir)
	if len(list.Items) != 1 || len(list.Items[0].Results) != 1 {
		t.Fatalf("want one result, got %+v", list)
	}
	r := list.Items[0].Results[0]
	if r.Severity != "error" || r.ResourceRef["kind"] != "Kptfile" || r.Field["path"] != "metadata.annotations[ipam.nephio.org/generation]" ||
		r.File["path"] != "Kptfile" {
		t.Errorf("result %+v", r)
	}
	for _, want := range []string{fmt.Sprintf("owner %q is at generation 2, and this package at 1", owner),
		"another copy of the package changed the owner's objects since this one was rendered",
		"give it an owner of its own (change metadata.name of its Kptfile, or the owner setting)",
		`ipam.nephio.org/adopt: "true"`} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("message %q does not say %q", r.Message, want)
		}
	}
	if st := pkgtest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("the refused render changed %s:\n%s", filepath.Base(dir), st)
	}
}

// TestRenderCopyNeverMovesTheOriginal: a package P is rendered, copied
// with cp -r to Q (same Kptfile name, so the same owner, and the same
// package id), and Q drops alloc1 and renders first: that releases
// alloc1, and a third package takes its address. P's next render would
// move alloc1 elsewhere without a word; it is refused instead, naming the
// owner's generation and how to fork, and P keeps alloc1's address.
func TestRenderCopyNeverMovesTheOriginal(t *testing.T) {
	fnBin := filepath.Join(binaries(t), "ipam-fn")
	addr := startServer(t)
	parent := t.TempDir()
	p := sitePackage(t, parent, "site", fnBin, addr, "vpc-copy", "10.11", "alloc1", "alloc2")
	renderOK(t, p)
	kf, err := os.ReadFile(filepath.Join(p, "Kptfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kf), "ipam.nephio.org/generation: \"1\"\n") {
		t.Errorf("the first render wrote no generation 1:\n%s", kf)
	}
	addr1 := statusPrefix(t, p, "alloc1")
	if addr1 == "" {
		t.Fatal("alloc1 got no address")
	}
	// Rendering again changes nothing.
	if out, ok := render(t, p, t.TempDir()); !ok || pkgtest.Git(t, p, "status", "--porcelain") != "" {
		t.Fatalf("re-render: ok %v, changed:\n%s\n%s", ok, pkgtest.Git(t, p, "diff"), out)
	}

	q := filepath.Join(parent, "site-copy")
	cpR(t, p, q)
	dropAllocation(t, q, "alloc1")
	pkgtest.CommitAll(t, q, "drop alloc1")
	resultsDir := t.TempDir()
	if out, ok := render(t, q, resultsDir); !ok {
		t.Fatalf("the copy's render failed:\n%s", out)
	}
	if got, _ := readResults(t, resultsDir); !strings.Contains(got, "released IPAllocation alloc1 of owner site") {
		t.Fatalf("the copy's render did not release alloc1:\n%s", got)
	}
	pkgtest.CommitAll(t, q, "render")
	// A third package now gets alloc1's address.
	thief := writePackage(t, parent, "other", fnBin, map[string]string{"server": addr},
		map[string]string{"alloc.yaml": allocation("other-alloc", "vpc-copy", "vpc-copy-net")})
	renderOK(t, thief)
	b, err := os.ReadFile(filepath.Join(thief, "alloc.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "prefix: "+addr1+"\n") {
		t.Fatalf("the third package did not get alloc1's released address %s:\n%s", addr1, b)
	}

	// The original, unchanged since its render, renders again.
	resultsDir = t.TempDir()
	out, ok := render(t, p, resultsDir)
	if got := statusPrefix(t, p, "alloc1"); got != addr1 {
		t.Errorf("the original's alloc1 moved from %s to %s", addr1, got)
	}
	wantStaleRefusal(t, p, "site", out, ok, resultsDir)
}

// TestRenderOriginalFirstRefusesTheCopy: the other order. The original
// renders a change first; the copy's render, which would prune alloc1,
// is refused and releases nothing: the original renders again without a
// change.
func TestRenderOriginalFirstRefusesTheCopy(t *testing.T) {
	fnBin := filepath.Join(binaries(t), "ipam-fn")
	addr := startServer(t)
	parent := t.TempDir()
	p := sitePackage(t, parent, "site", fnBin, addr, "vpc-first", "10.12", "alloc1")
	renderOK(t, p)
	q := filepath.Join(parent, "site-copy")
	cpR(t, p, q)

	writeFile(t, filepath.Join(p, "more.yaml"), allocation("alloc3", "vpc-first", "vpc-first-net"))
	pkgtest.CommitAll(t, p, "add alloc3")
	renderOK(t, p)

	dropAllocation(t, q, "alloc1")
	pkgtest.CommitAll(t, q, "drop alloc1")
	resultsDir := t.TempDir()
	out, ok := render(t, q, resultsDir)
	wantStaleRefusal(t, q, "site", out, ok, resultsDir)

	if out, ok := render(t, p, t.TempDir()); !ok || pkgtest.Git(t, p, "status", "--porcelain") != "" {
		t.Fatalf("the original after the refused copy: ok %v, changed:\n%s\n%s", ok, pkgtest.Git(t, p, "diff"), out)
	}
}

// TestRenderForkGetsItsOwnOwner: `kpt pkg get` of a rendered package names
// the fork after its directory, which makes it a new owner: it renders
// (keeping the generation it was copied with), gets allocations of its
// own, and prunes nothing of the original. A cp -r copy whose Kptfile is
// renamed by hand does the same.
func TestRenderForkGetsItsOwnOwner(t *testing.T) {
	fnBin := filepath.Join(binaries(t), "ipam-fn")
	addr := startServer(t)
	parent := t.TempDir()
	p := sitePackage(t, parent, "site", fnBin, addr, "vpc-fork", "10.13", "alloc1")
	renderOK(t, p)
	addr1 := statusPrefix(t, p, "alloc1")

	bare := filepath.Join(parent, "upstream.git")
	pkgtest.Git(t, parent, "clone", "--quiet", "--bare", p, bare)
	branch := strings.TrimSpace(pkgtest.Git(t, p, "branch", "--show-current"))
	fork := filepath.Join(parent, "site-b")
	cmd := exec.Command(kptPath(t), "pkg", "get", "file://"+bare+"@"+branch, fork)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kpt pkg get: %v\n%s", err, out)
	}
	renamed := filepath.Join(parent, "site-c")
	cpR(t, p, renamed)
	pkgtest.ReplaceIn(t, filepath.Join(renamed, "Kptfile"), "  name: site\n", "  name: site-c\n")

	for _, f := range []struct{ dir, owner string }{{fork, "site-b"}, {renamed, "site-c"}} {
		kf, err := os.ReadFile(filepath.Join(f.dir, "Kptfile"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(kf), "  name: "+f.owner+"\n") {
			t.Fatalf("the fork's Kptfile is not named %s:\n%s", f.owner, kf)
		}
		if !strings.Contains(string(kf), "ipam.nephio.org/generation: \"1\"") {
			t.Errorf("the fork's Kptfile lost the generation it was copied with:\n%s", kf)
		}
		pkgtest.Git(t, f.dir, "init", "--quiet")
		pkgtest.CommitAll(t, f.dir, "fork")
		// Its network and VRF are the original's: the fork only allocates.
		writeFile(t, filepath.Join(f.dir, "resources.yaml"), allocation("alloc1", "vpc-fork", "vpc-fork-net"))
		pkgtest.CommitAll(t, f.dir, "allocations only")
		resultsDir := t.TempDir()
		if out, ok := render(t, f.dir, resultsDir); !ok {
			t.Fatalf("%s: render failed:\n%s", f.owner, out)
		}
		got, _ := readResults(t, resultsDir)
		if !strings.Contains(got, "0 released by prune") {
			t.Errorf("%s: results:\n%s", f.owner, got)
		}
		if a := statusPrefix(t, f.dir, "alloc1"); a == "" || a == addr1 {
			t.Errorf("%s: alloc1 got %q, the original holds %s", f.owner, a, addr1)
		}
		d := pkgtest.Git(t, f.dir, "diff", "Kptfile")
		if strings.Contains(d, "ipam.nephio.org/generation") || strings.Contains(d, "ipam.nephio.org/package-id") {
			t.Errorf("%s: the render rewrote the identity or generation:\n%s", f.owner, d)
		}
	}
	if out, ok := render(t, p, t.TempDir()); !ok || pkgtest.Git(t, p, "status", "--porcelain") != "" {
		t.Fatalf("the original after the forks: ok %v, changed:\n%s\n%s", ok, pkgtest.Git(t, p, "diff"), out)
	}
}

func writeFile(t *testing.T, file, content string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
