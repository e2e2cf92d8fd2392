package controllers_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	"github.com/nephio-project/ipam/service/fronts/controllers"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestMTLS runs the controllers against an ipam-server that requires
// client certificates: without one, the resources are not Synced and say
// why (the server tells the client); with --tls-ca, --tls-cert and
// --tls-key they become Ready.
func TestMTLS(t *testing.T) {
	s := testSuite(t)
	c := s.k8s
	ns := s.namespace(t, "mtls")
	certs := servertest.WriteCerts(t, t.TempDir())
	srv, err := startServer("127.0.0.1:0", t.TempDir(), s.logFile, certs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.stop() })

	noCert := s.startControllers(t, s.cfg, func(cfg *controllers.Config) {
		cfg.Server, cfg.TLSCA = srv.addr, certs.CA
	})
	create(t, c, networkInstance(ns, "vpc-mtls"))
	ni := waitFor(t, c, ns, "vpc-mtls", func(ni *niT) error {
		if err := condIs(ni.Status.Conditions, ipamv1alpha1.ConditionTypeSynced, metav1.ConditionFalse, ipamv1alpha1.ReasonReconcileFailure, "ipam-server: Unauthenticated: ipam-server requires a client certificate signed by its client CA (mTLS): no client certificate was presented"); err != nil {
			return err
		}
		return condIs(ni.Status.Conditions, ipamv1alpha1.ConditionTypeReady, metav1.ConditionFalse, ipamv1alpha1.ReasonFailed, "not synced")
	})
	t.Logf("without a client certificate: Synced=False: %s", ni.Status.Conditions[0].Message)
	noCert.stop()

	s.startControllers(t, s.cfg, func(cfg *controllers.Config) {
		cfg.Server, cfg.TLSCA, cfg.TLSCert, cfg.TLSKey = srv.addr, certs.CA, certs.ClientCert, certs.ClientKey
	})
	waitFor(t, c, ns, "vpc-mtls", func(ni *niT) error { return ready(ni.Status.Conditions) })
	create(t, c, ipPrefix(ns, "agg", "vpc-mtls", ipamv1alpha1.PrefixKindAggregate, "10.70.0.0/16", "", nil))
	waitFor(t, c, ns, "agg", recorded("10.70.0.0/16", ""))
}

// TestFrontsUnderTheBlueprintPolicy runs the controllers with the
// blueprint's identity (client certificate CN ipam-controller) against an
// ipam-server that enforces the blueprint's authorization policy: the
// Cluster API, Metal3 and NVIDIA fronts all serve their claims, so the
// policy grants every owner they write.
func TestFrontsUnderTheBlueprintPolicy(t *testing.T) {
	s := testSuite(t)
	ctx := context.Background()
	ns := s.namespace(t, "policy")
	dir := t.TempDir()
	certs := servertest.WriteCerts(t, dir)
	certs.ClientCert, certs.ClientKey = certs.WriteClient(t, "controller", servertest.ClientCert{CommonName: "ipam-controller"})
	b, err := os.ReadFile(filepath.Join(blueprintDir, "authz-policy.yaml"))
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal(b, &cm))
	policy := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte(cm.Data["policy.yaml"]), 0o600))
	srv, err := startServerWith("127.0.0.1:0", filepath.Join(dir, "data"), s.logFile, func(c *server.Config) { c.AuthzPolicy = policy }, certs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.stop() })
	s.startControllers(t, s.cfg, func(cfg *controllers.Config) {
		cfg.Server, cfg.TLSCA, cfg.TLSCert, cfg.TLSKey = srv.addr, certs.CA, certs.ClientCert, certs.ClientKey
	})

	require.NoError(t, s.k8s.Create(ctx, pool(ns, "p", ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.95.0.10-10.95.0.20"}, Prefix: 24})))
	require.NoError(t, s.k8s.Create(ctx, claim(ns, "c", ipamv1alpha1.KindInClusterIPPool, "p")))
	assert.Equal(t, "10.95.0.10", s.address(t, ns, "c").Spec.Address)
	require.NoError(t, s.k8s.Create(ctx, m3(t, ns, "metadata: {name: m3}\nspec: {pools: [{subnet: 10.95.1.0/24}], prefix: 24}\n", &metal3v1alpha1.IPPool{})))
	require.NoError(t, s.k8s.Create(ctx, m3Claim(ns, "m3c", "m3")))
	assert.Equal(t, "m3-10-95-1-1", s.m3Served(t, s.k8s, ns, "m3c").Name)
	s.node(t, "policy-node", map[string]string{"policy-node": "yes"})
	nv := m3(t, ns, "metadata: {name: nv}\nspec: {subnet: 10.95.2.0/24, perNodeBlockSize: 4, nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: policy-node, operator: Exists}]}]}}\n", &nvv1alpha1.IPPool{})
	require.NoError(t, s.k8s.Create(ctx, nv))
	s.nvAllocations(t, nv, map[string]string{"policy-node": "10.95.2.1-10.95.2.4"})
}
