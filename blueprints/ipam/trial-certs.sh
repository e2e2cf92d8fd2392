#!/usr/bin/env bash
# trial-certs.sh NAMESPACE DIR: for a trial, a CA and the four client and
# server certificates of the ipam package's identities (openssl, EC P-256,
# valid 365 days) written into DIR (created; it must not exist), and the
# three kubernetes.io/tls Secrets the pods mount created in NAMESPACE with
# kubectl. ipam-fn's certificate stays in DIR for the CI that runs it.
# Production clusters issue these from their own CA or cert-manager.
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
for c in ipam-server ipam-controller ipam-injector; do
	kubectl -n "$ns" create secret generic "$c-tls" --type=kubernetes.io/tls \
		--from-file=tls.crt="$c.crt" --from-file=tls.key="$c.key" --from-file=ca.crt=ca.crt
done
echo "certificates in $PWD"
