package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
)

// build builds ipam-node, ipam-server and ipam-controller once.
func build(t *testing.T) string {
	t.Helper()
	return proctest.Build(t, "./service/cmd/ipam-node", "./service/cmd/ipam-server", "./service/cmd/ipam-controller")
}

func TestMain(m *testing.M) { proctest.Main(m) }

// startCluster starts the NVIDIA cluster (clustertest.StartNVIDIA) with
// the binaries build built.
func startCluster(t *testing.T) *clustertest.NVIDIA {
	t.Helper()
	dir := build(t)
	return clustertest.StartNVIDIA(t, filepath.Join(dir, "ipam-server"), filepath.Join(dir, "ipam-controller"))
}

// daemon is a started ipam-node with a client of its node API.
type daemon struct {
	*proctest.Proc
	sock    string
	metrics string
	health  string
	conn    *grpc.ClientConn
	api     nodev1.IPAMServiceClient
}

// waitLineOut waits for a line already printed or still to come.
func (d *daemon) waitLineOut(t *testing.T, want string) {
	t.Helper()
	if strings.Contains(d.Output(), want) {
		return
	}
	d.WaitLine(t, want, 30*time.Second)
}

// startNode runs ipam-node for node in dir (its store, socket and CNI
// directories), against kubeconfig.
func startNode(t *testing.T, dir, node, kubeconfig string, extra ...string) *daemon {
	t.Helper()
	bin := filepath.Join(build(t), "ipam-node")
	sock := filepath.Join(dir, "run", "daemon.sock")
	args := append([]string{"--node-name", node, "--kubeconfig", kubeconfig, "--store-file", filepath.Join(dir, "store"),
		"--bind-address", "unix://" + sock, "--cni-bin-dir", filepath.Join(dir, "cni-bin"), "--cni-conf-dir", filepath.Join(dir, "cni-conf"),
		"--cni-nv-ipam-bin-file", bin, "--cni-daemon-socket", "unix://" + sock,
		"--health-probe-bind-address", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0", "--log-level", "debug"}, extra...)
	_ = os.MkdirAll(filepath.Join(dir, "cni-bin"), 0o755)
	p := proctest.Start(t, bin, args...)
	p.WaitLine(t, `"msg":"serving"`, 60*time.Second)
	d := &daemon{Proc: p, sock: sock}
	for range 2 {
		var l struct{ Server, Address string }
		_ = json.Unmarshal([]byte(p.WaitLine(t, `"msg":"http"`, 30*time.Second)), &l)
		switch l.Server {
		case "metrics":
			d.metrics = l.Address
		case "health":
			d.health = l.Address
		}
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	d.conn, d.api = conn, nodev1.NewIPAMServiceClient(conn)
	return d
}

func params(cid string, typ nodev1.PoolType, pools ...string) *nodev1.IPAMParameters {
	return &nodev1.IPAMParameters{Pools: pools, PoolType: typ, CniContainerid: cid, CniIfname: "net1",
		Metadata: &nodev1.IPAMMetadata{K8SPodName: "pod-" + cid, K8SPodNamespace: "default", K8SPodUid: "uid-" + cid}}
}

// allocate calls Allocate until the pools are set up (NotFound while the
// daemon has not seen the blocks yet).
func (d *daemon) allocate(t *testing.T, p *nodev1.IPAMParameters) *nodev1.AllocateResponse {
	t.Helper()
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var res *nodev1.AllocateResponse
		res, err = d.api.Allocate(context.Background(), &nodev1.AllocateRequest{Parameters: p})
		if err == nil {
			return res
		}
		if status.Code(err) != codes.NotFound {
			break
		}
	}
	t.Fatalf("Allocate %v: %v", p.GetPools(), err)
	return nil
}

func (d *daemon) metric(t *testing.T, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + d.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if err = f(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

// TestIPAMNode runs the whole path against a real API server: the
// controller gives host-b its blocks, ipam-node serves them (IPPool, dual
// stack, CIDRPool), 200 concurrent Allocates, stale pods cleaned up, a
// block change, and a restart from disk with the API server unreachable.
func TestIPAMNode(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.Seed(t, nil)
	dir := t.TempDir()
	d := startNode(t, dir, "host-b", c.Kubeconfig)

	// The plugin and its configuration are installed.
	conf, err := os.ReadFile(filepath.Join(dir, "cni-conf", "nv-ipam.conf"))
	if err != nil || !strings.Contains(string(conf), `"daemonSocket": "unix://`+d.sock+`"`) {
		t.Fatalf("nv-ipam.conf: %v\n%s", err, conf)
	}
	if fi, err := os.Stat(filepath.Join(dir, "cni-bin", "nv-ipam")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("nv-ipam not installed: %v", err)
	}

	ipp := nodev1.PoolType_POOL_TYPE_IPPOOL
	res := d.allocate(t, params("c1", ipp, "pool1"))
	a := res.GetAllocations()[0]
	ip := netip.MustParsePrefix(a.GetIp())
	if ip.Bits() != 16 || ip.Addr().Less(netip.MustParseAddr("192.168.0.25")) || netip.MustParseAddr("192.168.0.48").Less(ip.Addr()) ||
		a.GetGateway() != "192.168.0.1" {
		t.Fatalf("host-b's first address: %v", a)
	}
	t.Logf("host-b pool1: %s gateway %s", a.GetIp(), a.GetGateway())

	res = d.allocate(t, params("dual", ipp, "pool1", "pool6"))
	if len(res.GetAllocations()) != 2 || !strings.HasPrefix(res.GetAllocations()[1].GetIp(), "fd00::") ||
		!strings.HasSuffix(res.GetAllocations()[1].GetIp(), "/64") || res.GetAllocations()[1].GetGateway() != "fd00::1" {
		t.Fatalf("dual stack: %v", res)
	}

	res = d.allocate(t, params("cidr1", nodev1.PoolType_POOL_TYPE_CIDRPOOL, "cpool"))
	ca := res.GetAllocations()[0]
	cp := netip.MustParsePrefix(ca.GetIp())
	if cp.Bits() != 24 || !netip.MustParsePrefix("10.90.0.0/16").Contains(cp.Addr()) || ca.GetGateway() != cp.Masked().Addr().Next().String() ||
		cp.Addr() == cp.Masked().Addr() || ca.GetPoolType() != nodev1.PoolType_POOL_TYPE_CIDRPOOL {
		t.Fatalf("CIDRPool: %v", ca)
	}

	// 200 concurrent Allocates on one node: no duplicate, all in the block.
	var big nvv1alpha1.IPPool
	eventually(t, "big's block", func() error {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "big"}, &big); err != nil {
			return err
		}
		for _, x := range big.Status.Allocations {
			if x.NodeName == "host-b" {
				return nil
			}
		}
		return fmt.Errorf("no block for host-b")
	})
	var lo, hi netip.Addr
	for _, x := range big.Status.Allocations {
		if x.NodeName == "host-b" {
			lo, hi = netip.MustParseAddr(x.StartIP), netip.MustParseAddr(x.EndIP)
		}
	}
	d.allocate(t, params("warm", ipp, "big"))
	var wg sync.WaitGroup
	got := make([]string, 200)
	errs := make([]error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := d.api.Allocate(ctx, &nodev1.AllocateRequest{Parameters: params(fmt.Sprintf("load%d", i), ipp, "big")})
			errs[i] = err
			if err == nil {
				got[i] = r.GetAllocations()[0].GetIp()
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, s := range got {
		if errs[i] != nil {
			t.Fatalf("load%d: %v", i, errs[i])
		}
		a := netip.MustParsePrefix(s).Addr()
		if seen[s] || a.Less(lo) || hi.Less(a) {
			t.Fatalf("%s twice or outside %s-%s", s, lo, hi)
		}
		seen[s] = true
	}

	// Pods: pod-keep exists with the UID its allocation names; pod-again
	// exists with another UID than its allocation's.
	keep := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-keep", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "host-b", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	c.Create(t, keep)
	pk := params("keep", ipp, "pool1")
	pk.Metadata.K8SPodUid = string(keep.UID)
	d.allocate(t, pk)
	c.Create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-again", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "host-b", Containers: []corev1.Container{{Name: "c", Image: "x"}}}})
	d.allocate(t, params("again", ipp, "pool1")) // UID uid-again: not the pod's

	// Block change: host-b stops being a worker, so the controller takes
	// its blocks back. Its allocations stay (reported outside the block),
	// new ones are refused with NotFound.
	var hb corev1.Node
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "host-b"}, &hb); err != nil {
		t.Fatal(err)
	}
	hb.Labels = map[string]string{"kubernetes.io/role": "storage"}
	if err := c.Client.Update(ctx, &hb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pool1 gone from host-b", func() error {
		_, err := d.api.Allocate(ctx, &nodev1.AllocateRequest{Parameters: params("late", ipp, "pool1")})
		if status.Code(err) != codes.NotFound {
			return fmt.Errorf("Allocate: %v", err)
		}
		return nil
	})
	if _, err := d.api.IsAllocated(ctx, &nodev1.IsAllocatedRequest{Parameters: pk}); err != nil {
		t.Fatalf("pod-keep's allocation lost with the block: %v", err)
	}
	eventually(t, "outside-block gauge and event", func() error {
		// c1, dual, keep, again, and late when it came before the change.
		if m := d.metric(t, `ipam_node_allocations_outside_block{pool="pool1"`); !strings.HasSuffix(m, " 4") && !strings.HasSuffix(m, " 5") {
			return fmt.Errorf("gauge %q", m)
		}
		var evs corev1.EventList
		if err := c.Client.List(ctx, &evs, client.InNamespace("kube-system")); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "AllocationOutsideBlock" && e.InvolvedObject.Name == "pool1" && strings.Contains(e.Message, "pod-keep") {
				return nil
			}
		}
		return fmt.Errorf("no AllocationOutsideBlock event naming pod-keep")
	})
	// The store's log: every allocation above was fsynced before its answer.
	for _, name := range []string{"ipam_wal_fsync_duration_seconds_count", "ipam_wal_batch_records_sum", "ipam_wal_batch_bytes_sum"} {
		m := d.metric(t, name+" ")
		v, err := strconv.ParseFloat(strings.TrimPrefix(m, name+" "), 64)
		if err != nil || v < 4 {
			t.Errorf("%s: %q, want at least 4 (one per allocation made)", name, m)
		}
	}
	// Back to a worker: a block again, and nothing handed out twice.
	hb.Labels = clustertest.Workers()
	if err := c.Client.Update(ctx, &hb); err != nil {
		t.Fatal(err)
	}
	back := d.allocate(t, params("back", ipp, "pool1")).GetAllocations()[0].GetIp()
	if back == ip.String() || back == pkIP(t, d, pk) {
		t.Fatalf("handed out %s twice", back)
	}

	// Restart from disk with the API server unreachable.
	d.Stop(t)
	d = startNode(t, dir, "host-b", unreachable(t))
	if _, err := d.api.IsAllocated(ctx, &nodev1.IsAllocatedRequest{Parameters: params("dual", ipp, "pool1", "pool6")}); err != nil {
		t.Fatalf("dual lost over the restart: %v", err)
	}
	r2, err := d.api.Allocate(ctx, &nodev1.AllocateRequest{Parameters: params("offline", ipp, "pool1")})
	if err != nil {
		t.Fatalf("Allocate with the API server down: %v", err)
	}
	t.Logf("offline: %s", r2.GetAllocations()[0].GetIp())
	d.Stop(t)

	// The cleanup: every allocation whose pod is gone (all but pod-keep's
	// here) or has another UID is released after the interval.
	d = startNode(t, dir, "host-b", c.Kubeconfig, "--cleanup-interval", "1s", "--cleanup-grace", "0s")
	eventually(t, "stale allocations released", func() error {
		for _, cid := range []string{"c1", "again", "offline"} {
			if _, err := d.api.IsAllocated(ctx, &nodev1.IsAllocatedRequest{Parameters: params(cid, ipp, "pool1")}); status.Code(err) != codes.NotFound {
				return fmt.Errorf("%s: %v", cid, err)
			}
		}
		return nil
	})
	if _, err := d.api.IsAllocated(ctx, &nodev1.IsAllocatedRequest{Parameters: pk}); err != nil {
		t.Fatalf("pod-keep's allocation released: %v", err)
	}
	if m := d.metric(t, "ipam_node_stale_allocations_released_total"); !strings.Contains(m, "total ") || strings.HasSuffix(m, " 0") {
		t.Fatalf("stale metric: %q", m)
	}
	d.Stop(t)
}

func pkIP(t *testing.T, d *daemon, p *nodev1.IPAMParameters) string {
	t.Helper()
	r, err := d.api.Allocate(context.Background(), &nodev1.AllocateRequest{Parameters: p})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetAllocations()[0].GetIp()
}
