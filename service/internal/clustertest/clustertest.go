// Package clustertest starts a real Kubernetes API server (envtest's
// kube-apiserver and etcd) with the project's CRDs for tests that run the
// shipped binaries against it, and the NVIDIA cluster the node tests run
// ipam-node in: ipam-server, ipam-controller --nvidia, worker nodes and
// their pools.
package clustertest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	"github.com/nephio-project/ipam/service/internal/proctest"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// APIServer starts envtest's kube-apiserver and etcd with every CRD
// ipam-controller serves (ipam, Cluster API, Metal3, NVIDIA), stops them
// when t ends, and returns the path of a kubeconfig file for it and its
// rest config. It skips the test when KUBEBUILDER_ASSETS is not set.
func APIServer(t testing.TB) (kubeconfig string, cfg *rest.Config) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("SKIPPED: KUBEBUILDER_ASSETS is not set (make test sets it after `make testbin` builds etcd and kube-apiserver)")
	}
	root := servertest.ModuleRoot(t)
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(root, "api", "ipam", "v1alpha1", "crds"),
		filepath.Join(root, "api", "capi", "crds"), filepath.Join(root, "api", "metal3", "v1alpha1", "crds"),
		filepath.Join(root, "api", "nvidia", "v1alpha1", "crds")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	WriteKubeconfig(t, cfg, kubeconfig)
	return kubeconfig, cfg
}

// WriteKubeconfig writes a kubeconfig file for the API server of cfg
// (envtest's) at path, creating its directory.
func WriteKubeconfig(t testing.TB, cfg *rest.Config, path string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// StartServer runs the ipam-server binary on a loopback port with its
// data in a temporary directory, waits until it is ready and returns it
// with its gRPC address.
func StartServer(t testing.TB, bin string) (*proctest.Proc, string) {
	t.Helper()
	srv := proctest.Start(t, bin, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	var serving struct{ Addr string }
	if err := json.Unmarshal([]byte(srv.WaitLine(t, `"msg":"serving"`, 60*time.Second)), &serving); err != nil || serving.Addr == "" {
		t.Fatalf("the serving line has no addr: %v", err)
	}
	srv.WaitLine(t, `"msg":"ready"`, 60*time.Second)
	return srv, serving.Addr
}

// NVIDIA is the cluster ipam-node runs in: the API server of APIServer,
// an ipam-server, and ipam-controller --nvidia assigning the nodes their
// blocks of the NVIDIA pools.
type NVIDIA struct {
	// Kubeconfig is the path of a kubeconfig file for the API server.
	Kubeconfig string
	// Client is a client of the API server knowing the core and the
	// NVIDIA types.
	Client client.Client
}

// StartNVIDIA starts the cluster with the ipam-server and ipam-controller
// binaries server and controller; all of it stops when t ends.
func StartNVIDIA(t testing.TB, server, controller string) *NVIDIA {
	t.Helper()
	kubeconfig, cfg := APIServer(t)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nvv1alpha1.AddToScheme(scheme)
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := StartServer(t, server)
	proctest.Start(t, controller, "--kubeconfig", kubeconfig, "--server", addr, "--nvidia",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	return &NVIDIA{Kubeconfig: kubeconfig, Client: k8s}
}

// Create creates obj, failing the test on an error.
func (c *NVIDIA) Create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := c.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// Workers are the labels of a worker node, the nodes the pools of Seed
// select.
func Workers() map[string]string {
	return map[string]string{"kubernetes.io/role": "worker"}
}

// Seed creates the worker nodes host-a, host-b, host-c and k8s-master, and
// in kube-system the pools of the workers: the IPPools pool1
// (192.168.0.0/16, blocks of 24, gateway 192.168.0.1), pool6 (fd00::/64,
// blocks of 24, gateway fd00::1) and big (10.50.0.0/16, blocks of 256, no
// gateway), and the CIDRPool cpool (a /24 of 10.90.0.0/16 a node, gateway
// index 1). A non-nil pool1 changes pool1 before it is created.
func (c *NVIDIA) Seed(t testing.TB, pool1 func(*nvv1alpha1.IPPool)) {
	t.Helper()
	for _, n := range []string{"host-a", "host-b", "host-c", "k8s-master"} {
		c.Create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: Workers()}})
	}
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "kubernetes.io/role", Operator: corev1.NodeSelectorOpIn, Values: []string{"worker"}}}}}}
	ippool := func(name, subnet string, block int, gw string) *nvv1alpha1.IPPool {
		return &nvv1alpha1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
			Spec: nvv1alpha1.IPPoolSpec{Subnet: subnet, PerNodeBlockSize: block, Gateway: gw, NodeSelector: sel}}
	}
	p1 := ippool("pool1", "192.168.0.0/16", 24, "192.168.0.1")
	if pool1 != nil {
		pool1(p1)
	}
	c.Create(t, p1)
	c.Create(t, ippool("pool6", "fd00::/64", 24, "fd00::1"))
	c.Create(t, ippool("big", "10.50.0.0/16", 256, ""))
	c.Create(t, &nvv1alpha1.CIDRPool{ObjectMeta: metav1.ObjectMeta{Name: "cpool", Namespace: "kube-system"},
		Spec: nvv1alpha1.CIDRPoolSpec{CIDR: "10.90.0.0/16", PerNodeNetworkPrefix: 24, GatewayIndex: ptr.To[int32](1), NodeSelector: sel}})
}
