package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
	"github.com/nephio-project/ipam/service/server/servertest"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// build builds ipam-node, ipam-server and ipam-controller once.
func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "ipam-node-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "./service/cmd/ipam-node", "./service/cmd/ipam-server", "./service/cmd/ipam-controller")
		cmd.Dir = servertest.ModuleRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// proc is a started binary whose output lines are collected.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	line chan string
	done chan error
}

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), line: make(chan string, 4096), done: make(chan error, 1)}
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.line <- sc.Text():
			default:
			}
		}
	}()
	go func() { err := p.cmd.Wait(); _ = w.Close(); p.done <- err }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *proc) waitLine(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-p.line:
			if strings.Contains(l, want) {
				return l
			}
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited (%v) before printing %q", p.cmd.Path, err, want)
		case <-deadline:
			t.Fatalf("%s printed no %q within %s", p.cmd.Path, want, timeout)
		}
	}
}

func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("%s after SIGTERM: %v, want exit 0", filepath.Base(p.cmd.Path), err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30s of SIGTERM", filepath.Base(p.cmd.Path))
	}
}

func (p *proc) kill9(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	err := <-p.done
	p.done <- err
}

// cluster is envtest's API server with the NVIDIA CRDs, ipam-server and
// ipam-controller --nvidia.
type cluster struct {
	kubeconfig string
	k8s        client.Client
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("SKIPPED: KUBEBUILDER_ASSETS is not set (make test sets it after `make testbin` builds etcd and kube-apiserver)")
	}
	dir := build(t)
	root := servertest.ModuleRoot(t)
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(root, "api", "nvidia", "v1alpha1", "crds"),
		filepath.Join(root, "api", "ipam", "v1alpha1", "crds"), filepath.Join(root, "api", "capi", "crds")},
		ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nvv1alpha1.AddToScheme(scheme)
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	srv := start(t, filepath.Join(dir, "ipam-server"), "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	var serving struct{ Addr string }
	if err := json.Unmarshal([]byte(srv.waitLine(t, `"msg":"serving"`, 30*time.Second)), &serving); err != nil {
		t.Fatal(err)
	}
	srv.waitLine(t, `"msg":"ready"`, 30*time.Second)
	start(t, filepath.Join(dir, "ipam-controller"), "--kubeconfig", path, "--server", serving.Addr, "--nvidia",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	return &cluster{kubeconfig: path, k8s: k8s}
}

func (c *cluster) node(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	if err := c.k8s.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := c.k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

var worker = map[string]string{"kubernetes.io/role": "worker"}

func workerSelector() *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "kubernetes.io/role", Operator: corev1.NodeSelectorOpIn, Values: []string{"worker"}}}}}}
}

func ippool(name, subnet string, block int, gw string) *nvv1alpha1.IPPool {
	return &nvv1alpha1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: nvv1alpha1.IPPoolSpec{Subnet: subnet, PerNodeBlockSize: block, Gateway: gw, NodeSelector: workerSelector()}}
}

// daemon is a started ipam-node with a client of its node API.
type daemon struct {
	*proc
	sock    string
	metrics string
	health  string
	conn    *grpc.ClientConn
	api     nodev1.IPAMServiceClient
}

// waitLineOut waits for a line already printed or still to come.
func (d *daemon) waitLineOut(t *testing.T, want string) {
	t.Helper()
	if strings.Contains(d.output(), want) {
		return
	}
	d.waitLine(t, want, 30*time.Second)
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
	p := start(t, bin, args...)
	p.waitLine(t, `"msg":"serving"`, 60*time.Second)
	d := &daemon{proc: p, sock: sock}
	for range 2 {
		var l struct{ Server, Address string }
		_ = json.Unmarshal([]byte(p.waitLine(t, `"msg":"http"`, 30*time.Second)), &l)
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
	for _, n := range []string{"host-a", "host-b", "host-c", "k8s-master"} {
		c.node(t, n, worker)
	}
	c.create(t, ippool("pool1", "192.168.0.0/16", 24, "192.168.0.1"))
	c.create(t, ippool("pool6", "fd00::/64", 24, "fd00::1"))
	c.create(t, ippool("big", "10.50.0.0/16", 256, ""))
	c.create(t, &nvv1alpha1.CIDRPool{ObjectMeta: metav1.ObjectMeta{Name: "cpool", Namespace: "kube-system"},
		Spec: nvv1alpha1.CIDRPoolSpec{CIDR: "10.90.0.0/16", PerNodeNetworkPrefix: 24, GatewayIndex: ptr.To[int32](1), NodeSelector: workerSelector()}})
	dir := t.TempDir()
	d := startNode(t, dir, "host-b", c.kubeconfig)

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
		if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "big"}, &big); err != nil {
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
	c.create(t, keep)
	pk := params("keep", ipp, "pool1")
	pk.Metadata.K8SPodUid = string(keep.UID)
	d.allocate(t, pk)
	c.create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-again", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "host-b", Containers: []corev1.Container{{Name: "c", Image: "x"}}}})
	d.allocate(t, params("again", ipp, "pool1")) // UID uid-again: not the pod's

	// Block change: host-b stops being a worker, so the controller takes
	// its blocks back. Its allocations stay (reported outside the block),
	// new ones are refused with NotFound.
	var hb corev1.Node
	if err := c.k8s.Get(ctx, client.ObjectKey{Name: "host-b"}, &hb); err != nil {
		t.Fatal(err)
	}
	hb.Labels = map[string]string{"kubernetes.io/role": "storage"}
	if err := c.k8s.Update(ctx, &hb); err != nil {
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
		if err := c.k8s.List(ctx, &evs, client.InNamespace("kube-system")); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "AllocationOutsideBlock" && e.InvolvedObject.Name == "pool1" && strings.Contains(e.Message, "pod-keep") {
				return nil
			}
		}
		return fmt.Errorf("no AllocationOutsideBlock event naming pod-keep")
	})
	// Back to a worker: a block again, and nothing handed out twice.
	hb.Labels = worker
	if err := c.k8s.Update(ctx, &hb); err != nil {
		t.Fatal(err)
	}
	back := d.allocate(t, params("back", ipp, "pool1")).GetAllocations()[0].GetIp()
	if back == ip.String() || back == pkIP(t, d, pk) {
		t.Fatalf("handed out %s twice", back)
	}

	// Restart from disk with the API server unreachable.
	d.stop(t)
	bad := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["none"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.Contexts["none"] = &clientcmdapi.Context{Cluster: "none"}
	kc.CurrentContext = "none"
	if err := clientcmd.WriteToFile(*kc, bad); err != nil {
		t.Fatal(err)
	}
	d = startNode(t, dir, "host-b", bad)
	if _, err := d.api.IsAllocated(ctx, &nodev1.IsAllocatedRequest{Parameters: params("dual", ipp, "pool1", "pool6")}); err != nil {
		t.Fatalf("dual lost over the restart: %v", err)
	}
	r2, err := d.api.Allocate(ctx, &nodev1.AllocateRequest{Parameters: params("offline", ipp, "pool1")})
	if err != nil {
		t.Fatalf("Allocate with the API server down: %v", err)
	}
	t.Logf("offline: %s", r2.GetAllocations()[0].GetIp())
	d.stop(t)

	// The cleanup: every allocation whose pod is gone (all but pod-keep's
	// here) or has another UID is released after the interval.
	d = startNode(t, dir, "host-b", c.kubeconfig, "--cleanup-interval", "1s", "--cleanup-grace", "0s")
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
	d.stop(t)
}

func pkIP(t *testing.T, d *daemon, p *nodev1.IPAMParameters) string {
	t.Helper()
	r, err := d.api.Allocate(context.Background(), &nodev1.AllocateRequest{Parameters: p})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetAllocations()[0].GetIp()
}
