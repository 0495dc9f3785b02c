# cloudgate — see README.md. Every target works on a fresh machine: `make test`
# installs what the tests need (Go modules, Debian packages, built control-plane
# binaries cached under $(CACHE_DIR)).
GO        ?= go
CACHE_DIR ?= $(HOME)/.cache/cloudgate
export CLOUDGATE_CACHE_DIR := $(CACHE_DIR)

.PHONY: all build test bench bench-results run lint fuzz deps setup control-plane

all: lint build test

deps:
	$(GO) mod download

build: deps
	$(GO) build ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The e2e tests need a real etcd + kube-apiserver: built once from a separate tools
# module (.ci/k8s-tools) and cached under $(CACHE_DIR), keyed on its go.sum and the Go
# version. control-plane.sh prints KEY=VALUE lines (CLOUDGATE_KUBE_APISERVER=..., ...).
test: deps setup control-plane
	env $$(cat $(CACHE_DIR)/control-plane.env) $(GO) test -race -count=1 -timeout 40m ./...
	$(GO) test -count=1 -timeout 20m -run 'TestBenchLB' ./bench/
	$(GO) test -run '^$$' -fuzz FuzzLoadConfig -fuzztime 10s ./provider/
	$(GO) test -run '^$$' -fuzz FuzzCacheKeys -fuzztime 10s ./provider/

control-plane:
	@mkdir -p $(CACHE_DIR)
	bash .ci/control-plane.sh > $(CACHE_DIR)/control-plane.env.tmp
	mv $(CACHE_DIR)/control-plane.env.tmp $(CACHE_DIR)/control-plane.env

bench: deps
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

fuzz: deps
	$(GO) test -run '^$$' -fuzz FuzzLoadConfig -fuzztime 60s ./provider/
	$(GO) test -run '^$$' -fuzz FuzzCacheKeys -fuzztime 60s ./provider/

setup:
	bash .ci/setup.sh
