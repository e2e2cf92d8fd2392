package authz

import (
	"fmt"
	"slices"
	"strings"
)

// checkReplica accepts the certificate identities a replica can go by:
// cn:, dns: and uri: names. A token, "*" or anonymous cannot name a
// replica: a replica's statement of who its caller is is believed, so
// only a certificate the server verified itself may make it.
func checkReplica(id string) error {
	kind, name, ok := strings.Cut(id, ":")
	if !ok || name == "" || strings.Contains(name, "*") {
		return fmt.Errorf("%q: write cn:NAME, dns:NAME or uri:URI of the replicas' certificate (no *)", id)
	}
	switch kind {
	case "cn", "dns", "uri":
		return nil
	}
	return fmt.Errorf("%q: a replica is named by its certificate (cn, dns or uri), not %q", id, kind)
}

// HasReplicas reports whether the policy names ipam-server's replicas,
// which then relay changes to the write lead over mTLS.
func (p *Policy) HasReplicas() bool { return len(p.replicas) > 0 }

// Replica reports whether pr, authenticated by its client certificate,
// is one of ipam-server's replicas: one of its names is listed under
// replicas. A replica may relay calls and state, for each, who the
// caller is; the server believes that statement from nobody else.
func (p *Policy) Replica(pr Principal) bool {
	for _, id := range p.replicas {
		if slices.Contains(pr.Names, id) {
			return true
		}
	}
	return false
}
