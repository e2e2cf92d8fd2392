package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	"github.com/nephio-project/ipam/functions/engine"
	"github.com/nephio-project/ipam/functions/internal/pkgtest"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

const capiPool = `apiVersion: ipam.nephio.org/v1alpha1
kind: InClusterIPPool
metadata: {name: nodes, namespace: default}
spec:
  addresses: [10.30.0.10-10.30.0.20]
  prefix: 24
  gateway: 10.30.0.1
`

// capiClaim is a claim of the pool nodes.
func capiClaim(name string) string {
	return "---\napiVersion: ipam.cluster.x-k8s.io/v1beta2\nkind: IPAddressClaim\nmetadata: {name: " + name +
		", namespace: default}\nspec:\n  poolRef: {apiGroup: ipam.nephio.org, kind: InClusterIPPool, name: nodes}\n"
}

// addresses are the IPAddresses among objs, name -> address.
func addresses(t *testing.T, objs fn.KubeObjects) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		if o.GetKind() == "IPAddress" {
			out[o.GetName()] = pkgtest.Str(t, o, "spec", "address")
		}
	}
	return out
}

// TestClaimsRestoreToAFreshServer: a package rendered against one server
// holds IPAddresses; rendered against a fresh (restored, replaced) server
// it keeps them byte for byte, and a new claim gets none of them.
func TestClaimsRestoreToAFreshServer(t *testing.T) {
	ctx := context.Background()
	first := servertest.Start(t, server.Config{}, false)
	cfg := engine.Options{Server: first.Addr, Prune: true}
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "capi.yaml", capiPool+capiClaim("c1")+capiClaim("c2"))
	if _, _, err := engine.Process(ctx, first.Client(t), cfg, &objs); err != nil {
		t.Fatal(err)
	}
	if got := addresses(t, objs); got["c1"] != "10.30.0.10" || got["c2"] != "10.30.0.11" {
		t.Fatalf("addresses %v", got)
	}
	// Again on the same server: nothing moves.
	before := pkgtest.Snapshot(objs)
	if changed, _, err := engine.Process(ctx, first.Client(t), cfg, &objs); err != nil || changed {
		t.Fatalf("second run: changed %v, err %v", changed, err)
	}

	// A fresh server learns the package's addresses back; the claim c0,
	// new and first in the package, gets the next free one.
	fresh := servertest.Start(t, server.Config{}, false)
	cfg.Server = fresh.Addr
	if changed, _, err := engine.Process(ctx, fresh.Client(t), cfg, &objs); err != nil || changed {
		t.Fatalf("restore: changed %v, err %v", changed, err)
	}
	if got := pkgtest.Snapshot(objs); !slices.Equal(got, before) {
		t.Fatalf("the restore changed the package:\n%s", strings.Join(got, "\n"))
	}
	more := append(objs, pkgtest.Items(t, "more.yaml", capiClaim("c0"))...)
	if _, _, err := engine.Process(ctx, fresh.Client(t), cfg, &more); err != nil {
		t.Fatal(err)
	}
	if got := addresses(t, more); got["c0"] != "10.30.0.12" || got["c1"] != "10.30.0.10" || got["c2"] != "10.30.0.11" {
		t.Fatalf("addresses after the restore %v", got)
	}
}

// TestClaimErrors: a claim whose pool is not in the package, one whose
// allocation key collides with an IPAllocation, and a pool the server
// refuses are reported on the right object and field; nothing changes.
func TestClaimErrors(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	cfg := engine.Options{Server: srv.Addr, Prune: true}
	for name, tc := range map[string]struct {
		doc, kind, obj, field, msg string
	}{
		"missing pool": {capiClaim("c1") + "---\napiVersion: ipam.cluster.x-k8s.io/v1beta2\nkind: IPAddressClaim\nmetadata: {name: x, namespace: default}\n" +
			"spec:\n  poolRef: {apiGroup: ipam.nephio.org, kind: InClusterIPPool, name: other}\n",
			"IPAddressClaim", "x", "spec.poolRef", `no InClusterIPPool "default/other" in the package`},
		"key collision": {capiPool + capiClaim("c1") + "---\napiVersion: ipam.nephio.org/v1alpha1\nkind: IPAllocation\n" +
			"metadata: {name: ipaddressclaim.c1, namespace: default}\nspec: {kind: network, networkInstance: x}\n",
			"IPAddressClaim", "c1", "metadata.name", "its allocation is keyed ipaddressclaim.c1, the name of IPAllocation default/ipaddressclaim.c1"},
		"bad pool": {strings.Replace(capiPool, "gateway: 10.30.0.1", "gateway: 10.31.0.1", 1) + capiClaim("c1"),
			"InClusterIPPool", "nodes", "spec.gateway", "10.31.0.1 is not in the network 10.30.0.0/24"},
		"wrong pool kind": {capiPool + "---\napiVersion: ipam.cluster.x-k8s.io/v1beta2\nkind: IPAddressClaim\nmetadata: {name: y, namespace: default}\n" +
			"spec:\n  poolRef: {apiGroup: ipam.nephio.org, kind: IPAllocation, name: nodes}\n",
			"IPAddressClaim", "y", "spec.poolRef", `"IPAllocation" is not a pool kind`},
	} {
		t.Run(name, func(t *testing.T) {
			objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "capi.yaml", tc.doc)
			before := pkgtest.Snapshot(objs)
			n := len(objs)
			changed, results, err := engine.Process(context.Background(), srv.Client(t), cfg, &objs)
			if changed || err == nil || len(objs) != n || !slices.Equal(pkgtest.Snapshot(objs), before) {
				t.Fatalf("changed %v, err %v, %d items (was %d)", changed, err, len(objs), n)
			}
			for _, r := range results {
				if r.Severity == fn.Error && r.ResourceRef != nil && r.ResourceRef.Kind == tc.kind && r.ResourceRef.Name == tc.obj &&
					r.Field != nil && r.Field.Path == tc.field && strings.Contains(r.Message, tc.msg) {
					return
				}
			}
			t.Fatalf("no error on %s %s %s containing %q in %v", tc.kind, tc.obj, tc.field, tc.msg, results)
		})
	}
}

// TestPoolEditDroppingAnAddressIsRefused: a pool edit that drops an
// allocated address is refused by ipam-server, reported on the pool, and
// changes nothing.
func TestPoolEditDroppingAnAddressIsRefused(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	cfg := engine.Options{Server: srv.Addr, Prune: true}
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "capi.yaml", capiPool+capiClaim("c1"))
	if _, _, err := engine.Process(context.Background(), srv.Client(t), cfg, &objs); err != nil {
		t.Fatal(err)
	}
	kptfile := pkgtest.Find(t, objs, "Kptfile", "seed-pkg").String()
	shrunk := strings.Replace(capiPool, "10.30.0.10-10.30.0.20", "10.30.0.11-10.30.0.20", 1)
	claimDoc := ""
	for _, o := range objs {
		if o.GetKind() == "IPAddressClaim" || o.GetKind() == "IPAddress" {
			claimDoc += "---\n" + o.String()
		}
	}
	edited := pkgtest.Items(t, "Kptfile", kptfile, "capi.yaml", shrunk+claimDoc)
	_, results, err := engine.Process(context.Background(), srv.Client(t), cfg, &edited)
	if err == nil {
		t.Fatal("the edit dropping 10.30.0.10 was accepted")
	}
	for _, r := range results {
		if r.ResourceRef != nil && r.ResourceRef.Kind == "InClusterIPPool" && strings.Contains(r.Message, "10.30.0.10") {
			t.Log(r.Message)
			return
		}
	}
	t.Fatalf("no error on the pool naming 10.30.0.10: %v", results)
}

const m3Pool = `apiVersion: ipam.metal3.io/v1alpha1
kind: IPPool
metadata: {name: pool1, namespace: default}
spec:
  pools: [{start: 10.31.0.10, end: 10.31.0.30}]
  prefix: 24
  gateway: 10.31.0.1
  preAllocations: {pre: 10.31.0.20}
`

// m3Claim is an IPClaim of pool1.
func m3Claim(name string) string {
	return "---\napiVersion: ipam.metal3.io/v1alpha1\nkind: IPClaim\nmetadata: {name: " + name + ", namespace: default}\nspec:\n  pool: {name: pool1}\n"
}

// TestMetal3ClaimsRestoreToAFreshServer: the Metal3 IPAddresses in Git
// pin their claims on a fresh server; pre-allocations hold in a package.
func TestMetal3ClaimsRestoreToAFreshServer(t *testing.T) {
	ctx := context.Background()
	first := servertest.Start(t, server.Config{}, false)
	cfg := engine.Options{Server: first.Addr, Prune: true}
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "m3.yaml", m3Pool+m3Claim("a")+m3Claim("pre")+m3Claim("b"))
	if _, _, err := engine.Process(ctx, first.Client(t), cfg, &objs); err != nil {
		t.Fatal(err)
	}
	names := func(objs fn.KubeObjects) []string {
		var out []string
		for _, o := range objs {
			if o.GetKind() == "IPAddress" {
				out = append(out, o.GetName())
			}
		}
		slices.Sort(out)
		return out
	}
	if got := names(objs); !slices.Equal(got, []string{"pool1-10-31-0-10", "pool1-10-31-0-11", "pool1-10-31-0-20"}) {
		t.Fatalf("IPAddresses %v", got)
	}
	before := pkgtest.Snapshot(objs)
	fresh := servertest.Start(t, server.Config{}, false)
	cfg.Server = fresh.Addr
	// On the fresh server a new claim c comes first in the package.
	more := append(pkgtest.Items(t, "c.yaml", m3Claim("c")), objs...)
	if _, _, err := engine.Process(ctx, fresh.Client(t), cfg, &more); err != nil {
		t.Fatal(err)
	}
	if got := names(more); !slices.Equal(got, []string{"pool1-10-31-0-10", "pool1-10-31-0-11", "pool1-10-31-0-12", "pool1-10-31-0-20"}) {
		t.Fatalf("after the restore: IPAddresses %v", got)
	}
	for _, s := range before {
		if !slices.Contains(pkgtest.Snapshot(more), s) {
			t.Errorf("the restore changed %s", s)
		}
	}
	// A claim of a pool that is not in the package names its field.
	bad := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "m3.yaml", strings.Replace(m3Claim("x"), "pool1", "nope", 1))
	_, results, err := engine.Process(ctx, fresh.Client(t), cfg, &bad)
	if err == nil || len(results) != 1 || results[0].Field == nil || results[0].Field.Path != "spec.pool" || !strings.Contains(results[0].Message, `no IPPool "default/nope" in the package`) {
		t.Fatalf("err %v, results %v", err, results)
	}
}
