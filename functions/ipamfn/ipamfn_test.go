package ipamfn_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kptdev/krm-functions-sdk/go/fn"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/functions/ipamfn"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// seed is the README's seed example as one package file, full of comments,
// with the gateway prefix listed before its aggregate.
const seed = `# The seed example of the README.
apiVersion: ipam.nephio.org/v1alpha1
kind: NetworkInstance
metadata:
  name: vpc-1 # the VRF
spec: {}
---
# A network prefix with a gateway, before its aggregate.
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: net1-prefix1
  labels:
    nephio.org/gateway: "true" # .1 is the gateway
spec:
  prefix: 10.0.1.1/24
  network: net1
  networkInstance: vpc-1
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: aggregate0
spec:
  kind: aggregate
  prefix: 10.0.0.0/8 # everything
  networkInstance: vpc-1
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: net1-prefix10
  labels:
    nephio.org/interface: n3
spec:
  prefix: 10.0.1.10/24
  network: net1
  networkInstance: vpc-1
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata:
  name: alloc1
spec:
  # next free address of net1
  kind: network
  selector:
    matchLabels:
      nephio.org/network-instance: vpc-1
      nephio.org/network-name: net1
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata:
  name: alloc2-n3
spec:
  kind: network
  selector:
    matchLabels:
      nephio.org/network-instance: vpc-1
      nephio.org/network-name: net1
      nephio.org/interface: n3 # the static address
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata:
  name: alloc-pool1
spec:
  kind: pool
  prefixLength: 16
  selector:
    matchLabels:
      nephio.org/network-instance: vpc-1
---
# Not an IPAM resource: left alone.
apiVersion: v1
kind: ConfigMap
metadata:
  name: other # keep me
data:
  b: "2"
  a: "1"
`

const kptfile = `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: seed-pkg
pipeline:
  mutators:
    - exec: bin/ipam-fn
      configPath: ipam-fn-config.yaml
`

// items parses files (path → content) into items annotated as kpt does.
func items(t *testing.T, files ...string) fn.KubeObjects {
	t.Helper()
	var out fn.KubeObjects
	for i := 0; i < len(files); i += 2 {
		objs, err := fn.ParseKubeObjects([]byte(files[i+1]))
		if err != nil {
			t.Fatal(err)
		}
		for j, o := range objs {
			if err := o.SetAnnotation("internal.config.kubernetes.io/path", files[i]); err != nil {
				t.Fatal(err)
			}
			if err := o.SetAnnotation("internal.config.kubernetes.io/index", itoa(j)); err != nil {
				t.Fatal(err)
			}
			out = append(out, o)
		}
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

func find(t *testing.T, objs fn.KubeObjects, kind, name string) *fn.KubeObject {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("%s %s not found", kind, name)
	return nil
}

func str(t *testing.T, o *fn.KubeObject, fields ...string) string {
	t.Helper()
	s, _, err := o.NestedString(fields...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func snapshot(objs fn.KubeObjects) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.String()
	}
	return out
}

func fixedClock() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

func TestProcessSeed(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	client := srv.Client(t)
	objs := items(t, "Kptfile", kptfile, "resources.yaml", seed)
	before := snapshot(objs)

	cfg := ipamfn.Config{Server: srv.Addr, Prune: true, Now: fixedClock}
	changed, results, err := ipamfn.Process(context.Background(), client, cfg, objs)
	if err != nil || !onlySummary(results, "synced 7 resources with ipam-server: 6 statuses written, 0 up to date, 0 released by prune") || !changed {
		t.Fatalf("Process: changed %v, results %v, err %v", changed, results, err)
	}
	for _, tc := range []struct{ kind, name, prefix, gateway string }{
		{"IPAllocation", "alloc1", "10.0.1.2/24", "10.0.1.1"},
		{"IPAllocation", "alloc2-n3", "10.0.1.10/24", "10.0.1.1"},
		{"IPAllocation", "alloc-pool1", "10.1.0.0/16", ""},
		{"IPPrefix", "aggregate0", "10.0.0.0/8", ""},
	} {
		o := find(t, objs, tc.kind, tc.name)
		if got := str(t, o, "status", "prefix"); got != tc.prefix {
			t.Errorf("%s %s: status.prefix %q, want %q", tc.kind, tc.name, got, tc.prefix)
		}
		if got := str(t, o, "status", "gateway"); got != tc.gateway {
			t.Errorf("%s %s: status.gateway %q, want %q", tc.kind, tc.name, got, tc.gateway)
		}
		conds := o.GetMap("status").GetSlice("conditions")
		if len(conds) != 2 {
			t.Fatalf("%s %s: %d conditions, want 2:\n%s", tc.kind, tc.name, len(conds), o)
		}
		for i, want := range [][3]string{{"Synced", "True", "ReconcileSuccess"}, {"Ready", "True", "Ready"}} {
			c := conds[i]
			if c.GetString("type") != want[0] || c.GetString("status") != want[1] || c.GetString("reason") != want[2] ||
				c.GetString("lastTransitionTime") != "2026-01-02T03:04:05Z" {
				t.Errorf("%s %s: condition %d is\n%s", tc.kind, tc.name, i, c)
			}
		}
	}
	// Everything that is not an IPAllocation or IPPrefix is untouched,
	// byte for byte, and comments of the changed objects survive.
	for i, o := range objs {
		if k := o.GetKind(); k != "IPAllocation" && k != "IPPrefix" && o.String() != before[i] {
			t.Errorf("%s %s changed:\n%s\nwas\n%s", k, o.GetName(), o, before[i])
		}
	}
	for _, c := range []string{"# next free address of net1", "# the static address", "# .1 is the gateway", "# everything"} {
		if !strings.Contains(strings.Join(snapshot(objs), "\n"), c) {
			t.Errorf("comment %q lost", c)
		}
	}

	// Processing the result again changes nothing, not even timestamps.
	after := snapshot(objs)
	cfg.Now = func() time.Time { return fixedClock().Add(time.Hour) }
	changed, results, err = ipamfn.Process(context.Background(), client, cfg, objs)
	if err != nil || !onlySummary(results, "0 statuses written, 6 up to date") || changed {
		t.Fatalf("second Process: changed %v, results %v, err %v", changed, results, err)
	}
	if got := snapshot(objs); strings.Join(got, "\n") != strings.Join(after, "\n") {
		t.Errorf("second Process changed the package:\n%s", strings.Join(got, "\n"))
	}
}

// TestProcessListsReleases: a run whose prune releases an object says so
// in a result naming it, so the review of a render sees every release.
func TestProcessListsReleases(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	cfg := ipamfn.Config{Server: srv.Addr, Prune: true}
	if _, _, err := ipamfn.Process(context.Background(), srv.Client(t), cfg, items(t, "Kptfile", kptfile, "resources.yaml", seed)); err != nil {
		t.Fatal(err)
	}
	pool := "---\napiVersion: ipam.nephio.org/v1alpha1\nkind: IPAllocation\nmetadata:\n  name: alloc-pool1\n"
	i := strings.Index(seed, pool)
	j := strings.Index(seed[i+len(pool):], "---")
	without := seed[:i] + seed[i+len(pool)+j:]
	_, results, err := ipamfn.Process(context.Background(), srv.Client(t), cfg, items(t, "Kptfile", kptfile, "resources.yaml", without))
	if err != nil || len(results) != 2 || !strings.Contains(results[0].Message, "1 released by prune") ||
		results[1].Message != "ipam-fn: released IPAllocation alloc-pool1 of owner seed-pkg: the package no longer declares it" ||
		results[1].ResourceRef == nil || results[1].ResourceRef.Name != "alloc-pool1" {
		t.Fatalf("results %v, err %v", results, err)
	}
}

// onlySummary reports whether results is the one info line of a
// successful run, containing want.
func onlySummary(results fn.Results, want string) bool {
	return len(results) == 1 && results[0].Severity == fn.Info && strings.Contains(results[0].Message, want)
}

func TestProcessKeepsConditionTimeWhenStatusIsUnchanged(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	client := srv.Client(t)
	objs := items(t, "Kptfile", kptfile, "resources.yaml", seed)
	cfg := ipamfn.Config{Server: srv.Addr, Prune: true, Now: fixedClock}
	if _, _, err := ipamfn.Process(context.Background(), client, cfg, objs); err != nil {
		t.Fatal(err)
	}
	// A stale prefix and an extra condition: the prefix is corrected, the
	// conditions keep their time, the foreign condition stays.
	a := find(t, objs, "IPAllocation", "alloc1")
	if err := a.SetNestedString("10.0.1.99/24", "status", "prefix"); err != nil {
		t.Fatal(err)
	}
	conds := a.GetMap("status").GetSlice("conditions")
	extra := fn.NewEmptyKubeObject()
	_ = extra.SetNestedString("Custom", "type")
	_ = extra.SetNestedString("False", "status")
	if err := a.UpsertMap("status").SetSlice(append(conds, &extra.SubObject), "conditions"); err != nil {
		t.Fatal(err)
	}
	cfg.Now = func() time.Time { return fixedClock().Add(time.Hour) }
	changed, _, err := ipamfn.Process(context.Background(), client, cfg, objs)
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v", changed, err)
	}
	a = find(t, objs, "IPAllocation", "alloc1")
	if got := str(t, a, "status", "prefix"); got != "10.0.1.2/24" {
		t.Errorf("status.prefix %q", got)
	}
	conds = a.GetMap("status").GetSlice("conditions")
	if len(conds) != 3 || conds[0].GetString("lastTransitionTime") != "2026-01-02T03:04:05Z" || conds[2].GetString("type") != "Custom" {
		t.Errorf("conditions:\n%s", a.GetMap("status"))
	}
}

func TestProcessWithoutIPAMResourcesMakesNoCall(t *testing.T) {
	objs := items(t, "Kptfile", kptfile, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	changed, results, err := ipamfn.Process(context.Background(), nil, ipamfn.Config{}, objs)
	if changed || len(results) > 0 || err != nil {
		t.Fatalf("changed %v, results %v, err %v", changed, results, err)
	}
	// The function needs no server either.
	rl := &fn.ResourceList{Items: objs, FunctionConfig: fn.NewEmptyKubeObject()}
	ok, err := ipamfn.Function{Getenv: func(string) string { return "" }}.Process(rl)
	if !ok || err != nil || len(rl.Results) > 0 {
		t.Fatalf("Function: ok %v, err %v, results %v", ok, err, rl.Results)
	}
}

func TestFunctionWithoutServerSaysWhatToSet(t *testing.T) {
	objs := items(t, "Kptfile", kptfile, "resources.yaml", seed)
	before := snapshot(objs)
	rl := &fn.ResourceList{Items: objs, FunctionConfig: fn.NewEmptyKubeObject()}
	ok, err := ipamfn.Function{Getenv: func(string) string { return "" }}.Process(rl)
	if ok || !errors.Is(err, ipamfn.ErrFailed) || len(rl.Results) != 1 {
		t.Fatalf("ok %v, err %v, results %v", ok, err, rl.Results)
	}
	if msg := rl.Results[0].Message; !strings.Contains(msg, "data.server") || !strings.Contains(msg, "IPAM_SERVER") {
		t.Errorf("message %q does not say what to set", msg)
	}
	if strings.Join(snapshot(objs), "\n") != strings.Join(before, "\n") {
		t.Error("items changed")
	}
}

func TestFunctionUnreachableServer(t *testing.T) {
	// A port nobody listens on: bind one, close it.
	srv := servertest.Start(t, server.Config{}, false)
	addr := srv.Addr
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	objs := items(t, "Kptfile", kptfile, "resources.yaml", seed)
	rl := &fn.ResourceList{Items: objs, FunctionConfig: configMap(t, map[string]string{"server": addr, "timeout": "3s"})}
	start := time.Now()
	ok, err := ipamfn.Function{}.Process(rl)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s with a 3s timeout", d)
	}
	if ok || err == nil || len(rl.Results) != 1 {
		t.Fatalf("ok %v, err %v, results %v", ok, err, rl.Results)
	}
	want := "ipam-fn: cannot reach ipam-server at " + addr + " (set data.server in the functionConfig or IPAM_SERVER): "
	if msg := rl.Results[0].Message; !strings.HasPrefix(msg, want) || rl.Results[0].Severity != fn.Error {
		t.Errorf("result %q, want prefix %q", msg, want)
	}
	// A refused loopback address is what a function container without
	// network sees: the result says what kpt needs.
	if msg := rl.Results[0].Message; !strings.Contains(msg, "connection refused") || !strings.Contains(msg, "--allow-network") {
		t.Errorf("result %q: want the refusal and the --allow-network hint", msg)
	}
}

func TestFunctionServerFromEnvironment(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	objs := items(t, "Kptfile", kptfile, "resources.yaml", seed)
	rl := &fn.ResourceList{Items: objs, FunctionConfig: configMap(t, map[string]string{"owner": "env-owner"})}
	getenv := func(k string) string {
		if k == "IPAM_SERVER" {
			return srv.Addr
		}
		return ""
	}
	if ok, err := (ipamfn.Function{Getenv: getenv}).Process(rl); !ok || err != nil {
		t.Fatalf("ok %v, err %v, results %v", ok, err, rl.Results)
	}
	// The owner came from data.owner: the server knows alloc1 under it.
	resp, err := srv.Client(t).Get(context.Background(), &ipamv1.GetRequest{
		Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: &ipamv1.Key{Owner: "env-owner", Name: "alloc1"}})
	if err != nil || resp.GetObject().GetAllocation().GetResult().GetPrefix() != "10.0.1.2/24" {
		t.Fatalf("Get alloc1 of env-owner: %v %v", resp, err)
	}
}

func TestFunctionTLS(t *testing.T) {
	certs := servertest.WriteCerts(t, t.TempDir())
	srv := servertest.Start(t, server.Config{TLSCert: certs.ServerCert, TLSKey: certs.ServerKey, ClientCA: certs.CA}, false)
	cfg := map[string]string{"server": srv.Addr, "tlsCA": certs.CA, "tlsCert": certs.ClientCert, "tlsKey": certs.ClientKey}
	rl := &fn.ResourceList{Items: items(t, "Kptfile", kptfile, "resources.yaml", seed), FunctionConfig: configMap(t, cfg)}
	if ok, err := (ipamfn.Function{}).Process(rl); !ok || err != nil {
		t.Fatalf("mTLS: ok %v, err %v, results %v", ok, err, rl.Results)
	}
	// Without the client certificate the server refuses: an error result.
	delete(cfg, "tlsCert")
	delete(cfg, "tlsKey")
	rl = &fn.ResourceList{Items: items(t, "Kptfile", kptfile, "resources.yaml", seed), FunctionConfig: configMap(t, cfg)}
	if ok, err := (ipamfn.Function{}).Process(rl); ok || err == nil || len(rl.Results) != 1 {
		t.Fatalf("no client cert: ok %v, err %v, results %v", ok, err, rl.Results)
	}
}

// TestFunctionOwnerNotGranted: a package that names another package as
// its owner (data.owner) is refused when the function's identity may not
// change that owner, and the other package's allocations stay.
func TestFunctionOwnerNotGranted(t *testing.T) {
	dir := t.TempDir()
	certs := servertest.WriteCerts(t, dir)
	policy := dir + "/policy.yaml"
	if err := os.WriteFile(policy, []byte(`apiVersion: ipam.nephio.org/v1alpha1
kind: AuthorizationPolicy
rules:
- identities: [cn:ipamctl]
  owners: [seed-pkg]
  networkInstances: ["*"]
  write: true
  read: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, server.Config{TLSCert: certs.ServerCert, TLSKey: certs.ServerKey, ClientCA: certs.CA, AuthzPolicy: policy}, false)
	cfg := map[string]string{"server": srv.Addr, "tlsCA": certs.CA, "tlsCert": certs.ClientCert, "tlsKey": certs.ClientKey}
	rl := &fn.ResourceList{Items: items(t, "Kptfile", kptfile, "resources.yaml", seed), FunctionConfig: configMap(t, cfg)}
	if ok, err := (ipamfn.Function{}).Process(rl); !ok || err != nil {
		t.Fatalf("own package: ok %v, err %v, results %v", ok, err, rl.Results)
	}
	// The same identity renders a copy claiming owner other-package: refused,
	// and seed-pkg keeps its allocations.
	cfg["owner"] = "other-package"
	objs := items(t, "Kptfile", kptfile, "resources.yaml", seed)
	before := snapshot(objs)
	rl = &fn.ResourceList{Items: objs, FunctionConfig: configMap(t, cfg)}
	ok, err := (ipamfn.Function{}).Process(rl)
	if ok || err == nil || len(rl.Results) != 1 || !strings.Contains(rl.Results[0].Message, "PermissionDenied") {
		t.Fatalf("other owner: ok %v, err %v, results %v", ok, err, rl.Results)
	}
	if !strings.Contains(rl.Results[0].Message, `"cn:ipamctl"`) || !strings.Contains(rl.Results[0].Message, `"other-package"`) {
		t.Errorf("the result does not name the identity and owner: %s", rl.Results[0].Message)
	}
	if strings.Join(snapshot(objs), "\n") != strings.Join(before, "\n") {
		t.Error("items changed although the Sync was refused")
	}
	c := srv.Dial(t, grpc.WithTransportCredentials(credentials.NewTLS(certs.ClientTLS(t, true))))
	resp, err := ipamv1.NewIPAMClient(c).List(context.Background(), &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Owner: "seed-pkg"})
	if err != nil || len(resp.GetObjects()) != 3 {
		t.Fatalf("seed-pkg's allocations after the refused render: %v, %v", resp, err)
	}
}

func TestProcessItemErrorsNameFileResourceAndField(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	bad := strings.Replace(seed, "prefix: 10.0.1.10/24", "prefix: 10.0.1.10/33", 1)
	objs := items(t, "Kptfile", kptfile, "resources.yaml", bad)
	before := snapshot(objs)
	changed, results, err := ipamfn.Process(context.Background(), srv.Client(t),
		ipamfn.Config{Server: srv.Addr, Prune: true}, objs)
	if changed || !errors.Is(err, ipamfn.ErrFailed) || len(results) == 0 {
		t.Fatalf("changed %v, err %v, results %v", changed, err, results)
	}
	r := results[0]
	if r.Severity != fn.Error || r.File == nil || r.File.Path != "resources.yaml" || r.File.Index != 3 ||
		r.ResourceRef == nil || *r.ResourceRef != (fn.ResourceRef{APIVersion: "ipam.nephio.org/v1alpha1", Kind: "IPPrefix", Name: "net1-prefix10"}) ||
		r.Field == nil || r.Field.Path != "spec.prefix" || r.Field.CurrentValue != "10.0.1.10/33" || r.Tags["code"] != "InvalidArgument" {
		t.Errorf("result: %+v %+v %+v %+v", r, r.File, r.ResourceRef, r.Field)
	}
	if !strings.HasPrefix(r.Message, `"10.0.1.10/33" is not a prefix`) || !strings.HasSuffix(r.Message, " (resources.yaml)") {
		t.Errorf("message %q", r.Message)
	}
	if strings.Join(snapshot(objs), "\n") != strings.Join(before, "\n") {
		t.Error("items changed although the Sync failed")
	}
}

func TestProcessLocalFieldErrors(t *testing.T) {
	bad := strings.Replace(seed, "prefixLength: 16", "prefixLength: sixteen", 1)
	objs := items(t, "Kptfile", kptfile, "resources.yaml", bad)
	// No call is made: a nil client would fail otherwise.
	_, results, err := ipamfn.Process(context.Background(), nil, ipamfn.Config{Prune: true}, objs)
	if !errors.Is(err, ipamfn.ErrFailed) || len(results) != 1 || results[0].Field == nil || results[0].Field.Path != "spec.prefixLength" ||
		results[0].ResourceRef.Name != "alloc-pool1" {
		t.Fatalf("err %v, results %v", err, results)
	}
}

// TestProcessRefusesUnknownGroupObjects: an object of the ipam.nephio.org
// group in a version or of a kind the function does not know is an error
// naming the field, with or without known objects beside it, and no call
// is made (a nil client would fail otherwise).
func TestProcessRefusesUnknownGroupObjects(t *testing.T) {
	for _, tc := range []struct {
		name, apiVersion, kind, field, msg string
		withSeed                           bool
	}{
		{"unknown version alone", "ipam.nephio.org/v1alpha9", "IPAllocation", "apiVersion", `"ipam.nephio.org/v1alpha9" is not served by ipam-fn`, false},
		{"unknown version beside the seed", "ipam.nephio.org/v1", "IPPrefix", "apiVersion", `"ipam.nephio.org/v1" is not served by ipam-fn`, true},
		{"unknown kind", "ipam.nephio.org/v1alpha1", "IPAlocation", "kind", `"IPAlocation" is not a kind of ipam.nephio.org/v1alpha1`, true},
		{"long version is cut", "ipam.nephio.org/" + strings.Repeat("v", 5000), "IPAllocation", "apiVersion", `(5016 bytes)`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "apiVersion: " + tc.apiVersion + "\nkind: " + tc.kind + "\nmetadata:\n  name: x\nspec:\n  kind: network\n"
			if tc.withSeed {
				doc = seed + "\n---\n" + doc
			}
			objs := items(t, "Kptfile", kptfile, "resources.yaml", doc)
			if !ipamfn.HasIPAMObjects(objs) {
				t.Fatal("HasIPAMObjects is false: the run would pass the package untouched")
			}
			before := snapshot(objs)
			changed, results, err := ipamfn.Process(context.Background(), nil, ipamfn.Config{Prune: true}, objs)
			if changed || !errors.Is(err, ipamfn.ErrFailed) || len(results) != 1 {
				t.Fatalf("changed %v, err %v, results %v", changed, err, results)
			}
			r := results[0]
			if r.Field == nil || r.Field.Path != tc.field || r.ResourceRef == nil || r.ResourceRef.Kind != tc.kind || r.ResourceRef.Name != "x" ||
				r.File == nil || r.File.Path != "resources.yaml" || !strings.Contains(r.Message, tc.msg) || len(r.Message) > 300 {
				t.Errorf("result %+v field %+v ref %+v file %+v", r, r.Field, r.ResourceRef, r.File)
			}
			if strings.Join(snapshot(objs), "\n") != strings.Join(before, "\n") {
				t.Error("items changed")
			}
		})
	}
}

func TestProcessOwnerFromRootKptfile(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	sub := strings.Replace(kptfile, "seed-pkg", "subpackage", 1)
	objs := items(t, "sub/Kptfile", sub, "Kptfile", kptfile, "resources.yaml", seed)
	if _, _, err := ipamfn.Process(context.Background(), srv.Client(t), ipamfn.Config{Server: srv.Addr, Prune: true}, objs); err != nil {
		t.Fatal(err)
	}
	_, err := srv.Client(t).Get(context.Background(), &ipamv1.GetRequest{
		Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: &ipamv1.Key{Owner: "seed-pkg", Name: "alloc1"}})
	if err != nil {
		t.Fatalf("alloc1 is not owned by the root package: %v", err)
	}
}

func configMap(t *testing.T, data map[string]string) *fn.KubeObject {
	t.Helper()
	o := fn.NewEmptyKubeObject()
	_ = o.SetAPIVersion("v1")
	_ = o.SetKind("ConfigMap")
	_ = o.SetName("ipam-fn-config")
	if len(data) > 0 {
		if err := o.SetNestedStringMap(data, "data"); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func TestParseConfig(t *testing.T) {
	env := func(k string) string {
		if k == "IPAM_SERVER" {
			return "10.9.9.9:9090"
		}
		return ""
	}
	for _, tc := range []struct {
		name    string
		data    map[string]string
		want    ipamfn.Config
		wantErr string
	}{
		{name: "defaults", want: ipamfn.Config{Server: "10.9.9.9:9090", Prune: true, Timeout: 10 * time.Second}},
		{name: "functionConfig wins", data: map[string]string{"server": "127.0.0.1:9090", "owner": "o", "prune": "false", "timeout": "2s"},
			want: ipamfn.Config{Server: "127.0.0.1:9090", Owner: "o", Prune: false, Timeout: 2 * time.Second}},
		{name: "tls", data: map[string]string{"tlsCA": "ca.pem", "tlsCert": "c.pem", "tlsKey": "k.pem"},
			want: ipamfn.Config{Server: "10.9.9.9:9090", Prune: true, Timeout: 10 * time.Second, TLSCA: "ca.pem", TLSCert: "c.pem", TLSKey: "k.pem"}},
		{name: "bad prune", data: map[string]string{"prune": "yes please"}, wantErr: "data.prune"},
		{name: "bad timeout", data: map[string]string{"timeout": "10"}, wantErr: "data.timeout"},
		{name: "cert without key", data: map[string]string{"tlsCert": "c.pem"}, wantErr: "tlsKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ipamfn.ParseConfig(configMap(t, tc.data), env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Server != tc.want.Server || got.Owner != tc.want.Owner || got.Prune != tc.want.Prune ||
				got.Timeout != tc.want.Timeout || got.TLSCA != tc.want.TLSCA || got.TLSCert != tc.want.TLSCert || got.TLSKey != tc.want.TLSKey {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestParseIPAMConfig: the typed functionConfig reads the same settings
// under spec, prune a boolean, and refuses unknown or mistyped fields by
// name; an IPAMConfig among a package's resources is not a request.
func TestParseIPAMConfig(t *testing.T) {
	for _, tc := range []struct {
		name, spec, wantErr string
		want                ipamfn.Config
	}{
		{name: "all fields", spec: "server: 127.0.0.1:9090\nowner: o\nprune: false\ntimeout: 2s\ntlsCA: ca.pem\ntlsCert: c.pem\ntlsKey: k.pem\ntokenFile: t",
			want: ipamfn.Config{Server: "127.0.0.1:9090", Owner: "o", Prune: false, Timeout: 2 * time.Second, TLSCA: "ca.pem", TLSCert: "c.pem", TLSKey: "k.pem", TokenFile: "t"}},
		{name: "defaults", spec: "server: h:1", want: ipamfn.Config{Server: "h:1", Prune: true, Timeout: 10 * time.Second}},
		{name: "typo", spec: "sever: h:1", wantErr: "spec.sever: unknown field"},
		{name: "prune as a string", spec: "prune: \"yes\"", wantErr: "spec.prune"},
		{name: "timeout as a number", spec: "timeout: 10", wantErr: "spec.timeout"},
		{name: "bad duration", spec: "timeout: soon", wantErr: "spec.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := fn.ParseKubeObject([]byte("apiVersion: ipam.nephio.org/v1alpha1\nkind: IPAMConfig\nmetadata:\n  name: c\nspec:\n  " +
				strings.ReplaceAll(tc.spec, "\n", "\n  ") + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ipamfn.ParseConfig(o, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Server != tc.want.Server || got.Owner != tc.want.Owner || got.Prune != tc.want.Prune || got.Timeout != tc.want.Timeout ||
				got.TLSCA != tc.want.TLSCA || got.TLSCert != tc.want.TLSCert || got.TLSKey != tc.want.TLSKey || got.TokenFile != tc.want.TokenFile {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
			objs := items(t, "Kptfile", kptfile, "config.yaml", o.String())
			if ipamfn.HasIPAMObjects(objs) {
				t.Error("an IPAMConfig alone counts as an IPAM request")
			}
		})
	}
}

func TestProcessWithoutOwner(t *testing.T) {
	// No data.owner and no Kptfile: nothing to key the objects by.
	objs := items(t, "resources.yaml", seed)
	_, results, err := ipamfn.Process(context.Background(), nil, ipamfn.Config{Prune: true}, objs)
	if !errors.Is(err, ipamfn.ErrFailed) || len(results) != 1 || !strings.Contains(results[0].Message, "data.owner") {
		t.Fatalf("err %v, results %v", err, results)
	}
}
