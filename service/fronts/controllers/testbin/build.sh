#!/usr/bin/env bash
# build.sh builds the two binaries envtest needs (etcd and kube-apiserver)
# from the Go module proxy into OUT (default bin/k8s), each in a throwaway
# module under OUT/.build. It does nothing when OUT already holds both
# binaries at the pinned versions (recorded in OUT/.versions).
#
#   service/fronts/controllers/testbin/build.sh [OUT]
#
# Pinned versions can be overridden with ETCD_VERSION and KUBE_VERSION.
set -euo pipefail

ETCD_VERSION=${ETCD_VERSION:-v3.5.21}
KUBE_VERSION=${KUBE_VERSION:-v1.32.13}
OUT=${1:-bin/k8s}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STAMP="$OUT/.versions"
WANT="etcd=$ETCD_VERSION kube-apiserver=$KUBE_VERSION"

if [[ -x "$OUT/etcd" && -x "$OUT/kube-apiserver" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
	echo "testbin: $OUT is up to date ($WANT)"
	exit 0
fi
rm -f "$STAMP"

export GOFLAGS="${GOFLAGS:-} -mod=mod"
export GOWORK=off
BUILD="$OUT/.build"

# etcd: its module root is the main package; `go install` is refused because
# its go.mod has replace directives, so build it from a throwaway module.
build_etcd() {
	local dir="$BUILD/etcd"
	rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
	printf 'module local/etcdbuild\n\ngo 1.23.0\n' >go.mod
	go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
	go build -o "$OUT/etcd" go.etcd.io/etcd/server/v3
}

# kube-apiserver: k8s.io/kubernetes points its k8s.io/* dependencies at
# ./staging; replace each with the published module of the same release.
build_kube_apiserver() {
	local dir="$BUILD/kube-apiserver"
	local minor=${KUBE_VERSION#v1.}
	local staging="v0.$minor"
	local major=1
	local minor_only=${minor%%.*}
	rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
	printf 'module local/kubebuild\n\ngo 1.23.0\n' >go.mod
	local gomod
	gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	local args=(-require "k8s.io/kubernetes@$KUBE_VERSION")
	local name
	for name in $(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/.*#\1#p' "$gomod"); do
		args+=(-replace "$name=$name@$staging")
	done
	echo "testbin: replacing $(( ${#args[@]} / 2 - 1 )) staging modules with $staging"
	go mod edit "${args[@]}"
	go get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION"
	go build -ldflags "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor_only" \
		-o "$OUT/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
}

start=$(date +%s)
(build_etcd)
(build_kube_apiserver)
"$OUT/etcd" --version | sed -n 1p
"$OUT/kube-apiserver" --version
echo "$WANT" >"$STAMP"
echo "testbin: built $WANT into $OUT in $(( $(date +%s) - start ))s"
