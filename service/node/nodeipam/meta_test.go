package nodeipam

import (
	"strings"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/ipam"
)

// FuzzMeta: every pod field is kept in labels of Kubernetes label syntax
// (which the allocation core requires) and read back as it was.
func FuzzMeta(f *testing.F) {
	for _, s := range []string{"", "pod-1", "0000:3b:00.2", "-a", "a.", strings.Repeat("p", 63), strings.Repeat("p.q-", 63), "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		l := ipam.Labels{}
		setMeta(l, labelDeviceID, v)
		for k, x := range l {
			if why := ipam.LabelKeySyntax(k); why != "" {
				t.Fatalf("%q: key %q: %s", v, k, why)
			}
			if why := ipam.LabelValueSyntax(x); why != "" {
				t.Fatalf("%q: value %q of %s: %s", v, x, k, why)
			}
		}
		if got := getMeta(l, labelDeviceID); got != v {
			t.Fatalf("%q read back as %q", v, got)
		}
	})
}

// TestMetaOldForm: a pod name stored by an older version, cut into
// pod-name.0, pod-name.1, ..., is read back.
func TestMetaOldForm(t *testing.T) {
	name := strings.Repeat("a", 63) + "-" + strings.Repeat("b", 20)
	l := ipam.Labels{labelPodName + ".0": name[:63], labelPodName + ".1": name[63:], labelCreated: "100"}
	p, created := podOf(l)
	if p.Name != name || !created.Equal(time.Unix(100, 0)) {
		t.Fatalf("podOf = %+v, %v", p, created)
	}
	l = podLabels(Pod{Name: name, DeviceID: "0000:3b:00.2", Namespace: "ns", UID: "u"}, time.Unix(5, 0))
	for k, v := range l {
		if ipam.LabelKeySyntax(k) != "" || !ipam.IsLabelValue(v) {
			t.Errorf("label %q=%q is not of Kubernetes label syntax", k, v)
		}
	}
	if p, _ := podOf(l); p != (Pod{Name: name, DeviceID: "0000:3b:00.2", Namespace: "ns", UID: "u"}) {
		t.Fatalf("read back %+v", p)
	}
}
