#!/usr/bin/env bash
# build.sh builds the node and control-plane binaries of the test cluster
# (`make cluster`) that envtest does not need: kube-controller-manager,
# kube-scheduler, kubelet and kube-proxy from k8s.io/kubernetes, and a
# trimmed CoreDNS (only the errors, health, ready and kubernetes plugins: no
# forward, so it never asks a resolver outside the cluster). Each is built
# from the Go module proxy into OUT (default bin/k8s, next to the etcd and
# kube-apiserver of testbin/build.sh) in a throwaway module under
# OUT/.build. It does nothing when OUT holds them at the pinned versions
# (recorded in OUT/.versions-cluster).
#
#   service/cluster/build.sh [OUT]
#
# Pinned versions can be overridden with KUBE_VERSION and COREDNS_VERSION.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.32.13}
COREDNS_VERSION=${COREDNS_VERSION:-v1.12.1}
OUT=${1:-bin/k8s}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STAMP="$OUT/.versions-cluster"
WANT="kubernetes=$KUBE_VERSION coredns=$COREDNS_VERSION"
CMDS=(kube-controller-manager kube-scheduler kubelet kube-proxy)

have=1
for c in "${CMDS[@]}" coredns; do [[ -x "$OUT/$c" ]] || have=; done
if [[ -n "$have" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
	echo "cluster-bin: $OUT is up to date ($WANT)"
	exit 0
fi
rm -f "$STAMP"

export GOFLAGS="${GOFLAGS:-} -mod=mod"
export GOWORK=off
BUILD="$OUT/.build"
start=$(date +%s)

# k8s.io/kubernetes points its k8s.io/* dependencies at ./staging; replace
# each with the published module of the same release. The proxy refuses
# k8s.io/endpointslice at v0.32.13, which kube-controller-manager imports:
# its previous patch release has the same API.
build_kubernetes() {
	local dir="$BUILD/cluster" minor=${KUBE_VERSION#v1.}
	local staging="v0.$minor" minor_only=${minor%%.*}
	rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
	printf 'module local/clusterbuild\n\ngo 1.23.0\n' >go.mod
	local gomod name v
	gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	local args=(-require "k8s.io/kubernetes@$KUBE_VERSION")
	for name in $(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/.*#\1#p' "$gomod"); do
		v=$staging
		[[ $name == k8s.io/endpointslice && $KUBE_VERSION == v1.32.13 ]] && v=v0.32.12
		args+=(-replace "$name=$name@$v")
	done
	go mod edit "${args[@]}"
	local c pkgs=()
	for c in "${CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c@$KUBE_VERSION"); done
	go get "${pkgs[@]}"
	local ldflags="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor_only"
	for c in "${CMDS[@]}"; do
		local s=$(date +%s)
		go build -ldflags "$ldflags" -o "$OUT/$c" "k8s.io/kubernetes/cmd/$c"
		echo "cluster-bin: built $c in $(( $(date +%s) - s ))s"
	done
}

build_coredns() {
	local dir="$BUILD/coredns"
	rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
	printf 'module local/corednsbuild\n\ngo 1.23.0\n' >go.mod
	cp "$HERE/coredns/main.go.txt" main.go
	go get "github.com/coredns/coredns@$COREDNS_VERSION"
	go mod tidy
	local s=$(date +%s)
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT/coredns" .
	echo "cluster-bin: built coredns in $(( $(date +%s) - s ))s"
}

(build_kubernetes)
(build_coredns)
"$OUT/kubelet" --version
"$OUT/coredns" -version | head -1
echo "$WANT" >"$STAMP"
echo "cluster-bin: built $WANT into $OUT in $(( $(date +%s) - start ))s"
