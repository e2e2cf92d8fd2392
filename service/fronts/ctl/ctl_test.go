package ctl_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/fronts/ctl"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// run runs ipamctl and renders what it printed and its exit code.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := ctl.Run(context.Background(), args, &stdout, &stderr)
	out := stdout.String()
	if stderr.Len() > 0 {
		out += "--- stderr ---\n" + stderr.String()
	}
	return out, code
}

// golden compares got with testdata/name.golden (or rewrites it with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (run go test -update to accept):\n--- got ---\n%s--- want ---\n%s", name, file, got, want)
	}
}

// TestGolden runs a session of ipamctl commands against a real server
// seeded with the demo and compares every output with its golden file.
func TestGolden(t *testing.T) {
	t.Setenv("IPAM_SERVER", "") // usage texts show the built-in default
	ts := servertest.Start(t, server.Config{Demo: true}, false)
	srv := "--server=" + ts.Addr
	for _, step := range []struct {
		name string
		args string
		code int
	}{
		{"vrf-list", "vrf list", 0},
		{"prefix-list", "prefix list", 0},
		{"alloc-create", "alloc create alloc1 --selector nephio.org/network-instance=vpc-1 --selector nephio.org/network-name=net1", 0},
		{"alloc-create-again", "alloc create alloc1 --selector nephio.org/network-instance=vpc-1 --selector nephio.org/network-name=net1", 0},
		{"alloc-create-pool", "alloc create pool1 --kind pool --prefix-length 16 -s nephio.org/network-instance=vpc-1", 0},
		{"prefix-create-static", "prefix create net1-prefix10 --vrf vpc-1 --prefix 10.0.1.10/24 --network net1 --label nephio.org/interface=n3", 0},
		{"alloc-create-static", "alloc create alloc2-n3 -s nephio.org/network-instance=vpc-1 -s nephio.org/network-name=net1 -s nephio.org/interface=n3", 0},
		{"alloc-create-block", "alloc create node-block --vrf vpc-1 -s nephio.org/network-name=net1 --count 8 --owner kubelet --namespace kube-system", 0},
		{"range-create", "range create r1 --vrf vpc-1 --start 10.0.1.100 --end 10.0.1.110 --label pool=metal3 --pre-alloc host-a=10.0.1.105 --exclude 10.0.1.108-10.0.1.109", 0},
		{"range-create-override", "range create r2 --vrf vpc-1 --start 10.0.1.120 --end 10.0.1.126 --prefix-length 25 --gateway 10.0.1.126 --label pool=metal3-b", 0},
		{"alloc-create-from-range", "alloc create host-b -s nephio.org/network-instance=vpc-1 -s pool=metal3-b", 0},
		{"prefix-create-allocate-reserved", "prefix create net9 --vrf vpc-1 --prefix 10.0.9.0/30 --network net9 --allocate-reserved", 0},
		{"alloc-create-reserved", "alloc create first-of-net9 -s nephio.org/network-instance=vpc-1 -s nephio.org/network-name=net9", 0},
		{"prefix-create-gateway-in-blocks", "prefix create net8 --vrf vpc-1 --prefix 10.0.8.1/24 --network net8 --label nephio.org/gateway=true --gateway-in-blocks", 0},
		{"alloc-create-block-gateway", "alloc create node-1 -s nephio.org/network-instance=vpc-1 -s nephio.org/network-name=net8 --count 15", 0},
		{"vrf-create", "vrf create vpc-2 --prefix 192.168.0.0/16 --prefix 2001:db8::/32 --label env=lab", 0},
		{"alloc-list", "alloc list", 0},
		{"alloc-list-filtered", "alloc list --owner ipamctl --vrf vpc-1", 0},
		{"alloc-list-yaml", "-o yaml alloc list", 0},
		{"alloc-list-wide", "alloc list -o wide", 0},
		{"alloc-list-name", "allocs ls -o name --vrf vpc-1", 0},
		{"error-other-owner", "alloc get node-block -n kube-system --owner ipamctl", 1},
		{"alloc-get-json", "alloc get alloc1 -o json", 0},
		{"prefix-get-yaml", "prefix get net1-prefix1 -o yaml", 0},
		{"prefix-list-label", "prefix list -l nephio.org/gateway=true", 0},
		{"range-list", "range list", 0},
		{"range-get-yaml", "--output yaml range get r1", 0},
		{"vrf-list-after", "vrf list", 0},
		{"vrf-get-json", "vrf get vpc-2 -o json", 0},
		{"tree", "tree vpc-1", 0},
		{"tree-yaml", "tree vpc-1 -o yaml", 0},
		{"tree-empty", "tree vpc-2", 0},
		{"error-not-found", "alloc get nope", 1},
		{"error-invalid", "prefix create bad --vrf vpc-1 --prefix 10.0.1.1/33", 1},
		{"error-conflict", "alloc create taken --vrf vpc-1 --prefix 10.0.1.2/24", 1},
		{"error-in-use", "prefix delete net1-prefix1", 1},
		{"error-no-vrf", "tree vpc-9", 1},
		{"alloc-delete", "alloc delete alloc1", 0},
		{"alloc-delete-block", "alloc release node-block -n kube-system", 0},
		{"range-delete", "range delete r1", 0},
		{"alloc-delete-from-range", "alloc delete host-b", 0},
		{"range-delete-override", "range delete r2", 0},
		{"alloc-delete-reserved", "alloc delete first-of-net9", 0},
		{"alloc-delete-block-gateway", "alloc delete node-1", 0},
		{"prefix-delete-gateway-in-blocks", "prefix delete net8", 0},
		{"prefix-delete-allocate-reserved", "prefix delete net9", 0},
		{"range-list-empty", "ranges list", 0},
		{"vrf-delete", "vrf delete vpc-2", 0},
		{"usage-missing-flags", "prefix create x", 2},
		{"usage-missing-name", "alloc get", 2},
		{"usage-unknown-command", "vrf frobnicate", 2},
		{"usage-bad-output", "-o xml vrf list", 2},
		{"usage-bad-label", "alloc create a1 --selector novalue", 2},
		{"usage-group", "vrf", 0},
		{"version", "version", 0},
	} {
		t.Run(step.name, func(t *testing.T) {
			got, code := run(t, append([]string{srv}, strings.Fields(step.args)...)...)
			if code != step.code {
				t.Errorf("ipamctl %s exited %d, want %d:\n%s", step.args, code, step.code, got)
			}
			golden(t, step.name, fmt.Sprintf("$ ipamctl %s\n%s--- exit %d ---\n", step.args, got, code))
		})
	}
}

// TestUsage prints the help without a server.
func TestUsage(t *testing.T) {
	t.Setenv("IPAM_SERVER", "")
	got, code := run(t)
	if code != ctl.ExitOK {
		t.Errorf("ipamctl without arguments exited %d", code)
	}
	golden(t, "usage", got)
	got, code = run(t, "alloc", "create", "--help")
	if code != ctl.ExitOK {
		t.Errorf("ipamctl alloc create --help exited %d", code)
	}
	golden(t, "usage-alloc-create", got)
}

// TestCompletion: the shells' completion scripts are there, and the
// completion of -o offers the formats.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		got, code := run(t, "completion", shell)
		if code != ctl.ExitOK || !strings.Contains(got, "ipamctl") || len(got) < 1000 {
			t.Errorf("completion %s: exit %d, %d bytes", shell, code, len(got))
		}
	}
	got, code := run(t, "__complete", "vrf", "list", "-o", "")
	if code != ctl.ExitOK || !strings.Contains(got, "wide\nyaml\njson\nname") {
		t.Errorf("completion of -o: exit %d\n%s", code, got)
	}
}

// TestServerFromEnvironment uses $IPAM_SERVER when --server is absent.
func TestServerFromEnvironment(t *testing.T) {
	ts := servertest.Start(t, server.Config{Demo: true}, false)
	t.Setenv("IPAM_SERVER", ts.Addr)
	got, code := run(t, "vrf", "list")
	if code != 0 || !strings.Contains(got, "vpc-1") {
		t.Fatalf("vrf list via $IPAM_SERVER: exit %d\n%s", code, got)
	}
}

// TestMTLS talks to a server that requires client certificates.
func TestMTLS(t *testing.T) {
	certs := servertest.WriteCerts(t, t.TempDir())
	ts := servertest.Start(t, server.Config{Demo: true, TLSCert: certs.ServerCert, TLSKey: certs.ServerKey, ClientCA: certs.CA}, false)
	got, code := run(t, "--server", ts.Addr, "--tls-ca", certs.CA, "--tls-cert", certs.ClientCert, "--tls-key", certs.ClientKey, "vrf", "list")
	if code != 0 || !strings.Contains(got, "vpc-1") {
		t.Fatalf("vrf list with a client certificate: exit %d\n%s", code, got)
	}
	got, code = run(t, "--server", ts.Addr, "--tls-ca", certs.CA, "vrf", "list", "--timeout", "5s")
	if code != ctl.ExitError || !strings.Contains(got, "Error: ") {
		t.Fatalf("vrf list without a client certificate: exit %d\n%s", code, got)
	}
	got, code = run(t, "--server", ts.Addr, "vrf", "list", "--timeout", "5s")
	if code != ctl.ExitError {
		t.Fatalf("plaintext vrf list against TLS: exit %d\n%s", code, got)
	}
}

// TestListPagesBySize lists allocations whose labels make the server cut
// its pages by size rather than count: ipamctl follows the page tokens
// and prints every allocation once.
func TestListPagesBySize(t *testing.T) {
	ts := servertest.Start(t, server.Config{Demo: true}, false)
	c := ts.Client(t)
	const n = 200 // 64 labels of 380 bytes each: about 5 MB, two pages
	req := &ipamv1.SyncRequest{Owner: "big"}
	for i := range n {
		labels := map[string]string{}
		for j := range ipam.MaxLabels {
			labels[fmt.Sprintf("%d.%s/%s", j, strings.Repeat("p", 250), strings.Repeat("n", 63))] = strings.Repeat("v", ipam.MaxLabelValueLength)
		}
		req.Allocations = append(req.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: fmt.Sprintf("a%03d", i)},
			Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net1"}, Labels: labels})
	}
	if _, err := c.Sync(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got, code := run(t, "--server="+ts.Addr, "alloc", "list", "--owner", "big", "-o", "name")
	if code != 0 {
		t.Fatalf("alloc list: exit %d\n%.2000s", code, got)
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	if len(lines) != n || len(seen) != n {
		t.Errorf("alloc list printed %d lines, %d distinct, want %d", len(lines), len(seen), n)
	}
}
