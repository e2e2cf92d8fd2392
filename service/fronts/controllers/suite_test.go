package controllers_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	ipamclient "github.com/nephio-project/ipam/service/client"
	"github.com/nephio-project/ipam/service/fronts/controllers"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// crdDir holds the generated CRDs envtest installs; capiCRDDir the Cluster
// API CRDs (IPAddressClaim, IPAddress, Cluster) copied from its module.
var (
	crdDir        = filepath.Join("..", "..", "..", "api", "ipam", "v1alpha1", "crds")
	capiCRDDir    = filepath.Join("..", "..", "..", "api", "capi", "crds")
	metal3CRDDir  = filepath.Join("..", "..", "..", "api", "metal3", "v1alpha1", "crds")
	nvidiaCRDDir  = filepath.Join("..", "..", "..", "api", "nvidia", "v1alpha1", "crds")
	nephioCRDDirs = []string{filepath.Join("..", "..", "..", "api", "nephioresource", "ipam", "v1alpha1", "crds"),
		filepath.Join("..", "..", "..", "api", "nephioresource", "vlan", "v1alpha1", "crds")}
)

// suite is one kube-apiserver + etcd (envtest, real binaries) and one
// ipam-server, shared by the tests of this package, which run one after
// the other and each use their own namespace and network instances.
type suite struct {
	dir        string
	env        *envtest.Environment
	cfg        *rest.Config
	k8s        client.Client
	kubeconfig string
	serverAddr string
	ipam       ipamv1.IPAMClient
	logFile    *os.File
	log        logr.Logger
	stopServer func() error
}

var (
	suiteOnce sync.Once
	theSuite  *suite
	suiteErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if theSuite != nil {
		if err := theSuite.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the test environment:", err)
		}
	}
	os.Exit(code)
}

// testSuite starts the shared environment on first use. Without the
// binaries it fails: these tests are never skipped.
func testSuite(t *testing.T) *suite {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make testbin` to build etcd and kube-apiserver into bin/k8s, " +
			"then `make test` (or export KUBEBUILDER_ASSETS=$PWD/bin/k8s before go test)")
	}
	suiteOnce.Do(func() { theSuite, suiteErr = startSuite() })
	if suiteErr != nil {
		t.Fatalf("starting the test environment: %v", suiteErr)
	}
	return theSuite
}

func startSuite() (_ *suite, err error) {
	s := &suite{}
	if s.dir, err = os.MkdirTemp("", "ipam-controllers-test-"); err != nil {
		return nil, err
	}
	if s.logFile, err = os.Create(filepath.Join(s.dir, "test.log")); err != nil {
		return nil, err
	}
	s.log = logr.FromSlogHandler(slog.NewTextHandler(s.logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctrl.SetLogger(s.log)
	defer func() {
		if err != nil {
			_ = s.stop()
		}
	}()

	scheme := runtime.NewScheme()
	if err := controllers.AddToScheme(scheme); err != nil {
		return nil, err
	}
	s.env = &envtest.Environment{
		CRDDirectoryPaths:     append([]string{crdDir, capiCRDDir, metal3CRDDir, nvidiaCRDDir}, nephioCRDDirs...),
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	start := time.Now()
	if s.cfg, err = s.env.Start(); err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	s.log.Info("envtest started", "took", time.Since(start).String())
	if s.k8s, err = client.New(s.cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	s.kubeconfig = filepath.Join(s.dir, "kubeconfig")
	if err := os.WriteFile(s.kubeconfig, s.env.KubeConfig, 0o600); err != nil {
		return nil, err
	}

	// A real ipam-server on a free loopback port with a temp data dir.
	srv, err := startServer("127.0.0.1:0", filepath.Join(s.dir, "ipam-data"), s.logFile)
	if err != nil {
		return nil, err
	}
	s.serverAddr, s.ipam, s.stopServer = srv.addr, srv.client, srv.stop
	return s, nil
}

// ipamServer is a real ipam-server (server.Run) in this process.
type ipamServer struct {
	addr   string
	client ipamv1.IPAMClient
	stop   func() error
}

// startServer runs ipam-server on addr with the file store in dataDir and
// waits until its health service reports SERVING. With certs, it serves
// TLS and requires client certificates (mTLS).
func startServer(addr, dataDir string, logTo io.Writer, certs ...servertest.Certs) (*ipamServer, error) {
	return startServerWith(addr, dataDir, logTo, nil, certs...)
}

// startServerWith is startServer with mod applied to the server's
// configuration (an authorization policy).
func startServerWith(addr, dataDir string, logTo io.Writer, mod func(*server.Config), certs ...servertest.Certs) (*ipamServer, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	cfg := server.Config{
		Listener: lis,
		DataDir:  dataDir,
		Store:    "file",
		Logger:   slog.New(slog.NewTextHandler(logTo, nil)).With("component", "ipam-server", "addr", lis.Addr().String()),
	}
	cc := ipamclient.Config{Server: lis.Addr().String()}
	if len(certs) > 0 {
		c := certs[0]
		cfg.TLSCert, cfg.TLSKey, cfg.ClientCA = c.ServerCert, c.ServerKey, c.CA
		cc.CA, cc.Cert, cc.Key = c.CA, c.ClientCert, c.ClientKey
	}
	if mod != nil {
		mod(&cfg)
	}
	dial, err := ipamclient.DialOptions(cc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg) }()
	conn, err := grpc.NewClient(lis.Addr().String(), dial...)
	if err != nil {
		cancel()
		return nil, errors.Join(err, <-done)
	}
	srv := &ipamServer{addr: lis.Addr().String(), client: ipamv1.NewIPAMClient(conn)}
	srv.stop = func() error {
		cancel()
		err := <-done
		done <- err
		return errors.Join(err, conn.Close())
	}
	health := healthpb.NewHealthClient(conn)
	for deadline := time.Now().Add(30 * time.Second); ; {
		select {
		case err := <-done:
			done <- err
			_ = conn.Close()
			return nil, fmt.Errorf("ipam-server exited: %v", err)
		default:
		}
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return srv, nil
		}
		if time.Now().After(deadline) {
			_ = srv.stop()
			return nil, fmt.Errorf("ipam-server not serving after 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *suite) stop() error {
	var errs []error
	if s.stopServer != nil {
		errs = append(errs, s.stopServer())
	}
	if s.env != nil && s.cfg != nil {
		errs = append(errs, s.env.Stop())
	}
	if s.logFile != nil {
		_ = s.logFile.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.RemoveAll(s.dir)
}

// running is one ipam-controller manager started by a test.
type running struct {
	stop       func()
	calls      *callCounter
	reconciles *reconcileLog
	// resync is the controllers' resync period.
	resync time.Duration
}

// reconcileLog records every reconcile the controllers finish
// (controllers.Config.Reconciled): how many per object, and the last
// outcome.
type reconcileLog struct {
	mu   sync.Mutex
	n    map[types.NamespacedName]int
	last map[types.NamespacedName]reconcileOutcome
}

// reconcileOutcome is what one reconcile returned.
type reconcileOutcome struct {
	res ctrl.Result
	err error
}

func (l *reconcileLog) record(_ string, key types.NamespacedName, res ctrl.Result, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n, l.last = map[types.NamespacedName]int{}, map[types.NamespacedName]reconcileOutcome{}
	}
	l.n[key]++
	l.last[key] = reconcileOutcome{res, err}
}

// count is the number of finished reconciles of key.
func (l *reconcileLog) count(key types.NamespacedName) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[key]
}

// lastOf is the outcome of the last reconcile of key.
func (l *reconcileLog) lastOf(key types.NamespacedName) (reconcileOutcome, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.last[key]
	return o, ok
}

// startControllers runs the controllers (controllers.Run) against restCfg
// until the test ends or stop is called.
func (s *suite) startControllers(t *testing.T, restCfg *rest.Config, opts ...func(*controllers.Config)) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	calls := &callCounter{}
	log := &reconcileLog{}
	done := make(chan error, 1)
	cfg := controllers.Config{
		RESTConfig:             restCfg,
		Server:                 s.serverAddr,
		Resync:                 time.Minute,
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
		SkipNameValidation:     true,
		Logger:                 s.log.WithName(t.Name()),
		DialOptions:            []grpc.DialOption{grpc.WithUnaryInterceptor(calls.intercept)},
		Reconciled:             log.record,
		Metal3:                 true,
		NVIDIA:                 true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	go func() { done <- controllers.Run(ctx, cfg) }()
	var once sync.Once
	r := &running{calls: calls, reconciles: log, resync: cfg.Resync}
	r.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("controllers.Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("controllers did not stop within 30s")
			}
		})
	}
	t.Cleanup(r.stop)
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLog(t)
		}
	})
	return r
}

// dumpLog prints the tail of the shared log when a test fails.
func (s *suite) dumpLog(t *testing.T) {
	data, err := os.ReadFile(s.logFile.Name())
	if err != nil {
		return
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	t.Logf("last log lines (%s):\n%s", s.logFile.Name(), strings.Join(lines, "\n"))
}

// callCounter counts the gRPC calls the controllers make, by method and by
// method and object name.
type callCounter struct {
	mu     sync.Mutex
	byName map[string]int
}

func (c *callCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	name := method[strings.LastIndex(method, "/")+1:]
	if k, ok := requestKey(req); ok {
		name += " " + k.GetNamespace() + "/" + k.GetName()
	}
	c.mu.Lock()
	if c.byName == nil {
		c.byName = map[string]int{}
	}
	c.byName[name]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func requestKey(req any) (*ipamv1.Key, bool) {
	switch r := req.(type) {
	case *ipamv1.AllocateRequest:
		return r.GetAllocation().GetKey(), true
	case *ipamv1.CreatePrefixRequest:
		return r.GetPrefix().GetKey(), true
	case *ipamv1.CreateNetworkInstanceRequest:
		return r.GetNetworkInstance().GetKey(), true
	case *ipamv1.DeleteRequest:
		return r.GetKey(), true
	}
	return nil, false
}

// count is how many calls of method (with " ns/name" to narrow) were made.
func (c *callCounter) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byName[name]
}

// namespace creates a namespace for one test.
func (s *suite) namespace(t *testing.T, name string) string {
	t.Helper()
	err := s.k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

// kubectl runs the real kubectl against the envtest API server.
func (s *suite) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", s.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// eventually retries check until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// table is one table of kubectl get output: its header and rows, each row
// a map from column name to cell.
type table struct {
	header []string
	rows   []map[string]string
}

// parseTables splits kubectl get output into its tables (one per kind,
// separated by blank lines) and cuts every row at the header's column
// starts, so that empty cells stay empty.
func parseTables(out string) []table {
	var tables []table
	var cur *table
	var starts []int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			cur = nil
			continue
		}
		if cur == nil {
			tables = append(tables, table{})
			cur = &tables[len(tables)-1]
			starts = starts[:0]
			for i := range line {
				if line[i] != ' ' && (i == 0 || line[i-1] == ' ') {
					starts = append(starts, i)
				}
			}
			cur.header = strings.Fields(line)
			continue
		}
		row := map[string]string{}
		for i, col := range cur.header {
			from, to := starts[i], len(line)
			if i+1 < len(starts) {
				to = min(starts[i+1], len(line))
			}
			if from < len(line) {
				row[col] = strings.TrimSpace(line[from:to])
			} else {
				row[col] = ""
			}
		}
		cur.rows = append(cur.rows, row)
	}
	return tables
}

// getIPAM runs `kubectl get ipam -A` and returns, per resource name as
// kubectl prints it (kind.group/name), the row of namespace ns, and the
// headers of the tables.
func (s *suite) getIPAM(t *testing.T, ns string) (map[string]map[string]string, [][]string, string) {
	t.Helper()
	out := s.kubectl(t, "get", "ipam", "-A")
	rows := map[string]map[string]string{}
	var headers [][]string
	for _, tb := range parseTables(out) {
		headers = append(headers, tb.header)
		for _, r := range tb.rows {
			if r["NAMESPACE"] == ns {
				rows[r["NAME"]] = r
			}
		}
	}
	return rows, headers, out
}

// runKubectl runs kubectl with kubeconfig, feeding it stdin.
func runKubectl(kubeconfig, stdin string, args ...string) (string, error) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
