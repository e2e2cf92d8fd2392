package cni_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nephio-project/ipam/service/internal/proctest"
)

// binary builds ./service/cmd/<name> once (proctest.Build) and returns
// its path.
func binary(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(proctest.Build(t, "./service/cmd/"+name), name)
}

func TestMain(m *testing.M) { proctest.Main(m) }

// runPlugin runs the nv-ipam binary with env (besides PATH) and stdin, and
// returns its stdout, stderr and exit code.
func runPlugin(t *testing.T, env []string, stdin string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary(t, "nv-ipam"))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("nv-ipam: %v", err)
	}
	return o.String(), e.String(), code
}

// cniError decodes the error JSON a plugin prints on stdout.
type cniError struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details"`
}

// TestBinary starts the plugin for real: no command prints what it is on
// stderr; VERSION prints the versions; a bad configuration or CNI_ARGS,
// and a daemon that is not there, print a CNI error on stdout and exit 1.
func TestBinary(t *testing.T) {
	stdout, stderr, code := runPlugin(t, nil, "")
	if code != 0 || stdout != "" || !strings.Contains(stderr, "nv-ipam CNI IPAM plugin") || !strings.Contains(stderr, "CNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0") {
		t.Fatalf("no command: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	stdout, _, code = runPlugin(t, []string{"CNI_COMMAND=VERSION"}, `{"cniVersion":"1.0.0"}`)
	var v struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &v) != nil || len(v.SupportedVersions) != 7 {
		t.Fatalf("VERSION: exit %d stdout %q", code, stdout)
	}

	dir := t.TempDir()
	logFile := filepath.Join(dir, "nv-ipam.log")
	ipam := func(keys string) string {
		return `{"cniVersion":"1.0.0","name":"pool1","ipam":{"type":"nv-ipam","confDir":"` + dir + `","logFile":"` + logFile +
			`","daemonSocket":"unix://` + filepath.Join(dir, "none.sock") + `"` + keys + `}}`
	}
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/var/run/netns/none", "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin",
		"CNI_ARGS=K8S_POD_NAME=p;K8S_POD_NAMESPACE=ns"}
	tests := []struct {
		name   string
		env    []string
		stdin  string
		code   uint
		msgHas string
	}{
		{"not JSON", env, `{"name":`, 6, "unmarshal"},
		{"no ipam", env, `{"cniVersion":"1.0.0","name":"pool1"}`, 7, "ipam object is missing"},
		{"three pools", env, ipam(`,"poolName":"a,b,c"`), 7, "at most 2"},
		{"another IPAM's key", env, ipam(`,"ranges":[]`), 2, "ipam.ranges"},
		{"bad poolType", env, ipam(`,"poolType":"x"`), 7, "poolType"},
		{"no pod", append(env[:len(env)-1:len(env)-1], "CNI_ARGS=IgnoreUnknown=1"), ipam(""), 4, "K8S_POD_NAME"},
		{"no daemon", env, ipam(""), 11, "unavailable"},
		{"no daemon, DEL", append(env[1:len(env):len(env)], "CNI_COMMAND=DEL"), ipam(""), 11, "unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runPlugin(t, tc.env, tc.stdin)
			var e cniError
			if code != 1 || json.Unmarshal([]byte(stdout), &e) != nil {
				t.Fatalf("exit %d stdout %q stderr %q; want exit 1 and a CNI error", code, stdout, stderr)
			}
			if e.Code != tc.code || !strings.Contains(e.Msg+e.Details, tc.msgHas) {
				t.Fatalf("error %+v, want code %d naming %q", e, tc.code, tc.msgHas)
			}
			if strings.Contains(stderr, "panic") {
				t.Fatalf("stderr %q", stderr)
			}
		})
	}
	if data, err := os.ReadFile(logFile); err != nil || !bytes.Contains(data, []byte(`"code":11`)) {
		t.Fatalf("log file: %v\n%s", err, data)
	}
}
