package injector

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"

	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
	"github.com/nephio-project/ipam/functions/engine"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// The Nephio-shaped package of TestPorchNephioDraft: the conditions
// interface-fn leaves in the Kptfile, the VRF, network and VLAN index in
// Nephio's resource API, IPClaims for n3 and n6 with interface-fn's owner
// annotations, a VLANClaim, and an ipam.nephio.org IPAllocation from the
// same VRF.
const (
	nephioConditions = `status:
  conditions:
  - message: update condition for initial resource
    reason: workload.nephio.org/v1alpha1.NFDeployment.upf-edge
    status: "False"
    type: req.nephio.org/v1alpha1.Interface.n3
  - message: create initial resource
    reason: req.nephio.org/v1alpha1.Interface.n3
    status: "False"
    type: ipam.resource.nephio.org/v1alpha1.IPClaim.upf-n3
  - message: create initial resource
    reason: req.nephio.org/v1alpha1.Interface.n6
    status: "False"
    type: ipam.resource.nephio.org/v1alpha1.IPClaim.upf-n6
  - message: create initial resource
    reason: req.nephio.org/v1alpha1.Interface.n3
    status: "False"
    type: vlan.resource.nephio.org/v1alpha1.VLANClaim.upf-n3
`
	nephioInfra = `apiVersion: ipam.resource.nephio.org/v1alpha1
kind: NetworkInstance
metadata:
  name: vpc-edge
spec:
  prefixes:
  - prefix: 10.70.0.0/16
---
apiVersion: ipam.resource.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: edge-n3
spec:
  kind: network
  networkInstance:
    name: vpc-edge
  prefix: 10.70.3.1/24
  labels:
    nephio.org/cluster-name: edge
    nephio.org/network-name: n3
    nephio.org/gateway: "true"
---
apiVersion: ipam.resource.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: edge-n6
spec:
  kind: network
  networkInstance:
    name: vpc-edge
  prefix: 10.70.6.1/24
  labels:
    nephio.org/cluster-name: edge
    nephio.org/network-name: n6
    nephio.org/gateway: "true"
---
apiVersion: vlan.resource.nephio.org/v1alpha1
kind: VLANIndex
metadata:
  name: edge
`
	nephioN3 = `apiVersion: ipam.resource.nephio.org/v1alpha1
kind: IPClaim
metadata:
  name: upf-n3
  annotations:
    specializer.nephio.org/owner: req.nephio.org/v1alpha1.Interface.n3
spec:
  kind: network
  networkInstance:
    name: vpc-edge
  selector:
    matchLabels:
      nephio.org/cluster-name: edge
      nephio.org/network-name: n3
status: {}
`
	nephioN6 = `---
apiVersion: ipam.resource.nephio.org/v1alpha1
kind: IPClaim
metadata:
  name: upf-n6
  annotations:
    specializer.nephio.org/owner: req.nephio.org/v1alpha1.Interface.n6
spec:
  kind: network
  networkInstance:
    name: vpc-edge
  selector:
    matchLabels:
      nephio.org/cluster-name: edge
      nephio.org/network-name: n6
status: {}
`
	nephioVLAN = `apiVersion: vlan.resource.nephio.org/v1alpha1
kind: VLANClaim
metadata:
  name: upf-n3
  annotations:
    specializer.nephio.org/owner: req.nephio.org/v1alpha1.Interface.n3
spec:
  vlanIndex:
    name: edge
status: {}
`
	nephioAlloc = `apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata:
  name: probe
spec:
  selector:
    matchLabels:
      nephio.org/network-instance: vpc-edge
      nephio.org/network-name: n6
`
)

// nephioStatus is what the injector wrote into a Draft of the Nephio
// package: IPClaim name -> status.prefix (and gateway), the VLANClaim's
// ID, and the Kptfile's conditions by type.
type nephioStatus struct {
	claims     map[string]string
	vlan       int64
	conditions map[string]engine.Condition
}

func (x *e2e) nephioStatus(name string) nephioStatus {
	x.t.Helper()
	res := x.resources(name)
	p, err := parseFiles(res)
	must(x.t, err)
	st := nephioStatus{claims: map[string]string{}, conditions: map[string]engine.Condition{}}
	for _, it := range p.items {
		switch {
		case it.IsGVK(nipamv1alpha1.Group, nipamv1alpha1.Version, nipamv1alpha1.KindIPClaim):
			pfx, _, _ := it.NestedString("status", "prefix")
			gw, _, _ := it.NestedString("status", "gateway")
			st.claims[it.GetName()] = pfx + " via " + gw
		case it.IsGVK(vlanv1alpha1.Group, vlanv1alpha1.Version, vlanv1alpha1.KindVLANClaim):
			st.vlan, _, _ = it.NestedInt64("status", "vlanID")
		case it.IsGVK("kpt.dev", "v1", "Kptfile"):
			list, _, _ := it.NestedSlice("status", "conditions")
			for _, c := range list {
				t := c.GetString("type")
				st.conditions[t] = engine.Condition{Type: t, Status: c.GetString("status"), Reason: c.GetString("reason"), Message: c.GetString("message")}
			}
		}
	}
	return st
}

// TestPorchNephioDraft: a Draft of a Nephio-shaped workload package in a
// real Porch gets its IPClaims' and VLANClaim's status and Nephio's
// Kptfile conditions from the injector, keeping interface-fn's; removing
// a claim from the Draft releases it in ipam-server.
func TestPorchNephioDraft(t *testing.T) {
	env := startPorch(t)
	srv := servertest.Start(t, server.Config{}, false)
	x := &e2e{t: t, env: env, ipam: srv.Client(t), ctx: context.Background()}
	logf, err := os.Create(filepath.Join(env.logs, "injector-nephio.log"))
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{RESTConfig: env.cfg, Server: srv.Addr, Namespace: testNamespace,
			GCInterval: time.Second, ResyncInterval: time.Hour, SkipNameValidation: true,
			Logger: logr.FromSlogHandler(slog.NewTextHandler(logf, nil))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("--- tail of injector-nephio.log ---\n%s", b)
		}
	})

	v1 := x.createDraft("upf-edge", "v1", porchv1alpha1.Task{Type: porchv1alpha1.TaskTypeInit,
		Init: &porchv1alpha1.PackageInitTaskSpec{Description: "a Nephio workload package"}})
	x.edit(v1, func(r map[string]string) {
		if strings.Contains(r["Kptfile"], "\nstatus:") {
			t.Fatalf("Porch's Kptfile has a status already:\n%s", r["Kptfile"])
		}
		r["Kptfile"] = strings.TrimRight(r["Kptfile"], "\n") + "\n" + nephioConditions
		r["infra.yaml"] = nephioInfra
		r["ipclaims.yaml"] = nephioN3 + nephioN6
		r["vlanclaim.yaml"] = nephioVLAN
		r["ipallocation.yaml"] = nephioAlloc
	})
	want := map[string]string{"upf-n3": "10.70.3.2/24 via 10.70.3.1", "upf-n6": "10.70.6.2/24 via 10.70.6.1"}
	var st nephioStatus
	eventually(t, 60*time.Second, v1+" served", func() error {
		st = x.nephioStatus(v1)
		if fmt.Sprint(st.claims) != fmt.Sprint(want) || st.vlan != 1 {
			return fmt.Errorf("claims %v, VLAN ID %d", st.claims, st.vlan)
		}
		for _, c := range []string{"ipam.resource.nephio.org/v1alpha1.IPClaim.upf-n3", "ipam.resource.nephio.org/v1alpha1.IPClaim.upf-n6",
			"vlan.resource.nephio.org/v1alpha1.VLANClaim.upf-n3"} {
			if got := st.conditions[c]; got.Status != "True" || got.Message != engine.MessageNephioDone || !strings.HasPrefix(got.Reason, "req.nephio.org/") {
				return fmt.Errorf("condition %s: %+v", c, got)
			}
		}
		return nil
	})
	if c := st.conditions["req.nephio.org/v1alpha1.Interface.n3"]; c.Status != "False" || c.Message != "update condition for initial resource" {
		t.Errorf("interface-fn's own condition was changed: %+v", c)
	}
	if c := st.conditions[ConditionType]; c.Status != "True" || c.Message != "1 IPAllocation(s), 0 IPPrefix(es), 2 IPClaim(s) and 1 VLANClaim(s) allocated by ipam-server" {
		t.Errorf("the injector's condition: %+v", c)
	}
	t.Logf("Kptfile of %s as the injector left it:\n%s", v1, x.resources(v1)["Kptfile"])

	// Removing n6 from the Draft releases its address.
	owner := Owner(testRepo, "upf-edge")
	x.edit(v1, func(r map[string]string) {
		cur := r["ipclaims.yaml"]
		r["ipclaims.yaml"] = cur[:strings.Index(cur, "---\n")]
	})
	eventually(t, 60*time.Second, "upf-n6 released", func() error {
		held := x.serverAllocations(owner)
		if _, ok := held[engine.NephioIPClaimName("upf-n6")]; ok || held[engine.NephioIPClaimName("upf-n3")] != "10.70.3.2/24" {
			return fmt.Errorf("server holds %v", held)
		}
		return nil
	})

	// A claim that cannot be served gets its condition False with the
	// error, as Nephio's specializers write it; the Draft keeps it.
	taken := "---\napiVersion: vlan.resource.nephio.org/v1alpha1\nkind: VLANClaim\nmetadata:\n  name: upf-taken\nspec:\n  vlanIndex:\n    name: edge\n  vlanID: 1\n"
	x.edit(v1, func(r map[string]string) { r["vlanclaim.yaml"] += taken })
	eventually(t, 60*time.Second, "upf-taken refused", func() error {
		c := x.nephioStatus(v1).conditions["vlan.resource.nephio.org/v1alpha1.VLANClaim.upf-taken"]
		if c.Status != "False" || c.Message != "spec.vlanID: VLAN ID 1 is already held by VLANClaim upf-n3 of owner \""+owner+"\" (vlanclaim.yaml)" {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	if c := x.nephioStatus(v1).conditions[ConditionType]; c.Status != "False" {
		t.Errorf("the injector's condition: %+v", c)
	}
	// Removed again, the claim's condition goes with it.
	x.edit(v1, func(r map[string]string) { r["vlanclaim.yaml"] = strings.Replace(r["vlanclaim.yaml"], taken, "", 1) })
	eventually(t, 60*time.Second, "upf-taken's condition removed", func() error {
		st := x.nephioStatus(v1)
		if _, ok := st.conditions["vlan.resource.nephio.org/v1alpha1.VLANClaim.upf-taken"]; ok || st.conditions[ConditionType].Status != "True" {
			return fmt.Errorf("conditions %+v", st.conditions)
		}
		return nil
	})
}
