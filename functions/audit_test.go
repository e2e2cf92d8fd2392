package functions_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nephio-project/ipam/functions/audit"
	"github.com/nephio-project/ipam/functions/internal/pkgtest"
)

// TestAudit renders two golden packages into a Git checkout with the real
// kpt, ipam-fn and ipam-server, then runs the ipamctl binary's audit:
// clean at first (exit 0), then one finding of each kind after edits that
// were not rendered (exit 3), and --all-owners reports an owner no
// package has.
func TestAudit(t *testing.T) {
	bin := binaries(t)
	kptPath(t)
	addr := startServer(t)
	repo := t.TempDir()
	pkgtest.Git(t, repo, "init", "--quiet")
	root := filepath.Join(pkgtest.ModuleRoot(t), "testdata")
	for _, name := range []string{"release", "dual-stack", "capi", "metal3"} {
		pkg := filepath.Join(repo, name)
		pkgtest.CopyPackage(t, filepath.Join(root, name), pkg)
		point(t, pkg, filepath.Join(bin, "ipam-fn"), addr)
		if out, ok := render(t, pkg, t.TempDir()); !ok {
			t.Fatalf("render %s:\n%s", name, out)
		}
	}
	pkgtest.CommitAll(t, repo, "rendered")

	ipamctl := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "ipamctl"), append([]string{"--server", addr}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := ipamctl("audit", repo); code != 0 || !strings.Contains(out, "no findings") {
		t.Fatalf("a freshly rendered checkout: exit %d\n%s", code, out)
	}

	// Edits nobody rendered in release: a new claim, a status edited by
	// hand and a claim removed; and a copy of dual-stack that kept its
	// Kptfile name.
	release := filepath.Join(repo, "release")
	appendFile(t, filepath.Join(release, "resources.yaml"), "---\napiVersion: ipam.nephio.org/v1alpha1\nkind: IPAllocation\nmetadata:\n  name: alloc-new\n"+
		"spec:\n  kind: network\n  selector:\n    matchLabels:\n      nephio.org/network-instance: vpc-1\n      nephio.org/network-name: net1\n")
	res := filepath.Join(release, "resources.yaml")
	b, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, d := range strings.Split(string(b), "\n---\n") {
		if strings.Contains(d, "name: alloc-a ") || strings.Contains(d, "name: alloc-a\n") {
			continue // removed without rendering: the server still holds it
		}
		docs = append(docs, strings.Replace(d, "prefix: 10.0.1.3/24", "prefix: 10.0.1.99/24", 1))
	}
	if err := os.WriteFile(res, []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	pkgtest.CopyPackage(t, filepath.Join(repo, "dual-stack"), filepath.Join(repo, "sites", "dual-stack-copy"))
	// An IPAddress of the Cluster API front edited by hand.
	pkgtest.ReplaceIn(t, filepath.Join(repo, "capi", "ipaddress-node-0.yaml"), "address: 10.10.0.10", "address: 10.10.0.19")

	out, code := ipamctl("audit", "-o", "json", repo)
	if code != 3 {
		t.Fatalf("exit %d, want 3 (findings)\n%s", code, out)
	}
	var findings []audit.Finding
	if err := json.Unmarshal([]byte(out), &findings); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string]string{
		audit.Unrendered:     "IPAllocation alloc-new",
		audit.Drift:          "IPAllocation alloc-b",
		audit.Leak:           "IPAllocation alloc-a",
		audit.DuplicateOwner: "",
	}
	capiDrift := false
	for _, f := range findings {
		if obj, ok := want[f.Kind]; ok && obj == f.Object {
			delete(want, f.Kind)
		}
		if f.Kind == audit.Drift && f.Object == "IPAllocation default/ipaddressclaim.node-0" && strings.Contains(f.Detail, "Git says 10.10.0.19/24, the server holds 10.10.0.10/24") {
			capiDrift = true
		}
		if f.Owner == "capi" && f.Object != "IPAllocation default/ipaddressclaim.node-0" {
			t.Errorf("the Cluster API package has a finding beyond its edited IPAddress: %+v", f)
		}
		if f.Owner == "metal3" {
			t.Errorf("the untouched Metal3 package has a finding: %+v", f)
		}
	}
	if !capiDrift {
		t.Errorf("no drift finding for the hand-edited IPAddress node-0 in\n%s", out)
	}
	if len(want) > 0 {
		t.Fatalf("missing findings %v in\n%s", want, out)
	}
	if table, code := ipamctl("audit", repo); code != 3 || !strings.Contains(table, "FINDING") || !strings.Contains(table, "Git says 10.0.1.99/24, the server holds 10.0.1.3/24") {
		t.Fatalf("table: exit %d\n%s", code, table)
	}

	// Another client's owner is a leak only with --all-owners.
	if out, code := ipamctl("alloc", "create", "manual", "--vrf", "vpc-1", "-s", "nephio.org/network-name=net1"); code != 0 {
		t.Fatalf("alloc create: exit %d\n%s", code, out)
	}
	if out, _ := ipamctl("audit", repo); strings.Contains(out, "ipamctl") {
		t.Fatalf("without --all-owners the audit reports another client's owner:\n%s", out)
	}
	if out, _ := ipamctl("audit", "--all-owners", repo); !strings.Contains(out, "no audited package has it") {
		t.Fatalf("--all-owners does not report owner ipamctl:\n%s", out)
	}
	if out, code := ipamctl("audit"); code != 2 || !strings.Contains(out, "want at least one DIR") {
		t.Fatalf("no directory: exit %d\n%s", code, out)
	}
}

func appendFile(t *testing.T, file, s string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}
