package controllers_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	"github.com/nephio-project/ipam/service/fronts/controllers"
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
