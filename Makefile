# cloudgate — see README.md. Every target works on a fresh machine: `make test`
# installs what the tests need (Go modules, Debian packages, built control-plane
# binaries cached under $(CACHE_DIR)).
GO        ?= go
CACHE_DIR ?= $(HOME)/.cache/cloudgate
export CLOUDGATE_CACHE_DIR := $(CACHE_DIR)

.PHONY: all build test bench bench-results bench-hotpath run lint fuzz deps setup control-plane

all: lint build test

# The AWS provider and its SDK live in a nested module (providers/aws: its own go.mod),
# so the core module never depends on them; every target covers both modules.
AWS_MOD := providers/aws

deps:
	$(GO) mod download
	cd $(AWS_MOD) && $(GO) mod download

build: deps
	$(GO) build ./...
	cd $(AWS_MOD) && $(GO) build ./...

# The nested module is vetted with -race: vet then compiles the AWS SDK as `make test` does,
# so CI (lint, then test) compiles github.com/aws/aws-sdk-go-v2/service/ec2 once per run and
# test (and the e2e's CCM build) reuse it from the build cache.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd $(AWS_MOD) && $(GO) vet -race ./...

# The e2e tests need a real etcd + kube-apiserver: built once from a separate tools
# module (.ci/k8s-tools) and cached under $(CACHE_DIR), keyed on its go.sum and the Go
# version. control-plane.sh prints KEY=VALUE lines (CLOUDGATE_KUBE_APISERVER=..., ...).
test: deps setup control-plane
	env $$(cat $(CACHE_DIR)/control-plane.env) $(GO) test -race -count=1 -timeout 40m ./...
	cd $(AWS_MOD) && env $$(cat $(CACHE_DIR)/control-plane.env) $(GO) test -race -count=1 -timeout 40m ./...
	$(GO) test -count=1 -timeout 20m -run 'TestBenchLB' ./bench/
	$(GO) test -run '^$$' -fuzz FuzzLoadConfig -fuzztime 10s ./provider/
	$(GO) test -run '^$$' -fuzz FuzzCacheKeys -fuzztime 10s ./provider/

control-plane:
	@mkdir -p $(CACHE_DIR)
	bash .ci/control-plane.sh > $(CACHE_DIR)/control-plane.env.tmp
	mv $(CACHE_DIR)/control-plane.env.tmp $(CACHE_DIR)/control-plane.env

bench: deps setup
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 ./...

# The load benchmark: the CCM controllers against the simulated cloud, five
# columns, default scenarios, one seed (make bench-results uses 3); under 10
# minutes on 2 cores. Writes an HTML report with plots. See docs/bench.md.
run: deps
	@mkdir -p bench/out
	$(GO) run ./cmd/cloudgate-bench --html bench/out/report.html

# Regenerates bench/RESULTS.md (and bench/results.json): make bench's hot-path
# benchmarks and make run's load benchmark, with the commands and targets.
bench-results: deps
	GO=$(GO) bash bench/results.sh

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
