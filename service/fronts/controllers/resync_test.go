package controllers_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/fronts/controllers"
)

// TestResync runs the controllers with a 2s resync against an ipam-server
// of its own and shows that the periodic resync converges: a status lost
// while the controllers run comes back; after ipam-server restarts from
// its data dir every answer stays the same; and after it restarts with its
// state lost, the controllers declare everything again.
func TestResync(t *testing.T) {
	s := testSuite(t)
	c := s.k8s
	ctx := context.Background()
	ns := s.namespace(t, "resync")
	dataDir := t.TempDir()
	srv, err := startServer("127.0.0.1:0", dataDir, s.logFile)
	require.NoError(t, err)
	addr := srv.addr
	t.Cleanup(func() { _ = srv.stop() })
	s.startControllers(t, s.cfg, func(cfg *controllers.Config) {
		cfg.Server, cfg.Resync = addr, 2*time.Second
	})

	sel := map[string]string{ipamv1alpha1.LabelNetworkInstance: "vpc-resync", ipamv1alpha1.LabelNetworkName: "net"}
	create(t, c, networkInstance(ns, "vpc-resync"),
		ipPrefix(ns, "agg", "vpc-resync", ipamv1alpha1.PrefixKindAggregate, "10.60.0.0/16", "", nil),
		ipPrefix(ns, "net", "vpc-resync", "", "10.60.1.1/24", "net", map[string]string{ipamv1alpha1.LabelGateway: "true"}))
	waitFor(t, c, ns, "net", recorded("10.60.1.1/24", "10.60.1.1"))
	create(t, c, ipAllocation(ns, "y1", "", 0, sel))
	waitFor(t, c, ns, "y1", allocated("10.60.1.2/24", "10.60.1.1"))
	create(t, c, ipAllocation(ns, "y2", "", 0, sel))
	waitFor(t, c, ns, "y2", allocated("10.60.1.3/24", "10.60.1.1"))

	// A status lost while the controllers run: only the resync brings it
	// back (the controllers ignore status-only changes).
	y1 := &allocT{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "y1"}, y1))
	y1.Status = ipamv1alpha1.IPAllocationStatus{}
	require.NoError(t, c.Status().Update(ctx, y1))
	waitFor(t, c, ns, "y1", allocated("10.60.1.2/24", "10.60.1.1"))

	// ipam-server restarts from its data dir: the same answers, and the
	// next address is the next free one.
	require.NoError(t, srv.stop())
	srv, err = startServer(addr, dataDir, s.logFile)
	require.NoError(t, err)
	create(t, c, ipAllocation(ns, "y3", "", 0, sel))
	waitFor(t, c, ns, "y3", allocated("10.60.1.4/24", "10.60.1.1"))
	waitFor(t, c, ns, "y1", allocated("10.60.1.2/24", "10.60.1.1"))
	waitFor(t, c, ns, "y2", allocated("10.60.1.3/24", "10.60.1.1"))

	// ipam-server restarts with nothing: the resync declares the network
	// instance, the prefixes and the allocations again.
	require.NoError(t, srv.stop())
	srv, err = startServer(addr, t.TempDir(), s.logFile)
	require.NoError(t, err)
	eventually(t, 60*time.Second, "ipam-server holds the resources again", func() error {
		resp, err := srv.client.List(ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, NetworkInstance: "vpc-resync"})
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, o := range resp.GetObjects() {
			got[o.GetAllocation().GetAllocation().GetKey().GetName()] = o.GetAllocation().GetResult().GetPrefix()
		}
		if len(got) != 3 {
			return fmt.Errorf("allocations %v; want y1, y2, y3", got)
		}
		seen := map[string]bool{}
		net := netip.MustParsePrefix("10.60.1.0/24")
		for _, name := range []string{"y1", "y2", "y3"} {
			a := &allocT{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, a); err != nil {
				return err
			}
			if err := ready(a.Status.Conditions); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if a.Status.Prefix != got[name] {
				return fmt.Errorf("%s: status %s, ipam-server %s", name, a.Status.Prefix, got[name])
			}
			p, err := netip.ParsePrefix(got[name])
			if err != nil || !net.Contains(p.Addr()) || seen[got[name]] {
				return fmt.Errorf("%s: %s not a fresh address of %s", name, got[name], net)
			}
			seen[got[name]] = true
		}
		return nil
	})
}
