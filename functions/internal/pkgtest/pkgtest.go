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
	"strings"
	"testing"
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
	timestamp = regexp.MustCompile(`(lastTransitionTime: )"?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})"?`)
)

// Diff is the package's change since the last commit as `git diff` shows
// it, written as the golden diff.patch files are: blob hashes dropped and
// condition times masked.
func Diff(t testing.TB, dir string) string {
	t.Helper()
	d := Git(t, dir, "diff", "--no-color", "--no-ext-diff")
	d = indexLine.ReplaceAllString(d, "")
	return timestamp.ReplaceAllString(d, `${1}"<masked>"`)
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
