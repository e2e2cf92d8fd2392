package injector

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nephio-project/ipam/service/server/servertest"
)

// porchEnv is etcd + kube-apiserver (envtest) + Porch's function runner +
// the Porch server as an aggregated API server, all on loopback, and a git
// Repository "blueprints" on a local bare repo.
type porchEnv struct {
	dir        string
	cfg        *rest.Config
	k8s        client.Client
	kubeconfig string
	bareRepo   string
	logs       string
	ports      func(testing.TB) int // picks a free port; nil: freePort
	// netns, when set, is the network namespace Porch and its function
	// runner run in (the cluster's, whose API server reaches them there).
	netns string
}

const testNamespace = "default"
const testRepo = "blueprints"

// repoRoot is the module root (bin/ lives there).
func repoRoot(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// startPorch starts the environment and stops it when the test ends. It
// fails, naming make porch-env, when the binaries are missing.
func startPorch(t testing.TB) *porchEnv {
	t.Helper()
	root := repoRoot(t)
	bins := map[string]string{
		"etcd":            filepath.Join(root, "bin/k8s/etcd"),
		"kube-apiserver":  filepath.Join(root, "bin/k8s/kube-apiserver"),
		"porch":           filepath.Join(root, "bin/porch/porch"),
		"function-runner": filepath.Join(root, "bin/porch/function-runner"),
		"Repository CRD":  filepath.Join(root, "bin/porch/crds/config.porch.kpt.dev_repositories.yaml"),
	}
	for name, p := range bins {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing (%s): run make porch-env (it builds Porch and the function runner into bin/porch and etcd and kube-apiserver into bin/k8s)", name, p)
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed for the Porch e2e test")
	}
	start := time.Now()
	e := &porchEnv{dir: t.TempDir()}
	e.logs = filepath.Join(e.dir, "logs")
	must(t, os.MkdirAll(e.logs, 0o755))
	t.Cleanup(func() {
		if keep := os.Getenv("PORCH_TEST_LOGS"); keep != "" {
			// Keep every log of the run (Porch's, the injectors') for study.
			dst := filepath.Join(keep, t.Name())
			if err := os.CopyFS(dst, os.DirFS(e.logs)); err != nil {
				t.Logf("keeping the logs in %s: %v", dst, err)
			}
		}
		if t.Failed() {
			e.logTails(t)
		}
	})

	// Front-proxy PKI: kube-apiserver authenticates itself to Porch with
	// it when proxying porch.kpt.dev requests.
	pki := filepath.Join(e.dir, "pki")
	must(t, os.MkdirAll(pki, 0o755))
	caKey, caCert := newCert(t, nil, nil, "front-proxy-ca", true)
	writePEMs(t, filepath.Join(pki, "front-proxy-ca"), caKey, caCert)
	clKey, clCert := newCert(t, caKey, caCert, "front-proxy-client", false)
	writePEMs(t, filepath.Join(pki, "front-proxy-client"), clKey, clCert)

	scheme := k8sruntime.NewScheme()
	must(t, clientgoscheme.AddToScheme(scheme))
	must(t, porchv1alpha1.AddToScheme(scheme))
	t.Setenv("KUBEBUILDER_ASSETS", filepath.Join(root, "bin/k8s"))
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "bin/porch/crds")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("enable-aggregator-routing", "false")
	args.Set("proxy-client-cert-file", filepath.Join(pki, "front-proxy-client.crt"))
	args.Set("proxy-client-key-file", filepath.Join(pki, "front-proxy-client.key"))
	args.Set("requestheader-client-ca-file", filepath.Join(pki, "front-proxy-ca.crt"))
	args.Set("requestheader-allowed-names", "front-proxy-client")
	args.Set("requestheader-username-headers", "X-Remote-User")
	args.Set("requestheader-group-headers", "X-Remote-Group")
	args.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	e.cfg = cfg
	e.k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	must(t, err)
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "porch-admin", Groups: []string{"system:masters"}}, nil)
	must(t, err)
	kc, err := user.KubeConfig()
	must(t, err)
	e.kubeconfig = filepath.Join(e.dir, "kubeconfig")
	must(t, os.WriteFile(e.kubeconfig, kc, 0o600))
	t.Logf("kube-apiserver ready in %s", time.Since(start).Round(100*time.Millisecond))
	e.startServers(t, start)
	return e
}

// logTails logs the ends of Porch's and the function runner's logs.
func (e *porchEnv) logTails(t testing.TB) {
	for _, name := range []string{"porch.log", "function-runner.log"} {
		b, _ := os.ReadFile(filepath.Join(e.logs, name))
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Logf("--- tail of %s ---\n%s", name, b)
	}
}

// startServers starts the function runner and Porch against the API
// server of e.k8s and e.kubeconfig, registers Porch as its aggregated API
// and adds the Repository testRepo.
func (e *porchEnv) startServers(t testing.TB, start time.Time) {
	t.Helper()
	root := repoRoot(t)
	bins := map[string]string{"porch": filepath.Join(root, "bin/porch/porch"), "function-runner": filepath.Join(root, "bin/porch/function-runner")}

	// The function runner (exec runtime only; no function is needed by
	// the test packages, which have no pipeline).
	fnDir := filepath.Join(e.dir, "functions")
	must(t, os.MkdirAll(fnDir, 0o755))
	runnerCfg := filepath.Join(e.dir, "runner-config.yaml")
	must(t, os.WriteFile(runnerCfg, []byte("functions: []\n"), 0o644))
	runnerPort := e.serveOnFreePort(t, "function-runner", bins["function-runner"], func(port int) []string {
		return []string{"--disable-runtimes=pod", "--port", strconv.Itoa(port), "--functions", fnDir, "--config", runnerCfg}
	})

	// Porch, registered as the aggregated API v1alpha1.porch.kpt.dev.
	porchPort := e.serveOnFreePort(t, "porch", bins["porch"], func(port int) []string {
		return []string{"--standalone-debug-mode",
			"--secure-port", strconv.Itoa(port), "--bind-address", "127.0.0.1",
			"--cert-dir", filepath.Join(e.dir, "porch-certs"),
			"--kubeconfig", e.kubeconfig, "--authentication-kubeconfig", e.kubeconfig,
			"--cache-directory", filepath.Join(e.dir, "porch-cache"),
			"--function-runner", "127.0.0.1:" + strconv.Itoa(runnerPort),
			"--repo-sync-frequency", "10s"}
	})
	ctx := context.Background()
	must(t, e.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "porch-system"}}))
	must(t, e.k8s.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "porch-system"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "api", Port: int32(porchPort), Protocol: corev1.ProtocolTCP}}},
	}))
	apisvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1alpha1.porch.kpt.dev"},
		"spec": map[string]any{
			"insecureSkipTLSVerify": true, "group": "porch.kpt.dev", "version": "v1alpha1",
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service": map[string]any{"name": "api", "namespace": "porch-system", "port": int64(porchPort)},
		},
	}}
	must(t, e.k8s.Create(ctx, apisvc))
	eventually(t, 120*time.Second, "Porch API available", func() error {
		var list porchv1alpha1.PackageRevisionList
		return e.k8s.List(ctx, &list, client.InNamespace(testNamespace))
	})
	t.Logf("Porch API available after %s", time.Since(start).Round(100*time.Millisecond))

	e.bareRepo = e.addRepo(t, testRepo)
	t.Logf("Porch environment ready in %s", time.Since(start).Round(100*time.Millisecond))
}

// addRepo creates a bare git repo with an initial commit on main,
// registers it as the Porch Repository name in testNamespace, waits until
// it is ready and returns the bare repo's path.
func (e *porchEnv) addRepo(t testing.TB, name string) string {
	t.Helper()
	ctx := context.Background()
	bare := filepath.Join(e.dir, name+".git")
	gitRun(t, "", "init", "--bare", "--initial-branch=main", bare)
	work := filepath.Join(e.dir, "seed-"+name)
	gitRun(t, "", "clone", bare, work)
	must(t, os.WriteFile(filepath.Join(work, "README.md"), []byte(name+"\n"), 0o644))
	gitRun(t, work, "add", "README.md")
	gitRun(t, work, "commit", "-m", "initial commit")
	gitRun(t, work, "push", "origin", "HEAD:main")
	repo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository",
		"metadata": map[string]any{"name": name, "namespace": testNamespace},
		"spec": map[string]any{
			"type": "git", "content": "Package", "deployment": false,
			"git": map[string]any{"repo": "file://" + bare, "branch": "main", "directory": "/"},
		},
	}}
	must(t, e.k8s.Create(ctx, repo))
	eventually(t, 60*time.Second, "Repository "+name+" ready", func() error {
		var r unstructured.Unstructured
		r.SetGroupVersionKind(RepositoryGVK)
		if err := e.k8s.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: name}, &r); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(r.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", conds)
	})
	return bare
}

// spawned is a process started by spawn; exited is closed when it ends.
type spawned struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// spawn starts a process logging into e.logs/name.log, killed at cleanup.
func (e *porchEnv) spawn(t testing.TB, name, bin string, args ...string) *spawned {
	t.Helper()
	p := &spawned{log: filepath.Join(e.logs, name+".log"), exited: make(chan struct{})}
	logf, err := os.Create(p.log)
	must(t, err)
	if e.netns != "" {
		// nsenter execs bin: the process is bin, with the same PID.
		args = append([]string{"--net=" + e.netns, bin}, args...)
		bin = "nsenter"
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none")
	p.cmd.Dir = e.dir
	must(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		_ = logf.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// serveStartTimeout bounds how long a server of the environment takes to
// listen.
const serveStartTimeout = 60 * time.Second

// serveOnFreePort starts name (bin with args(port)) on a loopback port
// picked free, waits until that process listens on it and returns the
// port; a port taken by another test's process meanwhile makes it start
// again on another (servertest.StartOnFreePorts). Whether the port is
// served by this process and not by another is read from /proc, so a port
// taken by someone else is never mistaken for readiness.
func (e *porchEnv) serveOnFreePort(t testing.TB, name, bin string, args func(port int) []string) int {
	t.Helper()
	pick := e.ports
	if pick == nil {
		pick = freePort
	}
	return servertest.StartOnFreePorts(t, name, func() (int, string, error) {
		port := pick(t)
		p := e.spawn(t, name, bin, args(port)...)
		if err := waitListening(p, port, serveStartTimeout); err != nil {
			out, _ := os.ReadFile(p.log)
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			return 0, string(out), fmt.Errorf("on port %d: %w", port, err)
		}
		return port, "", nil
	})
}

// waitListening waits until p listens on the TCP port, failing at once
// when p exits.
func waitListening(p *spawned, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("exited: %v", p.cmd.ProcessState)
		default:
		}
		ok, err := listensOn(p.cmd.Process.Pid, port)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on port %d within %s", port, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// listensOn reports whether process pid holds a TCP socket listening on
// port, from the listening sockets of its /proc/PID/net/tcp and tcp6 and the
// process's open sockets.
func listensOn(pid, port int) (bool, error) {
	inodes := map[string]bool{}
	// The tables of the process's network namespace (Porch may run in the
	// cluster's).
	for _, table := range []string{fmt.Sprintf("/proc/%d/net/tcp", pid), fmt.Sprintf("/proc/%d/net/tcp6", pid)} {
		b, err := os.ReadFile(table)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no IPv6 on this machine
		}
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st ... inode: the local
			// address ends in :PORT in hex; state 0A is LISTEN.
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" {
				continue
			}
			i := strings.LastIndexByte(f[1], ':')
			if p, err := strconv.ParseUint(f[1][i+1:], 16, 16); err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return false, nil
	}
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fds)
	if err != nil {
		return false, nil // gone: the caller sees it exit
	}
	for _, ent := range ents {
		if l, err := os.Readlink(filepath.Join(fds, ent.Name())); err == nil && inodes[l] {
			return true, nil
		}
	}
	return false, nil
}

func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// eventually polls f until it returns nil, failing the test after timeout
// with f's last error.
func eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, timeout, err)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newCert(t testing.TB, caKey *ecdsa.PrivateKey, ca *x509.Certificate, cn string, isCA bool) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	signer, parent := key, tmpl
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = nil
	} else {
		signer, parent = caKey, ca
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	must(t, err)
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	return key, cert
}

func writePEMs(t testing.TB, base string, key *ecdsa.PrivateKey, cert *x509.Certificate) {
	t.Helper()
	kb, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	must(t, os.WriteFile(base+".key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	must(t, os.WriteFile(base+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644))
}
