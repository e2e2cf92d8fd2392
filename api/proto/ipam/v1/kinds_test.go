package ipamv1_test

import (
	"testing"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/vocab"
)

func TestKindNamesRoundTrip(t *testing.T) {
	for _, name := range []string{vocab.ObjNetworkInstance, vocab.ObjPrefix, vocab.ObjRange, vocab.ObjAllocation} {
		k := ipamv1.KindOf(name)
		if k == ipamv1.ObjectKind_OBJECT_KIND_UNSPECIFIED {
			t.Errorf("KindOf(%q) is unspecified", name)
		}
		if got := ipamv1.KindName(k); got != name {
			t.Errorf("KindName(KindOf(%q)) = %q", name, got)
		}
	}
	for _, name := range []string{vocab.ObjSync, "", "Pod"} {
		if k := ipamv1.KindOf(name); k != ipamv1.ObjectKind_OBJECT_KIND_UNSPECIFIED {
			t.Errorf("KindOf(%q) = %v, want unspecified", name, k)
		}
	}
	if got := ipamv1.KindName(ipamv1.ObjectKind(99)); got != "99" {
		t.Errorf("KindName(99) = %q", got)
	}
	for k := range ipamv1.ObjectKind_name {
		if kk := ipamv1.ObjectKind(k); kk != ipamv1.ObjectKind_OBJECT_KIND_UNSPECIFIED && ipamv1.KindOf(ipamv1.KindName(kk)) != kk {
			t.Errorf("the wire kind %v has no name users know", kk)
		}
	}
}
