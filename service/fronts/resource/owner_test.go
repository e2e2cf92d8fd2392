package resource

import (
	"strings"
	"testing"

	resourcepb "github.com/nephio-project/ipam/api/proto/resource"
)

func TestOwner(t *testing.T) {
	h := &resourcepb.Header{OwnerGvk: &resourcepb.GVK{Group: "req.nephio.org", Version: "v1alpha1", Kind: "Interface"},
		OwnerNsn: &resourcepb.NSN{Namespace: "default", Name: "n3"}}
	got, err := Owner(h)
	if err != nil || got != "resource:req.nephio.org/v1alpha1/Interface/default/n3" {
		t.Fatalf("Owner = %q, %v", got, err)
	}
	for name, bad := range map[string]*resourcepb.Header{
		"no owner":      {},
		"no kind":       {OwnerNsn: &resourcepb.NSN{Name: "n3"}},
		"no name":       {OwnerGvk: &resourcepb.GVK{Kind: "Interface"}},
		"a / in a name": {OwnerGvk: &resourcepb.GVK{Kind: "Interface"}, OwnerNsn: &resourcepb.NSN{Name: "a/b"}},
	} {
		if o, err := Owner(bad); err == nil {
			t.Errorf("%s: Owner = %q, want an error", name, o)
		}
	}
}

// FuzzOwner: an owner Owner makes parses back into the header's owner
// kind and name, so two owners are the same string only for the same
// owner, and it starts with its kind's prefix, which WatchClaim filters by.
func FuzzOwner(f *testing.F) {
	f.Add("req.nephio.org", "v1alpha1", "Interface", "default", "n3")
	f.Add("", "v1", "Pod", "", "p")
	f.Add("a/b", "v", "K", "ns", "n")
	f.Fuzz(func(t *testing.T, group, version, kind, ns, name string) {
		h := &resourcepb.Header{OwnerGvk: &resourcepb.GVK{Group: group, Version: version, Kind: kind},
			OwnerNsn: &resourcepb.NSN{Namespace: ns, Name: name}}
		owner, err := Owner(h)
		if err != nil {
			return
		}
		g, n, ok := parseOwner(owner)
		if !ok || g.GetGroup() != group || g.GetVersion() != version || g.GetKind() != kind || n.GetNamespace() != ns || n.GetName() != name {
			t.Fatalf("Owner(%q %q %q %q %q) = %q parses to %v %v %v", group, version, kind, ns, name, owner, g, n, ok)
		}
		if !strings.HasPrefix(owner, ownerKind(h.GetOwnerGvk())) {
			t.Fatalf("owner %q does not start with its kind's prefix %q", owner, ownerKind(h.GetOwnerGvk()))
		}
	})
}
