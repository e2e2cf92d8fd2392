package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const alloc = "apiVersion: ipam.nephio.org/v1alpha1\nkind: IPAllocation\nmetadata:\n  name: %s\nstatus:\n  prefix: 10.0.1.2/24\n"

// TestReadPackages: every directory with a Kptfile is a package of its
// own (nested ones too), hidden directories are skipped, and the owner is
// the ipam-fn functionConfig's owner setting, else the Kptfile's name.
func TestReadPackages(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"a/Kptfile":          "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\npipeline:\n  mutators:\n  - exec: bin/ipam-fn\n    configPath: fn.yaml\n",
		"a/fn.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  owner: site-a\n",
		"a/r.yaml":           strings.Replace(alloc, "%s", "x", 1),
		"a/sub/Kptfile":      "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub\n",
		"a/sub/r.yaml":       strings.Replace(alloc, "%s", "y", 1),
		"a/.expected/r.yaml": strings.Replace(alloc, "%s", "hidden", 1),
		"a/README.md":        "not yaml: [",
	})
	pkgs, err := readPackages(root)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range pkgs {
		var names []string
		for _, o := range p.objs {
			names = append(names, o.name)
		}
		got[p.owner] = strings.Join(names, ",")
	}
	if len(got) != 2 || got["site-a"] != "x" || got["sub"] != "y" {
		t.Fatalf("packages %v", got)
	}
	for name, files := range map[string]map[string]string{
		"no Kptfile":   {"r.yaml": strings.Replace(alloc, "%s", "x", 1)},
		"bad YAML":     {"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n", "r.yaml": "a: [\n"},
		"missing conf": {"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\npipeline:\n  mutators:\n  - image: ipam-fn:dev\n    configPath: nope.yaml\n"},
	} {
		dir := t.TempDir()
		write(t, dir, files)
		if _, err := readPackages(dir); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
