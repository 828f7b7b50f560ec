# xferbench — `make run` and `make test` are the whole quick start (README.md).
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

# The Go toolchain scripts/bootstrap.sh links as build/go where the machine's own is too old (Debian 12's 1.19)
# comes first on PATH; where there is none, the entry names nothing and the machine's own Go is found.
export PATH := $(CURDIR)/build/go/bin:$(PATH)

VENV   := .venv
PY     := $(VENV)/bin/python
BIN    := build/bin
PYTEST ?= $(PY) -m pytest
EXPERIMENT ?= experiments/quick.toml
# What `xferd-go --version` and `xferd-c --version` print (and xfer_build_info's version label).
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)

.PHONY: setup build build-go build-c test test-slow lint containers test-go test-c test-py test-asan fuzz fuzz-replay \
  fresh-check run demo proto clean bench lab-up lab-down

setup:
	@bash scripts/bootstrap.sh

# Go and C build side by side (two cores); each prints its own time.
build: setup
	@t0=$$SECONDS; $(MAKE) --no-print-directory -j2 build-go build-c; echo "build: $$((SECONDS - t0))s"

build-go:
	cd servers/go && go build -ldflags "-X main.version=$(VERSION)" -o ../../$(BIN)/xferd-go ./cmd/xferd-go
	cd servers/go && go build -o ../../$(BIN)/xferload ./cmd/xferload
	cd servers/go && go build -o ../../$(BIN)/grpcxfer ./cmd/grpcxfer  # the bench's gRPC transfer client
	cd servers/go && go build -o ../../$(BIN)/pprof-fold ./cmd/pprof-fold  # Go CPU profiles → folded stacks (xferbench/measure/profile)
	cd servers/go && go build -o ../../$(BIN)/bare-echo ./cmd/bare-echo

build-c:
	$(MAKE) -C servers/c VERSION=$(VERSION)

# lint-imports: which way imports run inside xferbench/ ([tool.importlinter] in pyproject.toml).
lint: setup
	@out=$$(gofmt -l servers/go); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	cd servers/go && go vet ./...
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache --no-logo

test-go:
	cd servers/go && go test -race -count=1 ./...

test-c:
	$(MAKE) -C servers/c test

test-py:
	$(PYTEST) -q -m "not slow"

# The conformance and frame bad-input suites again, against xferd-c built with ASan+UBSan (LeakSanitizer on).
test-asan:
	$(MAKE) -C servers/c asan
	XFERD_SERVERS=xferd-c XFERD_C_BIN=$(CURDIR)/$(BIN)/xferd-c-asan $(PYTEST) -q -n $${PYTEST_WORKERS:-2} --dist loadfile tests/servers/conformance tests/servers/badinput tests/servers/c/test_shutdown_race.py tests/servers/c/test_alloc_metrics.py tests/servers/tls_c --ignore=tests/servers/badinput/test_grpc_badinput.py

# Go fuzz targets as package:Target. Each explores for GO_FUZZ_EXECS inputs (one worker: the machine is shared).
# A count, not a duration: Go 1.26's coordinator can report a spurious "context deadline exceeded" failure when
# a -fuzztime duration expires while a starved worker is mid-input (golang/go#75804, fixed in Go 1.27). `go test` replays each package's testdata/fuzz/<Target>/ as ordinary tests (`make test-go`); after
# exploring, what go test found new is copied there from its cache, so the corpus lives in the repository.
GO_FUZZ := internal/frame:FuzzParseFrame internal/frame:FuzzDecodeUploadChunk internal/errs:FuzzQuote \
  internal/chunkwire:FuzzPieces \
  internal/gobrpc:FuzzGobServerCodec
GO_FUZZ_EXECS ?= 60000
GO_MODULE := xferbench/servers/go

# Exploration (`make test-slow`): C for FUZZ_SECONDS, each Go target for GO_FUZZ_EXECS inputs.
fuzz:
	$(MAKE) -C servers/c fuzz-run
	cd servers/go && cache=$$(go env GOCACHE)/fuzz/$(GO_MODULE) && for t in $(GO_FUZZ); do \
	  pkg=$${t%%:*} name=$${t#*:}; \
	  go test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(GO_FUZZ_EXECS)x -parallel=1 ./$$pkg || exit 1; \
	  mkdir -p $$pkg/testdata/fuzz/$$name; \
	  if [ -d $$cache/$$pkg/$$name ]; then cp -n $$cache/$$pkg/$$name/* $$pkg/testdata/fuzz/$$name/; fi; \
	  echo "fuzz: $$pkg $$name keeps $$(ls $$pkg/testdata/fuzz/$$name | wc -l) inputs"; done

# Replay only (`make test`): the C corpus and seeds once each; the Go corpus runs inside `make test-go`.
fuzz-replay:
	$(MAKE) -C servers/c fuzz-replay

# The fast suite (README): every phase timed, a table at the end, the slowest tests printed by pytest.
test: build containers
	@bash scripts/test.sh fast

# What must stay long: the full quick experiment, the 40 s ramp, the full soak, fuzz exploration, the compose
# stack and the fresh-machine check.
test-slow: build containers
	@bash scripts/test.sh slow

# The newcomer's path in a pristine container from the debootstrap base, borrowing only the host's CA bundle:
# bootstrap (Go from the module proxy), build, then make test's fast suite (FRESH_SUITE=fast, about 7 minutes on
# 2 cores, in make test-slow) or a smoke test (FRESH_SUITE=smoke). scripts/fresh_check.py says what it leaves out.
FRESH_SUITE ?= fast
fresh-check: containers
	$(PY) scripts/fresh_check.py --suite $(FRESH_SUITE)

# The Docker path (docs/EXPERIMENTS.md, "Servers in containers"): an engine, the debootstrap base image (cached
# under build/podman/) and the project's images. One-time and slow (debootstrap, image builds): set-up for
# `make test`, timed apart from it, never in `make run`'s path. Says why in one line when it
# cannot, and lets the rest run (the container tests then fail with that reason).
containers: build
	@t0=$$SECONDS; $(PY) -m xferbench.run.containers; echo "containers: $$((SECONDS - t0))s"

run: build
	$(VENV)/bin/xferbench run $(EXPERIMENT)

# A 20-second tour: both servers, the py_client CLI, a short Locust run with a check (scripts/demo.sh).
demo: build
	bash scripts/demo.sh

# A lab of hosts on this machine: network namespaces on a private bridge, each with its own sshd and cpuset
# (scripts/lab.sh; docs/EXPERIMENTS.md, "A lab of hosts on one machine"). `make lab-down` removes all of it.
LAB_HOSTS ?= 3
lab-up:
	bash scripts/lab.sh up --hosts $(LAB_HOSTS)

lab-down:
	bash scripts/lab.sh down

proto: setup
	bash scripts/gen-proto.sh
	$(PY) proto/testdata/make_vectors.py

clean:
	rm -rf build results
	-$(MAKE) -C servers/c clean

# The headline figures side by side (xferbench/tools/bench/, under 10 minutes): each a ratio to an anchor measured in the
# same rounds, one record appended to bench-records/history.jsonl and compared with the previous one of this machine
# class, then BENCHMARKS.md's generated section rewritten from it. BENCH_ARGS=--force measures on a busy machine.
BENCH_ARGS ?=
bench: build
	@t0=$$SECONDS; $(VENV)/bin/xferbench bench $(BENCH_ARGS); $(VENV)/bin/xferbench bench --markdown; \
	  echo "bench: $$((SECONDS - t0))s"

