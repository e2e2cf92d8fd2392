// Package pkgtest holds what the kpt package tests of the function share:
// copying a golden package, committing it in a throwaway git repository and
// reading its change back as the diff a reviewer sees.
package pkgtest

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kptdev/krm-functions-sdk/go/fn"
)

// ModuleRoot is the directory of the go.mod above the test's working
// directory.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Git runs git in dir, isolated from the user's configuration, and returns
// its output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=ipam test", "-c", "user.email=test@example.invalid",
		"-c", "commit.gpgsign=false", "-c", "core.autocrlf=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// CommitAll records the package in dir as it is now.
func CommitAll(t testing.TB, dir, msg string) {
	t.Helper()
	Git(t, dir, "add", "--all", ".")
	Git(t, dir, "commit", "--quiet", "--allow-empty", "-m", msg)
}

var (
	indexLine = regexp.MustCompile(`(?m)^index [0-9a-f]+\.\.[0-9a-f]+( [0-7]+)?\n`)
	// function is the Kptfile line that runs ipam-fn, which tests point at
	// a temporary binary or an image.
	function = regexp.MustCompile(`(?m)^( +- )(?:exec|image): \S*ipam-fn\S*$`)
)

// Diff is the package's change since the last commit as `git diff` shows
// it, written as the golden diff.patch files are: blob hashes dropped and
// the Kptfile's function shown as the golden packages name it (exec:
// bin/ipam-fn). Nothing else is masked: ipam-fn writes no time.
func Diff(t testing.TB, dir string) string {
	t.Helper()
	// New files show in the diff (intent to add; a deletion stays unstaged).
	if untracked := strings.Fields(Git(t, dir, "ls-files", "--others", "--exclude-standard", "-z")); len(untracked) > 0 {
		Git(t, dir, append([]string{"add", "--intent-to-add", "--"}, strings.Split(strings.Trim(strings.Join(untracked, ""), "\x00"), "\x00")...)...)
	}
	d := Git(t, dir, "diff", "--no-color", "--no-ext-diff")
	d = indexLine.ReplaceAllString(d, "")
	return function.ReplaceAllString(d, "${1}exec: bin/ipam-fn")
}

// CopyPackage copies the package at src into dst, leaving out the
// expectations (.expected, .steps).
func CopyPackage(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if d.Name() == ".expected" || d.Name() == ".steps" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ReplaceIn replaces old by new in file, failing when old is not there.
func ReplaceIn(t testing.TB, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s does not contain %q", file, old)
	}
	if err := os.WriteFile(file, bytes.ReplaceAll(b, []byte(old), []byte(new)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Seed is the README's seed example as one package file, full of comments,
// with the gateway prefix listed before its aggregate.
const Seed = `# The seed example of the README.
apiVersion: ipam.nephio.org/v1alpha1
kind: NetworkInstance
metadata:
  name: vpc-1 # the VRF
spec: {}
---
# A network prefix with a gateway, before its aggregate.
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: net1-prefix1
  labels:
    nephio.org/gateway: "true" # .1 is the gateway
spec:
  prefix: 10.0.1.1/24
  network: net1
  networkInstance: vpc-1
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: aggregate0
spec:
  kind: aggregate
  prefix: 10.0.0.0/8 # everything
  networkInstance: vpc-1
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: net1-prefix10
  labels:
    nephio.org/interface: n3
spec:
  prefix: 10.0.1.10/24
  network: net1
  networkInstance: vpc-1
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata:
  name: alloc1
spec:
  # next free address of net1
  kind: network
  selector:
    matchLabels:
      nephio.org/network-instance: vpc-1
      nephio.org/network-name: net1
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata:
  name: alloc2-n3
spec:
  kind: network
  selector:
    matchLabels:
      nephio.org/network-instance: vpc-1
      nephio.org/network-name: net1
      nephio.org/interface: n3 # the static address
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata:
  name: alloc-pool1
spec:
  kind: pool
  prefixLength: 16
  selector:
    matchLabels:
      nephio.org/network-instance: vpc-1
---
# Not an IPAM resource: left alone.
apiVersion: v1
kind: ConfigMap
metadata:
  name: other # keep me
data:
  b: "2"
  a: "1"
`

// Kptfile is the root Kptfile of the Seed package, named seed-pkg.
const Kptfile = `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: seed-pkg
pipeline:
  mutators:
    - exec: bin/ipam-fn
      configPath: ipam-fn-config.yaml
`

// Items parses files (path → content) into items annotated as kpt does.
func Items(t testing.TB, files ...string) fn.KubeObjects {
	t.Helper()
	var out fn.KubeObjects
	for i := 0; i < len(files); i += 2 {
		objs, err := fn.ParseKubeObjects([]byte(files[i+1]))
		if err != nil {
			t.Fatal(err)
		}
		for j, o := range objs {
			if err := o.SetAnnotation("internal.config.kubernetes.io/path", files[i]); err != nil {
				t.Fatal(err)
			}
			if err := o.SetAnnotation("internal.config.kubernetes.io/index", strconv.Itoa(j)); err != nil {
				t.Fatal(err)
			}
			out = append(out, o)
		}
	}
	return out
}

// Find is the object of kind named name among objs.
func Find(t testing.TB, objs fn.KubeObjects, kind, name string) *fn.KubeObject {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("%s %s not found", kind, name)
	return nil
}

// Str is the string at fields of o.
func Str(t testing.TB, o *fn.KubeObject, fields ...string) string {
	t.Helper()
	s, _, err := o.NestedString(fields...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Snapshot is every object of objs as YAML, to compare before and after.
func Snapshot(objs fn.KubeObjects) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.String()
	}
	return out
}
