#!/usr/bin/env bash
# build.sh builds the Porch server and Porch's function runner (func/server)
# from the Go module proxy into OUT (default bin/porch), in a throwaway
# module under OUT/.build. It does nothing when OUT already holds both
# binaries at the pinned version (recorded in OUT/.versions).
#
#   injector/porchenv/build.sh [OUT]
#
# The pinned versions can be overridden with PORCH_VERSION and KPT_VERSION.
set -euo pipefail

PORCH_VERSION=${PORCH_VERSION:-v1.5.8}
KPT_VERSION=${KPT_VERSION:-v1.0.0-beta.61}
OUT=${1:-bin/porch}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STAMP="$OUT/.versions"
WANT="porch=$PORCH_VERSION kpt=$KPT_VERSION"

if [[ -x "$OUT/porch" && -x "$OUT/function-runner" && -f "$OUT/crds/config.porch.kpt.dev_repositories.yaml" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
	echo "porch-env: $OUT is up to date ($WANT)"
	exit 0
fi
rm -f "$STAMP"

export GOFLAGS="${GOFLAGS:-} -mod=mod"
export GOWORK=off
export GONOSUMDB="${GONOSUMDB:+$GONOSUMDB,}github.com/kptdev"
BUILD="$OUT/.build"

start=$(date +%s)
rm -rf "$BUILD" && mkdir -p "$BUILD" && cd "$BUILD"
printf 'module local/porchbuild\n\ngo 1.25.0\n' >go.mod
go mod edit -require "github.com/nephio-project/porch@$PORCH_VERSION" \
	-replace "github.com/kptdev/kpt=github.com/kptdev/kpt@$KPT_VERSION"
go get "github.com/nephio-project/porch/cmd/porch@$PORCH_VERSION" \
	"github.com/nephio-project/porch/func/server@$PORCH_VERSION"
CGO_ENABLED=0 go build -o "$OUT/porch" github.com/nephio-project/porch/cmd/porch
CGO_ENABLED=0 go build -o "$OUT/function-runner" github.com/nephio-project/porch/func/server
# The CRDs Porch needs in the kube-apiserver (Repository, and the internal
# PackageRev its CR cache keeps), from the same module version.
src=$(go list -m -f '{{.Dir}}' github.com/nephio-project/porch)
rm -rf "$OUT/crds" && mkdir -p "$OUT/crds"
cp "$src/api/porchconfig/v1alpha1/config.porch.kpt.dev_repositories.yaml" \
	"$src/internal/api/porchinternal/v1alpha1/config.porch.kpt.dev_packagerevs.yaml" "$OUT/crds/"
chmod u+w "$OUT/crds/"*
echo "$WANT" >"$STAMP"
echo "porch-env: built $WANT into $OUT in $(( $(date +%s) - start ))s"
