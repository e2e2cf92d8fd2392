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

const nephioKptfile = `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: upf
status:
  conditions:
  - type: req.nephio.org/v1alpha1.Interface.n3
    status: "False"
    reason: workload.nephio.org/v1alpha1.NFDeployment.upf
    message: update condition for initial resource
  - type: ipam.resource.nephio.org/v1alpha1.IPClaim.n3
    status: "False"
    reason: req.nephio.org/v1alpha1.Interface.n3
    message: create initial resource
  - type: ipam.resource.nephio.org/v1alpha1.IPClaim.gone
    status: "True"
    message: update done
  - type: ipam.resource.nephio.org/v1alpha1.IPClaim.owned-gone
    status: "False"
    reason: req.nephio.org/v1alpha1.Interface.n9
    message: create initial resource
`

const nephioInfra = `apiVersion: ipam.resource.nephio.org/v1alpha1
kind: NetworkInstance
metadata:
  name: vpc-e
spec:
  prefixes:
  - prefix: 10.80.0.0/16
---
apiVersion: ipam.resource.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: n3
spec:
  networkInstance:
    name: vpc-e
  prefix: 10.80.3.1/24
  labels:
    nephio.org/network-name: n3
    nephio.org/gateway: "true"
---
apiVersion: vlan.resource.nephio.org/v1alpha1
kind: VLANIndex
metadata:
  name: e
`

const nephioClaims = `apiVersion: ipam.resource.nephio.org/v1alpha1
kind: IPClaim
metadata:
  name: n3
spec:
  networkInstance:
    name: vpc-e
  selector:
    matchLabels:
      nephio.org/network-name: n3
status: {}
---
apiVersion: vlan.resource.nephio.org/v1alpha1
kind: VLANClaim
metadata:
  name: n3
spec:
  vlanIndex:
    name: e
  vlanID: 42
`

// TestProcessNephioClaims: claims get their status; the Kptfile gets
// Nephio's condition per claim with interface-fn's reason kept, the
// other functions' conditions stay, a stale condition ipam-fn wrote goes
// and a stale one another function owns stays; the infra items are not
// touched; a second run changes nothing.
func TestProcessNephioClaims(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	objs := pkgtest.Items(t, "Kptfile", nephioKptfile, "infra.yaml", nephioInfra, "claims.yaml", nephioClaims)
	infraBefore := []string{pkgtest.Find(t, objs, "NetworkInstance", "vpc-e").String(), pkgtest.Find(t, objs, "IPPrefix", "n3").String()}
	changed, results, err := engine.Process(context.Background(), srv.Client(t), engine.Options{Server: srv.Addr, Prune: true}, &objs)
	if err != nil || !changed {
		t.Fatalf("Process: %v %v %v", changed, results, err)
	}
	ip := pkgtest.Find(t, objs, "IPClaim", "n3")
	if p, g := pkgtest.Str(t, ip, "status", "prefix"), pkgtest.Str(t, ip, "status", "gateway"); p != "10.80.3.2/24" || g != "10.80.3.1" {
		t.Errorf("IPClaim status %s via %s", p, g)
	}
	if !strings.Contains(ip.String(), "status:\n  prefix: 10.80.3.2/24\n") {
		t.Errorf("status: {} was filled in flow style:\n%s", ip)
	}
	for _, o := range objs {
		if o.GetKind() == "VLANClaim" {
			if id, _, _ := o.NestedInt64("status", "vlanID"); id != 42 {
				t.Errorf("VLANClaim status.vlanID %d", id)
			}
		}
	}
	if got := []string{pkgtest.Find(t, objs, "NetworkInstance", "vpc-e").String(), pkgtest.Find(t, objs, "IPPrefix", "n3").String()}; !slices.Equal(got, infraBefore) {
		t.Errorf("the infra items changed:\n%v", got)
	}
	kf := pkgtest.Find(t, objs, "Kptfile", "upf")
	var types []string
	for _, c := range kf.GetMap("status").GetSlice("conditions") {
		types = append(types, c.GetString("type"))
	}
	want := []string{"req.nephio.org/v1alpha1.Interface.n3", "ipam.resource.nephio.org/v1alpha1.IPClaim.n3",
		"ipam.resource.nephio.org/v1alpha1.IPClaim.owned-gone", "vlan.resource.nephio.org/v1alpha1.VLANClaim.n3"}
	if !slices.Equal(types, want) {
		t.Errorf("Kptfile conditions %v, want %v", types, want)
	}
	for typ, want := range map[string]engine.Condition{
		"ipam.resource.nephio.org/v1alpha1.IPClaim.n3":   {Status: "True", Reason: "req.nephio.org/v1alpha1.Interface.n3", Message: "update done"},
		"vlan.resource.nephio.org/v1alpha1.VLANClaim.n3": {Status: "True", Message: "update done"},
		"req.nephio.org/v1alpha1.Interface.n3":           {Status: "False", Reason: "workload.nephio.org/v1alpha1.NFDeployment.upf", Message: "update condition for initial resource"},
	} {
		want.Type = typ
		if got, _ := engine.KptfileCondition(kf, typ); got != want {
			t.Errorf("condition %s: %+v, want %+v", typ, got, want)
		}
	}
	before := pkgtest.Snapshot(objs)
	changed, _, err = engine.Process(context.Background(), srv.Client(t), engine.Options{Server: srv.Addr, Prune: true}, &objs)
	if err != nil || changed || !slices.Equal(pkgtest.Snapshot(objs), before) {
		t.Fatalf("a second run changed the package: %v %v", changed, err)
	}
}

// TestProcessNephioErrors: a claim the translation refuses is an error
// result naming its file, resource and field, and nothing changes.
func TestProcessNephioErrors(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	for _, tc := range []struct{ name, doc, field, msg string }{
		{"aggregate claim", "apiVersion: ipam.resource.nephio.org/v1alpha1\nkind: IPClaim\nmetadata:\n  name: agg\nspec:\n  kind: aggregate\n  networkInstance:\n    name: vpc-e\n",
			"spec.kind", "aggregate is not claimed here"},
		{"no network instance", "apiVersion: ipam.resource.nephio.org/v1alpha1\nkind: IPClaim\nmetadata:\n  name: x\nspec:\n  kind: network\n",
			"spec.networkInstance.name", "a network instance is required"},
		{"VLAN range", "apiVersion: vlan.resource.nephio.org/v1alpha1\nkind: VLANClaim\nmetadata:\n  name: v\nspec:\n  vlanIndex:\n    name: e\n  range: 200-100\n",
			"spec.range", "first ID 200 is above last ID 100"},
		{"VLAN ID", "apiVersion: vlan.resource.nephio.org/v1alpha1\nkind: VLANClaim\nmetadata:\n  name: v\nspec:\n  vlanIndex:\n    name: e\n  vlanID: 5000\n",
			"spec.vlanID", "5000 is outside 1-4094"},
		{"wrong type", "apiVersion: ipam.resource.nephio.org/v1alpha1\nkind: IPClaim\nmetadata:\n  name: x\nspec:\n  index: seven\n  networkInstance:\n    name: vpc-e\n",
			"spec.index", "must be an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := pkgtest.Items(t, "Kptfile", nephioKptfile, "claims.yaml", tc.doc)
			before := pkgtest.Snapshot(objs)
			changed, results, err := engine.Process(context.Background(), srv.Client(t), engine.Options{Server: srv.Addr, Prune: true}, &objs)
			if err == nil || changed || !slices.Equal(pkgtest.Snapshot(objs), before) {
				t.Fatalf("Process: changed %v, err %v", changed, err)
			}
			var r *fn.Result
			for _, x := range results {
				if x.Severity == fn.Error {
					r = x
				}
			}
			if r == nil || r.Field == nil || r.Field.Path != tc.field || !strings.Contains(r.Message, tc.msg) || r.File == nil || r.File.Path != "claims.yaml" {
				t.Fatalf("results %v", results)
			}
		})
	}
}

func TestNephioFailedConditions(t *testing.T) {
	objs := pkgtest.Items(t, "Kptfile", nephioKptfile)
	kf := pkgtest.Find(t, objs, "Kptfile", "upf")
	ref := func(apiVersion, kind, name string) *fn.ResourceRef {
		return &fn.ResourceRef{APIVersion: apiVersion, Kind: kind, Name: name}
	}
	got := engine.NephioFailedConditions(kf, fn.Results{
		{Severity: fn.Error, Message: "matches no network prefix", Field: &fn.Field{Path: "spec.selector"}, ResourceRef: ref("ipam.resource.nephio.org/v1alpha1", "IPClaim", "n3")},
		{Severity: fn.Error, Message: "a second error", ResourceRef: ref("ipam.resource.nephio.org/v1alpha1", "IPClaim", "n3")},
		{Severity: fn.Error, Message: "taken", Field: &fn.Field{Path: "spec.vlanID"}, ResourceRef: ref("vlan.resource.nephio.org/v1alpha1", "VLANClaim", "v")},
		{Severity: fn.Error, Message: "not a Nephio claim", ResourceRef: ref("ipam.nephio.org/v1alpha1", "IPAllocation", "a")},
		{Severity: fn.Warning, Message: "a warning", ResourceRef: ref("ipam.resource.nephio.org/v1alpha1", "IPClaim", "w")},
	})
	want := []engine.Condition{
		{Type: "ipam.resource.nephio.org/v1alpha1.IPClaim.n3", Status: "False", Reason: "req.nephio.org/v1alpha1.Interface.n3",
			Message: "spec.selector: matches no network prefix; a second error"},
		{Type: "vlan.resource.nephio.org/v1alpha1.VLANClaim.v", Status: "False", Message: "spec.vlanID: taken"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("NephioFailedConditions = %+v\nwant %+v", got, want)
	}
}
