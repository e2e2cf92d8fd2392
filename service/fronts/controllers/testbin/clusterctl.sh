#!/usr/bin/env bash
# clusterctl.sh builds Cluster API's clusterctl (sigs.k8s.io/cluster-api,
# cmd/clusterctl) from the Go module proxy into OUT (default bin/capi), in
# a throwaway module under OUT/.build, so the repository's go.mod is left
# alone. It does nothing when OUT already holds clusterctl at the pinned
# version (recorded in OUT/.versions).
#
#   service/fronts/controllers/testbin/clusterctl.sh [OUT]
#
# The pinned version can be overridden with CLUSTERCTL_VERSION.
set -euo pipefail

CLUSTERCTL_VERSION=${CLUSTERCTL_VERSION:-v1.14.2}
OUT=${1:-bin/capi}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STAMP="$OUT/.versions"
WANT="clusterctl=$CLUSTERCTL_VERSION"

export GOFLAGS="${GOFLAGS:-} -mod=mod"
export GOWORK=off
dir="$OUT/.build/clusterctl"

# inventory_crd copies the CRD of clusterctl's provider inventory (the
# Provider kind, which clusterctl installs from its own binary) from the
# module, for the tests that set up a management cluster as
# clusterctl init leaves it.
inventory_crd() {
	local src
	src=$(cd "$OUT" && go mod download -json "sigs.k8s.io/cluster-api@$CLUSTERCTL_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	test -n "$src" || { echo "clusterctl: cannot download sigs.k8s.io/cluster-api@$CLUSTERCTL_VERSION" >&2; exit 1; }
	cp "$src/cmd/clusterctl/config/manifest/clusterctl-api.yaml" "$OUT/clusterctl-api.yaml"
	chmod 644 "$OUT/clusterctl-api.yaml"
}

if [[ -x "$OUT/clusterctl" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
	[[ -f "$OUT/clusterctl-api.yaml" ]] || inventory_crd
	echo "clusterctl: $OUT is up to date ($WANT)"
	exit 0
fi
rm -f "$STAMP"

start=$(date +%s)
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
printf 'module local/clusterctlbuild\n\ngo 1.26.0\n' >go.mod
# The cluster-api module points its api submodule at ./api (a replace the
# go command ignores in a dependency): require the published submodule of
# the same release.
go mod edit -require "sigs.k8s.io/cluster-api@$CLUSTERCTL_VERSION" -require "sigs.k8s.io/cluster-api/api@$CLUSTERCTL_VERSION"
go get "sigs.k8s.io/cluster-api/cmd/clusterctl@$CLUSTERCTL_VERSION"
minor=${CLUSTERCTL_VERSION#v1.}
minor=${minor%%.*}
pkg=sigs.k8s.io/cluster-api/version
CGO_ENABLED=0 go build -ldflags "-X $pkg.gitVersion=$CLUSTERCTL_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
	-o "$OUT/clusterctl" sigs.k8s.io/cluster-api/cmd/clusterctl
CLUSTERCTL_DISABLE_VERSIONCHECK=true "$OUT/clusterctl" version
inventory_crd
echo "$WANT" >"$STAMP"
echo "clusterctl: built $WANT into $OUT in $(( $(date +%s) - start ))s"
