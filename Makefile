# cloudgate — see README.md. Every target works on a fresh machine: `make test`
# installs what the tests need (Go modules, Debian packages, built control-plane
# binaries cached under $(CACHE_DIR)).
GO        ?= go
CACHE_DIR ?= $(HOME)/.cache/cloudgate
export CLOUDGATE_CACHE_DIR := $(CACHE_DIR)

.PHONY: all build test deps-bench bench bench-results bench-results-aws bench-results-gce bench-scale bench-hotpath run run-full report-png lint fuzz deps setup control-plane cosign image test-image test-chart chart-sync release release-dist release-push release-check test-skew bench-real bench-real-aws bench-real-aws-scenario bench-real-aws-sim bench-plan

all: lint build test

# Modules, each with its own go.mod, so a user's module graph holds the library only
# (docs/architecture.md, "Layout"): the core (the library: provider, cache, limiter, metrics,
# dashboards, deploy); cmd (the CCM command package cmd/ccm every CCM binary runs,
# cloudgate-config, --version); testkit (the e2e tests' etcd + kube-apiserver and CCM builds);
# bench (the load benchmark, simcloud, cloudgate-bench, the simcloud CCM, the dashboards' and
# manifests' tests: gonum/plot and prometheus/prometheus stay there); providers/aws (the AWS
# provider and its SDK, ec2sim, its CCM); providers/aws/awsbench (aws-bench); providers/gce
# (the GCE provider, gcesim, gce-batch, its CCM); providers/gce/gcebench (gce-bench). make test
# runs the tests of MODULES; charts/test (Helm) and deploy/image (go-containerregistry) run in
# test-chart and test-image. deps, build and lint cover all of them.
BENCH_MOD    := bench
AWS_MOD      := providers/aws
AWSBENCH_MOD := providers/aws/awsbench
GCE_MOD      := providers/gce
GCEBENCH_MOD := providers/gce/gcebench
MODULES      := . cmd testkit $(BENCH_MOD) $(AWS_MOD) $(AWSBENCH_MOD) $(GCE_MOD) $(GCEBENCH_MOD)
ALL_MODULES  := $(MODULES) charts/test deploy/image

deps:
	@for m in $(ALL_MODULES); do echo "cd $$m && $(GO) mod download"; (cd $$m && $(GO) mod download) || exit 1; done

build: deps
	@for m in $(ALL_MODULES); do echo "cd $$m && $(GO) build ./..."; (cd $$m && $(GO) build ./...) || exit 1; done

# The provider modules are vetted with -race: vet then compiles the providers' SDKs as
# `make test` does, so CI (lint, then test) compiles them once per run and test (and the e2e's
# CCM builds) reuse them from the build cache. layout-check.sh: imports run down the core's
# layers, no module imports another's internal/, the core's graph is the library's.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in . cmd testkit $(BENCH_MOD) charts/test deploy/image; do echo "cd $$m && $(GO) vet ./..."; (cd $$m && $(GO) vet ./...) || exit 1; done
	@for m in $(AWS_MOD) $(AWSBENCH_MOD) $(GCE_MOD) $(GCEBENCH_MOD); do echo "cd $$m && $(GO) vet -race ./..."; (cd $$m && $(GO) vet -race ./...) || exit 1; done
	@if $(GO) mod graph | grep -E ' (gonum\.org/v1/plot|github\.com/prometheus/prometheus)@'; then \
	  echo "the core module's graph holds gonum/plot or prometheus/prometheus: they belong in bench/go.mod"; exit 1; fi
	@if $(GO) list -deps -test ./limiter/... | grep '^k8s.io/apimachinery/'; then \
	  echo "limiter/ depends on k8s.io/apimachinery (above): the limiter knows nothing of Kubernetes (limiter/doc.go)"; exit 1; fi
	GO=$(GO) bash .ci/layout-check.sh

# The e2e tests need a real etcd + kube-apiserver: built once from a separate tools
# module (.ci/k8s-tools) and cached under $(CACHE_DIR), keyed on its go.sum and the Go
# version. control-plane.sh prints KEY=VALUE lines (CLOUDGATE_KUBE_APISERVER=..., ...).
test: deps setup control-plane
	@for m in $(MODULES); do \
	  echo "cd $$m && $(GO) test -race -count=1 -timeout 40m ./..."; \
	  (cd $$m && env $$(cat $(CACHE_DIR)/control-plane.env) $(GO) test -race -count=1 -timeout 40m ./...) || exit 1; \
	done
	cd $(BENCH_MOD) && $(GO) test -count=1 -timeout 20m -run 'TestBenchLB|TestDeterminism' .
	$(MAKE) test-image
	$(MAKE) test-chart RELEASE_IMAGES=$(ABS_OUT)
	$(MAKE) release-check VERSION=v0.0.0-ci
	$(GO) test -run '^$$' -fuzz FuzzLoadConfig -fuzztime 10s ./provider/
	$(GO) test -run '^$$' -fuzz FuzzCacheKeys -fuzztime 10s ./provider/

# cosign, for the release test's signature checks: built once from .ci/cosign-tools and
# cached under $(CACHE_DIR) (keyed on its go.sum and the Go version) as the control plane is.
cosign:
	@mkdir -p $(CACHE_DIR)
	GO=$(GO) bash .ci/cosign.sh > $(CACHE_DIR)/cosign.env.tmp
	mv $(CACHE_DIR)/cosign.env.tmp $(CACHE_DIR)/cosign.env

control-plane:
	@mkdir -p $(CACHE_DIR)
	bash .ci/control-plane.sh > $(CACHE_DIR)/control-plane.env.tmp
	mv $(CACHE_DIR)/control-plane.env.tmp $(CACHE_DIR)/control-plane.env

bench: deps setup
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 ./...
	cd $(BENCH_MOD) && $(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 ./...

# The load benchmark: the CCM controllers against the simulated cloud, five
# columns, default scenarios, one seed, at first-run sizes (1,000 steady nodes
# for 30 min, 500 scaling up, 500 churning; README states its measured cold and
# warm times). A progress line per scenario; ends with a short summary and the
# HTML report (bench/out/report.html). make run-full runs the full sweep's sizes
# (bench/RESULTS.md's, with one seed instead of 3). Both run in virtual time, in
# the bench module (bench/cmd/cloudgate-bench). See docs/bench.md.
# Only the bench module's own modules (it builds the root through its replace): a first
# run downloads no provider module.
deps-bench:
	cd $(BENCH_MOD) && $(GO) mod download

run: deps-bench
	@mkdir -p bench/out
	cd $(BENCH_MOD) && $(GO) run ./cmd/cloudgate-bench --html $(CURDIR)/bench/out/report.html

run-full: deps-bench
	@mkdir -p bench/out
	cd $(BENCH_MOD) && $(GO) run ./cmd/cloudgate-bench --full --html $(CURDIR)/bench/out/report-full.html

# Regenerates README's pictures in chromium-headless-shell: docs/img/real-aws-hour.png,
# the real binaries' hour read from bench/RESULTS.real-aws.md's first table (bench
# TestRealAWSChartInBrowser checks every bar against the file, then screenshots the
# chart), and docs/img/report-headline.png, the HTML report of a small simulator run
# (bench TestReportInBrowser checks the page and screenshots its headline plot).
report-png: deps setup
	cd $(BENCH_MOD) && CLOUDGATE_REPORT_PNG=$(CURDIR)/docs/img/report-headline.png \
		CLOUDGATE_REAL_AWS_PNG=$(CURDIR)/docs/img/real-aws-hour.png \
		$(GO) test -count=1 -run '^(TestReportInBrowser|TestRealAWSChartInBrowser)$$' .

# Regenerates bench/RESULTS.md (and bench/results.json): make bench's hot-path
# benchmarks, make run's load benchmark, and the fleet scenario in real time
# (bench/fleet-results.sh, ~70 min; FLEET=0 appends the last RESULTS.fleet.md).
bench-results: deps
	GO=$(GO) bash bench/results.sh

# Regenerates bench/RESULTS.aws.md (bench-results appends it to RESULTS.md): the
# AWS provider alone / with cloudgate / with the adapter on ec2sim at two
# latencies: one steady hour measured at 1,000 and 5,000 nodes (every column and
# size side by side) next to the whole-cycle derivation, and the scale-up.
# ~70 min, real time (knobs: bench/aws-results.sh).
bench-results-aws:
	GO=$(GO) bash bench/aws-results.sh

# Regenerates providers/gce/RESULTS.gce.md: the GCE provider alone and behind cloudgate's
# default install (gce-batch) on gcesim at 1,000 and 5,000 nodes, 500 joining, and a
# 1,000-node scale-up with routes (~15 min, real time; knobs: bench/gce-results.sh).
bench-results-gce:
	GO=$(GO) bash bench/gce-results.sh

# Regenerates bench/RESULTS.scale.md (bench-results appends it to RESULTS.md) and
# bench/results-scale.json: the scale scenario, the steady status sweep at 1k, 5k,
# 20k, 50k and 100k nodes for every column (not part of make run), in virtual time,
# under the measurement lock (its CPU column is machine-dependent). ~5 min on 2 cores.
bench-scale: deps
	GO=$(GO) bash bench/scale-results.sh

# The hot-path benchmarks with their ratios (admission vs its floor,
# provider/cache hit, -cpu 1,2 scaling vs a control), under the measurement lock.
bench-hotpath: deps
	GO=$(GO) bash bench/hotpath.sh

fuzz: deps
	$(GO) test -run '^$$' -fuzz FuzzLoadConfig -fuzztime 60s ./provider/
	$(GO) test -run '^$$' -fuzz FuzzCacheKeys -fuzztime 60s ./provider/
	CLOUDGATE_HISTORY_SEEDS=64 CLOUDGATE_HISTORY_OPS=8000 $(GO) test -race -count=1 -timeout 30m -run '^TestHistory$$' -v ./provider/

setup:
	bash .ci/setup.sh

# Images, built without a Docker daemon (deploy/image, its own module so go-containerregistry
# stays out of the core module): the three CCM binaries (simcloud's, AWS's, GCE's), cross-compiled for each of IMAGE_ARCHS,
# static (CGO_ENABLED=0), non-root (65532), version-stamped, each written as a multi-arch OCI
# image index in an OCI layout tarball under $(OUT_DIR). Push one with
# `skopeo copy --all oci-archive:FILE docker://REGISTRY/...` (or load it: `podman load -i`).
# The version is `git describe` of a v* tag; without one, v0.0.0-<commit> (the CCM parses it
# as a semantic version, so a bare commit hash would not do).
# Reproducible: the build time is the commit's (SOURCE_DATE_EPOCH), never "now", and the
# builds are -trimpath, so two runs on one commit write the same digest (make test-image).
OUT_DIR    ?= _out
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
ifeq ($(origin VERSION),undefined)
VERSION    := $(shell git describe --tags --always --dirty --match 'v*' 2>/dev/null | sed 's/^[^v]/v0.0.0-&/')
endif
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
BUILD_DATE := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r $(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
VERSION_PKG := k8s.io/component-base/version
LDFLAGS    := -s -w -X $(VERSION_PKG).gitVersion=$(VERSION) -X $(VERSION_PKG).gitCommit=$(GIT_COMMIT) \
              -X $(VERSION_PKG).gitTreeState=$(if $(findstring dirty,$(VERSION)),dirty,clean) -X $(VERSION_PKG).buildDate=$(BUILD_DATE)
IMAGE_ARCHS ?= amd64 arm64
ABS_OUT    := $(abspath $(OUT_DIR))

image:
	@mkdir -p $(ABS_OUT)
	@for arch in $(IMAGE_ARCHS); do \
	  start=$$(date +%s); \
	  echo "image: building linux/$$arch"; \
	  (cd $(BENCH_MOD) && CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(ABS_OUT)/linux_$$arch/cloudgate-ccm ./cmd/cloud-controller-manager) || exit 1; \
	  (cd $(AWS_MOD) && CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(ABS_OUT)/linux_$$arch/cloudgate-aws-ccm ./cmd/cloud-controller-manager) || exit 1; \
	  (cd $(GCE_MOD) && CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(ABS_OUT)/linux_$$arch/cloudgate-gce-ccm ./cmd/cloud-controller-manager) || exit 1; \
	  echo "image: linux/$$arch: three binaries in $$(( $$(date +%s) - start )) s"; \
	done
	cd deploy/image && $(GO) run . $(foreach a,$(IMAGE_ARCHS),-binary $(a)=$(ABS_OUT)/linux_$(a)/cloudgate-ccm) \
	  -out $(ABS_OUT)/cloudgate-ccm.oci.tar -ref cloudgate-ccm:$(VERSION) -title cloudgate-ccm \
	  -version $(VERSION) -revision $(GIT_COMMIT) -created $(BUILD_DATE)
	cd deploy/image && $(GO) run . $(foreach a,$(IMAGE_ARCHS),-binary $(a)=$(ABS_OUT)/linux_$(a)/cloudgate-aws-ccm) \
	  -out $(ABS_OUT)/cloudgate-aws-ccm.oci.tar -ref cloudgate-aws-ccm:$(VERSION) -title cloudgate-aws-ccm \
	  -version $(VERSION) -revision $(GIT_COMMIT) -created $(BUILD_DATE)
	cd deploy/image && $(GO) run . $(foreach a,$(IMAGE_ARCHS),-binary $(a)=$(ABS_OUT)/linux_$(a)/cloudgate-gce-ccm) \
	  -out $(ABS_OUT)/cloudgate-gce-ccm.oci.tar -ref cloudgate-gce-ccm:$(VERSION) -title cloudgate-gce-ccm \
	  -version $(VERSION) -revision $(GIT_COMMIT) -created $(BUILD_DATE)

# Checks the tarballs make image wrote: the index (one image per IMAGE_ARCHS), user,
# entrypoint, labels, each binary's architecture, the extracted binary's --version
# (deploy/image/image_test.go); and builds them a second time into $(OUT_DIR)/rebuild to check
# that one commit gives one digest (the second build's compiles come from the build cache).
test-image: image
	$(MAKE) image OUT_DIR=$(ABS_OUT)/rebuild
	cd deploy/image && CLOUDGATE_IMAGE_DIR=$(ABS_OUT) CLOUDGATE_IMAGE_REBUILD_DIR=$(ABS_OUT)/rebuild \
	  CLOUDGATE_IMAGE_VERSION=$(VERSION) CLOUDGATE_IMAGE_COMMIT=$(GIT_COMMIT) CLOUDGATE_IMAGE_ARCHS='$(IMAGE_ARCHS)' \
	  $(GO) test -count=1 -timeout 10m ./...

# Opt-in, not part of make test: the AWS CCM's e2e tests against the previous minor's
# kube-apiserver (v1.36.3, built from .ci/k8s-tools-prev and cached under its own key: ~7 min
# cold). docs/versions.md has the supported range and the last result.
test-skew: deps setup
	GO=$(GO) OUT_DIR=$(ABS_OUT) bash .ci/test-skew.sh

# The Helm chart's tests (charts/test, a nested module so Helm stays out of the core module):
# helm lint rules, every values combination, cloudgate.yaml through provider.LoadConfig, a
# server-side apply (dry-run) to the real kube-apiserver with and without the monitoring CRDs,
# the cut-over from the stock AWS chart and back (TestE2ECutover: it builds both AWS CCM
# binaries with -race, linking what providers/aws's race tests compiled just before), the same
# from a stock GCE CCM with values-gce.yaml (TestE2ECutoverGCE, providers/gce's binaries), and the
# release (make release-dist first): TestRelease checks its files and SBOMs, TestPublishRelease
# pushes one to a registry on 127.0.0.1 and pulls it back, TestE2EReleaseFromRegistry signs one
# with a throwaway cosign key, pushes it, verifies it with the real cosign (make cosign) and
# installs the chart pulled from the registry by digest, TestE2EUpgrade installs
# its packaged chart, upgrades and rolls it back, and cuts over by scaling the stock chart
# to zero. make test passes RELEASE_IMAGES (make test-image's tarballs, not built again).
test-chart: control-plane cosign release-dist
	cd charts/test && env $$(cat $(CACHE_DIR)/control-plane.env) $$(cat $(CACHE_DIR)/cosign.env) CLOUDGATE_RELEASE_DIR=$(RELEASE_DIR) \
	  CLOUDGATE_RELEASE_VERSION=$(VERSION) CLOUDGATE_RELEASE_IMAGES=$(RELEASE_IMAGES) $(GO) test -count=1 -timeout 40m ./...

# make release VERSION=vX.Y.Z: what a user pulls, in $(RELEASE_DIR): the three multi-arch images
# (make image, OCI layout tarballs tagged VERSION), the chart packaged with Helm's SDK
# (cloudgate-X.Y.Z.tgz: version X.Y.Z, appVersion VERSION, so it installs the image tagged
# VERSION by default; its alerts' runbook URLs at the tag VERSION, not main), RELEASE-NOTES.md
# (CHANGELOG.md's "## VERSION" section, a pre-release without one gets "## Unreleased"; then
# each image index's digest and the install by digest), each image's CycloneDX SBOM
# (NAME-VERSION.cdx.json, the Go modules of its binary), signed with COSIGN_KEY (an ECDSA P-256
# PEM key, `cosign generate-key-pair`'s with COSIGN_PASSWORD set): per image the cosign payload
# and signature of its index digest and the SBOM's attestation, and cosign.pub; and SHA256SUMS
# (sha256sum -c checks it). make release-push publishes it to a registry; the tags are
# docs/versions.md's "Releasing".
RELEASE_DIR ?= $(ABS_OUT)/release/$(VERSION)
release:
	@test -n "$(COSIGN_KEY)" || { echo "release: set COSIGN_KEY=FILE (cosign generate-key-pair's cosign.key, with COSIGN_PASSWORD): a release is signed"; exit 2; }
	$(MAKE) image
	$(MAKE) release-dist RELEASE_IMAGES=$(ABS_OUT)

# Publishes $(RELEASE_DIR) (make release) to REGISTRY (HOST[:PORT][/PATH]; docker login or
# helm registry login first): each image index to REGISTRY/NAME:VERSION, with the digest the
# release notes give, its SBOM, signature and SBOM attestation beside it as cosign attaches
# them (tags sha256-HEX.sbom, .sig, .att), and the chart to oci://REGISTRY/charts/cloudgate
# --version X.Y.Z.
release-push:
	@test -n "$(REGISTRY)" || { echo "release-push: set REGISTRY=HOST[/PATH]"; exit 2; }
	cd charts/test && $(GO) run ./cmd/release -version $(VERSION) -out $(RELEASE_DIR) -push $(REGISTRY)

# The release directory from what exists: the chart, notes and checksums, plus the images
# make image wrote to RELEASE_IMAGES (refused unless tagged VERSION) with their SBOMs, signed
# when COSIGN_KEY is set; no RELEASE_IMAGES: chart only (what make test-chart needs).
release-dist:
	rm -rf $(RELEASE_DIR)
	cd charts/test && $(GO) run ./cmd/release -version $(VERSION) -out $(RELEASE_DIR) \
	  -source-date-epoch $(SOURCE_DATE_EPOCH) $(if $(RELEASE_IMAGES),-images $(RELEASE_IMAGES)) \
	  $(if $(COSIGN_KEY),-key $(abspath $(COSIGN_KEY)))

# The chart can only read files inside it: refresh its copies of the alerts and the
# dashboard (a test checks them).
CHART_FILES = alerts.yaml cloudgate.json
chart-sync:
	cp $(addprefix dashboards/,$(CHART_FILES)) charts/cloudgate/files/

# Checks that the tree released as vX.Y.Z, providers/aws/vX.Y.Z and providers/gce/vX.Y.Z builds for a user outside
# the repo, from a local file:// module proxy (docs/releasing: CHANGELOG.md).
release-check:
	GO=$(GO) VERSION=$(VERSION) bash .ci/release-check.sh

# The simulator checked against reality (issue 32): the real CCM binary on the
# real etcd + kube-apiserver, against simcloud over HTTP, bare and the default
# cloudgate column side by side (in parallel, one control plane each), at
# BENCH_REAL_NODES Nodes, next to the virtual-time simulator's figure for the
# same settings; writes bench/RESULTS.real.md (its header names the commit).
# The window per size is sized from the simulator's status round so each
# column completes at least 3 rounds (the run fails otherwise): real time
# ~30 min at 1,000 Nodes, ~50 min at 5,000. BENCH_REAL_PARALLEL=1 runs every
# size at once. Not part of make test.
BENCH_REAL_NODES ?= 1000
BENCH_REAL_PARALLEL ?=
bench-real: deps control-plane
	@mkdir -p $(CACHE_DIR)/bench-real
	cd $(BENCH_MOD) && $(GO) build -o $(CACHE_DIR)/bench-real/cloud-controller-manager ./cmd/cloud-controller-manager
	cd $(BENCH_MOD) && env $$(cat $(CACHE_DIR)/control-plane.env) CLOUDGATE_BENCH_REAL=1 CLOUDGATE_BENCH_REAL_NODES=$(BENCH_REAL_NODES) \
	  CLOUDGATE_BENCH_REAL_PARALLEL=$(BENCH_REAL_PARALLEL) CLOUDGATE_BENCH_REAL_COMMIT=$$(git rev-parse --short HEAD) \
	  CLOUDGATE_CCM=$(CACHE_DIR)/bench-real/cloud-controller-manager CLOUDGATE_BENCH_REAL_OUT=$(CURDIR)/bench/RESULTS.real.md \
	  $(GO) test -count=1 -timeout 240m -parallel 8 -v -run '^TestBenchReal$$' ./real/

# The headline from the real binaries: the stock AWS CCM (chart defaults, and tuned with 10
# node workers) and cloudgate's AWS CCM (its chart's default config) side by side, each on
# its own real etcd + kube-apiserver against ec2sim with EC2's buckets, an hour's window per
# size after a 5-minute warm-up, 1 % NotReady, 20 LoadBalancer Services, Node churn, then
# 500 Nodes joining; the virtual-time simulator's prediction beside each figure. Writes
# bench/RESULTS.real-aws.md. Not part of make test (TestBenchRealAWSSmall runs the same
# harness at 100 Nodes there). Knobs: BENCH_REAL_AWS_NODES, BENCH_REAL_AWS_WINDOW,
# BENCH_REAL_AWS_PARALLEL=1 (every size at once: 6 control planes and CCMs on one machine).
BENCH_REAL_AWS_NODES ?= 1000,5000
BENCH_REAL_AWS_WINDOW ?= 1h
BENCH_REAL_AWS_PARALLEL ?=
bench-real-aws: deps control-plane
	@mkdir -p $(CACHE_DIR)/bench-real-aws
	cd $(AWS_MOD) && $(GO) build -o $(CACHE_DIR)/bench-real-aws/aws-cloud-controller-manager k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager
	cd $(AWS_MOD) && $(GO) build -o $(CACHE_DIR)/bench-real-aws/cloudgate-aws-ccm ./cmd/cloud-controller-manager
	cd $(AWSBENCH_MOD) && env $$(cat $(CACHE_DIR)/control-plane.env) CLOUDGATE_BENCH_REAL_AWS=1 \
	  CLOUDGATE_BENCH_REAL_AWS_NODES=$(BENCH_REAL_AWS_NODES) CLOUDGATE_BENCH_REAL_AWS_WINDOW=$(BENCH_REAL_AWS_WINDOW) \
	  CLOUDGATE_BENCH_REAL_AWS_PARALLEL=$(BENCH_REAL_AWS_PARALLEL) CLOUDGATE_BENCH_REAL_AWS_COMMIT=$$(git rev-parse --short HEAD) \
	  CLOUDGATE_STOCK_AWS_CCM=$(CACHE_DIR)/bench-real-aws/aws-cloud-controller-manager \
	  CLOUDGATE_AWS_CCM=$(CACHE_DIR)/bench-real-aws/cloudgate-aws-ccm CLOUDGATE_BENCH_REAL_AWS_OUT=$(CURDIR)/bench/RESULTS.real-aws.md \
	  $(GO) test -count=1 -timeout 600m -parallel 8 -v -run '^TestBenchRealAWS$$' ./real/

# The failures the account's limits cause, on the same real binaries and harness: one
# scenario per run, its section of bench/RESULTS.real-aws-scenarios.md replaced.
#   SCENARIO=near-limit  a neighbour tenant of the same ec2sim account draws SHARES of each
#                        bucket's refill (0.7,0.85); WINDOW (30m) after WARMUP (5m), then
#                        SCALEUP (500) Nodes joining (SCALEUP_TIMEOUT 30m).
#   SCENARIO=launch-lag  new instances invisible to DescribeInstances for LAGS (5s,30s,120s),
#                        LAG_NODES Nodes joining at once.
#   SCENARIO=storm       a neighbour drains the account's buckets for STORM (10m), RECOVER
#                        (20m) to get current again.
# NODES (1000), SCENARIO_COLUMNS (indexes of stock, tuned, cloudgate; all), SCENARIO_PARALLEL=1
# (every knob value at once: 3 control planes and CCMs each). Not part of make test
# (TestBenchRealAWSScenariosSmall runs the three at 100 Nodes there).
SCENARIO ?= near-limit
NODES ?= 1000
SHARES ?=
LAGS ?=
LAG_NODES ?=
STORM ?=
RECOVER ?=
WINDOW ?= 30m
WARMUP ?= 5m
SCALEUP ?= 500
SCALEUP_TIMEOUT ?= 30m
SCENARIO_COLUMNS ?=
SCENARIO_PARALLEL ?=
bench-real-aws-scenario: deps control-plane
	@mkdir -p $(CACHE_DIR)/bench-real-aws
	cd $(AWS_MOD) && $(GO) build -o $(CACHE_DIR)/bench-real-aws/aws-cloud-controller-manager k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager
	cd $(AWS_MOD) && $(GO) build -o $(CACHE_DIR)/bench-real-aws/cloudgate-aws-ccm ./cmd/cloud-controller-manager
	cd $(AWSBENCH_MOD) && env $$(cat $(CACHE_DIR)/control-plane.env) CLOUDGATE_BENCH_REAL_AWS_SCENARIO=$(SCENARIO) \
	  CLOUDGATE_BENCH_REAL_AWS_NODES=$(NODES) CLOUDGATE_BENCH_REAL_AWS_WINDOW=$(WINDOW) CLOUDGATE_BENCH_REAL_AWS_SCALEUP=$(SCALEUP) \
	  CLOUDGATE_BENCH_REAL_AWS_WARMUP=$(WARMUP) CLOUDGATE_BENCH_REAL_AWS_SCALEUP_TIMEOUT=$(SCALEUP_TIMEOUT) \
	  CLOUDGATE_BENCH_REAL_AWS_SHARES=$(SHARES) CLOUDGATE_BENCH_REAL_AWS_LAGS=$(LAGS) CLOUDGATE_BENCH_REAL_AWS_LAG_NODES=$(LAG_NODES) \
	  CLOUDGATE_BENCH_REAL_AWS_STORM=$(STORM) CLOUDGATE_BENCH_REAL_AWS_RECOVER=$(RECOVER) CLOUDGATE_BENCH_REAL_AWS_COLUMNS=$(SCENARIO_COLUMNS) \
	  CLOUDGATE_BENCH_REAL_AWS_PARALLEL=$(SCENARIO_PARALLEL) \
	  CLOUDGATE_BENCH_REAL_AWS_COMMIT=$$(git rev-parse --short HEAD) \
	  CLOUDGATE_STOCK_AWS_CCM=$(CACHE_DIR)/bench-real-aws/aws-cloud-controller-manager \
	  CLOUDGATE_AWS_CCM=$(CACHE_DIR)/bench-real-aws/cloudgate-aws-ccm CLOUDGATE_BENCH_REAL_AWS_SCENARIOS_OUT=$(CURDIR)/bench/RESULTS.real-aws-scenarios.md \
	  $(GO) test -count=1 -timeout 600m -parallel 8 -v -run '^TestBenchRealAWSScenarios$$' ./real/

# The simulator at this commit (and plan) against the committed bench-real-aws runs: a model
# change checked against the real binaries' figures without running them again (minutes).
bench-real-aws-sim: deps
	cd $(AWSBENCH_MOD) && CLOUDGATE_BENCH_REAL_AWS_SIM_OUT=$(CURDIR)/bench/RESULTS.real-aws-sim.md \
	  CLOUDGATE_BENCH_REAL_AWS_SIM_FILES=$$(ls $(CURDIR)/bench/RESULTS.real-aws.md $(CURDIR)/bench/RESULTS.real-aws-cloudgate.md 2>/dev/null | paste -sd, -) \
	  CLOUDGATE_BENCH_REAL_AWS_COMMIT=$$(git rev-parse --short HEAD) \
	  $(GO) test -count=1 -timeout 60m -v -run '^TestBenchRealAWSPredictions$$' ./real/

# TestPlanPredictsRun at 1,000, 5,000 and 20,000 Nodes (make test checks 1,000 and
# 5,000; 20,000 costs minutes of CPU; GOGC 400 as cloudgate-bench runs: a quarter less CPU).
bench-plan: deps
	cd $(BENCH_MOD) && CLOUDGATE_PLAN_NODES=1000,5000,20000 GOGC=400 $(GO) test -count=1 -timeout 60m -v -run '^TestPlanPredictsRun$$' .
