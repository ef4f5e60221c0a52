# codapipe — see README.md. `make test` is what CI runs (.ci/run).
GO      ?= go
PKGS    := ./...
BIN     := $(CURDIR)/bin
FUZZTIME ?= 60s
SHELL   := /bin/bash
# MinIO is a test tool (AGPL): built from the Go module proxy into the ignored
# .bin/, never a dependency in go.mod. Pinned.
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
TOOLS   := $(CURDIR)/.bin
# -trimpath for the tests, vet and the fuzz binaries: without it the build cache keys every
# compiled package by the clone's absolute folder too (it is written into the object files), so
# a fresh clone recompiles all of codapipe's packages, three times (race, plain, fuzz); with it a
# clone at a new path reuses what an earlier clone of the same sources compiled
# (docs/performance.md, "make test"). MinIO (a tool outside this module) builds without it.
TRIM    := -trimpath
# The trainer/ tests (Python, PyTorch) run with Debian's interpreter, which sees Debian's
# python3-torch (the `python3` first on PATH may be another one).
PYTHON  := /usr/bin/python3
# Headless Chromium for internal/infra/browser (its tests, tools/pagepng, make report-png): Debian's
# chromium, installed by `make chromium`. The recipes hand it to Go as CODAPIPE_CHROMIUM.
CHROMIUM ?= /usr/bin/chromium
# The version is Debian's, not an exact pin: bookworm-security carries one chromium at a time and
# drops the one before (156.0.8078.73 on 2026-11-01, 156.0.8078.108 on 2026-11-28), so a pin to
# one would stop installing at the next security update. make chromium checks the major version
# instead, and the report tests log the version they ran with.
CHROMIUM_MIN_MAJOR := 120

.PHONY: all build test lint vet bench fuzz fuzz-short demo clean tools report-png chaos python-torch trainer-test chromium

all: build

## build: compile the four commands into ./bin
build:
	$(GO) build -o $(BIN)/ ./cmd/...

## tools: install the pinned test tools into .bin (MinIO, nats-server; 4-5 minutes on a never-built Go build cache)
## and the independent Arrow/Parquet reader's npm packages into tools/reader/node_modules,
## and Debian's python3-torch for the trainer/ tests when $(PYTHON) cannot import torch,
## and Debian's chromium for the internal/infra/browser tests when $(CHROMIUM) is missing
tools: $(TOOLS)/minio $(TOOLS)/nats-server tools/reader/node_modules/.installed python-torch chromium

## python-torch: install Debian's python3-torch (PyTorch 1.13 on bookworm, about 2 minutes; as root,
## or through sudo) unless $(PYTHON) already imports torch. Nothing is downloaded when the tests run.
python-torch:
	@$(PYTHON) -c 'import torch' 2>/dev/null || { \
	  echo "installing Debian's python3-torch for the trainer/ tests (apt-get, first time only)"; \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
	  $$sudo apt-get update && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-torch && \
	  $(PYTHON) -c 'import torch'; }

## chromium: install Debian's chromium (headless Chromium for internal/infra/browser: its tests,
## tools/pagepng, make report-png; as root, or through sudo) unless $(CHROMIUM) is there, then
## check that it runs. Nothing is downloaded when the tests run.
# The check discards stderr when it passes: Debian's /usr/bin/chromium (a shell script) can
# print a harmless "[: ...: unexpected operator" from /etc/chromium.d/dev-shm.
chromium:
	@test -x $(CHROMIUM) || { \
	  echo "installing Debian's chromium for internal/infra/browser (apt-get, first time only)"; \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
	  $$sudo apt-get update && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; }
	@v=$$($(CHROMIUM) --version 2>/dev/null) || { echo "chromium: $(CHROMIUM) --version fails:" >&2; $(CHROMIUM) --version; exit 1; }; \
	  major=$$(echo "$$v" | sed -n 's/^[^0-9]*\([0-9][0-9]*\)\..*/\1/p'); \
	  if [ -z "$$major" ] || [ "$$major" -lt $(CHROMIUM_MIN_MAJOR) ]; then \
	    echo "chromium: $$v is older than $(CHROMIUM_MIN_MAJOR) (internal/infra/browser needs the DevTools pipe and full-page captures of $(CHROMIUM_MIN_MAJOR)+)" >&2; exit 1; fi

## trainer-test: the reference trainer's tests (trainer/, Python unittest on CPU); make test runs them too
trainer-test: python-torch
	$(PYTHON) -m unittest discover -s trainer/tests -v
	$(PYTHON) -m unittest discover -s trainer/codapipe_reward -v

tools/reader/node_modules/.installed: tools/reader/package.json tools/reader/package-lock.json
	@echo "installing the independent shard reader (pinned versions, lock file; npm install in tools/reader)"
	cd tools/reader && npm install --no-audit --no-fund --no-save
	@touch $@

# -s -w: no symbol table and no DWARF, which makes the link (redone in every fresh clone) faster and
# the binary smaller; a test tool is not debugged.
$(TOOLS)/minio:
	@mkdir -p $(TOOLS)
	@echo "building MinIO $(MINIO_VERSION) into .bin/ (test tool, first time only)"
	GOBIN=$(TOOLS) $(GO) install -ldflags="-s -w" github.com/minio/minio@$(MINIO_VERSION)

# nats-server for the multi-process cluster tests (internal/testkit/natstest StartCluster): built
# from this module, so it is the version go.mod embeds (pinned there), and with the tests' -trimpath,
# so that its server package is compiled once for the tool and the tests (on a new build cache, one
# compile of nats-server instead of two). Built again when go.mod changes.
$(TOOLS)/nats-server: go.mod
	@mkdir -p $(TOOLS)
	@echo "building nats-server (go.mod's version) into .bin/ (test tool)"
	$(GO) build $(TRIM) -o $@ github.com/nats-io/nats-server/v2

## test: lint (gofmt + vet), then every test with the race detector but the
## acceptance tests (beside it a short fuzz pass, fuzz-short, and the trainer/ tests), then the acceptance tests without it
# The trainer/ tests (Python, trainer/tests/gotestjson.py) run beside the race pass at nice 10
# and write `go test -json` events, added to the stream after the Go tests: the report counts
# and lists them (package "trainer") and a failure fails make test.
# fuzz-short runs beside both passes at the lowest CPU priority (nice 19; its log is printed
# after the report; its failure fails make test): the tests leave part of the two cores idle
# while they wait on timeouts, leases, servers and simulated latency (vmstat: 0-47 % idle), and
# the fuzz pass, CPU only, fills that idle time without taking CPU from them. At equal
# priority it cost the run ~1.5 minutes beside the race pass and pushed the chaos test towards
# its 3-minute bound beside the acceptance pass (docs/performance.md, "make test").
# The acceptance tests (TestAccept*) run whole pipelines on the simulator:
# rendering, encoding and judging screenshots is 3-10x slower under the race
# detector, so they run in a second pass without it, at full size; every other
# test (unit and integration tests of the bus, the pool, the scheduler, the
# stores, ...) runs with it. `go test -race ./...` runs the acceptance tests too, most with smaller
# corpora, a few parts skipped (see raceEnabled in their packages).
ACCEPTANCE := ^TestAccept
# The second pass builds and runs only the packages that have a TestAccept function: linking
# the ~60 other test binaries just to run none of their tests cost ~1 CPU-minute.
# go test runs the packages it is given in that order, two at a time: the acceptance pass starts
# with its longest packages (CI's test.json, 2026-11-26: rollout 142 s, judge 136 s, chaos 136 s,
# advantage 93 s; the other seven 7-47 s), so that no long one runs alone at the end.
# Then nightly and agent (CI's test.json, 2026-11-28: nightly 63-78 s, agent 54-66 s), which had
# ended the pass alone after the short packages.
ACCEPT_FIRST := internal/testkit/chaos internal/stage/rollout internal/stage/judge internal/stage/advantage internal/stage/nightly internal/stage/agent
# GORACE=atexit_sleep_ms=0: a binary built with -race sleeps 1 s before it exits (the race
# runtime's default, to catch races of threads still running at exit), so each of the ~75 test
# binaries of the race pass, and each child process its tests start, ended 1 s late: ~40 s of
# the pass's wall time on 2 cores. Races are still reported as they happen; a GORACE of the
# user's own still applies.
# Two at a time (go test's default on 2 cores): with three, the acceptance pass took longer
# (docs/performance.md, "make test").
# The report lists skipped and failed tests with their output, the tests that
# ran against a real MinIO, the ten slowest tests, and closes with "N passed,
# N failed, N skipped"; the raw `go test -json` stream is kept in .bin/test.json.
# CODAPIPE_REQUIRE_CHROMIUM=1: the internal/infra/browser tests fail, rather than skip, without
# Chromium (`make tools` installs it: the chromium target); CODAPIPE_CHROMIUM is the one it checked.
test: tools lint
	@$(GO) build -o $(TOOLS)/testreport ./tools/testreport
	@set -o pipefail; { { nice -n 19 $(MAKE) --no-print-directory fuzz-short; echo $$? > $(TOOLS)/fuzz-short.rc; } > $(TOOLS)/fuzz-short.log 2>&1 & \
	  { nice -n 10 $(PYTHON) trainer/tests/gotestjson.py > $(TOOLS)/trainer-test.json 2>&1; echo $$? > $(TOOLS)/trainer-test.rc; } & \
	  CODAPIPE_REQUIRE_CHROMIUM=1 CODAPIPE_CHROMIUM='$(CHROMIUM)' GORACE="atexit_sleep_ms=0 $$GORACE" $(GO) test $(TRIM) -race -count=1 -json -skip '$(ACCEPTANCE)' $(PKGS); r=$$?; \
	  acc=$$($(GO) list -f '{{.ImportPath}} {{.Dir}}' $(PKGS) | \
	    while read -r p d; do if grep -qs '^func TestAccept' "$$d"/*_test.go; then echo "$$p"; fi; done); \
	  first=$$(for f in $(ACCEPT_FIRST); do echo "$$acc" | grep -x ".*/$$f" || true; done); \
	  rest=$$(echo "$$acc" | grep -vxF "$$first" || true); \
	  CODAPIPE_REQUIRE_CHROMIUM=1 CODAPIPE_CHROMIUM='$(CHROMIUM)' $(GO) test $(TRIM) -count=1 -json -run '$(ACCEPTANCE)' $$first $$rest || r=1; wait; \
	  cat $(TOOLS)/trainer-test.json; test "$$(cat $(TOOLS)/trainer-test.rc)" = 0 || r=1; exit $$r; } \
	  | tee $(TOOLS)/test.json | $(TOOLS)/testreport; r=$$?; \
	cat $(TOOLS)/fuzz-short.log; test "$$(cat $(TOOLS)/fuzz-short.rc)" = 0 && exit $$r

## lint: gofmt check + vet
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(TRIM) $(PKGS)

## chaos: the chaos test at full size (docs/operations.md, "Chaos test"): the pipeline as
## separate processes of the real binaries on a 3-node NATS cluster and MinIO, >= 1,000
## simulated episodes under faults, kill -9 of every kind of worker, a leader-node kill and a
## MinIO outage; prints the accounting table (0 lost, 0 duplicated) and the workers' RSS.
## make test runs the same test at its short size. CHAOS_SEED=N repeats a schedule.
chaos: $(TOOLS)/minio $(TOOLS)/nats-server
	CODAPIPE_CHAOS=full $(if $(CHAOS_SEED),CODAPIPE_CHAOS_SEED=$(CHAOS_SEED)) \
	  $(GO) test ./internal/testkit/chaos -run '^TestAcceptChaos$$' -count=1 -v -timeout 60m

## bench: run the benchmarks beside the code they measure; prints one figure per line, `name value`
# BENCH selects benchmarks (a -bench pattern). The end-to-end benchmarks
# (internal/stage/agent BenchmarkStepLatency, internal/stage/sched BenchmarkScheduler)
# do one full run per iteration, longer than -benchtime, so they run once.
# benchreport (tools/benchreport) turns go test's output into the figures
# and fails when the run failed. The MinIO benchmarks of internal/infra/blob need
# `make tools` first (they are skipped without it).
BENCH ?= .
bench:
	@$(GO) build -o $(TOOLS)/benchreport ./tools/benchreport
	@set -o pipefail; $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime 1s $(PKGS) | $(TOOLS)/benchreport

## fuzz: run every fuzz target of every package (go test -list '^Fuzz') for FUZZTIME (default 60s)
fuzz:
	@set -eo pipefail; n=0; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' "$$pkg" | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f ($(FUZZTIME))"; n=$$((n+1)); \
	    $(GO) test "$$pkg" -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME); \
	  done; \
	done; echo "fuzz: $$n targets ran, no finding"

## fuzz-short: every fuzz target for FUZZSHORT inputs each (default 500x, about 1-2 s a target), as
## make test runs them (CI, last): each package's instrumented test binary is built once (go test -c -fuzz, nproc at a time),
## then run per target in the package's folder (a finding is written to its testdata/fuzz/<target>/);
## the binaries (~80 MB each) go to a temporary folder, removed at the end
# The targets are the `func Fuzz*` of every *_test.go (docs/fuzzing.md lists them; internal/testkit/docstest
# checks the list). `go test -fuzz` would rebuild and relink per target. A count, not a duration:
# with a duration, Go 1.26's fuzzing coordinator can fail a target with a bare "context deadline
# exceeded" at the deadline on a loaded machine (go.dev/issue/75804, fixed in Go 1.27).
FUZZSHORT ?= 500x
fuzz-short:
	@set -eo pipefail; start=$$(date +%s); n=0; cache=$$($(GO) env GOCACHE)/fuzz; \
	export bins=$$(mktemp -d); trap 'rm -rf "$$bins"' EXIT; \
	dirs=$$(find . -name '*_test.go' -not -path './.bin/*' -not -path '*/node_modules/*' -exec grep -l '^func Fuzz' {} + | xargs -n1 dirname | sort -u); \
	echo "$$dirs" | xargs -P $$(nproc) -I{} sh -c 'd={}; exec $(GO) test $(TRIM) -c -fuzz=. -ldflags=-w -o "$$bins/$$(echo "$${d#./}" | tr / _).test" "$$d"'; \
	build=$$(( $$(date +%s) - start )); \
	for dir in $$dirs; do \
	  bin=$$bins/$$(echo "$${dir#./}" | tr / _).test; \
	  for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$dir"/*_test.go); do \
	    n=$$((n+1)); t0=$$(date +%s); \
	    if ! out=$$(cd "$$dir" && "$$bin" -test.run='^$$' -test.fuzz="^$$f$$" -test.fuzztime=$(FUZZSHORT) -test.fuzzcachedir="$$cache" 2>&1); then \
	      echo "$$out"; echo "fuzz-short: $${dir#./} $$f FAILED (the input is in $${dir#./}/testdata/fuzz/$$f/: keep it as a seed once fixed)"; exit 1; \
	    fi; \
	    echo "fuzz-short: $${dir#./} $$f ok ($$(( $$(date +%s) - t0 ))s)"; \
	  done; \
	done; echo "fuzz-short: $$n targets, $(FUZZSHORT) each, no finding, $$(( $$(date +%s) - start ))s ($${build}s building the test binaries, $$(nproc) at a time)"

## demo: the whole pipeline on the embedded defaults, on the SIMULATOR
## (simulated VMs and models), as the nightly job runs it (cmd/nightly,
## one app): embedded NATS and the local blob store under ./.codapipe;
## rollout runs ChimeraX's tasks with a judge worker (the default staged
## policy, the simulator's two judge models) and an advantage worker beside it, both
## drained after it; the GRPO rows go to one Arrow shard set under
## ./.codapipe/shards, read back at the end by the independent reader
## (tools/reader); sftpack builds the SFT set of the clean successes in
## ./.codapipe/sft/<night>. It ends with one closing summary.
# Logs are the human text format (one line per event) even when the output
# is not a terminal (CI logs); CODAPIPE_LOG_FORMAT=json make demo for JSON.
# The report: nightly writes the night's page (every night of the app on the
# stream, with trends once there are two), and the demo copies it to
# REPORT_HTML (the latest demo's page, what make report-png renders).
DEMO_DATA   := ./.codapipe
REPORT_HTML ?= $(DEMO_DATA)/report.html
REPORT_PNG  ?= $(DEMO_DATA)/report.png
DEMO_APP    ?= ChimeraX
demo: export CODAPIPE_LOG_FORMAT ?= text
demo: DEMO_NIGHT := demo-$(shell date -u +%Y%m%d-%H%M%S)
demo: DEMO_OUT = $(DEMO_DATA)/nightly/$(DEMO_NIGHT)
# DEMO_COUNT counts the files and rows the reader printed (one JSON line a file).
demo: export DEMO_COUNT := let n = 0, rows = 0; require("readline").createInterface({ input: process.stdin }).on("line", l => { const d = JSON.parse(l); n++; rows += d.num_rows; }).on("close", () => console.log(`reader: read back $${n} shard files, $${rows} rows (tools/reader/read.mjs: apache-arrow, independent of the Go writer)`));
demo: build tools/reader/node_modules/.installed
	@mkdir -p $(DEMO_OUT)
	@start=$$(date +%s); set -eo pipefail; \
	$(BIN)/nightly --sim --data $(DEMO_DATA) --apps $(DEMO_APP) --group 8 --samples 4 --night $(DEMO_NIGHT) \
	  --judge-args '--lowres 640x400' > $(DEMO_OUT)/summary.txt || { cat $(DEMO_OUT)/summary.txt; exit 1; }; \
	{ echo; echo "== the shards, read back by the independent reader (node tools/reader/read.mjs FILE...)"; } >&2; \
	files=$$(node -e 'for (const f of require(process.argv[1]).shard_files) console.log(f)' $(abspath $(DEMO_OUT))/summary.json); \
	if [ -n "$$files" ]; then node tools/reader/read.mjs $$files | node -e "$$DEMO_COUNT" \
	  >> $(DEMO_OUT)/summary.txt; else echo "reader: no shard files to read" >> $(DEMO_OUT)/summary.txt; fi; \
	cp $(DEMO_OUT)/report.html $(REPORT_HTML); \
	echo "report page also at $(REPORT_HTML) (make report-png renders it)" >> $(DEMO_OUT)/summary.txt; \
	echo "demo: $$(( $$(date +%s) - start ))s" >> $(DEMO_OUT)/summary.txt; \
	echo; echo "================ closing summary ================"; cat $(DEMO_OUT)/summary.txt

## report-png: render a run report page in headless Chromium to a full-page PNG for a
## person to look at (not part of make test), with tools/pagepng, which also lists the
## page's console errors, exceptions and failed loads (and then fails). RUN=NAME writes
## the page of that run first (rollout report --out); without RUN it renders the page
## already at REPORT_HTML (the demo's). Needs Chromium: the chromium target installs it.
report-png: build chromium
	@if [ -n "$(RUN)" ]; then $(BIN)/rollout report --run '$(RUN)' --out '$(REPORT_HTML)'; fi
	@test -f '$(REPORT_HTML)' || { echo "report-png: no $(REPORT_HTML): give RUN=NAME (a rollout --run) or run make demo first" >&2; exit 2; }
	@CODAPIPE_CHROMIUM='$(CHROMIUM)' $(GO) run ./tools/pagepng -in '$(REPORT_HTML)' -out '$(REPORT_PNG)'

clean:
	rm -rf $(BIN) $(TOOLS) tools/reader/node_modules
	$(GO) clean -testcache
