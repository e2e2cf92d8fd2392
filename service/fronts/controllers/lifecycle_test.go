package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/fronts/controllers"
)

type (
	niT     = ipamv1alpha1.NetworkInstance
	prefixT = ipamv1alpha1.IPPrefix
	allocT  = ipamv1alpha1.IPAllocation
)

// TestExhausted: an address from a full network and a prefix from a full
// pool wait with Ready=False, reason Failed and the service's
// ResourceExhausted message; the address comes as soon as another
// allocation's deletion releases one.
func TestExhausted(t *testing.T) {
	s := testSuite(t)
	c := s.k8s
	ns := s.namespace(t, "exhausted")
	s.startControllers(t, s.cfg)
	sel := map[string]string{ipamv1alpha1.LabelNetworkInstance: "vpc-ex", ipamv1alpha1.LabelNetworkName: "tiny"}

	create(t, c, networkInstance(ns, "vpc-ex"),
		ipPrefix(ns, "agg", "vpc-ex", ipamv1alpha1.PrefixKindAggregate, "10.20.0.0/16", "", nil),
		// A /30 keeps .0 and .3 back: two addresses to hand out.
		ipPrefix(ns, "tiny", "vpc-ex", ipamv1alpha1.PrefixKindNetwork, "10.20.0.0/30", "tiny", nil))
	waitFor(t, c, ns, "tiny", recorded("10.20.0.0/30", ""))
	create(t, c, ipAllocation(ns, "a1", "", 0, sel))
	waitFor(t, c, ns, "a1", allocated("10.20.0.1/30", ""))
	create(t, c, ipAllocation(ns, "a2", "", 0, sel))
	waitFor(t, c, ns, "a2", allocated("10.20.0.2/30", ""))

	create(t, c, ipAllocation(ns, "a3", "", 0, sel))
	a3 := waitFor(t, c, ns, "a3", func(a *allocT) error {
		return failed(a.Status.Conditions, "no free address left")
	})
	require.Empty(t, a3.Status.Prefix)
	t.Logf("a3 Ready=False: %s", a3.Status.Conditions[1].Message)

	del(t, c, &allocT{ObjectMeta: objectMeta(ns, "a1")})
	waitGone[allocT](t, c, ns, "a1")
	waitFor(t, c, ns, "a3", allocated("10.20.0.1/30", ""))

	// A pool: a /24 pool holds two /25 pool allocations, not three.
	create(t, c, ipPrefix(ns, "pool", "vpc-ex", ipamv1alpha1.PrefixKindPool, "10.20.1.0/24", "", map[string]string{"pool": "small"}))
	waitFor(t, c, ns, "pool", recorded("10.20.1.0/24", ""))
	poolSel := map[string]string{ipamv1alpha1.LabelNetworkInstance: "vpc-ex", "pool": "small"}
	create(t, c, ipAllocation(ns, "p1", ipamv1alpha1.PrefixKindPool, 25, poolSel))
	waitFor(t, c, ns, "p1", allocated("10.20.1.0/25", ""))
	create(t, c, ipAllocation(ns, "p2", ipamv1alpha1.PrefixKindPool, 25, poolSel))
	waitFor(t, c, ns, "p2", allocated("10.20.1.128/25", ""))
	create(t, c, ipAllocation(ns, "p3", ipamv1alpha1.PrefixKindPool, 25, poolSel))
	p3 := waitFor(t, c, ns, "p3", func(a *allocT) error { return failed(a.Status.Conditions, "no free /25 left") })
	require.Empty(t, p3.Status.Prefix)
	t.Logf("p3 Ready=False: %s", p3.Status.Conditions[1].Message)
}

// TestInvalidSpecRejected: the CRD schema makes the API server refuse
// malformed resources before any controller sees them.
func TestInvalidSpecRejected(t *testing.T) {
	s := testSuite(t)
	ns := s.namespace(t, "invalid")
	for _, tc := range []struct {
		name  string
		obj   client.Object
		field string
	}{
		{"prefix length 33", ipPrefix(ns, "p33", "vpc-1", "", "10.0.1.1/33", "net1", nil), "spec.prefix"},
		{"prefix not CIDR", ipPrefix(ns, "pbad", "vpc-1", "", "10.0.1.1", "net1", nil), "spec.prefix"},
		{"prefix kind vlan", ipPrefix(ns, "pvlan", "vpc-1", "vlan", "10.0.1.0/24", "net1", nil), "spec.kind"},
		{"prefix without network instance", ipPrefix(ns, "pnovrf", "", "", "10.0.1.0/24", "net1", nil), "spec.networkInstance"},
		{"allocation kind vlan", ipAllocation(ns, "avlan", "vlan", 0, seedSelector("vpc-1")), "spec.kind"},
		{"allocation of an aggregate", ipAllocation(ns, "aagg", ipamv1alpha1.PrefixKindAggregate, 16, seedSelector("vpc-1")), "spec.kind"},
		{"allocation prefix length 129", ipAllocation(ns, "a129", ipamv1alpha1.PrefixKindPool, 129, seedSelector("vpc-1")), "spec.prefixLength"},
		{"ipv4 allocation of /33", func() client.Object {
			a := ipAllocation(ns, "a33", ipamv1alpha1.PrefixKindPool, 33, seedSelector("vpc-1"))
			a.Spec.AddressFamily = ipamv1alpha1.AddressFamilyIPv4
			return a
		}(), "spec.prefixLength"},
		{"network instance aggregate not CIDR", &niT{ObjectMeta: objectMeta(ns, "vbad"),
			Spec: ipamv1alpha1.NetworkInstanceSpec{Prefixes: []ipamv1alpha1.NetworkInstancePrefix{{Prefix: "10.0.0.0/99"}}}}, "spec.prefixes[0].prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.k8s.Create(context.Background(), tc.obj)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: %v; want Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
	// And kubectl shows the same refusal to a user.
	cmdOut, err := kubectlErr(s, "apply", "-f", "-", `apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata: {name: p33, namespace: invalid}
spec: {prefix: 10.0.1.1/33, network: net1, networkInstance: vpc-1}
`)
	require.Error(t, err)
	require.Contains(t, cmdOut, "spec.prefix")
	t.Logf("kubectl apply: %s", cmdOut)
}

// TestServiceRefusesSpec: a spec the schema accepts but the service refuses
// (an aggregate with a host part) is Synced with Ready=False and the
// service's message, and becomes Ready once fixed.
func TestServiceRefusesSpec(t *testing.T) {
	s := testSuite(t)
	c := s.k8s
	ns := s.namespace(t, "refused")
	s.startControllers(t, s.cfg)
	create(t, c, networkInstance(ns, "vpc-rf"), ipPrefix(ns, "agg", "vpc-rf", ipamv1alpha1.PrefixKindAggregate, "10.50.0.1/16", "", nil))
	p := waitFor(t, c, ns, "agg", func(p *prefixT) error { return failed(p.Status.Conditions, "agg") })
	t.Logf("agg Ready=False: %s", p.Status.Conditions[1].Message)

	p.Spec.Prefix = "10.50.0.0/16"
	require.NoError(t, c.Update(context.Background(), p))
	waitFor(t, c, ns, "agg", recorded("10.50.0.0/16", ""))
}

// TestPrefixWithChildrenIsNotDeleted: deleting an aggregate, a network or
// a network instance that still holds something is refused by the
// service: the finalizer holds, Synced=False explains, and each goes away
// once its children have.
func TestPrefixWithChildrenIsNotDeleted(t *testing.T) {
	s := testSuite(t)
	c := s.k8s
	ns := s.namespace(t, "children")
	s.startControllers(t, s.cfg)
	create(t, c, networkInstance(ns, "vpc-ch"),
		ipPrefix(ns, "agg", "vpc-ch", ipamv1alpha1.PrefixKindAggregate, "10.30.0.0/16", "", nil),
		ipPrefix(ns, "net", "vpc-ch", ipamv1alpha1.PrefixKindNetwork, "10.30.1.0/24", "n", nil),
		ipAllocation(ns, "a", "", 0, map[string]string{ipamv1alpha1.LabelNetworkInstance: "vpc-ch", ipamv1alpha1.LabelNetworkName: "n"}))
	waitFor(t, c, ns, "a", allocated("10.30.1.1/24", ""))

	refused := func(conds []metav1.Condition) error {
		if err := condIs(conds, ipamv1alpha1.ConditionTypeSynced, metav1.ConditionFalse, ipamv1alpha1.ReasonReconcileFailure, "deletion refused by ipam-server"); err != nil {
			return err
		}
		// Still usable while it stays.
		return condIs(conds, ipamv1alpha1.ConditionTypeReady, metav1.ConditionTrue, ipamv1alpha1.ReasonReady, "")
	}
	del(t, c, &niT{ObjectMeta: objectMeta(ns, "vpc-ch")}, &prefixT{ObjectMeta: objectMeta(ns, "agg")}, &prefixT{ObjectMeta: objectMeta(ns, "net")})
	agg := waitFor(t, c, ns, "agg", func(p *prefixT) error { return refused(p.Status.Conditions) })
	net := waitFor(t, c, ns, "net", func(p *prefixT) error { return refused(p.Status.Conditions) })
	ni := waitFor(t, c, ns, "vpc-ch", func(ni *niT) error { return refused(ni.Status.Conditions) })
	for _, o := range []client.Object{agg, net, ni} {
		require.Contains(t, o.GetFinalizers(), controllers.Finalizer)
	}
	t.Logf("agg: %s", agg.Status.Conditions[0].Message)
	t.Logf("net: %s", net.Status.Conditions[0].Message)
	t.Logf("vpc-ch: %s", ni.Status.Conditions[0].Message)
	require.Contains(t, agg.Status.Conditions[0].Message, "10.30.1.0/24")
	rows, _, out := s.getIPAM(t, ns)
	t.Logf("kubectl get ipam while deletions wait:\n%s", out)
	require.Equal(t, "False", rows["ipprefix.ipam.nephio.org/agg"]["SYNC"])

	// Once the allocation is released, the rest follows on its own.
	del(t, c, &allocT{ObjectMeta: objectMeta(ns, "a")})
	waitGone[allocT](t, c, ns, "a")
	waitGone[prefixT](t, c, ns, "net")
	waitGone[prefixT](t, c, ns, "agg")
	waitGone[niT](t, c, ns, "vpc-ch")
	resp, err := s.ipam.List(context.Background(), &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE, Owner: controllers.DefaultOwner})
	require.NoError(t, err)
	for _, o := range resp.GetObjects() {
		require.NotEqual(t, "vpc-ch", o.GetNetworkInstance().GetKey().GetName(), "vpc-ch is still in ipam-server")
	}
}

// TestControllerRestart: a new controller process reconciles everything
// again with the same answers: statuses unchanged (not even rewritten),
// a lost status restored, and each allocation held once in ipam-server.
// While nothing changes, the controllers make no calls at all.
func TestControllerRestart(t *testing.T) {
	s := testSuite(t)
	c := s.k8s
	ctx := context.Background()
	ns := s.namespace(t, "restart")
	first := s.startControllers(t, s.cfg)

	sel := map[string]string{ipamv1alpha1.LabelNetworkInstance: "vpc-rs", ipamv1alpha1.LabelNetworkName: "net"}
	objs := []client.Object{networkInstance(ns, "vpc-rs"),
		ipPrefix(ns, "agg", "vpc-rs", ipamv1alpha1.PrefixKindAggregate, "10.40.0.0/16", "", nil),
		ipPrefix(ns, "net", "vpc-rs", "", "10.40.1.1/24", "net", map[string]string{ipamv1alpha1.LabelGateway: "true"}),
		ipAllocation(ns, "pool", ipamv1alpha1.PrefixKindPool, 24, map[string]string{ipamv1alpha1.LabelNetworkInstance: "vpc-rs"}),
	}
	var allocs []string
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("r%d", i)
		allocs = append(allocs, name)
		objs = append(objs, ipAllocation(ns, name, "", 0, sel))
	}
	allocs = append(allocs, "pool")
	create(t, c, objs...)
	want := map[string]string{"pool": "10.40.0.0/24"}
	for _, name := range allocs {
		a := waitFor(t, c, ns, name, func(a *allocT) error { return ready(a.Status.Conditions) })
		want[name] = a.Status.Prefix
	}
	// Five distinct addresses .2-.6 in some order, the pool first-fit.
	require.Equal(t, "10.40.0.0/24", want["pool"])
	seen := map[string]bool{}
	for _, name := range allocs[:5] {
		require.False(t, seen[want[name]], "address %s handed out twice", want[name])
		seen[want[name]] = true
	}

	// Quiet: with nothing changing, every object's last reconcile asks to
	// be called again only at the resync period and failed nothing, so no
	// reconcile schedules another one (no hot loop).
	eventually(t, 30*time.Second, "every object settled at the resync period", func() error {
		for _, o := range objs {
			key := client.ObjectKeyFromObject(o)
			last, ok := first.reconciles.lastOf(key)
			if !ok || last.err != nil || last.res.RequeueAfter != first.resync {
				return fmt.Errorf("%s: last reconcile %+v (done: %v)", key, last, ok)
			}
		}
		return nil
	})

	first.stop()
	versions := map[string]string{}
	for _, o := range objs {
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(o), o))
		versions[o.GetName()] = o.GetResourceVersion()
	}
	// Lose r3's status while no controller runs.
	r3 := &allocT{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r3"}, r3))
	r3.Status = ipamv1alpha1.IPAllocationStatus{}
	require.NoError(t, c.Status().Update(ctx, r3))

	second := s.startControllers(t, s.cfg)
	waitFor(t, c, ns, "r3", allocated(want["r3"], "10.40.1.1"))
	// Wait until the new controllers have called the service for each.
	eventually(t, 30*time.Second, "every object reconciled by the new controllers", func() error {
		for _, name := range allocs {
			if second.calls.count("Allocate "+ns+"/"+name) == 0 {
				return fmt.Errorf("no Allocate for %s yet", name)
			}
		}
		for _, name := range []string{"agg", "net"} {
			if second.calls.count("CreatePrefix "+ns+"/"+name) == 0 {
				return fmt.Errorf("no CreatePrefix for %s yet", name)
			}
		}
		return nil
	})
	// Every reconcile of the new controllers has finished (its status
	// write, if any, is done) before the versions are compared.
	eventually(t, 30*time.Second, "every object reconciled to the end", func() error {
		for _, o := range objs {
			if key := client.ObjectKeyFromObject(o); second.reconciles.count(key) == 0 {
				return fmt.Errorf("%s not reconciled yet", key)
			}
		}
		return nil
	})
	for _, o := range objs {
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(o), o))
		if o.GetName() == "r3" {
			continue
		}
		require.Equal(t, versions[o.GetName()], o.GetResourceVersion(), "%s was rewritten by the new controllers", o.GetName())
	}
	for _, name := range allocs {
		a := waitFor(t, c, ns, name, func(a *allocT) error { return ready(a.Status.Conditions) })
		require.Equal(t, want[name], a.Status.Prefix, name)
	}

	// ipam-server holds each allocation once, with the same result.
	resp, err := s.ipam.List(ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, NetworkInstance: "vpc-rs"})
	require.NoError(t, err)
	got := map[string]string{}
	for _, o := range resp.GetObjects() {
		rec := o.GetAllocation()
		k := rec.GetAllocation().GetKey()
		require.Equal(t, controllers.DefaultOwner, k.GetOwner())
		require.Equal(t, ns, k.GetNamespace())
		_, dup := got[k.GetName()]
		require.False(t, dup, "allocation %s listed twice", k.GetName())
		got[k.GetName()] = rec.GetResult().GetPrefix()
	}
	require.Equal(t, want, got)
}

// kubectlErr runs kubectl with stdin and returns its output and error.
func kubectlErr(s *suite, args ...string) (string, error) {
	stdin := args[len(args)-1]
	return runKubectl(s.kubeconfig, stdin, args[:len(args)-1]...)
}
