package cni_test

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
	"github.com/nephio-project/ipam/service/internal/clustertest"
	"github.com/nephio-project/ipam/service/internal/proctest"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// needs skips the test with why, or fails it when CI is set: on CI the
// end-to-end test must run.
func needs(t *testing.T, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set and the CNI end-to-end test cannot run: %s", why)
	}
	t.Skipf("SKIPPED: %s", why)
}

// cniTools returns bin/cni (cnitool and the bridge plugin, from `make
// cni-plugins`), skipping the test when what it needs is missing: root
// (network namespaces), ip, the tools, envtest's binaries.
func cniTools(t *testing.T) string {
	t.Helper()
	needs(t, os.Geteuid() == 0, "creating network namespaces needs root")
	_, err := exec.LookPath("ip")
	needs(t, err == nil, "no ip command (iproute2) on PATH")
	dir := filepath.Join(servertest.ModuleRoot(t), "bin", "cni")
	for _, tool := range []string{"cnitool", "bridge"} {
		_, err := os.Stat(filepath.Join(dir, tool))
		needs(t, err == nil, "bin/cni/"+tool+" is missing: run `make cni-plugins`")
	}
	needs(t, os.Getenv("KUBEBUILDER_ASSETS") != "", "KUBEBUILDER_ASSETS is not set (make test sets it after `make testbin` builds etcd and kube-apiserver)")
	return dir
}

var netnsSeq atomic.Int64

// netns creates a network namespace with a unique name, removed when the
// test ends, and returns its name.
func netns(t *testing.T, role string) string {
	t.Helper()
	name := fmt.Sprintf("nvipam-%d-%s%d", os.Getpid(), role, netnsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", name, err, out)
		}
	})
	return name
}

// e2e is the node side end to end: envtest's API server with ipam-server
// and ipam-controller --nvidia assigning blocks, one ipam-node for host-b,
// the nv-ipam plugin it installed, the bridge plugin and cnitool.
type e2e struct {
	t        *testing.T // the whole test: the daemon lives as long
	cluster  *clustertest.NVIDIA
	tools    string // bin/cni
	dir      string // the node's directories
	sock     string
	netconfs string // NETCONFPATH
	node     *proctest.Proc
	api      nodev1.IPAMServiceClient
	nodeNS   string // the "node" network namespace the bridges live in
}

// startNode (re)starts ipam-node for host-b on e.dir; extra flags last.
func (e *e2e) startNode(t *testing.T, extra ...string) {
	t.Helper()
	args := append([]string{"--node-name", "host-b", "--kubeconfig", e.cluster.Kubeconfig, "--store-file", filepath.Join(e.dir, "store"),
		"--bind-address", "unix://" + e.sock, "--cni-bin-dir", filepath.Join(e.dir, "cni-bin"), "--cni-conf-dir", filepath.Join(e.dir, "cni-conf"),
		"--cni-nv-ipam-bin-file", binary(t, "nv-ipam"), "--cni-daemon-socket", "unix://" + e.sock,
		"--cni-log-file", filepath.Join(e.dir, "nv-ipam.log"), "--cni-log-level", "debug",
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0"}, extra...)
	e.node = proctest.StartCmd(t, e.t, exec.Command(binary(t, "ipam-node"), args...))
	e.node.WaitLine(t, `"msg":"serving"`, 120*time.Second)
	// A fresh client: one that saw the daemon go away would wait out
	// its reconnect backoff.
	conn, err := grpc.NewClient("unix://"+e.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = conn.Close() })
	e.api = nodev1.NewIPAMServiceClient(conn)
}

// network writes the network configuration name into NETCONFPATH: a
// bridge in the node namespace with nv-ipam as its IPAM.
func (e *e2e) network(t *testing.T, name, bridge, ipam string) {
	t.Helper()
	conf := `{"cniVersion":"1.0.0","name":"` + name + `","type":"bridge","bridge":"` + bridge + `","isGateway":false,"ipMasq":false,` +
		`"ipam":{"type":"nv-ipam","confDir":"` + filepath.Join(e.dir, "cni-conf") + `"` + ipam + `}}`
	if err := os.WriteFile(filepath.Join(e.netconfs, name+".conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
}

// cnitool runs `ip netns exec <node ns> cnitool cmd net /var/run/netns/ctr`
// for pod, and returns its stdout and error.
func (e *e2e) cnitool(t *testing.T, cmd, net, ctr, pod, uid string) (string, error) {
	t.Helper()
	c := exec.Command("ip", "netns", "exec", e.nodeNS, filepath.Join(e.tools, "cnitool"), cmd, net, "/var/run/netns/"+ctr)
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "CNI_PATH=" + e.tools + ":" + filepath.Join(e.dir, "cni-bin"), "NETCONFPATH=" + e.netconfs,
		"CNI_IFNAME=eth0", "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAME=" + pod + ";K8S_POD_NAMESPACE=default;K8S_POD_UID=" + uid}
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	if err != nil {
		err = fmt.Errorf("cnitool %s %s %s: %w\nstdout: %s\nstderr: %s", cmd, net, ctr, err, out.String(), errOut.String())
	}
	return out.String(), err
}

// network11 writes a network configuration of CNI 1.1.0 into NETCONFPATH
// with nv-ipam as its only plugin: GC and STATUS need 1.1.0, which
// Debian's bridge plugin (CNI 1.0.0 at most) refuses, and an IPAM plugin
// answers both on its own.
func (e *e2e) network11(t *testing.T, name, ipam string) {
	t.Helper()
	conf := `{"cniVersion":"1.1.0","name":"` + name + `","type":"nv-ipam",` +
		`"ipam":{"type":"nv-ipam","confDir":"` + filepath.Join(e.dir, "cni-conf") + `"` + ipam + `}}`
	if err := os.WriteFile(filepath.Join(e.netconfs, name+".conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
}

// gc runs CNI GC of network net with the valid attachments given, through
// libcni as a runtime does (cnitool gc passes none).
func (e *e2e) gc(t *testing.T, net string, valid ...types.GCAttachment) error {
	t.Helper()
	list, err := libcni.LoadNetworkConf(e.netconfs, net)
	if err != nil {
		t.Fatal(err)
	}
	cfg := libcni.NewCNIConfig([]string{e.tools, filepath.Join(e.dir, "cni-bin")}, nil)
	return cfg.GCNetworkList(context.Background(), list, &libcni.GCArgs{ValidAttachments: valid})
}

// setPool1Exclusions replaces the exclusions of pool1.
func (e *e2e) setPool1Exclusions(t *testing.T, xs []nvv1alpha1.ExcludeRange) {
	t.Helper()
	var p nvv1alpha1.IPPool
	if err := e.cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: "pool1"}, &p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Exclusions = xs
	if err := e.cluster.Client.Update(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
}

// containerID is the id cnitool gives the container of netns ctr.
func containerID(ctr string) string {
	s := sha512.Sum512([]byte("/var/run/netns/" + ctr))
	return fmt.Sprintf("cnitool-%x", s[:10])
}

// addrs returns the global addresses of eth0 in netns ns, as `ip` shows
// them.
func addrs(t *testing.T, ns string) []netip.Prefix {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-j", "addr", "show", "dev", "eth0").Output()
	if err != nil {
		t.Fatalf("ip -n %s addr show dev eth0: %v", ns, err)
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
			Scope     string `json:"scope"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		t.Fatalf("ip -j: %v\n%s", err, out)
	}
	var ps []netip.Prefix
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if a.Scope == "global" {
				ps = append(ps, netip.PrefixFrom(netip.MustParseAddr(a.Local), a.PrefixLen))
			}
		}
	}
	return ps
}

// params are the node API's parameters of container cid on eth0.
func params(cid string, typ nodev1.PoolType, pools ...string) *nodev1.IPAMParameters {
	return &nodev1.IPAMParameters{Pools: pools, PoolType: typ, CniContainerid: cid, CniIfname: "eth0",
		Metadata: &nodev1.IPAMMetadata{K8SPodName: "probe", K8SPodNamespace: "default"}}
}

// isAllocated is the daemon's IsAllocated's code for cid (waiting out
// Unavailable while the client connects to a restarted daemon).
func (e *e2e) isAllocated(cid string, typ nodev1.PoolType, pools ...string) codes.Code {
	var c codes.Code
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, err := e.api.IsAllocated(context.Background(), &nodev1.IsAllocatedRequest{Parameters: params(cid, typ, pools...)},
			grpc.WaitForReady(true))
		if c = status.Code(err); c != codes.Unavailable {
			break
		}
	}
	return c
}

// waitBlock waits until the daemon holds a block of pool (probing with an
// allocation it releases again).
func (e *e2e) waitBlock(t *testing.T, typ nodev1.PoolType, pool string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		p := params("probe-"+pool, typ, pool)
		if _, err = e.api.Allocate(context.Background(), &nodev1.AllocateRequest{Parameters: p}); err == nil {
			if _, err := e.api.Deallocate(context.Background(), &nodev1.DeallocateRequest{Parameters: p}); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no block of %s on host-b: %v", pool, err)
}

// pluginEnv is the environment of a direct call of the nv-ipam binary.
func (e *e2e) pluginEnv(cmd, cid string) []string {
	return []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=" + cid, "CNI_NETNS=/var/run/netns/nvipam-none", "CNI_IFNAME=eth0",
		"CNI_PATH=" + filepath.Join(e.dir, "cni-bin"), "CNI_ARGS=K8S_POD_NAME=pod-" + cid + ";K8S_POD_NAMESPACE=default"}
}

// pluginConf is a network configuration for direct calls of the plugin.
func (e *e2e) pluginConf(version, ipam string) string {
	return `{"cniVersion":"` + version + `","name":"direct","ipam":{"type":"nv-ipam","confDir":"` + filepath.Join(e.dir, "cni-conf") + `"` + ipam + `}}`
}

// TestNetnsEndToEnd drives nv-ipam as the IPAM of the bridge plugin,
// through cnitool, in network namespaces the test creates, against a real
// ipam-node whose blocks ipam-controller --nvidia assigns on a real API
// server. Nothing touches the machine's own interfaces: the bridges live in
// a "node" namespace, the containers' ends in their own.
func TestNetnsEndToEnd(t *testing.T) {
	e := &e2e{t: t, tools: cniTools(t), dir: t.TempDir(), netconfs: t.TempDir()}
	e.sock = filepath.Join(e.dir, "run", "daemon.sock")
	if len(e.sock) > 100 {
		t.Fatalf("socket path %s is too long for a unix socket", e.sock)
	}
	e.cluster = clustertest.StartNVIDIA(t, binary(t, "ipam-server"), binary(t, "ipam-controller"))
	ctx := context.Background()
	e.cluster.Seed(t, func(pool1 *nvv1alpha1.IPPool) {
		pool1.Spec.Routes = []nvv1alpha1.Route{{Dst: "10.10.0.0/16"}}
		pool1.Spec.DefaultGateway = true
	})

	if err := os.MkdirAll(filepath.Join(e.dir, "cni-bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.startNode(t)
	ipp, cidr := nodev1.PoolType_POOL_TYPE_IPPOOL, nodev1.PoolType_POOL_TYPE_CIDRPOOL
	e.waitBlock(t, ipp, "pool1")
	e.waitBlock(t, ipp, "pool6")
	e.waitBlock(t, ipp, "big")
	e.waitBlock(t, cidr, "cpool")

	e.nodeNS = netns(t, "node")
	e.network(t, "pool1", "br-v4", "")
	e.network(t, "dual", "br-dual", `,"poolName":"pool1,pool6"`)
	e.network(t, "cidr", "br-cidr", `,"poolName":"cpool","poolType":"CIDRPool"`)
	e.network(t, "pool1b", "br-gb", `,"poolName":"pool1"`)
	e.network11(t, "ready11", `,"poolName":"pool1,pool6"`)
	e.network11(t, "noblock11", `,"poolName":"pool1,no-such-pool"`)
	e.network11(t, "gc11", `,"poolName":"pool1"`)

	var first netip.Prefix
	t.Run("add gives host-b's first address on eth0", func(t *testing.T) {
		ctr := netns(t, "c")
		out, err := e.cnitool(t, "add", "pool1", ctr, "pod-first", "uid-first")
		if err != nil {
			t.Fatal(err)
		}
		got := addrs(t, ctr)
		if len(got) != 1 {
			t.Fatalf("eth0 in %s has %v\nresult %s", ctr, got, out)
		}
		first = got[0]
		a := first.Addr()
		if first.Bits() != 16 || a.Less(netip.MustParseAddr("192.168.0.25")) || netip.MustParseAddr("192.168.0.48").Less(a) {
			t.Fatalf("eth0 has %s, want an address of 192.168.0.25-192.168.0.48/16", first)
		}
		var res struct {
			IPs []struct {
				Address, Gateway string
			}
			Routes []struct{ Dst, GW string }
		}
		// The pool's route and, with defaultGateway, the default route,
		// both through the gateway, in the result and in the container.
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.IPs) != 1 || res.IPs[0].Gateway != "192.168.0.1" || len(res.Routes) != 2 {
			t.Fatalf("result %s: %v", out, err)
		}
		for _, r := range res.Routes {
			if (r.Dst != "0.0.0.0/0" && r.Dst != "10.10.0.0/16") || r.GW != "192.168.0.1" {
				t.Fatalf("result %s: route %+v", out, r)
			}
		}
		routes, err := exec.Command("ip", "-n", ctr, "route", "show").Output()
		if err != nil || !strings.Contains(string(routes), "default via 192.168.0.1 dev eth0") || !strings.Contains(string(routes), "10.10.0.0/16 via 192.168.0.1 dev eth0") {
			t.Fatalf("routes in %s: %v\n%s", ctr, err, routes)
		}
		t.Logf("host-b's first container: eth0 %s (result %s)", first, strings.Join(strings.Fields(out), " "))
		cid := containerID(ctr)

		// CHECK passes; after the daemon lost the allocation (released
		// behind the plugin's back through the node API) it fails.
		if _, err := e.cnitool(t, "check", "pool1", ctr, "pod-first", "uid-first"); err != nil {
			t.Fatalf("CHECK after ADD: %v", err)
		}
		if e.isAllocated(cid, ipp, "pool1") != codes.OK {
			t.Fatal("the daemon does not hold the container's address")
		}
		if _, err := e.api.Deallocate(ctx, &nodev1.DeallocateRequest{Parameters: params(cid, ipp, "pool1")}); err != nil {
			t.Fatal(err)
		}
		_, err = e.cnitool(t, "check", "pool1", ctr, "pod-first", "uid-first")
		if err == nil || !strings.Contains(err.Error(), "holds no address") {
			t.Fatalf("CHECK after the daemon lost the allocation: %v, want an error", err)
		}
		// Taken again (the same address: the lowest free), then DEL
		// releases it and removes eth0.
		if _, err := e.api.Allocate(ctx, &nodev1.AllocateRequest{Parameters: params(cid, ipp, "pool1")}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.cnitool(t, "del", "pool1", ctr, "pod-first", "uid-first"); err != nil {
			t.Fatal(err)
		}
		if c := e.isAllocated(cid, ipp, "pool1"); c != codes.NotFound {
			t.Fatalf("after DEL IsAllocated is %s, want NotFound", c)
		}
		if out, err := exec.Command("ip", "-n", ctr, "link", "show", "eth0").CombinedOutput(); err == nil {
			t.Fatalf("eth0 still in %s after DEL:\n%s", ctr, out)
		}
		// DEL again (and of what was never added) succeeds.
		if _, err := e.cnitool(t, "del", "pool1", ctr, "pod-first", "uid-first"); err != nil {
			t.Fatalf("second DEL: %v", err)
		}
	})

	t.Run("dual stack gives both addresses", func(t *testing.T) {
		ctr := netns(t, "d")
		out, err := e.cnitool(t, "add", "dual", ctr, "pod-dual", "uid-dual")
		if err != nil {
			t.Fatal(err)
		}
		got := addrs(t, ctr)
		var v4, v6 bool
		for _, p := range got {
			v4 = v4 || (p.Addr().Is4() && p.Bits() == 16 && netip.MustParsePrefix("192.168.0.0/16").Contains(p.Addr()))
			v6 = v6 || (p.Addr().Is6() && p.Bits() == 64 && netip.MustParsePrefix("fd00::/64").Contains(p.Addr()))
		}
		if !v4 || !v6 || len(got) != 2 {
			t.Fatalf("eth0 has %v, want one address of 192.168.0.0/16 and one of fd00::/64\nresult %s", got, out)
		}
		t.Logf("dual stack: eth0 %v", got)
		if _, err := e.cnitool(t, "del", "dual", ctr, "pod-dual", "uid-dual"); err != nil {
			t.Fatal(err)
		}
		if c := e.isAllocated(containerID(ctr), ipp, "pool6"); c != codes.NotFound {
			t.Fatalf("after DEL pool6 IsAllocated is %s", c)
		}
	})

	t.Run("CIDRPool gives an address of the node's prefix with its gateway", func(t *testing.T) {
		ctr := netns(t, "p")
		out, err := e.cnitool(t, "add", "cidr", ctr, "pod-cidr", "uid-cidr")
		if err != nil {
			t.Fatal(err)
		}
		got := addrs(t, ctr)
		var res struct {
			IPs []struct{ Address, Gateway string }
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.IPs) != 1 || len(got) != 1 {
			t.Fatalf("result %s, eth0 %v: %v", out, got, err)
		}
		p := got[0]
		gw := p.Masked().Addr().Next()
		if p.Bits() != 24 || !netip.MustParsePrefix("10.90.0.0/16").Contains(p.Addr()) || p.Addr() == gw || res.IPs[0].Gateway != gw.String() {
			t.Fatalf("eth0 %s gateway %s, want an address of a /24 of 10.90.0.0/16 with its first address as gateway", p, res.IPs[0].Gateway)
		}
		t.Logf("CIDRPool: eth0 %s gateway %s", p, res.IPs[0].Gateway)
		if _, err := e.cnitool(t, "del", "cidr", ctr, "pod-cidr", "uid-cidr"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("kill -9 of the daemon between ADD and DEL loses nothing", func(t *testing.T) {
		ctr := netns(t, "k")
		if _, err := e.cnitool(t, "add", "pool1", ctr, "pod-kill", "uid-kill"); err != nil {
			t.Fatal(err)
		}
		before := addrs(t, ctr)
		cid := containerID(ctr)
		e.node.Kill9(t)
		// With the daemon gone, DEL fails with "try again later" (11):
		// the runtime retries it.
		stdout, _, code := runPlugin(t, e.pluginEnv("DEL", cid), e.pluginConf("1.0.0", `,"poolName":"pool1"`))
		if code != 1 || !strings.Contains(stdout, `"code": 11`) {
			t.Fatalf("DEL without the daemon: exit %d %s", code, stdout)
		}
		stdout, _, code = runPlugin(t, e.pluginEnv("STATUS", ""), e.pluginConf("1.1.0", ""))
		if code != 1 || !strings.Contains(stdout, `"code": 50`) {
			t.Fatalf("STATUS without the daemon: exit %d %s", code, stdout)
		}
		if _, err := e.cnitool(t, "status", "ready11", ctr, "probe", "uid-probe"); err == nil || !strings.Contains(err.Error(), "does not answer") {
			t.Fatalf("cnitool status without the daemon: %v, want it not ready", err)
		}
		e.startNode(t)
		if c := e.isAllocated(cid, ipp, "pool1"); c != codes.OK {
			t.Fatalf("after the restart IsAllocated is %s: the allocation of %v was lost", c, before)
		}
		if _, err := e.cnitool(t, "check", "pool1", ctr, "pod-kill", "uid-kill"); err != nil {
			t.Fatalf("CHECK after the restart: %v", err)
		}
		if _, err := e.cnitool(t, "del", "pool1", ctr, "pod-kill", "uid-kill"); err != nil {
			t.Fatal(err)
		}
		if c := e.isAllocated(cid, ipp, "pool1"); c != codes.NotFound {
			t.Fatalf("after DEL IsAllocated is %s", c)
		}
		stdout, _, code = runPlugin(t, e.pluginEnv("STATUS", ""), e.pluginConf("1.1.0", `,"poolName":"pool1"`))
		if code != 0 || stdout != "" {
			t.Fatalf("STATUS with the daemon: exit %d %s", code, stdout)
		}
	})

	t.Run("direct calls: DEL of what was never added, unknown pool, GC", func(t *testing.T) {
		for _, tc := range []struct{ cid, ipam string }{
			{"never-added", `,"poolName":"pool1"`},
			{"unknown-pool", `,"poolName":"no-such-pool"`},
		} {
			stdout, stderr, code := runPlugin(t, e.pluginEnv("DEL", tc.cid), e.pluginConf("1.0.0", tc.ipam))
			if code != 0 || stdout != "" {
				t.Fatalf("DEL %s: exit %d stdout %q stderr %q", tc.cid, code, stdout, stderr)
			}
		}
		stdout, _, code := runPlugin(t, e.pluginEnv("ADD", "nopool"), e.pluginConf("1.0.0", `,"poolName":"no-such-pool"`))
		if code != 1 || !strings.Contains(stdout, `"code": 11`) || !strings.Contains(stdout, "no-such-pool") {
			t.Fatalf("ADD of an unknown pool: exit %d %s", code, stdout)
		}
		gc := strings.Replace(e.pluginConf("1.1.0", ""), `"ipam"`, `"cni.dev/valid-attachments":[],"ipam"`, 1)
		if stdout, _, code := runPlugin(t, e.pluginEnv("GC", ""), gc); code != 0 || stdout != "" {
			t.Fatalf("GC: exit %d %s", code, stdout)
		}
	})

	t.Run("200 concurrent ADDs on one node: no duplicate, all in the block", func(t *testing.T) {
		var big nvv1alpha1.IPPool
		if err := e.cluster.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "big"}, &big); err != nil {
			t.Fatal(err)
		}
		var lo, hi netip.Addr
		for _, a := range big.Status.Allocations {
			if a.NodeName == "host-b" {
				lo, hi = netip.MustParseAddr(a.StartIP), netip.MustParseAddr(a.EndIP)
			}
		}
		if !lo.IsValid() {
			t.Fatalf("big has no block for host-b: %+v", big.Status)
		}
		const n = 200
		got := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		begin := time.Now()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stdout, stderr, code := runPlugin(t, e.pluginEnv("ADD", fmt.Sprintf("load%d", i)), e.pluginConf("1.0.0", `,"poolName":"big"`))
				var res struct{ IPs []struct{ Address string } }
				if code != 0 || json.Unmarshal([]byte(stdout), &res) != nil || len(res.IPs) != 1 {
					errs[i] = fmt.Errorf("exit %d stdout %q stderr %q", code, stdout, stderr)
					return
				}
				got[i] = res.IPs[0].Address
			}()
		}
		wg.Wait()
		t.Logf("200 concurrent ADDs (200 plugin processes): %s", time.Since(begin).Round(time.Millisecond))
		seen := map[netip.Addr]int{}
		for i, s := range got {
			if errs[i] != nil {
				t.Fatalf("load%d: %v", i, errs[i])
			}
			p := netip.MustParsePrefix(s)
			if j, dup := seen[p.Addr()]; dup {
				t.Fatalf("load%d and load%d both got %s", j, i, p)
			}
			seen[p.Addr()] = i
			if p.Bits() != 16 || p.Addr().Less(lo) || hi.Less(p.Addr()) {
				t.Fatalf("load%d got %s, outside host-b's block %s-%s", i, p, lo, hi)
			}
		}
		// And 200 concurrent DELs release them all.
		begin = time.Now()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stdout, stderr, code := runPlugin(t, e.pluginEnv("DEL", fmt.Sprintf("load%d", i)), e.pluginConf("1.0.0", `,"poolName":"big"`))
				if code != 0 {
					errs[i] = fmt.Errorf("exit %d stdout %q stderr %q", code, stdout, stderr)
				}
			}()
		}
		wg.Wait()
		t.Logf("200 concurrent DELs: %s", time.Since(begin).Round(time.Millisecond))
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("DEL load%d: %v", i, errs[i])
			}
			if c := e.isAllocated(fmt.Sprintf("load%d", i), ipp, "big"); c != codes.NotFound {
				t.Fatalf("load%d after DEL: IsAllocated %s", i, c)
			}
		}
	})

	t.Run("CNI 1.1: STATUS, GC of what is not valid, CHECK of the block", func(t *testing.T) {
		// STATUS: ready when the node holds a block of every pool, 50
		// naming the pool when it holds none of one.
		if _, err := e.cnitool(t, "status", "ready11", e.nodeNS, "probe", "uid-probe"); err != nil {
			t.Fatalf("STATUS with blocks of pool1 and pool6: %v", err)
		}
		_, err := e.cnitool(t, "status", "noblock11", e.nodeNS, "probe", "uid-probe")
		if err == nil || !strings.Contains(err.Error(), `not ready: pool "no-such-pool"`) {
			t.Fatalf("STATUS without a block of no-such-pool: %v, want not ready naming it", err)
		}

		// GC: two containers added by the bridge plugin (each on a bridge
		// of its own, as the bridge plugin's CHECK compares the bridge's
		// MAC address with the one of its ADD), and an orphan allocation
		// no runtime knows of (its DEL was lost). A GC that lists only
		// the first keeps it and releases the other two.
		ctrA, ctrB := netns(t, "ga"), netns(t, "gb")
		for _, x := range []struct{ net, ctr, pod string }{{"pool1", ctrA, "pod-ga"}, {"pool1b", ctrB, "pod-gb"}} {
			if _, err := e.cnitool(t, "add", x.net, x.ctr, x.pod, "uid-"+x.pod); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.api.Allocate(ctx, &nodev1.AllocateRequest{Parameters: params("orphan", ipp, "pool1")}); err != nil {
			t.Fatal(err)
		}
		cidA, cidB := containerID(ctrA), containerID(ctrB)
		if err := e.gc(t, "gc11", types.GCAttachment{ContainerID: cidA, IfName: "eth0"}, types.GCAttachment{ContainerID: cidB, IfName: "net9"}); err != nil {
			t.Fatalf("GC: %v", err)
		}
		if c := e.isAllocated(cidA, ipp, "pool1"); c != codes.OK {
			t.Fatalf("a valid attachment after GC: IsAllocated %s", c)
		}
		for _, cid := range []string{cidB, "orphan"} {
			if c := e.isAllocated(cid, ipp, "pool1"); c != codes.NotFound {
				t.Fatalf("%s after GC: IsAllocated %s, want it released", cid, c)
			}
		}
		if _, err := e.cnitool(t, "check", "pool1b", ctrB, "pod-gb", "uid-pod-gb"); err == nil || !strings.Contains(err.Error(), "does not hold its addresses") {
			t.Fatalf("CHECK of a collected attachment: %v, want it to fail", err)
		}

		// CHECK: the address must still be inside the node's block. An
		// exclusion over A's address takes it out of the block: CHECK
		// fails with 104 until the exclusion goes.
		a := addrs(t, ctrA)[0].Addr()
		if _, err := e.cnitool(t, "check", "pool1", ctrA, "pod-ga", "uid-pod-ga"); err != nil {
			t.Fatalf("CHECK: %v", err)
		}
		e.setPool1Exclusions(t, []nvv1alpha1.ExcludeRange{{StartIP: a.String(), EndIP: a.String()}})
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			_, err = e.cnitool(t, "check", "pool1", ctrA, "pod-ga", "uid-pod-ga")
			if err != nil || time.Now().After(deadline) {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), "outside the node's block") {
			t.Fatalf("CHECK of an excluded address: %v, want it outside the block", err)
		}
		t.Logf("CHECK of %s once excluded: %s", a, strings.Join(strings.Fields(err.Error()), " "))
		e.setPool1Exclusions(t, nil)
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			if _, err = e.cnitool(t, "check", "pool1", ctrA, "pod-ga", "uid-pod-ga"); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("CHECK once the exclusion is gone: %v", err)
		}

		// cnitool gc passes no valid attachment: everything of gc11's pool
		// goes.
		if _, err := e.cnitool(t, "gc", "gc11", e.nodeNS, "probe", "uid-probe"); err != nil {
			t.Fatalf("cnitool gc: %v", err)
		}
		if c := e.isAllocated(cidA, ipp, "pool1"); c != codes.NotFound {
			t.Fatalf("after cnitool gc: IsAllocated %s", c)
		}
		for _, x := range []struct{ net, ctr, pod string }{{"pool1", ctrA, "pod-ga"}, {"pool1b", ctrB, "pod-gb"}} {
			if _, err := e.cnitool(t, "del", x.net, x.ctr, x.pod, "uid-"+x.pod); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("a stale pod's allocation is released", func(t *testing.T) {
		keep := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-keep", Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "host-b", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		stale := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-stale", Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "host-b", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		e.cluster.Create(t, keep)
		e.cluster.Create(t, stale)
		ctrKeep, ctrStale := netns(t, "keep"), netns(t, "stale")
		if _, err := e.cnitool(t, "add", "pool1", ctrKeep, keep.Name, string(keep.UID)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.cnitool(t, "add", "pool1", ctrStale, stale.Name, string(stale.UID)); err != nil {
			t.Fatal(err)
		}
		// The pod is deleted while its container's DEL never comes.
		if err := e.cluster.Client.Delete(ctx, stale, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		e.node.Stop(t)
		t.Logf("ipam-node stopped on SIGTERM in %s", time.Since(begin).Round(time.Millisecond))
		begin = time.Now()
		e.startNode(t, "--cleanup-interval", "1s", "--cleanup-grace", "0s")
		var code codes.Code
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			if code = e.isAllocated(containerID(ctrStale), ipp, "pool1"); code == codes.NotFound {
				break
			}
		}
		if code != codes.NotFound {
			t.Fatalf("pod-stale's allocation: IsAllocated %s, want it released", code)
		}
		t.Logf("pod-stale's allocation released %s after the daemon's restart with --cleanup-interval 1s", time.Since(begin).Round(time.Millisecond))
		if c := e.isAllocated(containerID(ctrKeep), ipp, "pool1"); c != codes.OK {
			t.Fatalf("pod-keep's allocation: IsAllocated %s, want it kept", c)
		}
		for _, x := range []struct{ ctr, pod, uid string }{{ctrKeep, keep.Name, string(keep.UID)}, {ctrStale, stale.Name, string(stale.UID)}} {
			if _, err := e.cnitool(t, "del", "pool1", x.ctr, x.pod, x.uid); err != nil {
				t.Fatal(err)
			}
		}
	})

	// The plugin logged every call in the log file the daemon configured.
	data, err := os.ReadFile(filepath.Join(e.dir, "nv-ipam.log"))
	if err != nil || !bytes.Contains(data, []byte(`"cmd":"ADD"`)) || !bytes.Contains(data, []byte(`"cmd":"CHECK"`)) {
		t.Fatalf("plugin log: %v\n%.2000s", err, data)
	}
	e.node.Stop(t)
}
