package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	"github.com/nephio-project/ipam/functions/engine"
	"github.com/nephio-project/ipam/functions/internal/pkgtest"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestProcessPackageIdentity: the first run writes a package identity
// derived from the package; an edited copy that kept the Kptfile name is
// refused on its Kptfile and changes nothing; the copy adopts the owner
// once with the adopt annotation, which the run removes; the original is
// then refused in turn.
func TestProcessPackageIdentity(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	client := srv.Client(t)
	cfg := engine.Options{Server: srv.Addr, Prune: true}
	ctx := context.Background()
	idOf := func(objs fn.KubeObjects) string {
		return pkgtest.Find(t, objs, "Kptfile", "seed-pkg").GetAnnotation(engine.AnnotationPackageID)
	}

	original := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed)
	if _, _, err := engine.Process(ctx, client, cfg, &original); err != nil {
		t.Fatal(err)
	}
	id := idOf(original)
	if len(id) != 20 {
		t.Fatalf("package identity %q, want 20 hex digits", id)
	}
	// The identity depends on the package only: another render of the
	// same input writes the same one (and the server accepts it).
	again := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed)
	if _, _, err := engine.Process(ctx, client, cfg, &again); err != nil || idOf(again) != id {
		t.Fatalf("same input: identity %q (want %q), err %v", idOf(again), id, err)
	}

	edited := strings.Replace(pkgtest.Seed, "name: alloc1\n", "name: alloc1-site-b\n", 1)
	copied := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", edited)
	before := pkgtest.Snapshot(copied)
	changed, results, err := engine.Process(ctx, client, cfg, &copied)
	if !errors.Is(err, engine.ErrFailed) || changed || len(results) != 1 {
		t.Fatalf("copy: changed %v, results %v, err %v", changed, results, err)
	}
	r := results[0]
	if r.ResourceRef == nil || r.ResourceRef.Kind != "Kptfile" || r.Field == nil || r.Field.Path != "metadata.annotations[ipam.nephio.org/package-id]" ||
		r.Tags["code"] != "FailedPrecondition" || !strings.Contains(r.Message, `identity "`+id+`"`) || !strings.Contains(r.Message, engine.AnnotationAdopt) {
		t.Fatalf("copy: result %+v", r)
	}
	if strings.Join(pkgtest.Snapshot(copied), "\n") != strings.Join(before, "\n") {
		t.Fatal("a refused copy was changed")
	}

	// A malformed adopt annotation names itself.
	bad := pkgtest.Items(t, "Kptfile", strings.Replace(pkgtest.Kptfile, "  name: seed-pkg\n", "  name: seed-pkg\n  annotations:\n    ipam.nephio.org/adopt: \"yes\"\n", 1), "resources.yaml", edited)
	if _, results, err := engine.Process(ctx, client, cfg, &bad); err == nil || len(results) != 1 || results[0].Field == nil ||
		results[0].Field.Path != "metadata.annotations[ipam.nephio.org/adopt]" {
		t.Fatalf("adopt: yes: results %v, err %v", results, err)
	}

	adopting := pkgtest.Items(t, "Kptfile", strings.Replace(pkgtest.Kptfile, "  name: seed-pkg\n", "  name: seed-pkg\n  annotations:\n    ipam.nephio.org/adopt: \"true\"\n", 1), "resources.yaml", edited)
	_, results, err = engine.Process(ctx, client, cfg, &adopting)
	if err != nil || len(results) != 3 || !strings.Contains(results[1].Message, `adopted the owner's objects from the package with identity "`+id+`"`) ||
		!strings.Contains(results[2].Message, "released IPAllocation alloc1 of owner seed-pkg") {
		t.Fatalf("adopt: results %v, err %v", results, err)
	}
	k := pkgtest.Find(t, adopting, "Kptfile", "seed-pkg")
	if _, ok := k.GetAnnotations()[engine.AnnotationAdopt]; ok || idOf(adopting) == id || idOf(adopting) == "" {
		t.Fatalf("after adopting, the Kptfile's annotations are %v", k.GetAnnotations())
	}
	if got := pkgtest.Str(t, pkgtest.Find(t, adopting, "IPAllocation", "alloc1-site-b"), "status", "prefix"); got != "10.0.1.2/24" {
		t.Fatalf("alloc1-site-b got %q, want the address alloc1 released", got)
	}

	// The original, rendered, is now the one refused.
	if _, _, err := engine.Process(ctx, client, cfg, &original); !errors.Is(err, engine.ErrFailed) {
		t.Fatalf("original after adoption: %v", err)
	}
}

// TestProcessOwnerGeneration: each run writes the owner generation
// ipam-server answers; a copy of the rendered package (same owner, same
// identity) that renders a change first wins, and the original's next
// render, which would undo it, is refused on its Kptfile and changes
// nothing; a run that changes nothing writes nothing, also from a stale
// package that declares what the owner holds.
func TestProcessOwnerGeneration(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	client := srv.Client(t)
	cfg := engine.Options{Server: srv.Addr, Prune: true}
	ctx := context.Background()
	genOf := func(objs fn.KubeObjects) string {
		return pkgtest.Find(t, objs, "Kptfile", "seed-pkg").GetAnnotation(engine.AnnotationGeneration)
	}
	original := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed)
	if _, _, err := engine.Process(ctx, client, cfg, &original); err != nil || genOf(original) != "1" {
		t.Fatalf("first render: generation %q, %v", genOf(original), err)
	}
	rendered := pkgtest.Snapshot(original)
	if changed, _, err := engine.Process(ctx, client, cfg, &original); err != nil || changed {
		t.Fatalf("re-render: changed %v, %v", changed, err)
	}

	// The copy starts from the rendered Kptfile (identity and generation
	// 1) and drops alloc-pool1.
	kptfile := pkgtest.Find(t, original, "Kptfile", "seed-pkg").String()
	pool := "---\napiVersion: ipam.nephio.org/v1alpha1\nkind: IPAllocation\nmetadata:\n  name: alloc-pool1\n"
	i := strings.Index(pkgtest.Seed, pool)
	j := strings.Index(pkgtest.Seed[i+len(pool):], "---")
	copied := pkgtest.Items(t, "Kptfile", kptfile, "resources.yaml", pkgtest.Seed[:i]+pkgtest.Seed[i+len(pool)+j:])
	if _, results, err := engine.Process(ctx, client, cfg, &copied); err != nil || genOf(copied) != "2" || !strings.Contains(results[0].Message, "1 released") {
		t.Fatalf("the copy: generation %q, results %v, %v", genOf(copied), results, err)
	}

	// The original would allocate alloc-pool1 again: refused.
	changed, results, err := engine.Process(ctx, client, cfg, &original)
	if !errors.Is(err, engine.ErrFailed) || changed || len(results) != 1 {
		t.Fatalf("the original: changed %v, results %v, err %v", changed, results, err)
	}
	r := results[0]
	if r.ResourceRef == nil || r.ResourceRef.Kind != "Kptfile" || r.Field == nil || r.Field.Path != "metadata.annotations[ipam.nephio.org/generation]" ||
		r.Tags["code"] != "FailedPrecondition" {
		t.Fatalf("the original: result %+v", r)
	}
	for _, want := range []string{`owner "seed-pkg" is at generation 2, and this package at 1`, "another copy of the package", "owner of its own", engine.AnnotationAdopt} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("the original: message %q does not say %q", r.Message, want)
		}
	}
	if strings.Join(pkgtest.Snapshot(original), "\n") != strings.Join(rendered, "\n") {
		t.Fatal("a refused render changed the package")
	}

	// The copy's stale twin (generation 1) declares what the owner holds:
	// accepted, and it learns the generation.
	twin := pkgtest.Items(t, "Kptfile", kptfile, "resources.yaml", pkgtest.Seed[:i]+pkgtest.Seed[i+len(pool)+j:])
	if _, _, err := engine.Process(ctx, client, cfg, &twin); err != nil || genOf(twin) != "2" {
		t.Fatalf("stale twin: generation %q, %v", genOf(twin), err)
	}

	// A malformed generation names itself.
	bad := pkgtest.Items(t, "Kptfile", strings.Replace(pkgtest.Kptfile, "  name: seed-pkg\n", "  name: seed-pkg\n  annotations:\n    ipam.nephio.org/generation: \"-1\"\n", 1), "resources.yaml", pkgtest.Seed)
	if _, results, err := engine.Process(ctx, client, cfg, &bad); err == nil || len(results) != 1 || results[0].Field == nil ||
		results[0].Field.Path != "metadata.annotations[ipam.nephio.org/generation]" {
		t.Fatalf("generation -1: results %v, err %v", results, err)
	}
}

// TestProcessWithoutKptfile: items without a root Kptfile (kpt fn eval of
// a bare directory) have no identity, and nothing is written for one.
func TestProcessWithoutKptfile(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	objs := pkgtest.Items(t, "resources.yaml", pkgtest.Seed)
	cfg := engine.Options{Server: srv.Addr, Owner: "bare", Prune: true}
	for range 2 {
		if _, _, err := engine.Process(context.Background(), srv.Client(t), cfg, &objs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProcessNoIdentity: a caller whose owner already names one package
// (the Porch injector) sends and writes no identity and no generation, so
// two revisions edited apart do not refuse each other.
func TestProcessNoIdentity(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	cfg := engine.Options{Server: srv.Addr, Owner: "repo/pkg", Prune: true, NoIdentity: true}
	for _, seed := range []string{pkgtest.Seed, strings.Replace(pkgtest.Seed, "name: alloc1\n", "name: alloc1-v2\n", 1)} {
		objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", seed)
		if _, _, err := engine.Process(context.Background(), srv.Client(t), cfg, &objs); err != nil {
			t.Fatal(err)
		}
		if a := pkgtest.Find(t, objs, "Kptfile", "seed-pkg").GetAnnotations(); a[engine.AnnotationPackageID] != "" || a[engine.AnnotationGeneration] != "" {
			t.Fatalf("Kptfile annotations %v", a)
		}
	}
}
