package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/functions/engine"
	"github.com/nephio-project/ipam/functions/internal/pkgtest"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

func TestProcessSeed(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	client := srv.Client(t)
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed)
	before := pkgtest.Snapshot(objs)

	cfg := engine.Options{Server: srv.Addr, Prune: true}
	changed, results, err := engine.Process(context.Background(), client, cfg, &objs)
	if err != nil || !onlySummary(results, "synced 7 resources with ipam-server: 7 items written, 0 released by prune") || !changed {
		t.Fatalf("Process: changed %v, results %v, err %v", changed, results, err)
	}
	for _, tc := range []struct{ kind, name, prefix, gateway string }{
		{"IPAllocation", "alloc1", "10.0.1.2/24", "10.0.1.1"},
		{"IPAllocation", "alloc2-n3", "10.0.1.10/24", "10.0.1.1"},
		{"IPAllocation", "alloc-pool1", "10.1.0.0/16", ""},
		{"IPPrefix", "aggregate0", "10.0.0.0/8", ""},
	} {
		o := pkgtest.Find(t, objs, tc.kind, tc.name)
		if got := pkgtest.Str(t, o, "status", "prefix"); got != tc.prefix {
			t.Errorf("%s %s: status.prefix %q, want %q", tc.kind, tc.name, got, tc.prefix)
		}
		if got := pkgtest.Str(t, o, "status", "gateway"); got != tc.gateway {
			t.Errorf("%s %s: status.gateway %q, want %q", tc.kind, tc.name, got, tc.gateway)
		}
		conds := o.GetMap("status").GetSlice("conditions")
		if len(conds) != 2 {
			t.Fatalf("%s %s: %d conditions, want 2:\n%s", tc.kind, tc.name, len(conds), o)
		}
		verb := map[string]string{"IPAllocation": "allocated ", "IPPrefix": "recorded "}[tc.kind]
		for i, want := range [][4]string{{"Synced", "True", "ReconcileSuccess", ""}, {"Ready", "True", "Ready", verb + tc.prefix}} {
			c := conds[i]
			// No wall-clock time: the same input renders the same bytes.
			if c.GetString("type") != want[0] || c.GetString("status") != want[1] || c.GetString("reason") != want[2] ||
				c.GetString("message") != want[3] || c.GetString("lastTransitionTime") != "" {
				t.Errorf("%s %s: condition %d is\n%s", tc.kind, tc.name, i, c)
			}
		}
	}
	// The root Kptfile holds one condition per claim, as Nephio's
	// specializer writes them, for readiness gates.
	kf := pkgtest.Find(t, objs, "Kptfile", "seed-pkg")
	var got []string
	for _, c := range kf.GetMap("status").GetSlice("conditions") {
		got = append(got, c.GetString("type")+"="+c.GetString("status")+" "+c.GetString("reason")+": "+c.GetString("message"))
	}
	want := []string{
		"ipam.nephio.org.IPAllocation.alloc1=True Ready: allocated 10.0.1.2/24",
		"ipam.nephio.org.IPAllocation.alloc2-n3=True Ready: allocated 10.0.1.10/24",
		"ipam.nephio.org.IPAllocation.alloc-pool1=True Ready: allocated 10.1.0.0/16",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Kptfile conditions:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Everything that is not an IPAllocation or IPPrefix is untouched,
	// byte for byte, and comments of the changed objects survive.
	for i, o := range objs {
		if k := o.GetKind(); k != "IPAllocation" && k != "IPPrefix" && k != "Kptfile" && o.String() != before[i] {
			t.Errorf("%s %s changed:\n%s\nwas\n%s", k, o.GetName(), o, before[i])
		}
	}
	for _, c := range []string{"# next free address of net1", "# the static address", "# .1 is the gateway", "# everything"} {
		if !strings.Contains(strings.Join(pkgtest.Snapshot(objs), "\n"), c) {
			t.Errorf("comment %q lost", c)
		}
	}

	// Processing the result again changes nothing.
	after := pkgtest.Snapshot(objs)
	changed, results, err = engine.Process(context.Background(), client, cfg, &objs)
	if err != nil || !onlySummary(results, "0 items written") || changed {
		t.Fatalf("second Process: changed %v, results %v, err %v", changed, results, err)
	}
	if got := pkgtest.Snapshot(objs); strings.Join(got, "\n") != strings.Join(after, "\n") {
		t.Errorf("second Process changed the package:\n%s", strings.Join(got, "\n"))
	}
}

// TestProcessListsReleases: a run whose prune releases an object says so
// in a result naming it, so the review of a render sees every release.
func TestProcessListsReleases(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	cfg := engine.Options{Server: srv.Addr, Prune: true}
	first := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed)
	if _, _, err := engine.Process(context.Background(), srv.Client(t), cfg, &first); err != nil {
		t.Fatal(err)
	}
	// The edit starts from the rendered Kptfile, which holds the package
	// identity the first run wrote.
	kptfile := pkgtest.Find(t, first, "Kptfile", "seed-pkg").String()
	pool := "---\napiVersion: ipam.nephio.org/v1alpha1\nkind: IPAllocation\nmetadata:\n  name: alloc-pool1\n"
	i := strings.Index(pkgtest.Seed, pool)
	j := strings.Index(pkgtest.Seed[i+len(pool):], "---")
	without := pkgtest.Seed[:i] + pkgtest.Seed[i+len(pool)+j:]
	objs := pkgtest.Items(t, "Kptfile", kptfile, "resources.yaml", without)
	_, results, err := engine.Process(context.Background(), srv.Client(t), cfg, &objs)
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

// TestProcessCorrectsStatusKeepsForeignConditions: a stale prefix is
// corrected, a lastTransitionTime an older version wrote is dropped, a
// claim the package no longer holds loses its Kptfile condition, and
// conditions of other producers stay where they are.
func TestProcessCorrectsStatusKeepsForeignConditions(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	client := srv.Client(t)
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed)
	cfg := engine.Options{Server: srv.Addr, Prune: true}
	if _, _, err := engine.Process(context.Background(), client, cfg, &objs); err != nil {
		t.Fatal(err)
	}
	a := pkgtest.Find(t, objs, "IPAllocation", "alloc1")
	if err := a.SetNestedString("10.0.1.99/24", "status", "prefix"); err != nil {
		t.Fatal(err)
	}
	conds := a.GetMap("status").GetSlice("conditions")
	_ = conds[1].SetNestedString("2026-01-02T03:04:05Z", "lastTransitionTime")
	if err := a.UpsertMap("status").SetSlice(append(conds, condition(t, "Custom", "False")), "conditions"); err != nil {
		t.Fatal(err)
	}
	kf := pkgtest.Find(t, objs, "Kptfile", "seed-pkg")
	kconds := append([]*fn.SubObject{condition(t, "config.porch.kpt.dev.Other", "False")}, kf.GetMap("status").GetSlice("conditions")...)
	kconds = append(kconds, condition(t, "ipam.nephio.org.IPAllocation.gone", "True"))
	if err := kf.UpsertMap("status").SetSlice(kconds, "conditions"); err != nil {
		t.Fatal(err)
	}
	changed, _, err := engine.Process(context.Background(), client, cfg, &objs)
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v", changed, err)
	}
	a = pkgtest.Find(t, objs, "IPAllocation", "alloc1")
	if got := pkgtest.Str(t, a, "status", "prefix"); got != "10.0.1.2/24" {
		t.Errorf("status.prefix %q", got)
	}
	conds = a.GetMap("status").GetSlice("conditions")
	if len(conds) != 3 || conds[1].GetString("lastTransitionTime") != "" || conds[2].GetString("type") != "Custom" {
		t.Errorf("conditions:\n%s", a.GetMap("status"))
	}
	var types []string
	for _, c := range kf.GetMap("status").GetSlice("conditions") {
		types = append(types, c.GetString("type"))
	}
	want := "config.porch.kpt.dev.Other ipam.nephio.org.IPAllocation.alloc1 ipam.nephio.org.IPAllocation.alloc2-n3 ipam.nephio.org.IPAllocation.alloc-pool1"
	if strings.Join(types, " ") != want {
		t.Errorf("Kptfile conditions %v; want %s", types, want)
	}
}

// condition is a condition of type typ with status.
func condition(t *testing.T, typ, status string) *fn.SubObject {
	t.Helper()
	c := fn.NewEmptyKubeObject()
	if err := c.SetNestedString(typ, "type"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetNestedString(status, "status"); err != nil {
		t.Fatal(err)
	}
	return &c.SubObject
}

func TestProcessWithoutIPAMResourcesMakesNoCall(t *testing.T) {
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	changed, results, err := engine.Process(context.Background(), nil, engine.Options{}, &objs)
	if changed || len(results) > 0 || err != nil {
		t.Fatalf("changed %v, results %v, err %v", changed, results, err)
	}
}

func TestProcessItemErrorsNameFileResourceAndField(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	bad := strings.Replace(pkgtest.Seed, "prefix: 10.0.1.10/24", "prefix: 10.0.1.10/33", 1)
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", bad)
	before := pkgtest.Snapshot(objs)
	changed, results, err := engine.Process(context.Background(), srv.Client(t),
		engine.Options{Server: srv.Addr, Prune: true}, &objs)
	if changed || !errors.Is(err, engine.ErrFailed) || len(results) == 0 {
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
	if strings.Join(pkgtest.Snapshot(objs), "\n") != strings.Join(before, "\n") {
		t.Error("items changed although the Sync failed")
	}
}

func TestProcessLocalFieldErrors(t *testing.T) {
	bad := strings.Replace(pkgtest.Seed, "prefixLength: 16", "prefixLength: sixteen", 1)
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", bad)
	// No call is made: a nil client would fail otherwise.
	_, results, err := engine.Process(context.Background(), nil, engine.Options{Prune: true}, &objs)
	if !errors.Is(err, engine.ErrFailed) || len(results) != 1 || results[0].Field == nil || results[0].Field.Path != "spec.prefixLength" ||
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
				doc = pkgtest.Seed + "\n---\n" + doc
			}
			objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", doc)
			if !engine.HasIPAMObjects(objs) {
				t.Fatal("HasIPAMObjects is false: the run would pass the package untouched")
			}
			before := pkgtest.Snapshot(objs)
			changed, results, err := engine.Process(context.Background(), nil, engine.Options{Prune: true}, &objs)
			if changed || !errors.Is(err, engine.ErrFailed) || len(results) != 1 {
				t.Fatalf("changed %v, err %v, results %v", changed, err, results)
			}
			r := results[0]
			if r.Field == nil || r.Field.Path != tc.field || r.ResourceRef == nil || r.ResourceRef.Kind != tc.kind || r.ResourceRef.Name != "x" ||
				r.File == nil || r.File.Path != "resources.yaml" || !strings.Contains(r.Message, tc.msg) || len(r.Message) > 300 {
				t.Errorf("result %+v field %+v ref %+v file %+v", r, r.Field, r.ResourceRef, r.File)
			}
			if strings.Join(pkgtest.Snapshot(objs), "\n") != strings.Join(before, "\n") {
				t.Error("items changed")
			}
		})
	}
}

func TestProcessOwnerFromRootKptfile(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	sub := strings.Replace(pkgtest.Kptfile, "seed-pkg", "subpackage", 1)
	objs := pkgtest.Items(t, "sub/Kptfile", sub, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed)
	if _, _, err := engine.Process(context.Background(), srv.Client(t), engine.Options{Server: srv.Addr, Prune: true}, &objs); err != nil {
		t.Fatal(err)
	}
	_, err := srv.Client(t).Get(context.Background(), &ipamv1.GetRequest{
		Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: &ipamv1.Key{Owner: "seed-pkg", Name: "alloc1"}})
	if err != nil {
		t.Fatalf("alloc1 is not owned by the root package: %v", err)
	}
}

func TestProcessWithoutOwner(t *testing.T) {
	// No data.owner and no Kptfile: nothing to key the objects by.
	objs := pkgtest.Items(t, "resources.yaml", pkgtest.Seed)
	_, results, err := engine.Process(context.Background(), nil, engine.Options{Prune: true}, &objs)
	if !errors.Is(err, engine.ErrFailed) || len(results) != 1 || !strings.Contains(results[0].Message, "data.owner") {
		t.Fatalf("err %v, results %v", err, results)
	}
}
