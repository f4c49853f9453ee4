# Common tasks. `make help` lists them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
BIN_DIR   ?= bin
BINARY    := $(BIN_DIR)/maintainer
IMAGE     ?= ghcr.io/iceberg-maintainer/maintainer
# From git unless given (make image VERSION=v1.2.3); evaluated once.
VERSION   := $(or $(VERSION),$(shell git describe --tags --always --dirty 2>/dev/null),dev)
COMMIT    := $(or $(COMMIT),$(shell git rev-parse HEAD 2>/dev/null),unknown)
CREATED   := $(or $(CREATED),$(shell date -u +%Y-%m-%dT%H:%M:%SZ))
TAG       ?= $(subst +,-,$(VERSION))
BENCH_DIR ?= /tmp/compactbench
# The same flags as the Dockerfile's build.
LDFLAGS   := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: help build test demo lint docs bench image k8s-validate clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build bin/maintainer (static, stamped with VERSION and COMMIT)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BINARY) ./cmd/maintainer

test: ## Run the project's tests (scripts/test.sh: go vet + go test, with a throw-away redis-server)
	scripts/test.sh

demo: ## Run the demo: a local warehouse maintained before your eyes
	$(GO) run ./cmd/maintainer demo

lint: ## gofmt -l (fails on unformatted files) and go vet
	@out=$$(find . -name '*.go' -not -path './.cache/*' -not -path '*/node_modules/*' -print0 | xargs -0 gofmt -l); \
	if [ -n "$$out" ]; then echo "gofmt -l: not formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd deploy/kubernetes/validate && $(GO) vet ./...

docs: ## Check the docs (go test ./docs/... when docs/ exists)
	@if [ -d docs ]; then $(GO) test ./docs/...; else echo "docs: no docs/ folder yet"; fi

bench: ## The compaction benchmark against iceberg-go's CLI (BENCH_DIR keeps the tables for reruns)
	$(GO) run ./internal/bench/compactbench -dir $(BENCH_DIR)

image: ## Build the container image IMAGE:TAG (needs a Docker engine with BuildKit)
	docker build \
	  --build-arg VERSION=$(VERSION) \
	  --build-arg COMMIT=$(COMMIT) \
	  --build-arg CREATED=$(CREATED) \
	  -t $(IMAGE):$(TAG) .

k8s-validate: ## Render deploy/kubernetes with kustomize and check every manifest strictly
	cd deploy/kubernetes/validate && $(GO) test -count=1 -timeout 30m ./...

clean: ## Remove built binaries and test artefacts
	rm -rf $(BIN_DIR) dist tmp deploy/kubernetes/validate/tmp
	rm -f maintainer *.test *.prof
