package controllers_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	"github.com/nephio-project/ipam/service/fronts/controllers"
)

// logLines collects what a logger writes, for tests that wait for a line.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// has reports whether a line containing want was logged.
func (l *logLines) has(want string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), want)
}

// wait fails the test unless a line containing want is logged in time.
func (l *logLines) wait(t *testing.T, want string) {
	t.Helper()
	eventually(t, capiWait, "log line "+want, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !strings.Contains(l.buf.String(), want) {
			return fmt.Errorf("not logged")
		}
		return nil
	})
}

// TestFrontsTurnOnWhenCRDsArrive starts the controllers (--metal3
// --nvidia) on an API server with only the ipam.nephio.org CRDs: the three
// fronts log that they are off. Installing Cluster API's, then Metal3's,
// then NVIDIA's CRDs afterwards turns each front on (logged) without a
// restart: a Cluster API claim, a Metal3 claim and a node of an NVIDIA
// pool get their addresses. The Cluster API claim names a Metal3 pool and
// is created before the Metal3 front is on: the claim controller, running
// already, is given the Metal3 pools' watch.
func TestFrontsTurnOnWhenCRDsArrive(t *testing.T) {
	s := testSuite(t)
	ctx := context.Background()
	env := &envtest.Environment{CRDDirectoryPaths: []string{crdDir}, ErrorIfCRDPathMissing: true, Scheme: s.k8s.Scheme()}
	cfg, err := env.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	k, err := client.New(cfg, client.Options{Scheme: s.k8s.Scheme()})
	require.NoError(t, err)
	srv, err := startServer("127.0.0.1:0", filepath.Join(t.TempDir(), "ipam-data"), s.logFile)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.stop() })

	logged := &logLines{}
	s.startControllers(t, cfg, func(c *controllers.Config) {
		c.Server = srv.addr
		c.FrontCheck = 200 * time.Millisecond
		c.Logger = logr.FromSlogHandler(slog.NewTextHandler(io.MultiWriter(logged, s.logFile), nil))
	})
	logged.wait(t, "Metal3 front off: the ipam.metal3.io CRDs are not installed")
	logged.wait(t, "NVIDIA front off: the nv-ipam.nvidia.com CRDs are not installed")
	logged.wait(t, "Cluster API front off: Cluster API's IPAddressClaim and IPAddress CRDs (ipam.cluster.x-k8s.io) are not installed")
	const ns = "late-crds"
	require.NoError(t, k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	install := func(dir string) {
		t.Helper()
		_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true})
		require.NoError(t, err)
	}
	install(capiCRDDir)
	logged.wait(t, "Cluster API front on")
	require.NoError(t, k.Create(ctx, &capiv1beta2.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "capi-m3"},
		Spec: capiv1beta2.IPAddressClaimSpec{PoolRef: capiv1beta2.IPPoolReference{APIGroup: metal3v1alpha1.Group, Kind: metal3v1alpha1.KindIPPool, Name: "m3"}}}))

	// CRDs installed together reach discovery one by one: with the IPClaim
	// CRD alone the Metal3 front stays off (registering its controllers
	// would fail on the IPPool and IPAddress kinds and stop the manager).
	install(filepath.Join(metal3CRDDir, "ipam.metal3.io_ipclaims.yaml"))
	eventually(t, capiWait, "IPClaim served", func() error {
		_, err := k.RESTMapper().RESTMapping(metal3v1alpha1.GroupVersion.WithKind(metal3v1alpha1.KindIPClaim).GroupKind(), metal3v1alpha1.GroupVersion.Version)
		return err
	})
	time.Sleep(10 * 200 * time.Millisecond) // ten front checks
	if logged.has("Metal3 front on") {
		t.Fatal("the Metal3 front turned on with only its IPClaim CRD installed")
	}
	install(metal3CRDDir)
	logged.wait(t, "Metal3 front on")
	require.NoError(t, k.Create(ctx, m3(t, ns, "metadata: {name: m3}\nspec: {pools: [{start: 10.95.0.10, end: 10.95.0.20}], prefix: 24, gateway: 10.95.0.1}\n", &metal3v1alpha1.IPPool{})))
	require.NoError(t, k.Create(ctx, m3Claim(ns, "m3-claim", "m3")))
	got := s.m3Served(t, k, ns, "m3-claim")
	var capiAddr capiv1beta2.IPAddress
	eventually(t, capiWait, "IPAddress of the Cluster API claim on the Metal3 pool", func() error {
		return k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "capi-m3"}, &capiAddr)
	})
	assert.ElementsMatch(t, []string{"10.95.0.10", "10.95.0.11"}, []string{string(got.Spec.Address), capiAddr.Spec.Address})

	install(nvidiaCRDDir)
	logged.wait(t, "NVIDIA front on")
	require.NoError(t, k.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "late-node", Labels: map[string]string{"late": "yes"}}}))
	nv := m3(t, ns, "metadata: {name: nv}\nspec: {subnet: 10.95.1.0/24, perNodeBlockSize: 8, nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: late, operator: Exists}]}]}}\n", &nvv1alpha1.IPPool{})
	require.NoError(t, k.Create(ctx, nv))
	eventually(t, capiWait, "the node's block", func() error {
		if err := k.Get(ctx, client.ObjectKeyFromObject(nv), nv); err != nil {
			return err
		}
		if len(nv.Status.Allocations) != 1 || nv.Status.Allocations[0].StartIP != "10.95.1.1" {
			return fmt.Errorf("allocations %+v", nv.Status.Allocations)
		}
		return nil
	})
}

// TestRunWithoutCRDs: on an API server without the ipam.nephio.org CRDs,
// Run stops at once and names what to install.
func TestRunWithoutCRDs(t *testing.T) {
	s := testSuite(t)
	env := &envtest.Environment{Scheme: s.k8s.Scheme()}
	cfg, err := env.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), capiWait)
	defer cancel()
	err = controllers.Run(ctx, controllers.Config{RESTConfig: cfg, Server: s.serverAddr, MetricsBindAddress: "0",
		HealthProbeBindAddress: "0", SkipNameValidation: true, Logger: s.log.WithName(t.Name())})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the ipam.nephio.org CRDs are not installed: install them before starting the controller")
	assert.NoError(t, ctx.Err(), "Run returned only when the test gave up")
}
