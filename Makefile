# github.com/nephio-project/ipam — `make help` lists the targets.
#
# Tools the targets need are installed at pinned versions under bin/ by the
# target that needs them, and reused while they report that version.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO  ?= go
BIN := $(CURDIR)/bin

# Pinned tool versions.
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN         := $(BIN)/controller-gen

# How long `make fuzz` runs each Fuzz* target.
FUZZTIME ?= 20s
# Which benchmarks `make bench` runs (a -bench regexp).
BENCH ?= .

# Main packages live next to their component, under <component>/cmd/<binary>;
# directories without Go files yet are skipped.
CMD_PKGS := $(patsubst %/,./%,$(sort $(dir $(wildcard service/cmd/*/*.go functions/cmd/*/*.go injector/cmd/*/*.go))))
# Top-level directories holding Go code.
GO_DIRS := $(wildcard api service functions injector)

.PHONY: help build run demo test bench bench-peers peers-smoke fuzz generate generate-api generate-proto verify lint clean controller-gen

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{ printf "  %-20s %s\n", $$1, $$2 }'

# VERSION names the build: ipamctl version and ipam-fn --version print it,
# images are tagged with it, make catalog writes ipam-fn's catalog entry of it.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)
# VERSION_LDFLAGS stamp VERSION into the binaries that print it.
VERSION_LDFLAGS := -X github.com/nephio-project/ipam/service/fronts/ctl.Version=$(VERSION) \
	-X github.com/nephio-project/ipam/functions/ipamfn.Version=$(VERSION)

build: ## build every binary into bin/
	@mkdir -p $(BIN)
ifneq ($(CMD_PKGS),)
	CGO_ENABLED=0 $(GO) build -ldflags='$(VERSION_LDFLAGS)' -o $(BIN)/ $(CMD_PKGS)
else
	@echo "build: no main packages under service/cmd, functions/cmd or injector/cmd yet"
endif

run: ## build ipam-server and ipamctl, serve on 127.0.0.1:9090, web view on http://127.0.0.1:8080 (store in bin/data, demo VRF vpc-1)
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -ldflags='-X github.com/nephio-project/ipam/service/fronts/ctl.Version=$(VERSION)' -o bin/ ./service/cmd/ipam-server ./service/cmd/ipamctl
	bin/ipam-server --listen 127.0.0.1:9090 --web-addr 127.0.0.1:8080 --data-dir bin/data --demo

demo: ## run (as make run) for the five-minute tour; use bin/ipamctl in another terminal
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -o bin/ ./service/cmd/ipam-server ./service/cmd/ipamctl
	@echo "demo: in another terminal try: bin/ipamctl vrf list; bin/ipamctl prefix list;"
	@echo "demo:   bin/ipamctl alloc create alloc1 --selector nephio.org/network-instance=vpc-1 --selector nephio.org/network-name=net1;"
	@echo "demo:   bin/ipamctl tree vpc-1; and open http://127.0.0.1:8080 (the web view)"
	bin/ipam-server --listen 127.0.0.1:9090 --web-addr 127.0.0.1:8080 --data-dir bin/data --demo

# make test runs the cluster tests on the cluster of make cluster: it
# starts one when none is up and takes down only the one it started.
test: export KUBEBUILDER_ASSETS = $(TESTBIN)
test: verify testbin porch-env clusterctl browser cni-plugins ## build the tools the tests need under bin/, start the cluster, and run all tests
	$(GO) vet ./...
	@started=; if ! service/cluster/cluster.sh status >/dev/null 2>&1; then started=1; fi; \
	trap 'if [ -n "$$started" ]; then $(MAKE) --no-print-directory cluster-down; fi' EXIT; \
	$(MAKE) --no-print-directory cluster; \
	echo "$(GO) test -race -count=1 -timeout 45m ./..."; \
	IPAM_CLUSTER_REQUIRED=1 $(GO) test -race -count=1 -timeout 45m ./...
	$(MAKE) --no-print-directory peers-smoke

bench: export KUBEBUILDER_ASSETS = $(TESTBIN)
bench: testbin ## run the benchmarks and print them against the performance targets (W9 needs make porch-env; W9_DRAFTS=1000 for a bigger fleet)
	@mkdir -p $(BIN)
	@status=0; \
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count=1 -timeout 60m ./... 2>&1 | tee $(BIN)/bench.txt || status=$$?; \
	echo; $(GO) run ./service/internal/benchtable < $(BIN)/bench.txt; \
	exit $$status

# The peer benchmarks are a module of their own (service/peerbench); the
# checksum database does not know metal-stack/go-ipam nor Nephio's routing
# table (hansthienpondt/nipam, kentik/patricia): their sums are in its
# go.sum.
PEERS_ENV = GONOSUMDB=github.com/metal-stack,github.com/hansthienpondt,github.com/kentik

bench-peers: ## run the same workloads against this project and its peers (go-ipam, netipx, the Kubernetes service-IP bitmap, Nephio's routing table) and print the table
	@mkdir -p $(BIN)
	@cd service/peerbench && status=0; \
	$(PEERS_ENV) $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count=1 -timeout 60m . 2>&1 | tee $(abspath $(BIN))/bench-peers.txt || status=$$?; \
	echo; $(PEERS_ENV) $(GO) run ./cmd/peertable < $(abspath $(BIN))/bench-peers.txt; \
	exit $$status

peers-smoke: ## build the peer benchmarks and run each workload once (part of make test)
	@cd service/peerbench && $(PEERS_ENV) $(GO) vet ./... && \
	$(PEERS_ENV) $(GO) test -count=1 -short -run . -bench . -benchtime 1x ./...

fuzz: ## run every Fuzz* target for FUZZTIME (default 20s) each
	@targets=$$($(GO) test -list '^Fuzz' ./... | awk '/^Fuzz/ { names[n++] = $$1; next } /^ok/ { for (i = 0; i < n; i++) print $$2, names[i]; n = 0 }'); \
	if [ -z "$$targets" ]; then echo "fuzz: no Fuzz* targets"; exit 0; fi; \
	while read -r pkg name; do \
		echo "fuzz: $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$pkg" < /dev/null; \
	done <<< "$$targets"

generate: generate-api generate-proto blueprint-crds blueprint-rbac capi-crds ## regenerate all committed generated code

generate-api: controller-gen ## regenerate deepcopy and CRD YAML of api/ipam, api/metal3, api/nvidia and api/nephioresource, deepcopy of the api/capi mirrors
	rm -f api/ipam/v1alpha1/crds/*.yaml
	$(CONTROLLER_GEN) object paths=./api/ipam/... crd paths=./api/ipam/... output:crd:artifacts:config=api/ipam/v1alpha1/crds
	$(CONTROLLER_GEN) object paths=./api/capi/...
	rm -f api/metal3/v1alpha1/crds/*.yaml
	$(CONTROLLER_GEN) object paths=./api/metal3/... crd paths=./api/metal3/... output:crd:artifacts:config=api/metal3/v1alpha1/crds
	rm -f api/nvidia/v1alpha1/crds/*.yaml
	$(CONTROLLER_GEN) object paths=./api/nvidia/... crd paths=./api/nvidia/... output:crd:artifacts:config=api/nvidia/v1alpha1/crds
	$(CONTROLLER_GEN) object paths=./api/nephioresource/common/...
	rm -f api/nephioresource/ipam/v1alpha1/crds/*.yaml
	$(CONTROLLER_GEN) object paths=./api/nephioresource/ipam/... crd paths=./api/nephioresource/ipam/... output:crd:artifacts:config=api/nephioresource/ipam/v1alpha1/crds
	rm -f api/nephioresource/vlan/v1alpha1/crds/*.yaml
	$(CONTROLLER_GEN) object paths=./api/nephioresource/vlan/... crd paths=./api/nephioresource/vlan/... output:crd:artifacts:config=api/nephioresource/vlan/v1alpha1/crds

# ipam-controller's ClusterRoles, one per blueprint, from the
# +kubebuilder:rbac markers of service/fronts/controllers/rbac_*.go
# (TestBlueprintRBACGenerated fails when they drift).
.PHONY: blueprint-rbac

blueprint-rbac: controller-gen ## generate ipam-controller's ClusterRoles in the blueprints from the +kubebuilder:rbac markers
	service/fronts/controllers/rbac.sh $(CONTROLLER_GEN) .

# The Cluster API CRDs the Cluster API front serves claims of, copied from
# the sigs.k8s.io/cluster-api module (never written by hand).
CAPI_VERSION := v1.11.3
CAPI_CRDS    := ipam.cluster.x-k8s.io_ipaddressclaims.yaml ipam.cluster.x-k8s.io_ipaddresses.yaml cluster.x-k8s.io_clusters.yaml

.PHONY: capi-crds

capi-crds: ## copy the Cluster API IPAddressClaim, IPAddress and Cluster CRDs of $(CAPI_VERSION) into api/capi/crds
	@dir=$$(cd $$(mktemp -d) && GOFLAGS=-mod=mod $(GO) mod download -json sigs.k8s.io/cluster-api@$(CAPI_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
	test -n "$$dir" || { echo "capi-crds: cannot download sigs.k8s.io/cluster-api@$(CAPI_VERSION)" >&2; exit 1; }; \
	mkdir -p api/capi/crds; \
	for f in $(CAPI_CRDS); do cp "$$dir/config/crd/bases/$$f" api/capi/crds/$$f; chmod 644 api/capi/crds/$$f; done

# Pinned protobuf tools.
BUF_VERSION                := v1.75.0
BUF                        := $(BIN)/buf
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO              := $(BIN)/protoc-gen-go
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
PROTOC_GEN_GO_GRPC         := $(BIN)/protoc-gen-go-grpc

.PHONY: buf protoc-gen-go protoc-gen-go-grpc

generate-proto: buf protoc-gen-go protoc-gen-go-grpc ## regenerate api/proto Go code (buf with the pinned plugins under bin/)
	cd api/proto && $(BUF) generate

buf: ## install the pinned buf under bin/ unless it is there
	@if [ "v$$($(BUF) --version 2>/dev/null)" != "$(BUF_VERSION)" ]; then \
		echo "installing buf $(BUF_VERSION) into bin/"; \
		GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION); \
	fi

protoc-gen-go: ## install the pinned protoc-gen-go under bin/ unless it is there
	@if [ "$$($(PROTOC_GEN_GO) --version 2>/dev/null)" != "protoc-gen-go $(PROTOC_GEN_GO_VERSION)" ]; then \
		echo "installing protoc-gen-go $(PROTOC_GEN_GO_VERSION) into bin/"; \
		GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION); \
	fi

protoc-gen-go-grpc: ## install the pinned protoc-gen-go-grpc under bin/ unless it is there
	@if [ "v$$($(PROTOC_GEN_GO_GRPC) --version 2>/dev/null | awk '{ print $$2 }')" != "$(PROTOC_GEN_GO_GRPC_VERSION)" ]; then \
		echo "installing protoc-gen-go-grpc $(PROTOC_GEN_GO_GRPC_VERSION) into bin/"; \
		GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION); \
	fi

GENERATED := api/ blueprints/ipam/crds/ blueprints/ipam-metal3/crds/ blueprints/ipam-nvidia/crds/ blueprints/ipam-nephio/crds/ \
	blueprints/ipam/rbac-controller-role.yaml blueprints/ipam-metal3/rbac-controller-metal3-role.yaml \
	blueprints/ipam-nvidia/rbac-controller-nvidia-role.yaml blueprints/ipam-nephio/rbac-controller-nephio-role.yaml

verify: generate ## fail if committed generated code under api/ (or the blueprints' CRDs and ClusterRoles) is stale
	@untracked=$$(git ls-files --others --exclude-standard -- $(GENERATED)); \
	if ! git diff --quiet -- $(GENERATED) || [ -n "$$untracked" ]; then \
		git --no-pager diff --stat -- $(GENERATED); \
		for f in $$untracked; do echo "untracked: $$f"; done; \
		echo "verify: generated code under api/ is stale or not committed; run 'make generate' and commit the result" >&2; \
		exit 1; \
	fi

lint: golangci-lint ## gofmt, go vet and golangci-lint (.golangci.yml)
	@unformatted=$$(gofmt -l $(GO_DIRS)); \
	if [ -n "$$unformatted" ]; then echo "lint: not gofmt-ed:" >&2; echo "$$unformatted" >&2; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...
	cd service/peerbench && $(PEERS_ENV) $(abspath $(GOLANGCI_LINT)) run ./...

# Pinned linter.
GOLANGCI_LINT_VERSION := 2.15.0
GOLANGCI_LINT         := $(BIN)/golangci-lint

.PHONY: golangci-lint

golangci-lint: ## install the pinned golangci-lint under bin/ unless it is there
	@if ! $(GOLANGCI_LINT) version 2>/dev/null | grep -q "version $(GOLANGCI_LINT_VERSION) "; then \
		echo "installing golangci-lint v$(GOLANGCI_LINT_VERSION) into bin/"; \
		GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$(GOLANGCI_LINT_VERSION); \
	fi

# Container images `make images` builds, as name:main-packages:Dockerfile
# (packages joined by +: the ipam-node image also carries the nv-ipam CNI
# plugin it installs on the node). Each is FROM scratch around static
# binaries built here (CGO_ENABLED=0) and has no shell; nothing is pulled.
# All run as the non-root uid 65532 but ipam-node, which writes into the
# host's CNI directories as root.
# Tags: $(VERSION) and dev. The build contexts' files get one fixed
# modification time, so that a rebuild of the same binaries is the same
# image (Docker's build cache): make cluster then imports nothing new.
# Where `make images` builds the binaries and the build contexts.
IMAGES_DIR ?= $(BIN)/images
IMAGES := ipam-fn:./functions/cmd/ipam-fn:functions/Dockerfile.local \
	ipam-server:./service/cmd/ipam-server:service/Dockerfile.local \
	ipam-controller:./service/cmd/ipam-controller:service/Dockerfile.controller.local \
	ipam-injector:./injector/cmd/ipam-injector:injector/Dockerfile.local \
	ipam-node:./service/cmd/ipam-node+./service/cmd/nv-ipam:service/node/Dockerfile.local \
	ipamctl:./service/cmd/ipamctl:service/Dockerfile.ipamctl.local \
	ipam-load:./service/cluster/cmd/ipam-load:service/cluster/Dockerfile.load.local

.PHONY: images

images: ## build the images ipam-fn, ipam-server, ipam-controller, ipam-injector, ipam-node, ipamctl, ipam-load (tags: git describe, dev); skipped without docker
	@if ! reason=$$(docker info 2>&1 >/dev/null); then echo "images: docker is not available (docker info failed: $$reason); skipping"; exit 0; fi; \
	docker buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0; \
	out=$(IMAGES_DIR); rm -rf "$$out"; mkdir -p "$$out/bin"; \
	pkgs=; for spec in $(IMAGES); do IFS=: read -r name pkg dockerfile <<< "$$spec"; pkgs="$$pkgs $${pkg//+/ }"; done; \
	echo "images: go build$$pkgs (CGO_ENABLED=0, static)"; \
	CGO_ENABLED=0 $(GO) build -ldflags='-s -w $(VERSION_LDFLAGS)' -o "$$out/bin/" $$pkgs; \
	for spec in $(IMAGES); do \
		IFS=: read -r name pkg dockerfile <<< "$$spec"; \
		ctx="$$out/$$name"; mkdir -p "$$ctx/data"; \
		for p in $${pkg//+/ }; do cp "$$out/bin/$${p##*/}" "$$ctx/"; done; \
		cp "$$dockerfile" functions/image/passwd functions/image/group "$$ctx/"; \
		find "$$ctx" -exec touch -h -d @0 {} +; \
		if ! id=$$(docker build --pull=false -q -t "$$name:$(VERSION)" -t "$$name:dev" -f "$$ctx/$$(basename $$dockerfile)" "$$ctx" 2>"$$ctx/build.log"); then \
			cat "$$ctx/build.log" >&2; echo "images: docker build of $$name failed" >&2; exit 1; fi; \
		size=$$(docker image inspect --format '{{.Size}}' "$$name:dev"); \
		printf 'images: %-16s %-28s %s  %5.1f MB\n' "$$name" "$$name:$(VERSION)" "$${id:7:12}" "$$(awk -v s="$$size" 'BEGIN { print s / 1000000 }')"; \
	done

# The API server envtest runs the controller tests against:
# etcd and kube-apiserver built from the Go module proxy into bin/k8s, in
# throwaway modules under bin/k8s/.build; bin/k8s/.versions records what
# was built, so the build is skipped while it matches these pins.
ETCD_VERSION           := v3.5.21
KUBE_APISERVER_VERSION := v1.32.13
TESTBIN                := $(BIN)/k8s

.PHONY: testbin blueprint-crds browser web-screenshots

# The web view's browser tests drive Debian's chromium. It is installed
# with apt-get when missing and this runs as root; otherwise the tests
# skip, and this target says so loudly.
browser: ## install Debian's chromium for the web view's browser tests unless a Chromium is on PATH
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then \
		exit 0; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "browser: installing Debian's chromium for the web view's browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
		echo "browser: WARNING: no Chromium and no way to install it (needs root and apt-get):"; \
		echo "browser: WARNING: the web view's browser tests (service/server/web TestInBrowser) will be SKIPPED"; \
	fi

web-screenshots: browser ## regenerate the web view's screenshots in service/server/web/docs
	IPAM_WEB_SCREENSHOTS=$(CURDIR)/service/server/web/docs $(GO) test -count=1 -run TestInBrowser ./service/server/web/

testbin: ## build etcd and kube-apiserver for envtest into bin/k8s unless they are there at the pinned versions
	ETCD_VERSION=$(ETCD_VERSION) KUBE_VERSION=$(KUBE_APISERVER_VERSION) service/fronts/controllers/testbin/build.sh $(TESTBIN)

# The CNI tools the node side's end-to-end test (service/node/cni) drives:
# Debian's containernetworking-plugins (bridge, host-local, loopback),
# unpacked from the package into bin/cni without installing it, and
# cnitool, built from the containernetworking/cni module go.mod pins. The
# test also runs the etcd and kube-apiserver of testbin.
CNI_BIN             := $(BIN)/cni
CNI_PLUGINS_PACKAGE := containernetworking-plugins
CNI_PLUGINS         := bridge host-local loopback

.PHONY: cni-plugins

cni-plugins: ## put Debian's CNI bridge, host-local and loopback plugins and cnitool into bin/cni unless they are there
	@mkdir -p $(CNI_BIN)
	@missing=; for p in $(CNI_PLUGINS); do [ -x $(CNI_BIN)/$$p ] || missing=1; done; \
	if [ -n "$$missing" ]; then \
		if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg >/dev/null 2>&1; then \
			echo "cni-plugins: WARNING: no apt-get and dpkg to fetch $(CNI_PLUGINS_PACKAGE):"; \
			echo "cni-plugins: WARNING: the CNI end-to-end test (service/node/cni TestNetns*) will be SKIPPED"; \
			exit 0; \
		fi; \
		tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
		echo "cni-plugins: unpacking Debian's $(CNI_PLUGINS_PACKAGE) into bin/cni"; \
		if ! (cd "$$tmp" && apt-get download $(CNI_PLUGINS_PACKAGE) >/dev/null 2>&1); then \
			apt-get update -qq && (cd "$$tmp" && apt-get download $(CNI_PLUGINS_PACKAGE) >/dev/null); \
		fi; \
		dpkg -x "$$tmp"/$(CNI_PLUGINS_PACKAGE)_*.deb "$$tmp/root"; \
		for p in $(CNI_PLUGINS); do \
			install -m 0755 "$$tmp/root/usr/lib/cni/$$p" "$(CNI_BIN)/.$$p.tmp" && mv "$(CNI_BIN)/.$$p.tmp" "$(CNI_BIN)/$$p"; \
		done; \
	fi
	$(GO) build -o $(CNI_BIN)/cnitool github.com/containernetworking/cni/cnitool

# The single-node cluster (`make cluster`) the blueprints are tried and
# tested on: etcd and kube-apiserver of testbin, the node's binaries and a
# trimmed CoreDNS built by service/cluster/build.sh into bin/k8s (skipped
# while they match the pins), netns-forward and the pause image's binary
# into bin/cluster-tools, the product's images; service/cluster/cluster.sh
# runs it all inside a network namespace with no route out and writes
# bin/cluster/kubeconfig. make cluster-down removes all of it.
COREDNS_VERSION := v1.12.1
CLUSTER_TOOLS   := $(BIN)/cluster-tools

.PHONY: cluster cluster-down cluster-bin cluster-tools cluster-images

cluster-bin: ## build kube-controller-manager, kube-scheduler, kubelet, kube-proxy and CoreDNS into bin/k8s unless they are there at the pinned versions
	KUBE_VERSION=$(KUBE_APISERVER_VERSION) COREDNS_VERSION=$(COREDNS_VERSION) service/cluster/build.sh $(TESTBIN)

cluster-tools: ## build the cluster's API forwarder and pause binary into bin/cluster-tools
	@mkdir -p $(CLUSTER_TOOLS)
	CGO_ENABLED=0 $(GO) build -o $(CLUSTER_TOOLS)/ ./service/cluster/cmd/netns-forward ./service/cluster/cmd/pause

cluster: testbin cluster-bin cluster-tools cni-plugins images ## start the single-node cluster (network namespace ipam-cluster, no route out) with the product's images; KUBECONFIG=bin/cluster/kubeconfig
	@VERSION=$(VERSION) service/cluster/cluster.sh up

cluster-images: images ## import the images make images built into the running cluster's node (unchanged ones are skipped)
	@VERSION=$(VERSION) service/cluster/cluster.sh images

cluster-down: ## stop the cluster by PID and remove its namespace, mounts, cgroups and state
	@service/cluster/cluster.sh down

# Porch for the injector's e2e test: the Porch server and
# its function runner (func/server) built from the Go module proxy into
# bin/porch, with the CRDs Porch needs; bin/porch/.versions records the
# pins and the build is skipped while it matches. The test also runs the
# etcd and kube-apiserver of testbin.
PORCH_VERSION     := v1.5.8
PORCH_KPT_VERSION := v1.0.0-beta.61

.PHONY: porch-env

porch-env: testbin ## build Porch and its function runner into bin/porch unless they are there at the pinned versions
	PORCH_VERSION=$(PORCH_VERSION) KPT_VERSION=$(PORCH_KPT_VERSION) injector/porchenv/build.sh $(BIN)/porch

.PHONY: clusterctl release-artifacts catalog

# Cluster API's clusterctl for the provider's move and release tests, built
# from the Go module proxy into bin/capi in a throwaway module under
# bin/capi/.build (the repository's go.mod is left alone), with clusterctl's
# own CRD of its provider inventory next to it; bin/capi/.versions records
# the pin and the build is skipped while it matches.
CLUSTERCTL_VERSION := v1.14.2

clusterctl: ## build Cluster API's clusterctl into bin/capi unless it is there at the pinned version
	CLUSTERCTL_VERSION=$(CLUSTERCTL_VERSION) service/fronts/controllers/testbin/clusterctl.sh $(BIN)/capi

# The Cluster API IPAM provider's release: RELEASE_VERSION names it (a
# semantic version, as clusterctl requires: the tag git describe finds, or
# v0.0.0-<git describe> between tags); the images default to the tag
# $(VERSION) that `make images` builds.
PROVIDER        := nephio
RELEASE_VERSION ?= $(shell v=$$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null) && echo "$$v" || echo "v0.0.0-$(VERSION)")
RELEASE_DIR     ?= $(BIN)/release

release-artifacts: catalog ## write the clusterctl provider repository (ipam-components.yaml, metadata.yaml), a clusterctl.yaml and ipam-fn's catalog entry into bin/release
	$(GO) run ./service/internal/clusterctlrelease --blueprint blueprints/ipam --out $(RELEASE_DIR) \
		--provider $(PROVIDER) --version $(RELEASE_VERSION) --tag $(VERSION)

# ipam-fn's kpt function catalog entry of $(VERSION): the image
# ipam-fn:$(VERSION) that make images builds (ipam-fn --version prints
# $(VERSION)), its source and example package at that commit or tag.
catalog: ## write ipam-fn's kpt function catalog entry (metadata.yaml: image ipam-fn:<version>, source at its Git ref) into bin/release/ipam-fn/<version>
	$(GO) run ./functions/internal/catalog --version $(VERSION) --out $(RELEASE_DIR)

blueprint-crds: generate-api ## copy the generated CRDs into the blueprints/ipam, ipam-metal3, ipam-nvidia and ipam-nephio kpt packages, in the form kpt writes
	rm -rf blueprints/ipam/crds
	kpt fn source api/ipam/v1alpha1/crds | kpt fn sink blueprints/ipam/crds
	rm -rf blueprints/ipam-metal3/crds
	kpt fn source api/metal3/v1alpha1/crds | kpt fn sink blueprints/ipam-metal3/crds
	rm -rf blueprints/ipam-nvidia/crds
	kpt fn source api/nvidia/v1alpha1/crds | kpt fn sink blueprints/ipam-nvidia/crds
	rm -rf blueprints/ipam-nephio/crds
	kpt fn source api/nephioresource/ipam/v1alpha1/crds | kpt fn sink blueprints/ipam-nephio/crds
	rm -rf bin/crds-vlan && kpt fn source api/nephioresource/vlan/v1alpha1/crds | kpt fn sink bin/crds-vlan
	mv bin/crds-vlan/*.yaml blueprints/ipam-nephio/crds/ && rm -rf bin/crds-vlan

clean: ## remove bin/ (binaries and installed tools)
	rm -rf $(BIN)

controller-gen: ## install the pinned controller-gen under bin/ unless it is there
	@if [ "$$($(CONTROLLER_GEN) --version 2>/dev/null)" != "Version: $(CONTROLLER_GEN_VERSION)" ]; then \
		echo "installing controller-gen $(CONTROLLER_GEN_VERSION) into bin/"; \
		GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION); \
	fi
