GO      ?= go
BIN     := bin/composebox
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# Packages whose tests run with the race detector. The ones that link the compose library are
# left out of -race for now: instrumenting it roughly triples their cold build on 2 cores.
MODULE := github.com/composebox/composebox
RACE_PKGS := ./internal/... ./compose/... ./prereqs/... ./cleanup/... ./lifecycle/sandboxio/...
PLAIN_PKGS := $(shell $(GO) list ./... | grep -v -E '^$(MODULE)/(internal|compose|prereqs|cleanup|lifecycle/sandboxio)(/|$$)')
TEST_FLAGS ?= -count=1 -timeout 25m

.PHONY: build test test-python lint docker demo bench bench-pool bench-api clean

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/composebox

# Unit and real-engine integration tests. The leak check fails the run if the tests left any
# composebox container, network or volume behind.
test:
	@scripts/leakcheck.sh snapshot
	@status=0; \
	$(GO) test -race $(TEST_FLAGS) $(RACE_PKGS) || status=1; \
	$(GO) test $(TEST_FLAGS) $(PLAIN_PKGS) || status=1; \
	$(MAKE) --no-print-directory test-python || status=1; \
	scripts/leakcheck.sh check || status=1; \
	exit $$status

# The Python client (clients/python): unit tests, and end-to-end tests that spawn the binary
# built here against the real engine. Debian's python3 (python3-httpx, python3-pytest,
# python3-pytest-asyncio), as .ci/run installs them.
PYTHON ?= /usr/bin/python3
test-python: build
	COMPOSEBOX_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q -p no:cacheprovider clients/python/tests

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Installs and starts the engine and busybox on a fresh Debian machine; a no-op when both work.
docker:
	@scripts/setup-engine.sh

# The README's first command: engine setup, build, then one sample of multi-service end to end.
demo: docker build
	@go run ./examples/demo testdata/projects/multi-service

# The scale benchmark: composebox against the compose CLI, side by side in one run (under 20 min
# on 2 cores), written to bench/RESULTS.md. Not part of .ci/run. A smoke run:
#   make bench BENCH_FLAGS='-n 10 -capacity 40 -init-rounds 5 -exec-rounds 20'
bench:
	@bench/run.sh $(BENCH_FLAGS)

# The warm pool benchmark, cold against a pool of 8, side by side in each run (about 13 minutes
# in all), written into bench/RESULTS.md's warm pool sections: 16 workers and 100 samples with
# 2 s of agent time, which saturates 2 cores; then 4 workers and 40 samples with 10 s, which
# leaves start capacity idle. A smoke run:
#   make bench-pool POOL_FLAGS='-n 20 -out='
bench-pool:
	go run ./bench/pool -out bench/RESULTS.md $(POOL_FLAGS)
	go run ./bench/pool -out bench/RESULTS.md -section bench-pool-idle -n 40 -workers 4 -agent 10s $(POOL_FLAGS)

# The server and the Python client against the Go library, side by side in one run (a few
# minutes): exec latency (and `docker exec` from Python), 32 execs at once, a 10 MiB file each
# way, and the server's RSS at 100 live samples. Replaces the "Server and Python client" section
# of bench/RESULTS.md. Not part of .ci/run. A smoke run that writes nowhere:
#   make bench-api BENCH_API_FLAGS='--exec-rounds 10 --conc-rounds 1 --file-rounds 1 --samples 5 --out ""'
BENCH_API_FLAGS ?=
bench-api: build
	$(GO) build -o bin/cbxbench-api ./bench/api
	$(PYTHON) bench/api/bench_api.py --bin $(CURDIR)/$(BIN) --lib $(CURDIR)/bin/cbxbench-api --out bench/RESULTS.md $(BENCH_API_FLAGS)

clean:
	rm -rf bin
