package etcd_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestReplicaOverTLS: a replica reaches an etcd that serves TLS and
// requires client certificates, with --etcd-ca, --etcd-cert and
// --etcd-key.
func TestReplicaOverTLS(t *testing.T) {
	bin := etcdBinary(t)
	dir := t.TempDir()
	certs := servertest.WriteCerts(t, dir)
	clientURL := fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--name", "tls", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "tls="+peerURL,
		"--cert-file", certs.ServerCert, "--key-file", certs.ServerKey, "--trusted-ca-file", certs.CA, "--client-cert-auth",
		"--log-level", "error")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() })

	s := servertest.Start(t, server.Config{Store: "etcd", EtcdEndpoints: []string{clientURL}, EtcdPrefix: "/tls/",
		EtcdCA: certs.CA, EtcdCert: certs.ClientCert, EtcdKey: certs.ClientKey}, false)
	c := s.Client(t)
	seed20(t, c, "10.0.0.0/20")
	resp, err := c.Allocate(context.Background(), &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("a1"), Selector: net20}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetResult().GetPrefix(); got != "10.0.0.1/20" {
		t.Fatalf("allocated %s, want 10.0.0.1/20", got)
	}
}
