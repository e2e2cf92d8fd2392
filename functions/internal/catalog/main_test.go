package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/nephio-project/ipam/functions/internal/pkgtest"
)

// TestMakeCatalogAgreesWithIPAMFn builds ipam-fn with make build and
// writes the catalog entry with make catalog, both at one VERSION: the
// entry's image is tagged what ipam-fn --version prints, its source is at
// that version's commit, and ipam-fn --doc names the same image.
func TestMakeCatalogAgreesWithIPAMFn(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skipf("SKIPPED: no make: %v", err)
	}
	const version = "v1.2.3-4-gabcdef0"
	root := pkgtest.ModuleRoot(t)
	bin, release := t.TempDir(), t.TempDir()
	makeTarget(t, root, "build", "BIN="+bin, "CMD_PKGS=./functions/cmd/ipam-fn", "VERSION="+version)
	out := makeTarget(t, root, "catalog", "RELEASE_DIR="+release, "VERSION="+version)
	path := filepath.Join(release, "ipam-fn", version, "metadata.yaml")
	if !strings.Contains(out, path) {
		t.Fatalf("make catalog did not print %s:\n%s", path, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var entry struct {
		Image     string `yaml:"image"`
		SourceURL string `yaml:"sourceURL"`
	}
	if err := yaml.Unmarshal(data, &entry); err != nil {
		t.Fatal(err)
	}

	fnBin := filepath.Join(bin, "ipam-fn")
	got := strings.TrimSpace(string(runFn(t, fnBin, "--version")))
	if got != "ipam-fn "+version {
		t.Errorf("ipam-fn --version = %q, want %q", got, "ipam-fn "+version)
	}
	if want := "docker.io/library/ipam-fn:" + version; entry.Image != want {
		t.Errorf("catalog image %q, want %q (the version ipam-fn prints)", entry.Image, want)
	}
	if want := "https://github.com/nephio-project/ipam/tree/abcdef0/functions/ipamfn"; entry.SourceURL != want {
		t.Errorf("catalog sourceURL %q, want %q", entry.SourceURL, want)
	}
	var doc struct {
		Image     string `json:"image"`
		SourceURL string `json:"sourceURL"`
	}
	if err := json.Unmarshal(runFn(t, fnBin, "--doc"), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Image != entry.Image || doc.SourceURL != entry.SourceURL {
		t.Errorf("ipam-fn --doc names %q at %q, the catalog entry %q at %q", doc.Image, doc.SourceURL, entry.Image, entry.SourceURL)
	}
}

// makeTarget runs make target in root and returns its output.
func makeTarget(t *testing.T, root, target string, vars ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", append([]string{"--no-print-directory", "-C", root, target}, vars...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", target, err, out)
	}
	return string(out)
}

// runFn runs bin with args and returns its standard output.
func runFn(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Stdin, cmd.Stderr = strings.NewReader(""), &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func TestRunRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no version", nil, "not an image tag"},
		{"bad version", []string{"--version", "v1 2"}, "not an image tag"},
		{"arguments", []string{"--version", "v1.0.0", "x"}, "unexpected arguments"},
		{"unknown flag", []string{"--tag", "v1"}, "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			err := run(append([]string{"--out", out}, tc.args...), io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
			if _, statErr := os.Stat(out); !os.IsNotExist(statErr) {
				t.Errorf("run(%q) wrote %s", tc.args, out)
			}
		})
	}
}
