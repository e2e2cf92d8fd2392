package proctest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/nephio-project/ipam/service/server/servertest"
)

var (
	buildMu  sync.Mutex
	buildDir string
	built    = map[string]error{} // main package -> its go build's error
)

// Build builds the main packages pkgs (paths from the module root, like
// ./service/cmd/ipam-node) with CGO_ENABLED=0, those not built yet in one
// go build, into a temporary directory shared by the tests of the test
// binary, and returns that directory: the binary of a package is named as
// its directory. Main removes the directory.
func Build(t testing.TB, pkgs ...string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir == "" {
		d, err := os.MkdirTemp("", "ipam-test-bin-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = d
	}
	var missing []string
	for _, p := range pkgs {
		if _, ok := built[p]; !ok {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		cmd := exec.Command("go", append([]string{"build", "-o", buildDir + "/"}, missing...)...)
		cmd.Dir = servertest.ModuleRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		var err error
		if out, berr := cmd.CombinedOutput(); berr != nil {
			err = errors.New("go build " + strings.Join(missing, " ") + ": " + berr.Error() + "\n" + string(out))
		}
		for _, p := range missing {
			built[p] = err
		}
	}
	for _, p := range pkgs {
		if err := built[p]; err != nil {
			t.Fatal(err)
		}
	}
	return buildDir
}

// Main runs the tests of m, removes the binaries Build built and exits
// with the tests' code: a test package that calls Build calls it from its
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}
