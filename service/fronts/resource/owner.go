package resource

import (
	"fmt"
	"strings"

	resourcepb "github.com/nephio-project/ipam/api/proto/resource"
)

// OwnerPrefix starts the owner of every object declared through the
// resource API: resource:<group>/<version>/<Kind>/<namespace>/<name> of
// the header's ownerGvk and ownerNsn. Authorization policies name these
// owners, e.g. resource:req.nephio.org/* for the claims of Nephio's
// requirements.
const OwnerPrefix = "resource:"

// Owner is the owner ipam-server holds the objects of header for.
func Owner(h *resourcepb.Header) (string, error) {
	g, n := h.GetOwnerGvk(), h.GetOwnerNsn()
	if g.GetKind() == "" || n.GetName() == "" {
		return "", fmt.Errorf("header.ownerGvk.kind and header.ownerNsn.name are required: they name the claim's owner")
	}
	for _, part := range []string{g.GetGroup(), g.GetVersion(), g.GetKind(), n.GetNamespace(), n.GetName()} {
		if strings.Contains(part, "/") {
			return "", fmt.Errorf("header: %q holds a /", part)
		}
	}
	return ownerKind(g) + n.GetNamespace() + "/" + n.GetName(), nil
}

// ownerKind is the part of the owners of kind g before namespace/name.
func ownerKind(g *resourcepb.GVK) string {
	return OwnerPrefix + g.GetGroup() + "/" + g.GetVersion() + "/" + g.GetKind() + "/"
}

// parseOwner is the owner kind and name of an Owner, or false when owner
// is not one.
func parseOwner(owner string) (*resourcepb.GVK, *resourcepb.NSN, bool) {
	rest, ok := strings.CutPrefix(owner, OwnerPrefix)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 5 || parts[2] == "" || parts[4] == "" {
		return nil, nil, false
	}
	return &resourcepb.GVK{Group: parts[0], Version: parts[1], Kind: parts[2]}, &resourcepb.NSN{Namespace: parts[3], Name: parts[4]}, true
}
