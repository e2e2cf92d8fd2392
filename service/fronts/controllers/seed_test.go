package controllers_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
)

// TestSeedWalkthrough applies the seed README's resources one by one, in
// its order, through the API server, and checks every status and what the
// real `kubectl get ipam` prints.
func TestSeedWalkthrough(t *testing.T) {
	s := testSuite(t)
	s.startControllers(t, s.cfg)
	out := seedFlow(t, s, s.k8s, "default", "vpc-1")

	// Release: deleting alloc1 releases 10.0.1.2, and the next request gets it.
	c := s.k8s
	del(t, c, &allocT{ObjectMeta: objectMeta("default", "alloc1")})
	waitGone[allocT](t, c, "default", "alloc1")
	create(t, c, ipAllocation("default", "alloc3", ipamv1alpha1.PrefixKindNetwork, 0, seedSelector("vpc-1")))
	waitFor(t, c, "default", "alloc3", allocated("10.0.1.2/24", "10.0.1.1"))
	after := s.kubectl(t, "get", "ipam")
	require.Contains(t, after, "ipallocation.ipam.nephio.org/alloc3")
	require.NotContains(t, after, "ipallocation.ipam.nephio.org/alloc1 ")
	t.Logf("kubectl get ipam after the seed walk-through:\n%s", out)
	t.Logf("kubectl get ipam after deleting alloc1 and creating alloc3:\n%s", after)
}

// seedSelector selects network net1 of vrf, as the seed README does.
func seedSelector(vrf string) map[string]string {
	return map[string]string{ipamv1alpha1.LabelNetworkInstance: vrf, ipamv1alpha1.LabelNetworkName: "net1"}
}

// seedFlow walks the seed README in namespace ns with network instance vrf
// (the README's vpc-1), through client c, checking each status and the
// real `kubectl get ipam -A` output. It returns that output at the end.
func seedFlow(t *testing.T, s *suite, c client.Client, ns, vrf string) string {
	t.Helper()
	// 1. The network instance.
	create(t, c, networkInstance(ns, vrf))
	waitFor(t, c, ns, vrf, func(ni *niT) error { return ready(ni.Status.Conditions) })

	// 2. The network prefix with its gateway, before its aggregate: it waits,
	// naming the missing parent.
	create(t, c, ipPrefix(ns, "net1-prefix1", vrf, "", "10.0.1.1/24", "net1", map[string]string{ipamv1alpha1.LabelGateway: "true"}))
	p := waitFor(t, c, ns, "net1-prefix1", func(p *prefixT) error {
		return failed(p.Status.Conditions, "no aggregate contains 10.0.1.0/24 in network instance "+vrf)
	})
	t.Logf("net1-prefix1 before its aggregate: Ready=False: %s", meta.FindStatusCondition(p.Status.Conditions, ipamv1alpha1.ConditionTypeReady).Message)
	rows, _, _ := s.getIPAM(t, ns)
	t.Logf("kubectl get ipam while net1-prefix1 waits:\n%s", s.kubectl(t, "get", "ipam", "-n", ns))
	checkRows(t, rows, map[string]map[string]string{
		"ipprefix.ipam.nephio.org/net1-prefix1": {"SYNC": "True", "STATUS": "False", "NETWORK": vrf, "KIND": "network",
			"NETWORK-NAME": "net1", "PREFIX-REQ": "10.0.1.1/24", "PREFIX-ALLOC": ""},
	})

	// 3. The aggregate: both become Ready.
	create(t, c, ipPrefix(ns, "aggregate0", vrf, ipamv1alpha1.PrefixKindAggregate, "10.0.0.0/8", "", nil))
	waitFor(t, c, ns, "aggregate0", recorded("10.0.0.0/8", ""))
	waitFor(t, c, ns, "net1-prefix1", recorded("10.0.1.1/24", "10.0.1.1"))

	rows, headers, out := s.getIPAM(t, ns)
	t.Logf("kubectl get ipam -A after the prefixes:\n%s", out)
	require.Contains(t, headers, []string{"NAMESPACE", "NAME", "SYNC", "STATUS", "NETWORK", "KIND", "NETWORK-NAME", "PREFIX-REQ", "PREFIX-ALLOC", "AGE"})
	require.Contains(t, headers, []string{"NAMESPACE", "NAME", "SYNC", "STATUS", "AGE"})
	wantRows := map[string]map[string]string{
		"networkinstance.ipam.nephio.org/" + vrf: {"SYNC": "True", "STATUS": "True"},
		"ipprefix.ipam.nephio.org/aggregate0": {"SYNC": "True", "STATUS": "True", "NETWORK": vrf, "KIND": "aggregate",
			"NETWORK-NAME": "", "PREFIX-REQ": "10.0.0.0/8", "PREFIX-ALLOC": "10.0.0.0/8"},
		"ipprefix.ipam.nephio.org/net1-prefix1": {"SYNC": "True", "STATUS": "True", "NETWORK": vrf, "KIND": "network",
			"NETWORK-NAME": "net1", "PREFIX-REQ": "10.0.1.1/24", "PREFIX-ALLOC": "10.0.1.1/24"},
	}
	checkRows(t, rows, wantRows)

	// 4. A dynamic address from net1, with the network's gateway.
	create(t, c, ipAllocation(ns, "alloc1", ipamv1alpha1.PrefixKindNetwork, 0, seedSelector(vrf)))
	waitFor(t, c, ns, "alloc1", allocated("10.0.1.2/24", "10.0.1.1"))

	// 5. A static address declared by a labelled prefix and allocated by label.
	create(t, c, ipPrefix(ns, "net1-prefix10", vrf, "", "10.0.1.10/24", "net1", map[string]string{"nephio.org/interface": "n3"}))
	waitFor(t, c, ns, "net1-prefix10", recorded("10.0.1.10/24", "10.0.1.1"))
	n3 := seedSelector(vrf)
	n3["nephio.org/interface"] = "n3"
	create(t, c, ipAllocation(ns, "alloc2-n3", ipamv1alpha1.PrefixKindNetwork, 0, n3))
	waitFor(t, c, ns, "alloc2-n3", allocated("10.0.1.10/24", "10.0.1.1"))

	// 6. A /16 pool from the aggregate: best fit, lowest first.
	create(t, c, ipAllocation(ns, "alloc-pool1", ipamv1alpha1.PrefixKindPool, 16, map[string]string{ipamv1alpha1.LabelNetworkInstance: vrf}))
	waitFor(t, c, ns, "alloc-pool1", allocated("10.1.0.0/16", ""))

	// The network instance reports its aggregate's utilization.
	waitFor(t, c, ns, vrf, func(ni *niT) error {
		u := ni.Status.Utilization
		if len(u) != 1 || u[0].Prefix != "10.0.0.0/8" || u[0].Total != "16777216" || u[0].Used == "0" {
			return fmt.Errorf("utilization %+v; want 10.0.0.0/8, some of 16777216 used", u)
		}
		return nil
	})

	rows, headers, out = s.getIPAM(t, ns)
	t.Logf("kubectl get ipam -A after the allocations:\n%s", out)
	require.Contains(t, headers, []string{"NAMESPACE", "NAME", "SYNC", "STATUS", "KIND", "AF", "PREFIXLENGTH", "PREFIX-REQ", "PREFIX-ALLOC", "GATEWAY", "AGE"})
	wantRows["ipprefix.ipam.nephio.org/net1-prefix10"] = map[string]string{"SYNC": "True", "STATUS": "True", "NETWORK": vrf, "KIND": "network",
		"NETWORK-NAME": "net1", "PREFIX-REQ": "10.0.1.10/24", "PREFIX-ALLOC": "10.0.1.10/24"}
	wantRows["ipallocation.ipam.nephio.org/alloc1"] = map[string]string{"SYNC": "True", "STATUS": "True", "KIND": "network", "AF": "",
		"PREFIXLENGTH": "", "PREFIX-REQ": "", "PREFIX-ALLOC": "10.0.1.2/24", "GATEWAY": "10.0.1.1"}
	wantRows["ipallocation.ipam.nephio.org/alloc2-n3"] = map[string]string{"SYNC": "True", "STATUS": "True", "KIND": "network", "AF": "",
		"PREFIXLENGTH": "", "PREFIX-REQ": "", "PREFIX-ALLOC": "10.0.1.10/24", "GATEWAY": "10.0.1.1"}
	wantRows["ipallocation.ipam.nephio.org/alloc-pool1"] = map[string]string{"SYNC": "True", "STATUS": "True", "KIND": "pool", "AF": "",
		"PREFIXLENGTH": "16", "PREFIX-REQ": "", "PREFIX-ALLOC": "10.1.0.0/16", "GATEWAY": ""}
	checkRows(t, rows, wantRows)
	if len(rows) != len(wantRows) {
		t.Errorf("kubectl get ipam -A: %d rows in %s; want %d", len(rows), ns, len(wantRows))
	}
	return s.kubectl(t, "get", "ipam", "-n", ns)
}

// checkRows compares the cells of want with the rows kubectl printed.
func checkRows(t *testing.T, rows map[string]map[string]string, want map[string]map[string]string) {
	t.Helper()
	for name, cells := range want {
		row, ok := rows[name]
		if !ok {
			t.Errorf("kubectl get ipam: no row %s", name)
			continue
		}
		for col, v := range cells {
			if got, ok := row[col]; !ok || got != v {
				t.Errorf("kubectl get ipam: %s %s = %q; want %q", name, col, got, v)
			}
		}
		if row["AGE"] == "" {
			t.Errorf("kubectl get ipam: %s has no AGE", name)
		}
	}
}
