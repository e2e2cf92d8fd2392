package k8sdiff_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nephio-project/ipam/service/ipam"
)

// seeds are keys and values at the edges of Kubernetes label syntax.
var seeds = []string{
	"", "a", "A", "0", "-", "_", ".", "a-b", "a_b", "a.b", "-a", "a-", "_a", "a_", ".a", "a.",
	"a b", " a", "a ", "ü", "a/b", "/b", "a/", "a//b", "a/b/c", "Nephio.org/x", "nephio.org/x",
	"nephio..org/x", "-nephio.org/x", "nephio-.org/x", "nephio.org/-x", "nephio.org/x_", "a\x00b",
	strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 253) + "/" + strings.Repeat("b", 63),
	strings.Repeat("a", 254) + "/b", strings.Repeat("a", 253) + "/" + strings.Repeat("b", 64),
	"ipam-node.nephio.org/pod-name.0", "nephio.org/network-instance",
}

// FuzzLabelKey: the core's LabelKeySyntax accepts exactly the keys
// apimachinery's IsQualifiedName accepts.
func FuzzLabelKey(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		core := ipam.LabelKeySyntax(k) == ""
		k8s := len(validation.IsQualifiedName(k)) == 0
		if core != k8s {
			t.Fatalf("key %q: core accepts %v (%s), apimachinery %v (%v)", k, core, ipam.LabelKeySyntax(k), k8s, validation.IsQualifiedName(k))
		}
	})
}

// FuzzLabelValue: the core's LabelValueSyntax accepts exactly the values
// apimachinery's IsValidLabelValue accepts.
func FuzzLabelValue(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		core := ipam.IsLabelValue(v)
		k8s := len(validation.IsValidLabelValue(v)) == 0
		if core != k8s {
			t.Fatalf("value %q: core accepts %v (%s), apimachinery %v (%v)", v, core, ipam.LabelValueSyntax(v), k8s, validation.IsValidLabelValue(v))
		}
	})
}
