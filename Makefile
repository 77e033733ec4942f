GO      ?= go
BIN     := bin/composebox
# The repository's root (this Makefile's directory), so that paths hold under make -C or -f.
ROOT    := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
# One version for the binary and the Python package: VERSION (a link to the copy the Python
# package carries in its sdist and wheels). COMMIT is the checkout's, shown by `composebox version`.
VERSION := $(shell cat $(ROOT)/VERSION)
COMMIT  ?= $(shell git -C $(ROOT) describe --always --dirty --exclude '*' 2>/dev/null)
# The binary as it ships: static (no libc, so one build runs on any Linux of its architecture,
# and goes into the manylinux wheels as it is), without the symbol table and DWARF (a third of
# its size; panics still print their stacks), and with no build machine's paths in it.
GO_BUILD := CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)"
# Packages whose tests run with the race detector. The ones that link the compose library are
# left out of -race for now: instrumenting it roughly triples their cold build on 2 cores.
MODULE := github.com/composebox/composebox
RACE_PKGS := ./internal/... ./compose/... ./prereqs/... ./cleanup/... ./lifecycle/sandboxio/...
PLAIN_PKGS := $(shell $(GO) list ./... | grep -v -E '^$(MODULE)/(internal|compose|prereqs|cleanup|lifecycle/sandboxio)(/|$$)')
TEST_FLAGS ?= -count=1 -timeout 25m
# The orchestrator's, the server's and several engines' engine-free tests run on the in-memory
# backend (internal/fakebackend) under -race as well: they take seconds once built, and
# lifecycle/multiengine's build reuses the orchestrator's instrumented compose library (about
# 25 s more). The fake's own run of the backend harness (orchestrator/backend/backendtest) is
# in RACE_PKGS, with internal/.
FAKE_PKGS := ./orchestrator/ ./api/ ./lifecycle/multiengine/
FAKE_TESTS := ^TestFake

.PHONY: build wheel test test-python test-python-k8s test-inspect test-inspect-k8s lint docker k8s k8s-down demo docs bench bench-floor bench-pool bench-api bench-engines bench-k8s bench-startup bench-inspect bench-fork bench-egress clean

build:
	$(GO_BUILD) -o $(BIN) ./cmd/composebox

# The Python package's distributions, in dist/ (offline: Debian's python3-build, setuptools and
# wheel, which scripts/setup-python.sh installs): the sdist and the pure wheel (the client
# alone), and one platform wheel per architecture in WHEEL_ARCHES, each carrying the static
# binary for it with the `composebox` console script: composebox-VERSION-py3-none-
# manylinux_2_17_x86_64.whl and ..._aarch64.whl. The host's is bin/composebox; the others are
# cross-built (CGO_ENABLED=0 needs no cross toolchain) into bin/linux-ARCH/.
WHEEL_ARCHES ?= amd64 arm64
DIST ?= $(ROOT)/dist
HOST_GOARCH := $(shell $(GO) env GOARCH)
wheel: build
	@$(ROOT)/scripts/setup-python.sh $(PYTHON)
	@set -e; bins=; for a in $(WHEEL_ARCHES); do \
	  if [ "$$a" = "$(HOST_GOARCH)" ]; then bins="$$bins $(BIN)"; continue; fi; \
	  echo "wheel: cross-building bin/linux-$$a/composebox"; \
	  GOOS=linux GOARCH=$$a $(GO_BUILD) -o bin/linux-$$a/composebox ./cmd/composebox; \
	  bins="$$bins bin/linux-$$a/composebox"; \
	done; \
	rm -rf $(DIST); PYTHON=$(PYTHON) $(ROOT)/scripts/build-wheels.sh $(DIST) $$bins

# Unit and real-engine integration tests (scripts/test.sh), in three concurrent tracks, each
# printed whole when it ends: the Go packages on the local engine; the Python client's suites
# (test-python, which installs the Python test dependencies it lacks) then the real inspect_ai
# (test-inspect); and the local Kubernetes cluster's start followed by the tests that need it
# (Go, beside test-python-k8s then test-inspect-k8s). The suites mostly wait on containers and
# pods, so the tracks overlap well on 2 cores. The leak check fails the run if the tests left
# any composebox container, network, volume or namespace behind.
#
# The cluster's first build compiles for about 15 minutes on 2 cores, overlapping the other
# tracks; COMPOSEBOX_K8S_REQUIRED then makes a Kubernetes test that finds no cluster fail
# rather than skip. K8S=0 leaves the cluster out (for a machine that cannot run it: not root,
# not Debian), and its tests skip, saying so. TRACKS='go python cluster' runs fewer tracks.
K8S ?= 1
K8S_ON := $(filter-out 0,$(K8S))
K8S_LOG := $(ROOT)/bin/k8s-up.log
# What needs the cluster: the packages below, and cmd/composebox's tests named TestKubernetes*;
# everything else runs in the other tracks.
K8S_PKGS := $(MODULE)/internal/k8stest $(MODULE)/kubernetes
K8S_CLI_TESTS := ^TestKubernetes
RACE_EARLY := $(filter-out $(K8S_PKGS),$(shell $(GO) list $(RACE_PKGS)))
PLAIN_EARLY := $(filter-out $(K8S_PKGS),$(PLAIN_PKGS))
test: docker build
	@scripts/leakcheck.sh snapshot
	@status=0; \
	GO='$(GO)' TEST_FLAGS='$(TEST_FLAGS)' RACE_EARLY='$(RACE_EARLY)' PLAIN_EARLY='$(PLAIN_EARLY)' \
	  FAKE_PKGS='$(FAKE_PKGS)' FAKE_TESTS='$(FAKE_TESTS)' K8S_ON='$(K8S_ON)' K8S_LOG='$(K8S_LOG)' \
	  K8S_PKGS='$(K8S_PKGS)' K8S_CLI_TESTS='$(K8S_CLI_TESTS)' MODULE='$(MODULE)' \
	  scripts/test.sh || status=1; \
	scripts/leakcheck.sh check || status=1; \
	exit $$status

# The Python client (clients/python): unit tests, end-to-end tests that spawn the binary built
# here against the real engine, and a wheel built and installed into a fresh venv. The whole
# suite runs twice with PYTHON's pytest and pytest-asyncio (Debian's): first on the installed
# httpx, httpcore and anyio (Debian 12's: the oldest the client supports), then on the current
# releases' sources in PYTHON_MODERN put first on PYTHONPATH (what pip installs today); that
# run is skipped, saying so, where the directory is absent (a user's clone).
# scripts/setup-python.sh first installs with apt what the tests need and is missing (on Debian
# as root; elsewhere it says what to install).
PYTHON ?= /usr/bin/python3
PYTHON_MODERN ?= $(abspath $(ROOT)/../shared/python-modern)
PYTEST = $(PYTHON) -m pytest -q -p no:cacheprovider $(ROOT)/clients/python/tests
STACK_VERSIONS = $(PYTHON) -c 'import httpx, httpcore; print("httpx", httpx.__version__, "httpcore", httpcore.__version__)'
test-python: build
	@$(ROOT)/scripts/setup-python.sh $(PYTHON)
	@status=0; export COMPOSEBOX_BIN=$(ROOT)/$(BIN); \
	echo "test-python: on the installed packages: $$(env -u PYTHONPATH $(STACK_VERSIONS))"; \
	env -u PYTHONPATH COMPOSEBOX_TEST_STACK=installed $(PYTEST) || status=1; \
	if [ -d "$(PYTHON_MODERN)" ]; then \
	  echo "test-python: on $(PYTHON_MODERN): $$(PYTHONPATH="$(PYTHON_MODERN)" $(STACK_VERSIONS))"; \
	  PYTHONPATH="$(PYTHON_MODERN)" COMPOSEBOX_TEST_STACK=modern $(PYTEST) || status=1; \
	else \
	  echo "test-python: NOTICE: skipped the run on the current httpx/httpcore/anyio: no $(PYTHON_MODERN)"; \
	fi; \
	exit $$status

# The Python client's end-to-end tests against servers on the local Kubernetes cluster (the one
# bin/k8s/env describes, as for the Go tests), on the installed httpx stack: the inspect
# self-check's conformance suite, the sync and async clients, logs, TTYs and the inspect
# provider. The servers the tests spawn run with COMPOSEBOX_BACKEND=kubernetes, the client
# unchanged; leftovers are checked with `composebox ls` on the cluster. Without the cluster the
# tests skip, saying so (fail under COMPOSEBOX_K8S_REQUIRED, which make test K8S=1 sets).
# The async client and TTYs add minutes and nothing of the backend's own: run them with
# PYTHON_K8S_TESTS='... test_e2e_async.py test_e2e_tty.py'. test_egress.py runs on the cluster
# too (PYTHON_K8S_TESTS='... test_egress.py'); it is left out here because beside the Go
# tests it doubled this suite's time and the cluster's load (the Go egress test covers it).
PYTHON_K8S_TESTS ?= test_conformance.py test_e2e_sync.py test_logs.py test_inspect_shell.py
test-python-k8s: build
	@$(ROOT)/scripts/setup-python.sh $(PYTHON)
	@env -u PYTHONPATH -u KUBECONFIG -u COMPOSEBOX_REGISTRY COMPOSEBOX_BIN=$(ROOT)/$(BIN) \
	  COMPOSEBOX_TEST_BACKEND=kubernetes COMPOSEBOX_TEST_STACK=installed \
	  $(PYTHON) -m pytest -q -p no:cacheprovider $(addprefix $(ROOT)/clients/python/tests/,$(PYTHON_K8S_TESTS))

# The real inspect_ai against the provider (clients/python/tests-inspect): inspect_ai 0.3.260
# from ../shared/inspect_ai on Python 3.13 in a Debian trixie root that scripts/inspect/root.sh
# builds once and caches in /var/cache/composebox-trixie (INSPECT_ROOT_CACHE), the client from
# the wheel clients/python builds. Every test on the local engine, then those marked `backends`
# over two private engines (scripts/inspect/engines.sh). Skipped with a NOTICE where
# ../shared/inspect_ai is absent (a user's clone). INSPECT_FLAGS go to pytest, e.g.
#   make test-inspect INSPECT_FLAGS='-k self_check'
INSPECT_FLAGS ?=
test-inspect: build
	$(GO) build -o bin/testdockerd ./internal/testutil/dockerd/testdockerd
	@status=0; COMPOSEBOX_BIN=$(ROOT)/$(BIN) $(ROOT)/scripts/inspect/run.sh $(INSPECT_FLAGS) || status=1; \
	COMPOSEBOX_BIN=$(ROOT)/$(BIN) $(ROOT)/scripts/inspect/engines.sh $(INSPECT_FLAGS) || status=1; \
	exit $$status

# The same tests marked `backends` against servers on the local Kubernetes cluster (bin/k8s/env,
# as for test-python-k8s); they skip without it (fail under COMPOSEBOX_K8S_REQUIRED).
test-inspect-k8s: build
	@env -u KUBECONFIG -u COMPOSEBOX_REGISTRY COMPOSEBOX_BIN=$(ROOT)/$(BIN) COMPOSEBOX_TEST_BACKEND=kubernetes \
	  $(ROOT)/scripts/inspect/run.sh -m backends $(INSPECT_FLAGS)

# The CLI reference, docs/cli, written from the commands' own help; TestCLIReferenceIsFresh
# fails when it is stale.
docs:
	$(GO) run ./cmd/composebox __gendocs docs/cli

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@# Built as make build and the tests build (scripts/test.sh), so that vet compiles nothing twice.
	CGO_ENABLED=0 GOFLAGS=-trimpath $(GO) vet ./...

# Installs and starts the engine and busybox on a fresh Debian machine; a no-op when both work.
docker:
	@scripts/setup-engine.sh

# A real single-node Kubernetes cluster on this machine (root, Debian): a test fixture and a way
# to try the Kubernetes backend. Builds its binaries once into /var/cache/composebox-k8s (about
# 15 minutes cold on 2 cores shared with the tests), then starts in seconds; writes bin/k8s/env. A no-op while
# it runs. make test depends on it.
k8s: docker
	@scripts/k8s/up.sh

# Stops it and removes everything it made except the binary cache.
k8s-down:
	@scripts/k8s/down.sh

# The README's first command: engine setup, build, then one sample of multi-service end to end.
demo: docker build
	@go run ./examples/demo testdata/projects/multi-service

# The scale benchmark: composebox against the compose CLI, side by side in one run, then against
# the bare Engine API floor (under 25 min on 2 cores), written to bench/RESULTS.md. Not part of
# .ci/run. A smoke run:
#   make bench BENCH_FLAGS='-n 10 -capacity 40 -init-rounds 5 -exec-rounds 20 -floor-rounds 1 -floor-n 16'
bench:
	@bench/run.sh $(BENCH_FLAGS)

# The floor alone: a bare Engine API client doing one sample's whole work against composebox
# doing it through the library, batches alternating (3 rounds of 48 samples per side, 16 in
# flight, then exec latency; about 6 minutes). Replaces the floor's figures in bench/RESULTS.md;
# with FLOOR_FLAGS it writes to $$OUT or /tmp instead. A smoke run (about 2 minutes), with
# profiles:
#   make bench-floor FLOOR_FLAGS='-floor-rounds 1 -floor-n 16 -floor-exec-rounds 30 -profile /tmp/cbxfloor'
FLOOR_FLAGS ?=
bench-floor:
	@bench/run.sh -phases floor $(FLOOR_FLAGS)

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

# The inspect_ai provider with the real inspect_ai (bench/inspect, in the test root of
# scripts/inspect/run.sh): 200 execs at once from one sample through the provider against the
# same through the Go library (bench/api's program), then exec_remote's first byte against a
# model of inspect's polling. Replaces bench/RESULTS.md's "inspect_ai provider" section (a few
# minutes). Not part of .ci/run. A smoke run that writes nowhere:
#   make bench-inspect BENCH_INSPECT_FLAGS='--rounds 1 --latency-rounds 1 --out='
BENCH_INSPECT_FLAGS ?=
bench-inspect: build
	$(GO) build -o bin/cbxbench-api ./bench/api
	COMPOSEBOX_BIN=$(ROOT)/$(BIN) $(ROOT)/scripts/inspect/run.sh --script bench/inspect/bench_inspect.py \
	  --lib $(ROOT)/bin/cbxbench-api --out bench/RESULTS.md $(BENCH_INSPECT_FLAGS)

# Several engines (bench/engines), written into bench/RESULTS.md's own section: placement on 50
# fake engines (10,000 placements: decision time, imbalance, image locality, against random and
# round robin), then samples/min on 1, 2 and 3 private dockerds on this host against one
# reached directly, in two rounds of reversed order (root; 10 to 20 minutes on 2 busy cores).
# A smoke run that writes nowhere:
#   make bench-engines ENGINES_FLAGS='-placements 1000 -n 6 -workers 4 -rounds 1 -out='
ENGINES_FLAGS ?=
# Fork, snapshot and reset (bench/fork), written into bench/RESULTS.md's own section: a
# three-service sample with 100 MB written in one service, forked one way and 8 ways, and reset
# to a snapshot, each against a fresh SampleInit of the same task in the same run, as ratios of
# medians (3 rounds, a few minutes). FORK_FLAGS="-rounds 1 -out /tmp/x.md" for a smoke run.
bench-fork:
	$(GO) run ./bench/fork -out bench/RESULTS.md $(FORK_FLAGS)

# The egress gateway (bench/egress), written into bench/RESULTS.md's own section: a sample behind
# its gateway (allowlist pkgs.test) against one with unrestricted egress, side by side in one
# run, against a server the run builds in a network namespace (root): a 100 MiB download's
# throughput and a fresh connection's p50 and p99 over HTTP and HTTPS (a test CA), and the
# gateway's memory per sample (a minute or two). Not part of make test. A smoke run that writes
# nowhere:
#   make bench-egress EGRESS_FLAGS='-downloads 1 -connects 20 -samples 2'
EGRESS_FLAGS ?=
bench-egress: build
	$(GO) run ./bench/egress -bin $(BIN) -out bench/RESULTS.md $(EGRESS_FLAGS)

bench-engines:
	$(GO) run ./bench/engines -out bench/RESULTS.md $(ENGINES_FLAGS)

# The Kubernetes backend against the Docker backend (bench/k8s), both through the orchestrator,
# side by side in one run on the local cluster (about 5 minutes): SampleInit to ready and exec of
# `true` on testdata/projects/multi-service and bench/projects/two-service, batches alternating;
# exec through the backend against a bare client-go exec on the same pod; warm pool takes (own
# and shared pool). Written into bench/RESULTS.md's own section. Not part of make test. It reads
# KUBECONFIG and COMPOSEBOX_REGISTRY from bin/k8s/env and stops, saying "run `make k8s`", when
# the file is absent or the cluster does not answer. A smoke run that writes nowhere:
#   make bench-k8s K8S_BENCH_FLAGS='-init-rounds 1 -batch 1 -exec-rounds 1 -pool-rounds 1 -out='
K8S_BENCH_FLAGS ?=
bench-k8s:
	$(GO) run ./bench/k8s -out bench/RESULTS.md $(K8S_BENCH_FLAGS)

# CLI start-up (bench/startup): `composebox exec -p P true` as a process against `docker exec
# CONTAINER true` on the same sample's container, each round running both (and the process
# floor, `composebox version` against `docker --version`) in a rotating order; then the package
# initialisation before main (GODEBUG=inittrace=1). About a minute; replaces the section in
# bench/RESULTS.md. STARTUP_FLAGS='-baseline OLD_BINARY' measures another build beside it. A
# smoke run that writes nowhere:
#   make bench-startup STARTUP_FLAGS='-rounds 5 -init-runs 3 -out='
STARTUP_FLAGS ?=
bench-startup: build
	$(GO) run ./bench/startup -bin $(BIN) $(STARTUP_FLAGS)

clean:
	rm -rf bin dist
