GO       ?= go
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
PROGRAMS := core edge
FUZZTIME ?= 2m

.PHONY: help build run test bench fuzz

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## build every program into bin/
	@mkdir -p bin
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/ $(foreach p,$(PROGRAMS),./$(p)/cmd/$(p))

run: build ## start the whole dev stack in the foreground (Ctrl-C stops it)
	deploy/dev/run.sh

test: ## run every test (vet, unit, integration, end to end)
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

bench: ## run the Go benchmarks with allocations
	$(GO) test -run '^$$' -bench . -benchmem ./...

fuzz: ## run each fuzz test for FUZZTIME (default 2m)
	$(GO) test ./core/slip -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./core/slip -run '^$$' -fuzz '^FuzzEncode$$' -fuzztime $(FUZZTIME)
	$(GO) test ./core/server -run '^$$' -fuzz '^FuzzVerifyBody$$' -fuzztime $(FUZZTIME)
