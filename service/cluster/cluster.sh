#!/usr/bin/env bash
# cluster.sh up|down|status: the project's single-node Kubernetes cluster
# (`make cluster`, `make cluster-down`), for trying the blueprints and for
# the tests that run pods.
#
# Everything runs inside the network namespace $NS, which holds only
# loopback and the pod bridge $BRIDGE ($BRIDGE_IP) and has no default
# route: nothing the cluster runs can send a packet off the machine. The
# machine's shell reaches the API server through netns-forward on
# 127.0.0.1:$FWD_PORT; $STATE/kubeconfig points there.
#
# Control plane: etcd, kube-apiserver (with the aggregation layer's
# front-proxy certificates), kube-controller-manager, kube-scheduler. Node:
# a containerd of its own (Debian's binary, its own config, root, state and
# socket; Docker's containerd is left alone), kubelet, kube-proxy (iptables
# mode, its rules in $NS only), CoreDNS as a pod (no forwarders), a default
# StorageClass with local PersistentVolumes under $STATE/pv. The product's
# images (`make images`) are imported into the node's containerd.
#
# Every process is started with nsenter --net (not `ip netns exec`, which
# hides /sys/fs/cgroup) and recorded by PID in $STATE/pids; `down` stops
# them by those PIDs and removes the namespace, mounts, cgroups and state.
#
# Environment: STATE (default bin/cluster), K8S_BIN (bin/k8s: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy, coredns), TOOLS_BIN (bin/cluster-tools: netns-forward, pause),
# IMAGES (the product's images to import), VERSION (their second tag).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${STATE:-$ROOT/bin/cluster}
# The physical path (bin/cluster may be a link to another checkout's): the
# containerd socket's path must stay short.
mkdir -p "$STATE"
STATE=$(cd -P "$STATE" && pwd)
K8S_BIN=${K8S_BIN:-$ROOT/bin/k8s}
TOOLS_BIN=${TOOLS_BIN:-$ROOT/bin/cluster-tools}
IMAGES=${IMAGES:-ipam-server ipam-controller ipam-injector ipam-node ipam-fn ipamctl ipam-load}
VERSION=${VERSION:-}
HERE=$ROOT/service/cluster

NS=ipam-cluster
NSPATH=/var/run/netns/$NS
NODE=ipam-node-1
BRIDGE=ipamc0
BRIDGE_IP=10.88.0.1
POD_CIDR=10.88.0.0/16
SVC_CIDR=10.96.0.0/16
API_SVC_IP=10.96.0.1
DNS_IP=10.96.0.10
FWD_PORT=16443
PV_COUNT=${PV_COUNT:-24}
PAUSE_IMAGE=ipam-cluster.local/pause:1
COREDNS_IMAGE=ipam-cluster.local/coredns:1

PKI=$STATE/pki
LOGS=$STATE/logs
PIDS=$STATE/pids
CTRD=$STATE/containerd
CTRD_SOCK=$CTRD/containerd.sock
API_IN=https://$BRIDGE_IP:6443
API_OUT=https://127.0.0.1:$FWD_PORT
KUBECONFIG_OUT=$STATE/kubeconfig
# Paths kubelet, containerd and the CNI plugins create outside $STATE
# whatever they are told; `down` removes those that were absent before.
HOST_PATHS=(/var/log/containers /var/log/pods /var/lib/kubelet /var/lib/cni /run/containerd /etc/cni /usr/libexec/kubernetes)

say() { echo "cluster: $*"; }
die() { echo "cluster: $*" >&2; exit 1; }
nsx() { nsenter --net="$NSPATH" "$@"; }
kc() { kubectl --kubeconfig "$KUBECONFIG_OUT" "$@"; }
alive() { [[ -f $PIDS/$1.pid ]] && kill -0 "$(cat "$PIDS/$1.pid")" 2>/dev/null; }

# start NAME CMD...: runs CMD inside $NS in a session of its own, logging
# to $LOGS/NAME.log, and records its PID (nsenter execs CMD: same PID).
start() {
	local name=$1
	shift
	setsid nsenter --net="$NSPATH" "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$PIDS/$name.pid"
}

# waitfor SECONDS WHAT CMD...: until CMD succeeds; on timeout, the log.
waitfor() {
	local secs=$1 what=$2 i
	shift 2
	for ((i = 0; i < secs * 4; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.25
	done
	local log=$LOGS/${what%% *}.log
	[[ -f $log ]] && tail -n 30 "$log" >&2
	die "timed out after ${secs}s waiting for $what"
}

# The processes `up` starts, in the order `down` stops them.
PROCS=(kube-proxy kubelet containerd kube-scheduler kube-controller-manager kube-apiserver etcd forwarder)

# ours: whether the namespace $NS is the one this state made.
ours() {
	[[ -f $STATE/netns-inode && "$(stat -L -c %i "$NSPATH" 2>/dev/null)" == "$(cat "$STATE/netns-inode")" ]]
}

status() {
	local p ok=1
	for p in "${PROCS[@]}"; do alive "$p" || ok=; done
	[[ -n $ok ]] && ours && kc get --raw /readyz >/dev/null 2>&1
}

preflight() {
	[[ $(id -u) == 0 ]] || die "needs root (network namespaces, containerd, kubelet)"
	local b
	for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy coredns; do
		[[ -x $K8S_BIN/$b ]] || die "$K8S_BIN/$b is missing (make cluster-bin builds it)"
	done
	for b in netns-forward pause; do
		[[ -x $TOOLS_BIN/$b ]] || die "$TOOLS_BIN/$b is missing (make cluster-tools builds it)"
	done
	for b in containerd runc ctr nsenter ip iptables openssl kubectl docker; do
		command -v "$b" >/dev/null || die "$b is not on PATH"
	done
	[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
		[[ -x $ROOT/bin/cni/bridge ]] || die "no CNI bridge plugin (make cni-plugins)"
	# A port of the forwarder taken by someone else.
	if (exec 3<>/dev/tcp/127.0.0.1/$FWD_PORT) 2>/dev/null; then
		die "127.0.0.1:$FWD_PORT is in use; the cluster's API forwarder listens there"
	fi
}

netns_up() {
	ip netns add "$NS"
	ip -n "$NS" link set lo up
	ip -n "$NS" link add "$BRIDGE" type bridge
	ip -n "$NS" addr add "$BRIDGE_IP/16" dev "$BRIDGE"
	ip -n "$NS" link set "$BRIDGE" up
	# The namespace's own processes (kube-apiserver's webhooks and
	# aggregated APIs, CoreDNS's clients) reach ClusterIPs before
	# kube-proxy's DNAT only with a route for them; on-link, on the bridge.
	ip -n "$NS" route add "$SVC_CIDR" dev "$BRIDGE" src "$BRIDGE_IP"
	if ip -n "$NS" route show default | grep -q . || ip -n "$NS" -6 route show default | grep -q .; then
		die "$NS has a default route"
	fi
	stat -L -c '%i' "$NSPATH" >"$STATE/netns-inode"
}

pki() {
	mkdir -p "$PKI"
	cd "$PKI"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
		-subj /CN=ipam-cluster-ca -keyout ca.key -out ca.crt 2>/dev/null
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
		-subj /CN=ipam-cluster-front-proxy-ca -keyout front-proxy-ca.key -out front-proxy-ca.crt 2>/dev/null
	# leaf NAME SUBJECT EXTENDED-KEY-USAGE [SUBJECT-ALT-NAME] [CA]
	leaf() {
		local ca=${5:-ca}
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
		printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n%s\n' "$3" "${4:+subjectAltName=$4}" >"$1.ext"
		openssl x509 -req -in "$1.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days 30 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
		rm -f "$1.csr" "$1.ext"
	}
	leaf apiserver /CN=kube-apiserver serverAuth \
		"IP:$BRIDGE_IP,IP:127.0.0.1,IP:$API_SVC_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	leaf apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
	leaf front-proxy-client /CN=front-proxy-client clientAuth "" front-proxy-ca
	openssl genrsa -out sa.key 2048 2>/dev/null
	openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	# One bearer token per component (kube-apiserver --token-auth-file).
	local name user group line=""
	: >tokens.csv
	while read -r name user group; do
		local tok
		tok=$(openssl rand -hex 16)
		echo "$tok,$user,uid-$name,\"$group\"" >>tokens.csv
		kubeconfig "$name" "$tok" "$API_IN" >"$name.kubeconfig"
		[[ $name == admin ]] && line=$tok
	done <<-EOT
		admin admin system:masters
		kubelet system:node:$NODE system:nodes
		controller-manager system:kube-controller-manager system:masters
		scheduler system:kube-scheduler system:masters
		kube-proxy system:kube-proxy system:node-proxier
	EOT
	chmod 600 ./*.key tokens.csv ./*.kubeconfig
	kubeconfig admin "$line" "$API_OUT" >"$KUBECONFIG_OUT.tmp"
	chmod 600 "$KUBECONFIG_OUT.tmp"
	cd - >/dev/null
}

# kubeconfig NAME TOKEN SERVER: a kubeconfig for a token.
kubeconfig() {
	cat <<-EOT
		apiVersion: v1
		kind: Config
		clusters:
		- name: ipam-cluster
		  cluster:
		    server: $3
		    certificate-authority: $PKI/ca.crt
		users:
		- name: $1
		  user:
		    token: $2
		contexts:
		- name: $1@ipam-cluster
		  context: {cluster: ipam-cluster, user: $1}
		current-context: $1@ipam-cluster
	EOT
}

control_plane() {
	mkdir -p "$STATE/etcd"
	start etcd "$K8S_BIN/etcd" --name ipam-cluster --data-dir "$STATE/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster ipam-cluster=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
		--quota-backend-bytes 2147483648 --log-level warn
	waitfor 30 "etcd" nsx bash -c 'exec 3<>/dev/tcp/127.0.0.1/2379'
	start kube-apiserver "$K8S_BIN/kube-apiserver" \
		--etcd-servers=http://127.0.0.1:2379 \
		--bind-address="$BRIDGE_IP" --advertise-address="$BRIDGE_IP" --secure-port=6443 \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" \
		--authorization-mode=Node,RBAC \
		--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-cluster-ip-range="$SVC_CIDR" \
		--allow-privileged=true \
		--kubelet-preferred-address-types=InternalIP \
		--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
		--requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
		--requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
		--requestheader-extra-headers-prefix=X-Remote-Extra- \
		--proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
		--cert-dir="$STATE/apiserver-certs" --v=1
	waitfor 120 "kube-apiserver /readyz" nsx curl -sf --cacert "$PKI/ca.crt" "$API_IN/readyz"
	start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
		--kubeconfig="$PKI/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$PKI/controller-manager.kubeconfig" --authorization-kubeconfig="$PKI/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port=10257 \
		--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
		--use-service-account-credentials=false \
		--service-cluster-ip-range="$SVC_CIDR" --cluster-cidr="$POD_CIDR" --allocate-node-cidrs=false \
		--controllers='*,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller' \
		--flex-volume-plugin-dir="$STATE/flexvolume" --leader-elect=false --cert-dir="$STATE/cm-certs" --v=1
	start kube-scheduler "$K8S_BIN/kube-scheduler" \
		--kubeconfig="$PKI/scheduler.kubeconfig" \
		--authentication-kubeconfig="$PKI/scheduler.kubeconfig" --authorization-kubeconfig="$PKI/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --v=1
	waitfor 60 "kube-controller-manager /healthz" nsx curl -sfk https://127.0.0.1:10257/healthz
	waitfor 60 "kube-scheduler /healthz" nsx curl -sfk https://127.0.0.1:10259/healthz
}

forwarder() {
	setsid "$TOOLS_BIN/netns-forward" --listen "127.0.0.1:$FWD_PORT" --netns "$NSPATH" --to "$BRIDGE_IP:6443" \
		>"$LOGS/forwarder.log" 2>&1 </dev/null &
	echo $! >"$PIDS/forwarder.pid"
	mv "$KUBECONFIG_OUT.tmp" "$KUBECONFIG_OUT"
	waitfor 30 "forwarder" kc get --raw /readyz
}

cni_dirs() {
	mkdir -p "$STATE/cni/bin" "$STATE/cni/net.d" "$STATE/cni/host-local"
	local p src
	for p in bridge host-local loopback portmap; do
		src=/usr/lib/cni/$p
		[[ -x $src ]] || src=$ROOT/bin/cni/$p
		[[ -x $src ]] && install -m 0755 "$src" "$STATE/cni/bin/$p"
	done
	# The pod network: the bridge, host-local addresses of $POD_CIDR, and
	# routes for pods and Services only (no default route for pods either).
	cat >"$STATE/cni/net.d/10-ipam-cluster.conflist" <<-EOT
		{
		  "cniVersion": "0.4.0",
		  "name": "ipam-cluster",
		  "plugins": [
		    {
		      "type": "bridge",
		      "bridge": "$BRIDGE",
		      "isGateway": true,
		      "isDefaultGateway": false,
		      "ipMasq": false,
		      "hairpinMode": true,
		      "ipam": {
		        "type": "host-local",
		        "dataDir": "$STATE/cni/host-local",
		        "ranges": [[{"subnet": "$POD_CIDR", "rangeStart": "10.88.1.1", "gateway": "$BRIDGE_IP"}]],
		        "routes": [{"dst": "$POD_CIDR"}, {"dst": "$SVC_CIDR"}]
		      }
		    },
		    {"type": "loopback"}
		  ]
		}
	EOT
}

containerd_up() {
	mkdir -p "$CTRD/root" "$CTRD/state" "$CTRD/opt" "$CTRD/runc"
	cni_dirs
	cat >"$CTRD/config.toml" <<-EOT
		version = 2
		root = "$CTRD/root"
		state = "$CTRD/state"
		oom_score = 0
		[grpc]
		  address = "$CTRD_SOCK"
		[ttrpc]
		  address = ""
		[debug]
		  address = ""
		[metrics]
		  address = ""
		[plugins]
		  [plugins."io.containerd.internal.v1.opt"]
		    path = "$CTRD/opt"
		  [plugins."io.containerd.grpc.v1.cri"]
		    sandbox_image = "$PAUSE_IMAGE"
		    netns_mounts_under_state_dir = true
		    stream_server_address = "127.0.0.1"
		    stream_server_port = "0"
		    enable_selinux = false
		    disable_apparmor = true
		    # root lacks CAP_SYS_RESOURCE here: runc must not lower oom_score_adj.
		    restrict_oom_score_adj = true
		    [plugins."io.containerd.grpc.v1.cri".containerd]
		      snapshotter = "overlayfs"
		      default_runtime_name = "runc"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		        runtime_type = "io.containerd.runc.v2"
		        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		          BinaryName = "$(command -v runc)"
		          Root = "$CTRD/runc"
		          SystemdCgroup = false
		    [plugins."io.containerd.grpc.v1.cri".cni]
		      bin_dir = "$STATE/cni/bin"
		      conf_dir = "$STATE/cni/net.d"
		      max_conf_num = 1
		    [plugins."io.containerd.grpc.v1.cri".registry]
		      config_path = ""
	EOT
	start containerd containerd --config "$CTRD/config.toml"
	waitfor 30 "containerd" ctr -a "$CTRD_SOCK" version
}

# infra_images: the pause and CoreDNS images, FROM scratch around static
# binaries, into tarballs the node imports.
infra_images() {
	local dir=$STATE/images
	mkdir -p "$dir/pause" "$dir/coredns"
	cp "$TOOLS_BIN/pause" "$dir/pause/pause"
	printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$dir/pause/Dockerfile"
	cp "$K8S_BIN/coredns" "$dir/coredns/coredns"
	printf 'FROM scratch\nCOPY coredns /coredns\nUSER 65532:65532\nENTRYPOINT ["/coredns"]\n' >"$dir/coredns/Dockerfile"
	docker build -q -t "$PAUSE_IMAGE" "$dir/pause" >/dev/null 2>>"$LOGS/images.log"
	docker build -q -t "$COREDNS_IMAGE" "$dir/coredns" >/dev/null 2>>"$LOGS/images.log"
	docker save "$PAUSE_IMAGE" "$COREDNS_IMAGE" | ctr -a "$CTRD_SOCK" -n k8s.io images import - >/dev/null
}

# images: imports each of the product's images the local Docker holds, by
# its tags dev and $VERSION, when its ID differs from the one imported last
# (so an unchanged image changes nothing).
images() {
	alive containerd || die "the cluster is not up (make cluster)"
	local name id refs=() ids=""
	for name in $IMAGES; do
		id=$(docker image inspect --format '{{.Id}}' "$name:dev" 2>/dev/null) || { say "image $name:dev not built (make images); skipped"; continue; }
		ids+="$name $id"$'\n'
		refs+=("$name:dev")
		[[ -n $VERSION ]] && docker image inspect "$name:$VERSION" >/dev/null 2>&1 && refs+=("$name:$VERSION")
	done
	if [[ -f $STATE/images.txt && "$(cat "$STATE/images.txt")" == "${ids%$'\n'}" ]]; then
		say "images unchanged"
		return 0
	fi
	if ((${#refs[@]})); then
		docker save "${refs[@]}" | ctr -a "$CTRD_SOCK" -n k8s.io images import - >/dev/null
		say "imported ${refs[*]}"
	fi
	printf '%s' "$ids" >"$STATE/images.txt"
}

kubelet_up() {
	local kl=$STATE/kubelet
	mkdir -p "$kl/root" "$kl/pod-logs" "$kl/volume-plugins"
	cat >"$kl/config.yaml" <<-EOT
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		address: $BRIDGE_IP
		port: 10250
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: 10248
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: false}
		  x509: {clientCAFile: $PKI/ca.crt}
		authorization: {mode: AlwaysAllow}
		cgroupDriver: cgroupfs
		containerRuntimeEndpoint: unix://$CTRD_SOCK
		imageServiceEndpoint: unix://$CTRD_SOCK
		failSwapOn: false
		cgroupsPerQOS: true
		enforceNodeAllocatable: ["pods"]
		podLogsDir: $kl/pod-logs
		volumePluginDir: $kl/volume-plugins
		# CoreDNS of this cluster, and no resolver of the machine's.
		clusterDNS: ["$DNS_IP"]
		clusterDomain: cluster.local
		resolvConf: ""
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"}
		maxPods: 110
		syncFrequency: 10s
	EOT
	start kubelet "$K8S_BIN/kubelet" --config="$kl/config.yaml" --kubeconfig="$PKI/kubelet.kubeconfig" \
		--root-dir="$kl/root" --hostname-override="$NODE" --node-ip="$BRIDGE_IP" --cert-dir="$kl/pki" --v=1
	waitfor 60 "kubelet /healthz" nsx curl -sf http://127.0.0.1:10248/healthz
	waitfor 60 "node $NODE Ready" bash -c "[[ \$(kubectl --kubeconfig '$KUBECONFIG_OUT' get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}') == True ]]"
}

kube_proxy_up() {
	mkdir -p "$STATE/kube-proxy"
	cat >"$STATE/kube-proxy/config.yaml" <<-EOT
		apiVersion: kubeproxy.config.k8s.io/v1alpha1
		kind: KubeProxyConfiguration
		clientConnection:
		  kubeconfig: $PKI/kube-proxy.kubeconfig
		hostnameOverride: $NODE
		bindAddress: $BRIDGE_IP
		healthzBindAddress: 127.0.0.1:10256
		metricsBindAddress: 127.0.0.1:10249
		mode: iptables
		clusterCIDR: $POD_CIDR
		nodePortAddresses: ["$BRIDGE_IP/32"]
		iptables:
		  localhostNodePorts: false
		  masqueradeAll: false
		# 0: kube-proxy changes no conntrack sysctl of the machine.
		conntrack:
		  maxPerCore: 0
		  min: 0
		  tcpEstablishedTimeout: 0s
		  tcpCloseWaitTimeout: 0s
	EOT
	start kube-proxy "$K8S_BIN/kube-proxy" --config="$STATE/kube-proxy/config.yaml" --v=1
	waitfor 60 "kube-proxy /healthz" nsx curl -sf http://127.0.0.1:10256/healthz
}

# addons: CoreDNS, the StorageClass and the local PersistentVolumes.
addons() {
	local pv=$STATE/pv i
	mkdir -p "$pv"
	{
		sed -e "s|@COREDNS_IMAGE@|$COREDNS_IMAGE|" -e "s|@DNS_IP@|$DNS_IP|" "$HERE/coredns.yaml"
		cat <<-EOT
			---
			apiVersion: storage.k8s.io/v1
			kind: StorageClass
			metadata:
			  name: local
			  annotations:
			    storageclass.kubernetes.io/is-default-class: "true"
			provisioner: kubernetes.io/no-provisioner
			volumeBindingMode: WaitForFirstConsumer
			reclaimPolicy: Retain
		EOT
		for ((i = 1; i <= PV_COUNT; i++)); do
			mkdir -p "$pv/pv$i"
			cat <<-EOT
				---
				apiVersion: v1
				kind: PersistentVolume
				metadata:
				  name: local-pv$i
				  labels: {ipam.nephio.org/cluster-pv: "true"}
				spec:
				  capacity: {storage: 10Gi}
				  accessModes: [ReadWriteOnce]
				  persistentVolumeReclaimPolicy: Retain
				  storageClassName: local
				  local: {path: $pv/pv$i}
				  nodeAffinity:
				    required:
				      nodeSelectorTerms:
				      - matchExpressions:
				        - {key: kubernetes.io/hostname, operator: In, values: [$NODE]}
			EOT
		done
	} | kc apply -f - >/dev/null
	waitfor 120 "CoreDNS Available" kc -n kube-system wait --for=condition=Available deploy/coredns --timeout=1s
}

up() {
	mkdir -p "$STATE" "$LOGS" "$PIDS"
	if status; then
		say "up (KUBECONFIG=$KUBECONFIG_OUT); images:"
		images
		return 0
	fi
	if [[ -e $NSPATH ]] && ! ours; then
		die "the network namespace $NS exists but is not this checkout's (another checkout's cluster?): run make cluster-down there"
	fi
	if [[ -e $NSPATH ]] || ls "$PIDS"/*.pid >/dev/null 2>&1; then
		say "a cluster is partly up; taking it down first"
		down
		mkdir -p "$STATE" "$LOGS" "$PIDS"
	fi
	preflight
	local t0=$SECONDS
	if [[ ! -f $STATE/absent-before ]]; then
		local p
		for p in "${HOST_PATHS[@]}"; do [[ -e $p ]] || echo "$p"; done >"$STATE/absent-before"
	fi
	netns_up
	pki
	control_plane
	forwarder
	containerd_up
	infra_images
	images
	kubelet_up
	kube_proxy_up
	addons
	say "up in $((SECONDS - t0))s: KUBECONFIG=$KUBECONFIG_OUT kubectl get nodes"
}

# stop NAME: SIGTERM to the recorded PID, SIGKILL after 10 s.
stop() {
	local name=$1 pid i
	[[ -f $PIDS/$name.pid ]] || return 0
	pid=$(cat "$PIDS/$name.pid")
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for ((i = 0; i < 40; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$PIDS/$name.pid"
}

down() {
	[[ -d $STATE ]] || { say "down (nothing to remove)"; return 0; }
	local ctr=(ctr -a "$CTRD_SOCK" -n k8s.io) t c f p m
	# Pods first, through kubelet, so that their CNI DEL runs.
	if alive kubelet && alive kube-apiserver && alive forwarder; then
		kc delete pods --all -A --grace-period=1 --timeout=30s --wait=true >/dev/null 2>&1 || true
	fi
	stop kube-proxy
	stop kubelet
	if alive containerd; then
		for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
		sleep 0.5
		for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks delete -f "$t" >/dev/null 2>&1 || true; done
		for c in $("${ctr[@]}" containers ls -q 2>/dev/null); do "${ctr[@]}" containers delete "$c" >/dev/null 2>&1 || true; done
	fi
	stop containerd
	# The shims containerd started (they outlive it), by their PID files.
	for f in $(find "$CTRD/state" -name shim.pid 2>/dev/null); do
		p=$(cat "$f")
		[[ -n $p ]] && kill -9 "$p" 2>/dev/null || true
	done
	for p in kube-scheduler kube-controller-manager kube-apiserver etcd forwarder; do stop "$p"; done
	# Mounts under $STATE (pod namespaces, rootfs overlays, volumes), deepest first.
	for m in $(awk '{print $5}' /proc/self/mountinfo | grep "^$STATE/" | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	if ours; then
		ip netns del "$NS" 2>/dev/null || true
	fi
	# kubelet's pod cgroups (cgroup v1 hierarchies, or v2), deepest first.
	for m in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		[[ -d $m ]] && find "$m" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
	if [[ -f $STATE/absent-before ]]; then
		while read -r p; do
			case $p in
			/run/containerd) [[ -z "$(ls -A /run/containerd/s 2>/dev/null)" ]] && rm -rf /run/containerd ;;
			*) rm -rf "$p" ;;
			esac
		done <"$STATE/absent-before"
	fi
	# Docker's images of the cluster's own (the product's stay).
	docker rmi "$PAUSE_IMAGE" "$COREDNS_IMAGE" >/dev/null 2>&1 || true
	local ino left="" pid
	ino=$(cat "$STATE/netns-inode" 2>/dev/null || true)
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
		if [[ -n $ino && "$(stat -L -c %i "$p/ns/net" 2>/dev/null)" == "$ino" ]] ||
			tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -e "$STATE/" -e "netns/$NS"; then
			left+=" $pid"
		fi
	done
	rm -rf "$STATE"
	[[ -z $left ]] || die "processes of the cluster are still running:$left"
	! grep -q " $STATE/" /proc/self/mountinfo || die "mounts under $STATE are left"
	if [[ -n $ino && "$(stat -L -c %i "$NSPATH" 2>/dev/null)" == "$ino" ]]; then
		die "the network namespace $NS is left"
	fi
	say "down"
}

case ${1:-} in
up) up ;;
down) down ;;
images) images ;;
status) if status; then say "up (KUBECONFIG=$KUBECONFIG_OUT)"; else say "not up"; exit 1; fi ;;
*)
	echo "usage: $0 up|down|status|images" >&2
	exit 2
	;;
esac
