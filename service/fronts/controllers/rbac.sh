#!/usr/bin/env bash
# Generates ipam-controller's ClusterRoles from the +kubebuilder:rbac
# markers of rbac_*.go: one ClusterRole per blueprint, each from its own
# file of markers (rbac_<set>.go, built only with the tag rbac_<set>, so
# that controller-gen reads one set at a time), written under OUT (the
# repository root, or a scratch directory to compare against it) in the
# form kpt writes.
#
#   service/fronts/controllers/rbac.sh CONTROLLER_GEN OUT
#
# Run from the repository root. The bindings, the leader-election Role and
# their kpt setters stay hand-written in the blueprints' rbac-controller*.yaml.
set -euo pipefail
gen=$1
out=$2
dir=service/fronts/controllers
while read -r role set file; do
	mkdir -p "$out/$(dirname "$file")"
	# controller-gen starts the document with a separator; kpt does not.
	"$gen" --load-build-tags="rbac_$set" rbac:roleName="$role" paths="./$dir" output:rbac:stdout |
		sed '1{/^---$/d}' >"$out/$file"
done <<'LIST'
ipam-controller controller blueprints/ipam/rbac-controller-role.yaml
ipam-controller-metal3 metal3 blueprints/ipam-metal3/rbac-controller-metal3-role.yaml
ipam-controller-nvidia nvidia blueprints/ipam-nvidia/rbac-controller-nvidia-role.yaml
ipam-controller-nephio nephio blueprints/ipam-nephio/rbac-controller-nephio-role.yaml
LIST
