GO       ?= go
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# CMDS are the programs make build puts in bin/: the tiers, the dev broker
# and ClickHouse, slipsign, slipadm and bankfake (the dev stack's fake banks).
CMDS     := ./core/cmd/core ./edge/cmd/edge ./dispatcher/cmd/dispatcher ./usage/cmd/usage ./deploy/cmd/broker ./deploy/cmd/clickhouse ./edge/cmd/slipsign ./core/cmd/slipadm ./core/bank/bankfake/cmd/bankfake
FUZZTIME ?= 2m

.PHONY: help build run test test-faults vulncheck bench bench-go fuzz

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build every program into bin/
	@mkdir -p bin
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/ $(CMDS)

run: build ## start the whole dev stack in the foreground (Ctrl-C stops it)
	deploy/dev/run.sh

# LONG are the packages whose full tests are slow under the race detector
# (the image corpus, whole-stack runs, timing measurements): they run in
# full without it.
LONG := ./core/qrscan ./core/cmd/core ./deploy/... ./edge/openapi ./edge/cmd/edge ./usage/cmd/usage ./dispatcher ./bench/load ./core/bank/bankfake ./bench/scenario
# NORACE are packages whose tests must also run without the race detector:
# their allocation counts skip under it (it allocates), and the edge's raw
# socket calls are Go's own calls under it (it cannot follow raw ones).
NORACE := ./edge/rawsock ./edge/gateway ./edge/authn

test: ## run every test (vet, unit, integration, end to end)
	$(GO) vet ./...
	$(GO) test -race -short -count=1 ./...
	$(GO) test -count=1 $(LONG) $(NORACE)

test-faults: ## kill, stop, slow down and starve each tier under load; print what clients saw and what was lost
	$(GO) vet -tags faults ./deploy/faults
	$(GO) test -tags faults -count=1 -v -timeout 20m -run TestFaultMatrix ./deploy/faults

# REDOC_VERSION is the Redoc whose standalone bundle the API reference page
# (GET /docs) embeds; edge/docs/redoc/redoc.pin pins it, and make redoc
# REDOC_VERSION=x.y.z moves the pin.
REDOC_VERSION ?= $(shell sed -n 's/^version //p' edge/docs/redoc/redoc.pin)

.PHONY: redoc
redoc: ## fetch the pinned Redoc bundle of the API reference page from npm into edge/docs/redoc
	edge/docs/redoc/fetch.sh $(REDOC_VERSION)

# GOVULNCHECK is the govulncheck the vulncheck target runs. v1.1.4 builds
# from the module proxy alone (later versions need a golang.org/x/telemetry
# version the proxy does not serve).
GOVULNCHECK ?= golang.org/x/vuln/cmd/govulncheck@v1.1.4

vulncheck: ## report known vulnerabilities in the code's dependencies and Go (govulncheck; needs vuln.go.dev)
	$(GO) run $(GOVULNCHECK) ./...

bench: ## start a fresh stack and run the bench suite (table, JSON, HTML in bench/out)
	@mkdir -p bin
	$(GO) build -o bin/ ./bench/cmd/loadgen
	bin/loadgen suite -out bench/out

bench-go: ## run the Go benchmarks with allocations
	$(GO) test -run '^$$' -bench . -benchmem ./...

# FUZZ lists each fuzz test as package:Target.
FUZZ := core/slip:FuzzParse core/slip:FuzzEncode core/server:FuzzVerifyBody \
	core/promptpay:FuzzPayload core/lib/egress:FuzzHostClassification \
	core/qrscan:FuzzScan edge/authn:FuzzSignedHeaders edge/nonce:FuzzParseUUID core/lib/iplist:FuzzParse core/lib/iplist:FuzzClientIP \
	core/bank/httpbank:FuzzDecodeReply usage/consume:FuzzDecode

fuzz: ## run each fuzz test for FUZZTIME (default 2m)
	@set -e; for f in $(FUZZ); do \
		echo "fuzz $$f"; \
		$(GO) test ./$${f%%:*} -run '^$$' -fuzz "^$${f##*:}$$" -fuzztime $(FUZZTIME); \
	done
