# dirgate — `make help` lists the targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
GO_BUILD := CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)"

.PHONY: help
help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z_-]+:.*## /{printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/dirgate (the Dockerfile runs this same command)
	$(GO_BUILD) -o bin/dirgate ./cmd/dirgate

.PHONY: run
run: ## serve the embedded demo directory on 127.0.0.1:8080 (prints demo tokens and a curl line)
	go run ./cmd/dirgate

.PHONY: test
test: ## every test: installs and starts what they need (Samba AD DCs), gofmt, vet, go test -race
	bash test/run.sh

.PHONY: test-unit
test-unit: ## the tests that need no servers (integration tests skip outside CI)
	go test -race ./...

.PHONY: fmt
fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 10s)
	bash test/fuzz.sh $${FUZZTIME:-10s}

.PHONY: bench
bench: ## load runs against dirgate, a bare server and the DC (needs a DC env: docs/benchmarks.md)
	go run ./test/tools/load/cmd/bench -concurrency 32 -duration 10s -repeat 5

.PHONY: image compose-up compose-down
image: ## build the container image dirgate:$(VERSION) (deploy/Dockerfile)
	docker build -f deploy/Dockerfile --build-arg VERSION=$(VERSION) -t dirgate:$(VERSION) .
compose-up: ## local try-out: dirgate, Samba AD DC, Redis, OTel collector (deploy/compose.yaml)
	docker compose -f deploy/compose.yaml up --build
compose-down: ## stop the try-out and delete its volumes
	docker compose -f deploy/compose.yaml down -v

include test/harness/samba/samba.mk
include test/suite/faults/faults.mk
include test/suite/chaos/chaos.mk
