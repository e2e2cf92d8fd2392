#!/usr/bin/env bash
# trial-certs.sh NAMESPACE DIR: for a trial, a CA and the four client and
# server certificates of the ipam package's identities (openssl, EC P-256,
# valid 365 days) written into DIR (created; it must not exist), and the
# three kubernetes.io/tls Secrets the pods mount, in NAMESPACE, written as
# trial-secrets.yaml into the package beside this script: the next kpt live
# apply installs them with the rest (and kpt live destroy removes them);
# git ignores the file. ipam-fn's certificate stays in DIR for the CI that
# runs it. Production clusters issue these from their own CA or
# cert-manager.
set -euo pipefail
if [ $# -ne 2 ]; then
	echo "usage: $0 NAMESPACE DIR" >&2
	exit 2
fi
ns=$1 dir=$2
if [ -e "$dir" ]; then
	echo "$0: $dir exists; name a new directory" >&2
	exit 1
fi
pkg=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
chmod 700 "$dir"
cd "$dir"
quiet() { "$@" 2>/dev/null >/dev/null || "$@"; }
quiet openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
	-subj /CN=ipam-ca -keyout ca.key -out ca.crt
# leaf NAME EXTENDED-KEY-USAGE [SUBJECT-ALT-NAME]
leaf() {
	quiet openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" -keyout "$1.key" -out "$1.csr"
	printf 'extendedKeyUsage=%s\n%s\n' "$2" "${3:+subjectAltName=$3}" >"$1.ext"
	quiet openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -extfile "$1.ext" -out "$1.crt"
}
leaf ipam-server serverAuth,clientAuth "DNS:ipam-server.$ns.svc,DNS:ipam-server"
leaf ipam-controller clientAuth
leaf ipam-injector clientAuth
leaf ipam-fn clientAuth
b64() { base64 -w0 <"$1"; }
secrets=$pkg/trial-secrets.yaml
(
	umask 077
	for c in ipam-server ipam-controller ipam-injector; do
		printf -- '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: %s-tls\n  namespace: %s\ntype: kubernetes.io/tls\ndata:\n  tls.crt: %s\n  tls.key: %s\n  ca.crt: %s\n' \
			"$c" "$ns" "$(b64 "$c.crt")" "$(b64 "$c.key")" "$(b64 ca.crt)"
	done >"$secrets"
)
echo "certificates in $PWD; the Secrets in $secrets"
