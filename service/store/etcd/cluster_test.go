package etcd_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nephio-project/ipam/service/server/servertest"
)

// etcdBinary is the source-built etcd that make testbin installs.
func etcdBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(servertest.ModuleRoot(t), "bin", "k8s", "etcd")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run make testbin", bin)
	}
	return bin
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// member is one etcd process of a test cluster.
type member struct {
	name, dir, clientURL string
	args                 []string
	cmd                  *exec.Cmd
	done                 chan struct{}
}

// cluster is an etcd cluster of separate processes on loopback.
type cluster struct {
	t         testing.TB
	bin       string
	members   []*member
	scheme    string      // of the client URLs: http or https
	clientTLS *tls.Config // with https, how waitUp reaches the members
}

// startCluster starts n etcd members on loopback, with the extra flags,
// and waits until the cluster answers; they are killed when the test ends.
// A member that exits because a port that freePort saw free was taken
// meanwhile by another test's process makes the cluster start again on new
// ports (servertest.StartOnFreePorts).
func startCluster(t testing.TB, n int, extra ...string) *cluster {
	t.Helper()
	return startClusterOf(t, &cluster{t: t, bin: etcdBinary(t), scheme: "http"}, n, extra...)
}

// startTLSCluster starts one etcd member as startCluster does, serving its
// clients over TLS with the server certificate of certs and requiring a
// client certificate signed by its CA.
func startTLSCluster(t testing.TB, certs servertest.Certs) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: etcdBinary(t), scheme: "https", clientTLS: certs.ClientTLS(t, true)}
	return startClusterOf(t, c, 1, "--cert-file", certs.ServerCert, "--key-file", certs.ServerKey,
		"--trusted-ca-file", certs.CA, "--client-cert-auth")
}

// startClusterOf is startCluster for c.
func startClusterOf(t testing.TB, c *cluster, n int, extra ...string) *cluster {
	t.Helper()
	t.Cleanup(func() {
		for _, m := range c.members {
			c.kill(m)
		}
	})
	return servertest.StartOnFreePorts(t, "etcd cluster", func() (*cluster, string, error) {
		c.members = nil
		base := t.TempDir()
		var initial []string
		peers := make([]string, n)
		for i := range n {
			peers[i] = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
			initial = append(initial, fmt.Sprintf("m%d=%s", i, peers[i]))
		}
		for i := range n {
			m := &member{name: fmt.Sprintf("m%d", i), dir: filepath.Join(base, fmt.Sprintf("m%d", i)),
				clientURL: fmt.Sprintf("%s://127.0.0.1:%d", c.scheme, freePort(t))}
			m.args = []string{"--name", m.name, "--data-dir", m.dir,
				"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
				"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
				"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
				"--initial-cluster-token", "ipam-test", "--logger", "zap", "--log-level", "error"}
			m.args = append(m.args, extra...)
			c.members = append(c.members, m)
			c.start(m)
		}
		err := c.waitUp(c.endpoints())
		if err == nil {
			return c, "", nil
		}
		var log string
		for _, m := range c.members {
			if m.exited() && log == "" {
				err, log = fmt.Errorf("member %s of %v exited", m.name, c.endpoints()), m.logTail()
			}
			c.kill(m)
		}
		return nil, log, err
	})
}

// start runs m (again, on its data directory).
func (c *cluster) start(m *member) {
	c.t.Helper()
	logf, err := os.OpenFile(m.dir+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	m.cmd = exec.Command(c.bin, m.args...)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if err := m.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	m.done = make(chan struct{})
	go func() { m.cmd.Wait(); logf.Close(); close(m.done) }()
}

// kill ends m with SIGKILL (kill -9) and waits for it.
func (c *cluster) kill(m *member) {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
	m.cmd = nil
}

// endpoints lists the client URLs of every member.
func (c *cluster) endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.clientURL)
	}
	return out
}

// waitHealthy waits until a linearizable read succeeds through eps.
func (c *cluster) waitHealthy(eps []string) {
	c.t.Helper()
	if err := c.waitUp(eps); err != nil {
		c.t.Fatalf("etcd cluster %v not healthy: %v", eps, err)
	}
}

// waitUp waits until a linearizable read succeeds through eps, for a
// minute at most; it gives up at once when a running member exits,
// returning the end of that member's log.
func (c *cluster) waitUp(eps []string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, TLS: c.clientTLS, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		for _, m := range c.members {
			if m.exited() {
				return fmt.Errorf("member %s exited: %s", m.name, m.logTail())
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w; member logs: %s", err, c.logTails())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exited reports whether m was started, not killed, and has exited.
func (m *member) exited() bool {
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// logTail returns the last 2 KiB of m's log.
func (m *member) logTail() string {
	b, err := os.ReadFile(m.dir + ".log")
	if err != nil {
		return err.Error()
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return strings.TrimSpace(string(b))
}

// logTails returns the end of every member's log.
func (c *cluster) logTails() string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.name+": "+m.logTail())
	}
	return strings.Join(out, "; ")
}
