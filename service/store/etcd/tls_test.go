package etcd_test

import (
	"context"
	"testing"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestReplicaOverTLS: a replica reaches an etcd that serves TLS and
// requires client certificates, with --etcd-ca, --etcd-cert and
// --etcd-key.
func TestReplicaOverTLS(t *testing.T) {
	certs := servertest.WriteCerts(t, t.TempDir())
	clientURL := startTLSCluster(t, certs).endpoints()[0]

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
