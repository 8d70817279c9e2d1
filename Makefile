# AudioAccessoryBridge: the two commands a newcomer needs are `make run` and `make test`.
# Every target installs what it needs from Debian's packages first (apt-get; run as root or with sudo).

SWIFT        ?= swift
APT_PACKAGES := pkg-config protobuf-compiler protobuf-c-compiler libprotobuf-c-dev \
                libmosquitto-dev mosquitto mosquitto-clients
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps run test build generate check-generated vectors bench clean

## deps: install the Debian packages that are missing (nothing when all are present)
deps:
	@missing=$$(for p in $(APT_PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "installing:" $$missing; \
	    $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi

## run: build, start a local mosquitto (deploy/mosquitto/dev.conf) and the bridge; Ctrl-C stops both.
## Bridge options go in ARGS, e.g. `make run ARGS="--payload-format json --log-level debug"`.
run: deps
	$(SWIFT) build --product accessory-bridge
	$(SWIFT) build --product accessoryctl
	scripts/run.sh $(ARGS)

## test: every test (unit, cross-language, integration against a real mosquitto); builds the executables the
## integration tests run. One suite after another (about 50 s): the integration tests start brokers and processes, and
## some of their fixtures wait synchronously (stopping a broker, closing a client), which on a 2-core machine starves
## Swift's cooperative thread pool when ~200 tests run at once.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --no-parallel

## build: debug build of everything
build: deps
	$(SWIFT) build

## generate: regenerate the committed Swift and C code from Schemas/ (about 70 s the first time)
generate: deps
	scripts/generate.sh

## check-generated: fail when the committed generated code differs from a fresh generation
check-generated: deps
	scripts/generate.sh --check

## vectors: rewrite the golden protobuf vectors under Tests/ from the Swift samples
vectors:
	AUDIO_UPDATE_VECTORS=1 $(SWIFT) test --filter GoldenVectorTests

## bench: the release-build pipeline benchmark (decode -> model -> routing -> encode, one core), built with
## whole-program cross-module optimization in its own build folder; `make bench ARGS="1000000 10000 3 --stages"`
bench: deps
	$(SWIFT) build -c release --product pipeline-benchmark --scratch-path .build-bench -Xswiftc -cross-module-optimization
	.build-bench/release/pipeline-benchmark $(ARGS)

clean:
	$(SWIFT) package clean

## fuzz: libFuzzer over decode -> model -> routing, every output checked against the contract (Fuzz/README.md):
## a release build with AddressSanitizer in .build-fuzz, seeded from the golden vectors, RUNS inputs (1,000,000
## unless `make fuzz RUNS=...`; -1 runs until stopped), FUZZ_ARGS for more libFuzzer flags. Not part of `make test`.
RUNS         ?= 1000000
FUZZ_MAX_LEN ?= 4096
FUZZ_TIMEOUT ?= 10
.PHONY: fuzz
fuzz: deps
	$(SWIFT) build -c release --product pipeline-fuzzer --scratch-path .build-fuzz \
	    --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING
	Fuzz/make-corpus.sh .build-fuzz/seeds
	mkdir -p .build-fuzz/corpus .build-fuzz/artifacts
	SWIFT_BACKTRACE=enable=no .build-fuzz/release/pipeline-fuzzer -runs=$(RUNS) -max_len=$(FUZZ_MAX_LEN) \
	    -timeout=$(FUZZ_TIMEOUT) -print_final_stats=1 -artifact_prefix=.build-fuzz/artifacts/ $(FUZZ_ARGS) \
	    .build-fuzz/corpus .build-fuzz/seeds

## bench-e2e: end to end through ONE mosquitto, the bridge against a bare C relay (Benchmarks/Relay: decode, then
## publish a result, a retained state and a command; nothing else), interleaved A B A B over ROUNDS rounds (3): max
## throughput and CPU µs per report under a flood of DURATION seconds (10), p50/p99 latency at 50% of the relay's
## max, the bridge's peak RSS; medians and bridge/relay ratios (scripts/bench-e2e.sh). The relay and Benchmarks/LoadGen
## are C99 built by gcc, the bridge a release build, all in .build-e2e. PERF=1 also profiles the last round's floods.
ROUNDS       ?= 3
DURATION     ?= 10
ACCESSORIES  ?= 1000
E2E_CC       ?= gcc
E2E_CFLAGS   ?= -std=c99 -O2 -g -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L
E2E_WIRE     := $(wildcard Sources/CAccessoryWire/Generated/audioaccessory/v1/*.pb-c.c)
E2E_CBUILD    = $(E2E_CC) $(E2E_CFLAGS) -I Sources/CAccessoryWire/Generated -o $@ $< $(E2E_WIRE) \
                $$(pkg-config --cflags --libs libmosquitto libprotobuf-c) -pthread -lm
.PHONY: bench-e2e
bench-e2e: deps .build-e2e/relay .build-e2e/loadgen
	$(SWIFT) build -c release --product accessory-bridge --scratch-path .build-e2e
	ROUNDS=$(ROUNDS) DURATION=$(DURATION) ACCESSORIES=$(ACCESSORIES) PERF=$(PERF) scripts/bench-e2e.sh

.build-e2e/relay: Benchmarks/Relay/relay.c $(E2E_WIRE) | deps
	@mkdir -p $(@D)
	$(E2E_CBUILD)

.build-e2e/loadgen: Benchmarks/LoadGen/loadgen.c $(E2E_WIRE) | deps
	@mkdir -p $(@D)
	$(E2E_CBUILD)
