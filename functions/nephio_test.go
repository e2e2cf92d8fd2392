package functions_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nephio-project/ipam/functions/internal/pkgtest"
)

// TestNephioPipeline renders Nephio-shaped packages (testdata/nephio) with
// the real kpt and the real ipam-fn against one real ipam-server, as
// Nephio's pipeline does: the infra package (NetworkInstance, IPPrefixes
// and a VLANIndex of Nephio's resource API) first, then each workload
// package, whose IPClaims and VLANClaims select from it. Each package
// then goes through its .steps; every render is checked as TestGolden
// checks it (diff, results, and a second render that changes no byte).
func TestNephioPipeline(t *testing.T) {
	root := filepath.Join(pkgtest.ModuleRoot(t), "testdata", "nephio")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	cases := []string{"infra"}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "infra" {
			cases = append(cases, e.Name())
		}
	}
	for _, want := range []string{"claim_network_prefix", "claim_loopback", "claim_pool", "missing_ipclaim", "workload"} {
		if !slices.Contains(cases, want) {
			t.Errorf("testdata/nephio/%s is missing", want)
		}
	}
	fnBin := filepath.Join(binaries(t), "ipam-fn")
	kptPath(t)
	addr := startServer(t)
	for _, name := range cases {
		ok := t.Run(name, func(t *testing.T) {
			caseDir := filepath.Join(root, name)
			pkg := filepath.Join(t.TempDir(), name)
			pkgtest.CopyPackage(t, caseDir, pkg)
			point(t, pkg, fnBin, addr)
			pkgtest.Git(t, pkg, "init", "--quiet")
			for _, s := range steps(t, caseDir) {
				if s.overlay != "" && overlay(t, s.overlay, pkg) {
					pkgtest.ReplaceIn(t, filepath.Join(pkg, "Kptfile"), execPlaceholder, "exec: "+fnBin)
				}
				pkgtest.CommitAll(t, pkg, "input of "+s.name)
				runStep(t, s, pkg)
			}
		})
		if !ok && name == "infra" {
			t.Fatal("the infra package did not render; the workload packages select from it")
		}
	}
}
