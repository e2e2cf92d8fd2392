package doctest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestReadme runs the walk-throughs of the top-level README and of
// service/README.md: each section from a fresh copy of the repository,
// every command of its fenced blocks exactly as printed, transcripts
// compared line by line (normalize lists what may differ). make run serves
// on the fixed ports 9090 and 8080: the test skips when they are taken.
func TestReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short (the walk-throughs build and run the binaries)")
	}
	servertest.HoldMakeRunPorts(t)
	needPorts(t, "9090", "8080")
	walk(t, repoRoot(t), "README.md", "service/README.md")
}

// walk runs the walk-throughs of files, a subtest per README and section.
func walk(t *testing.T, root string, files ...string) {
	path := filepath.Join(root, "bin") + ":" + os.Getenv("PATH")
	seen := map[[2]string]bool{}
	for _, file := range files {
		all, err := steps(root, file, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(file, func(t *testing.T) {
			for len(all) > 0 {
				n := 1
				for n < len(all) && all[n].section == all[0].section {
					n++
				}
				sec := all[:n]
				all = all[n:]
				t.Run(sec[0].section, func(t *testing.T) {
					dir := freshCopy(t, root)
					s := newSession(t, dir, commandEnv(t, dir, t.TempDir()))
					for _, st := range sec {
						s.run(st, seen)
					}
				})
			}
		})
	}
	for key, why := range notRun {
		for _, f := range files {
			if key[0] == f && !seen[key] {
				t.Errorf("%s no longer has %q, which the test does not run (%s): drop it from notRun", key[0], key[1], why)
			}
		}
	}
}
