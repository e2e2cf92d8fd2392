package cluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nephio-project/ipam/service/cluster/clusterkit"
)

// TestNoRouteOut checks that nothing the cluster runs can send a packet
// off the machine: its namespace has no default route (IPv4 or IPv6) and
// holds only loopback, the pod bridge and the pods' veths; every process
// of the cluster but the API forwarder runs in it, and the forwarder
// listens on loopback only; CoreDNS has no forwarder and kubelet gives
// pods no resolver of the machine's.
func TestNoRouteOut(t *testing.T) {
	c := clusterkit.Use(t)
	for _, fam := range []string{"-4", "-6"} {
		out, err := c.Run("ip", fam, "-n", clusterkit.Netns, "route", "show", "default")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("ip %s -n %s route show default: %q (%v), want no default route", fam, clusterkit.Netns, out, err)
		}
		routes, _ := c.Run("ip", fam, "-n", clusterkit.Netns, "route", "show", "table", "all")
		for _, r := range strings.Split(strings.TrimSpace(routes), "\n") {
			if strings.Contains(r, " via ") {
				t.Errorf("route through a gateway in %s: %s", clusterkit.Netns, r)
			}
		}
	}
	links, err := c.Run("ip", "-n", clusterkit.Netns, "-o", "-d", "link", "show")
	if err != nil {
		t.Fatalf("ip link: %v\n%s", err, links)
	}
	for _, l := range strings.Split(strings.TrimSpace(links), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name := strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":")
		switch {
		case name == "lo", name == "ipamc0":
		case strings.HasPrefix(name, "veth") && strings.Contains(l, "master ipamc0"):
		default:
			t.Errorf("link %s in %s: only lo, the bridge ipamc0 and pod veths on it belong there:\n%s", name, clusterkit.Netns, l)
		}
	}

	var nsIno uint64
	var st syscall.Stat_t
	if err := syscall.Stat("/var/run/netns/"+clusterkit.Netns, &st); err != nil {
		t.Fatal(err)
	}
	nsIno = st.Ino
	pids, err := filepath.Glob(filepath.Join(c.Root, "bin", "cluster", "pids", "*.pid"))
	if err != nil || len(pids) < 8 {
		t.Fatalf("the cluster's PID files: %v %v", pids, err)
	}
	for _, p := range pids {
		name := strings.TrimSuffix(filepath.Base(p), ".pid")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var pst syscall.Stat_t
		if err := syscall.Stat("/proc/"+strings.TrimSpace(string(b))+"/ns/net", &pst); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if in := pst.Ino == nsIno; in != (name != "forwarder") {
			t.Errorf("%s runs in the cluster's namespace: %v", name, in)
		}
	}
	// The forwarder's socket: loopback only.
	if out, _ := c.Run("ss", "-Htlnp"); !strings.Contains(out, "127.0.0.1:16443") {
		t.Errorf("nothing listens on 127.0.0.1:16443:\n%s", out)
	} else {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "netns-forward") && !strings.Contains(l, "127.0.0.1:16443") {
				t.Errorf("netns-forward listens beyond loopback: %s", l)
			}
		}
	}

	corefile := c.MustKubectl(t, "-n", "kube-system", "get", "configmap", "coredns", "-o", "jsonpath={.data.Corefile}")
	if strings.Contains(corefile, "forward") || !strings.Contains(corefile, "kubernetes cluster.local") {
		t.Errorf("CoreDNS's Corefile must serve cluster.local and forward nothing:\n%s", corefile)
	}
	kubelet, err := os.ReadFile(filepath.Join(c.Root, "bin", "cluster", "kubelet", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kubelet), `resolvConf: ""`) || !strings.Contains(string(kubelet), `clusterDNS: ["10.96.0.10"]`) {
		t.Errorf("kubelet must give pods the cluster's DNS and no resolver of the machine's:\n%s", kubelet)
	}
}
