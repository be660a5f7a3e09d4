# hookd — run `make` for the list of targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN := bin/hookd
# PostgreSQL tests run when this is set (CI sets it); they skip with a reason otherwise.
HOOKD_TEST_POSTGRES_DSN ?=
export HOOKD_TEST_POSTGRES_DSN

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z/_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/hookd
	go build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/hookd

.PHONY: run
run: build ## run the daemon on its embedded default (SQLite under ./data, scripted model)
	./$(BIN) serve $(if $(CONFIG),--config $(CONFIG))

.PHONY: demo
demo: build ## see hookd work: daemon, sample receiver, a deny hook, a scripted chat over SSE
	go build -o bin/hookd-receiver ./cmd/hookd-receiver
	go run ./cmd/hookd-demo --bin bin

.PHONY: test
test: ## run every test (PostgreSQL ones when HOOKD_TEST_POSTGRES_DSN is set)
	go test -count=1 $(TESTFLAGS) ./...

.PHONY: test/race
test/race: ## run the tests of the concurrent parts (runtime, chat APIs, dispatcher) with the race detector
	go test -count=1 -race $(TESTFLAGS) ./agent/... ./api/... ./dispatcher/...

.PHONY: bench
bench: ## run the benchmarks (figures go to docs/benchmarks.md by hand)
	go test -run '^$$' -bench . -benchtime 2s ./...

.PHONY: load
load: build ## load test, modest sizes: idle SSE streams, an event burst, claim latency vs backlog
	go build -o bin/hookd-load ./cmd/hookd-load
	./bin/hookd-load streams -hookd $(BIN)
	./bin/hookd-load burst -hookd $(BIN)
	./bin/hookd-load backlog

.PHONY: lint
lint: ## go vet, a gofmt check, and go.mod/go.sum as go mod tidy leaves them
	go vet ./...
	@go mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run make tidy (go mod tidy -diff shows what changes)"; exit 1; }
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: tidy
tidy: ## tidy go.mod and go.sum
	go mod tidy
