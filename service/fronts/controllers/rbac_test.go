package controllers_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestBlueprintRBACGenerated regenerates ipam-controller's ClusterRoles
// from the +kubebuilder:rbac markers (rbac.sh, as `make blueprint-rbac`
// does) into a scratch directory and fails when a blueprint's committed
// ClusterRole differs: the markers and the blueprints cannot drift. It
// runs bin/controller-gen, or $CONTROLLER_GEN when set; without it it
// fails, as the envtest tests do without their binaries.
func TestBlueprintRBACGenerated(t *testing.T) {
	root := servertest.ModuleRoot(t)
	gen := os.Getenv("CONTROLLER_GEN")
	if gen == "" {
		gen = filepath.Join(root, "bin", "controller-gen")
	}
	if _, err := os.Stat(gen); err != nil {
		t.Fatalf("%s is not built: run `make controller-gen` (make generate and make test do): %v", gen, err)
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "service", "fronts", "controllers", "rbac.sh"), gen, out)
	cmd.Dir = root
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "rbac.sh: %s", msg)

	var files []string
	require.NoError(t, filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(out, path)
		files = append(files, rel)
		return err
	}))
	require.ElementsMatch(t, []string{
		filepath.Join("blueprints", "ipam", "rbac-controller-role.yaml"),
		filepath.Join("blueprints", "ipam-metal3", "rbac-controller-metal3-role.yaml"),
		filepath.Join("blueprints", "ipam-nvidia", "rbac-controller-nvidia-role.yaml"),
		filepath.Join("blueprints", "ipam-nephio", "rbac-controller-nephio-role.yaml"),
	}, files)
	for _, f := range files {
		want, err := os.ReadFile(filepath.Join(out, f))
		require.NoError(t, err)
		require.Contains(t, string(want), "kind: ClusterRole", f)
		got, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%s differs from the +kubebuilder:rbac markers: run `make blueprint-rbac`", f)
	}
}
