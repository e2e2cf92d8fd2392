package functions_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nephio-project/ipam/functions/internal/pkgtest"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from what the render produces")

// resultList is the part of kpt's results.yaml (a FunctionResultList) the
// tests look at.
type resultList struct {
	ExitCode int `yaml:"exitCode"`
	Items    []struct {
		ExitCode int `yaml:"exitCode"`
		Results  []struct {
			Severity    string            `yaml:"severity"`
			Message     string            `yaml:"message"`
			ResourceRef map[string]string `yaml:"resourceRef"`
			Field       map[string]any    `yaml:"field"`
			File        map[string]any    `yaml:"file"`
		} `yaml:"results"`
	} `yaml:"items"`
}

// step is one render of a golden case: the files laid over the package
// before it (none for the first) and where its expectations live.
type step struct {
	name     string
	overlay  string // directory whose files replace the package's; "" for none
	expected string // directory holding diff.patch and results.yaml
}

// steps lists the renders of a case: the package itself (expectations in
// .expected/), then each directory of .steps/ in name order (its files are
// laid over the rendered package; diff.patch and results.yaml in it are
// that render's expectations).
func steps(t *testing.T, caseDir string) []step {
	t.Helper()
	out := []step{{name: "render", expected: filepath.Join(caseDir, ".expected")}}
	entries, err := os.ReadDir(filepath.Join(caseDir, ".steps"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			dir := filepath.Join(caseDir, ".steps", e.Name())
			out = append(out, step{name: e.Name(), overlay: dir, expected: dir})
		}
	}
	return out
}

// TestGolden renders every package under testdata/ with the real kpt and
// the real ipam-fn against a real ipam-server (a fresh one per case) and
// compares the package's git diff and the function results with the
// case's expectations. A render that succeeds is repeated and must change
// nothing; a render that fails must leave the package as it was.
func TestGolden(t *testing.T) {
	root := filepath.Join(pkgtest.ModuleRoot(t), "testdata")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var cases []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(root, e.Name(), "Kptfile")); e.IsDir() && err == nil {
			cases = append(cases, e.Name())
		}
	}
	for _, want := range []string{"seed", "ipv6", "dual-stack", "release", "exhausted", "malformed-prefix", "unknown-vrf", "copy", "stale-copy"} {
		if !slices.Contains(cases, want) {
			t.Errorf("testdata/%s is missing", want)
		}
	}
	fnBin := filepath.Join(binaries(t), "ipam-fn")
	kptPath(t)
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			caseDir := filepath.Join(root, name)
			addr := startServer(t)
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
	}
}

// overlay copies the files of dir (but its expectations) into pkg and
// reports whether one was the Kptfile.
func overlay(t *testing.T, dir, pkg string) (kptfile bool) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "diff.patch" || e.Name() == "results.yaml" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
		kptfile = kptfile || e.Name() == "Kptfile"
	}
	return kptfile
}

// runStep renders pkg once and checks the step's expectations, then
// renders again to check that nothing moves.
func runStep(t *testing.T, s step, pkg string) {
	t.Helper()
	resultsDir := t.TempDir()
	out, ok := render(t, pkg, resultsDir)
	gotDiff := pkgtest.Diff(t, pkg)
	gotResults, list := readResults(t, resultsDir)
	if list.ExitCode != 0 && ok || list.ExitCode == 0 && !ok {
		t.Fatalf("%s: kpt succeeded=%v but results.yaml says exit code %d\n%s", s.name, ok, list.ExitCode, out)
	}

	diffFile := filepath.Join(s.expected, "diff.patch")
	resultsFile := filepath.Join(s.expected, "results.yaml")
	hasResults := false
	for _, it := range list.Items {
		hasResults = hasResults || len(it.Results) > 0
	}
	if *update {
		writeGolden(t, diffFile, gotDiff, true)
		writeGolden(t, resultsFile, gotResults, hasResults)
	}
	if want := readGolden(t, diffFile); gotDiff != want {
		t.Errorf("%s: diff of the package after kpt fn render differs from %s (-update rewrites it)\n--- got\n%s\n--- want\n%s\n--- kpt output\n%s",
			s.name, rel(diffFile), gotDiff, want, out)
	}
	if want := readGolden(t, resultsFile); gotResults != want && (hasResults || want != "") {
		t.Errorf("%s: results differ from %s (-update rewrites it)\n--- got\n%s\n--- want\n%s", s.name, rel(resultsFile), gotResults, want)
	}
	if !ok {
		// A failed render writes nothing.
		if st := pkgtest.Git(t, pkg, "status", "--porcelain"); st != "" || gotDiff != "" {
			t.Errorf("%s: the render failed but the package changed:\n%s\n%s", s.name, st, gotDiff)
		}
		for _, it := range list.Items {
			for _, r := range it.Results {
				if r.Severity != "error" || r.ResourceRef["name"] == "" || r.File["path"] == nil || r.Field["path"] == nil {
					t.Errorf("%s: result does not name its resource, file and field: %+v", s.name, r)
				}
			}
		}
		return
	}
	// A successful render reports its summary (and each release) as info.
	summary := false
	for _, it := range list.Items {
		for _, r := range it.Results {
			if r.Severity != "info" {
				t.Errorf("%s: the render succeeded with a result of severity %q: %+v", s.name, r.Severity, r)
			}
			summary = summary || strings.HasPrefix(r.Message, "ipam-fn: synced ")
		}
	}
	if !summary && hasResults { // a package without IPAM resources makes no call and reports nothing
		t.Errorf("%s: the render succeeded without its summary result:\n%s", s.name, gotResults)
	}
	// Idempotence: rendering the rendered package changes no byte.
	pkgtest.CommitAll(t, pkg, "output of "+s.name)
	out, ok = render(t, pkg, t.TempDir())
	if !ok {
		t.Fatalf("%s: second render failed:\n%s", s.name, out)
	}
	if st := pkgtest.Git(t, pkg, "status", "--porcelain"); st != "" {
		t.Errorf("%s: rendering again changed the package:\n%s\n%s", s.name, st, pkgtest.Git(t, pkg, "diff"))
	}
}

// readResults returns kpt's results.yaml with the temporary exec path
// replaced by the placeholder, and its decoded form.
func readResults(t *testing.T, dir string) (string, resultList) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "results.yaml"))
	if err != nil {
		t.Fatalf("kpt wrote no results.yaml: %v", err)
	}
	var list resultList
	if err := yaml.Unmarshal(b, &list); err != nil {
		t.Fatalf("results.yaml: %v\n%s", err, b)
	}
	b = bytes.ReplaceAll(b, []byte("exec: "+filepath.Join(binDir, "ipam-fn")), []byte(execPlaceholder))
	return string(b), list
}

func readGolden(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeGolden writes content to file, or removes file when keep is false.
func writeGolden(t *testing.T, file, content string, keep bool) {
	t.Helper()
	if !keep {
		if err := os.Remove(file); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rel shortens a testdata path for messages.
func rel(file string) string {
	if i := strings.Index(file, "testdata"+string(filepath.Separator)); i >= 0 {
		return file[i:]
	}
	return file
}
