package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/kyaml/kio"

	"github.com/nephio-project/ipam/service/server/servertest"
)

// build runs the tool on the repository's blueprint into a temp dir and
// returns the dir.
func build(t *testing.T, version string) string {
	t.Helper()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := Run([]string{"--blueprint", filepath.Join(servertest.ModuleRoot(t), "blueprints", "ipam"),
		"--out", out, "--version", version, "--tag", "abc1234"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	assert.Contains(t, stdout.String(), "ipam-components.yaml")
	return out
}

func TestComponentsFromTheBlueprint(t *testing.T) {
	out := build(t, "v0.3.1")
	data, err := os.ReadFile(filepath.Join(out, "ipam-nephio", "v0.3.1", "ipam-components.yaml"))
	require.NoError(t, err)
	nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(data), OmitReaderAnnotations: true}).Read()
	require.NoError(t, err)

	kinds := map[string][]string{}
	for _, n := range nodes {
		kinds[n.GetKind()] = append(kinds[n.GetKind()], n.GetName())
		assert.Equal(t, "ipam-nephio", n.GetLabels()[ProviderLabel], "%s %s: the provider label", n.GetKind(), n.GetName())
		assert.NotEqual(t, "ipam-injector", n.GetName(), "the Porch injector is no part of the provider")
		assert.NotEqual(t, "true", n.GetAnnotations()["config.kubernetes.io/local-config"], "%s %s", n.GetKind(), n.GetName())
	}
	assert.Equal(t, "Namespace", nodes[0].GetKind(), "the Namespace first")
	assert.Equal(t, []string{"${NEPHIO_IPAM_NAMESPACE:=ipam-system}"}, kinds["Namespace"])
	assert.ElementsMatch(t, []string{"ipam-server", "ipam-controller"}, kinds["Deployment"])
	assert.Contains(t, kinds["CustomResourceDefinition"], "inclusterippools.ipam.nephio.org")
	assert.Contains(t, kinds["CustomResourceDefinition"], "globalinclusterippools.ipam.nephio.org")
	assert.Contains(t, kinds["ConfigMap"], "ipam-config")
	assert.Contains(t, kinds["ClusterRole"], "ipam-controller")

	text := string(data)
	for _, want := range []string{
		"image: docker.io/library/ipam-server:abc1234",
		"image: docker.io/library/ipam-controller:abc1234",
		"server: ipam-server.${NEPHIO_IPAM_NAMESPACE:=ipam-system}.svc:9090",
		"--metal3=${NEPHIO_IPAM_METAL3:=false}",
		"storage: ${NEPHIO_IPAM_DATA_SIZE:=1Gi}",
		"clusterctl.cluster.x-k8s.io/move-hierarchy",
		"cluster.x-k8s.io/v1beta2: v1alpha1",
	} {
		assert.Contains(t, text, want)
	}
	for _, never := range []string{":dev", "kpt-set", "ipam-injector:"} {
		assert.NotContains(t, text, never)
	}

	meta, err := os.ReadFile(filepath.Join(out, "ipam-nephio", "v0.3.1", "metadata.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(meta), "kind: Metadata\nreleaseSeries:\n  - major: 0\n    minor: 3\n    contract: v1beta2\n")
	config, err := os.ReadFile(filepath.Join(out, "clusterctl.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(config), "url: file://"+filepath.Join(out, "ipam-nephio", "v0.3.1", "ipam-components.yaml"))
}

func TestRefusedOptions(t *testing.T) {
	root := servertest.ModuleRoot(t)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no version":      {nil, `--version "": not a semantic version`},
		"not semver":      {[]string{"--version", "1.2"}, `--version "1.2"`},
		"bad provider":    {[]string{"--version", "v1.0.0", "--provider", "Nephio_IPAM"}, `--provider "Nephio_IPAM"`},
		"bad tag":         {[]string{"--version", "v1.0.0", "--tag", "a b"}, `--tag "a b"`},
		"bad registry":    {[]string{"--version", "v1.0.0", "--registry", "Registry"}, `--registry "Registry"`},
		"stray argument":  {[]string{"--version", "v1.0.0", "extra"}, `unexpected arguments`},
		"no blueprint":    {[]string{"--version", "v1.0.0", "--blueprint", filepath.Join(t.TempDir(), "none")}, "setters.yaml"},
		"not a blueprint": {[]string{"--version", "v1.0.0", "--blueprint", filepath.Join(root, "blueprints", "ipam", "crds")}, "setters.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			out := t.TempDir()
			err := Run(append([]string{"--blueprint", filepath.Join(root, "blueprints", "ipam"), "--out", out}, tc.args...), &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			entries, _ := os.ReadDir(out)
			assert.Empty(t, entries, "nothing written")
		})
	}
}

func TestVariable(t *testing.T) {
	for setter, want := range map[string]string{
		"namespace": "NEPHIO_IPAM_NAMESPACE",
		"data-size": "NEPHIO_IPAM_DATA_SIZE",
		"metal3":    "NEPHIO_IPAM_METAL3",
	} {
		assert.Equal(t, want, Variable("nephio", setter))
	}
}

// clusterctlBin is the clusterctl `make clusterctl` builds.
func clusterctlBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(servertest.ModuleRoot(t), "bin", "capi", "clusterctl")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("SKIPPED: %s is not built (run `make clusterctl`; make test does): %v", bin, err)
	}
	return bin
}

// TestClusterctlGenerateProvider has the real clusterctl read the
// artifacts as a local repository: the variables it lists, and the
// components it renders with and without them set.
func TestClusterctlGenerateProvider(t *testing.T) {
	bin := clusterctlBin(t)
	out := build(t, "v0.3.1")
	config := filepath.Join(out, "clusterctl.yaml")
	run := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--config", config)...)
		cmd.Env = append(append(os.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME="+t.TempDir()), env...)
		got, err := cmd.CombinedOutput()
		require.NoError(t, err, "clusterctl %s:\n%s", strings.Join(args, " "), got)
		return string(got)
	}

	describe := run(nil, "generate", "provider", "--ipam", "nephio", "--describe")
	t.Logf("clusterctl generate provider --ipam nephio --describe:\n%s", describe)
	for _, want := range []string{"ipam-nephio", "v0.3.1", "ipam-system", "NEPHIO_IPAM_NAMESPACE", "NEPHIO_IPAM_DATA_SIZE", "NEPHIO_IPAM_METAL3"} {
		assert.Contains(t, describe, want)
	}

	rendered := run(nil, "generate", "provider", "--ipam", "nephio")
	assert.Contains(t, rendered, "image: docker.io/library/ipam-server:abc1234")
	assert.Contains(t, rendered, "server: ipam-server.ipam-system.svc:9090")
	assert.NotContains(t, rendered, "${")

	// The variables set, and the images moved by clusterctl's images:
	// configuration.
	require.NoError(t, os.WriteFile(config, append(must(os.ReadFile(config)),
		"images:\n  ipam-nephio:\n    repository: registry.example/nephio\n    tag: v0.3.1\n"...), 0o644))
	custom := run([]string{"NEPHIO_IPAM_NAMESPACE=capi-ipam", "NEPHIO_IPAM_METAL3=true"},
		"generate", "provider", "--ipam", "nephio:v0.3.1")
	for _, want := range []string{"name: capi-ipam", "namespace: capi-ipam", "image: registry.example/nephio/ipam-controller:v0.3.1",
		"server: ipam-server.capi-ipam.svc:9090", "--metal3=true", "cluster.x-k8s.io/provider: ipam-nephio"} {
		assert.Contains(t, custom, want)
	}
	assert.NotContains(t, custom, "ipam-system")
}

// must is the value of a call that cannot fail in a test.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestRunHelp(t *testing.T) {
	var errOut bytes.Buffer
	err := Run([]string{"--help"}, &bytes.Buffer{}, &errOut)
	require.Error(t, err)
	assert.Contains(t, errOut.String(), "-version")
}
