package injector

import (
	"slices"
	"strings"
	"testing"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	"github.com/nephio-project/ipam/functions/engine"
)

const kptfile = `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: pkg # the package
info:
  description: d
status:
  conditions:
  - type: Other
    status: "True"
    observedGeneration: 2 # by another tool
  - type: ipam.nephio.org.IPAllocation
    status: "True"
    reason: Allocated
    lastTransitionTime: "2026-01-02T03:04:05Z"
`

// An untouched package serializes back to nothing to write, and a set
// condition rewrites only the Kptfile, keeping other conditions and the
// fields other tools wrote.
func TestFilesAndCondition(t *testing.T) {
	res := map[string]string{
		"Kptfile":   kptfile,
		"app.yaml":  "# a comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
		"README.md": "not yaml: [",
	}
	p, err := parseFiles(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.items) != 3 {
		t.Fatalf("%d items, want 3", len(p.items))
	}
	if out, removed := p.changedFiles(); len(out)+len(removed) != 0 {
		t.Fatalf("nothing changed but %v would be written, %v removed", out, removed)
	}
	c := engine.Condition{Type: ConditionType, Status: "False", Reason: ReasonFailed, Message: "no free address"}
	changed, err := engine.SetKptfileCondition(p.kptfile(), c)
	if err != nil || !changed {
		t.Fatalf("SetKptfileCondition: %v %v", changed, err)
	}
	if again, _ := engine.SetKptfileCondition(p.kptfile(), c); again {
		t.Error("setting the same condition again reported a change")
	}
	out, removed := p.changedFiles()
	if len(out) != 1 || out["Kptfile"] == "" || len(removed) != 0 {
		t.Fatalf("written %v, removed %v, want the Kptfile only", out, removed)
	}
	got, ok := getCondition(out)
	if !ok || got != c {
		t.Errorf("condition %+v, want %+v", got, c)
	}
	for _, want := range []string{"type: Other", "# the package", "reason: AllocationFailed",
		"observedGeneration: 2 # by another tool", `lastTransitionTime: "2026-01-02T03:04:05Z"`} {
		if !strings.Contains(out["Kptfile"], want) {
			t.Errorf("Kptfile lost %q:\n%s", want, out["Kptfile"])
		}
	}
	if strings.Contains(out["Kptfile"], annotationPath) {
		t.Errorf("Kptfile keeps the path annotation:\n%s", out["Kptfile"])
	}

	// A new item makes a new file; a file whose items are all gone is
	// removed.
	added := fn.NewEmptyKubeObject()
	_ = added.SetAPIVersion("v1")
	_ = added.SetKind("ConfigMap")
	_ = added.SetName("c")
	_ = added.SetAnnotation(annotationPath, "new/c.yaml")
	p.items = append(slices.DeleteFunc(p.items, func(it *fn.KubeObject) bool { return it.GetAnnotation(annotationPath) == "app.yaml" }), added)
	out, removed = p.changedFiles()
	if !strings.Contains(out["new/c.yaml"], "name: c") || !slices.Equal(removed, []string{"app.yaml"}) {
		t.Errorf("written %v, removed %v; want new/c.yaml written and app.yaml removed", out, removed)
	}
}

func TestOwner(t *testing.T) {
	if got := Owner("blueprints", "net-pkg"); got != "blueprints/net-pkg" {
		t.Errorf("Owner = %q", got)
	}
}

func TestFirstWarning(t *testing.T) {
	var in Injector
	if !in.firstWarning("ns/a", "1") || in.firstWarning("ns/a", "1") || !in.firstWarning("ns/a", "2") {
		t.Error("want one warning per revision version")
	}
}
