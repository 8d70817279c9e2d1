# AudioAccessoryBridge: the two commands a newcomer needs are `make run` and `make test`.
# Every target installs what it needs from Debian's packages first (apt-get; run as root or with sudo).

SWIFT        ?= swift
APT_PACKAGES := pkg-config protobuf-compiler protobuf-c-compiler libprotobuf-c-dev \
                libmosquitto-dev mosquitto mosquitto-clients gcc make etcd-server curl jq bc python3
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
run: deps hub-sdk
	$(SWIFT) build --product accessory-bridge
	$(SWIFT) build --product accessoryctl
	scripts/run.sh $(ARGS)

## run-cluster: a cluster on one machine (mosquitto, a single-node etcd, three bridges b1-b3 sharing SLOTS slots);
## Ctrl-C stops them all (scripts/run-cluster.sh). Bridge options in ARGS.
.PHONY: run-cluster
run-cluster: deps hub-sdk
	$(SWIFT) build --product accessory-bridge
	$(SWIFT) build --product accessoryctl
	SLOTS=$(or $(SLOTS),12) scripts/run-cluster.sh $(ARGS)

## test: every test (unit, cross-language, integration against a real mosquitto, the C SDK's checks); builds the
## executables the integration tests run. In parallel (about 40 s on 2 cores, where one after another takes 140 s: most
## of the time is spent waiting for brokers and processes). A test that never ends fails the run after 20 minutes
## rather than holding it; `SERIAL=1` runs them one after another. The run fails too when a process it started
## outlives it (scripts/run-tests.sh).
TEST_MODE    := $(if $(SERIAL),--no-parallel,--parallel)
test: deps hub-sdk
	$(SWIFT) build --build-tests
	SWIFT="$(SWIFT)" scripts/run-tests.sh $(TEST_MODE)

## test-stress: the whole of `make test` RUNS times (10) while HOGS busy loops (2) compete for the CPU: a table of
## runs, each failing test with the runs it failed in, every run's log (and a failed run's brokers' and bridges'
## files) kept under .build-stress/ (scripts/test-stress.sh). `make test-stress RUNS=30 HOGS=2`
.PHONY: test-stress
test-stress: deps hub-sdk
	$(SWIFT) build --build-tests
	SWIFT="$(SWIFT)" RUNS=$(if $(filter command line environment,$(origin RUNS)),$(RUNS),10) HOGS=$(or $(HOGS),2) \
	    scripts/test-stress.sh

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

## bench: the release-build pipeline benchmark (decode -> model -> routing -> encode, one core), built as the bridge
## that `make bench-e2e` runs. Not with -cross-module-optimization: when it was tried, Swift 6.3.1 crashed in IRGen on
## the bridge's message handler, and it made no difference (83,000 against 81,700 messages/s with
## --no-home-automation).
## `make bench ARGS="1000000 10000 3 --no-home-automation"`
bench: deps
	$(SWIFT) build -c release --product pipeline-benchmark --scratch-path .build-bench
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

## ha-validate: a real Home Assistant (2025.4.4 from PyPI in .build-ha/venv: the first install takes 2 to 3 minutes
## and 0.8 GB) connected to the broker BROKER (127.0.0.1:1883); after WAIT seconds (20) for MQTT discovery it prints
## the devices, entities and states HA made of it, and HA's warnings (scripts/ha-validate.sh; more options in ARGS,
## e.g. ARGS="--screenshot"). A manual validation, not part of `make test`.
.PHONY: ha-validate
ha-validate: deps
	BROKER="$(BROKER)" WAIT="$(WAIT)" scripts/ha-validate.sh $(ARGS)

## ha-reshard: a cluster resharded (FROM 12 → TO 16 slots) under a real Home Assistant (as ha-validate installs it):
## prints what Home Assistant kept of its devices and entities, and what it logged (scripts/ha-reshard.sh). Manual.
.PHONY: ha-reshard
ha-reshard: deps hub-sdk
	$(SWIFT) build --product accessory-bridge
	scripts/ha-reshard.sh $(or $(FROM),12) $(or $(TO),16)

## bench-e2e: end to end through ONE mosquitto, the bridge against a bare C relay (Benchmarks/Relay: decode, then
## publish a result, a retained state and a command; nothing else), interleaved A B A B over ROUNDS rounds (3): max
## throughput and CPU µs per report under a flood of DURATION seconds (10), p50/p99 latency and CPU µs per report
## at PACE% (50) of the relay's max (the p99 also as the median of WINDOW-second windows' p99s, 1), the bridge's peak
## RSS; medians and bridge/relay ratios (scripts/bench-e2e.sh).
## The relay and Benchmarks/LoadGen are C99 built by gcc, the bridge a release build, all in .build-e2e. PERF=1 also
## profiles the last round's floods; CALIBRATE=N paces every round at PACE% of N relay floods' median, measured first.
ROUNDS       ?= 3
DURATION     ?= 10
ACCESSORIES  ?= 1000
E2E_CC       ?= gcc
E2E_CFLAGS   ?= -std=c99 -O2 -g -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L
E2E_WIRE     := $(wildcard Sources/CAccessoryWire/Generated/audioaccessory/v1/*.pb-c.c)
# The broker's URL is parsed by the SDK's url.c (url.h), compiled in.
E2E_URL      := Sources/CAudioHub/src/url.c Sources/CAudioHub/src/url.h
# Every C file among the prerequisites.
E2E_CBUILD    = $(E2E_CC) $(E2E_CFLAGS) -I Sources/CAudioHub/include -I Sources/CAccessoryWire/Generated -o $@ \
                $(filter %.c,$^) $$(pkg-config --cflags --libs libmosquitto libprotobuf-c) -pthread -lm
.PHONY: bench-e2e
bench-e2e: deps .build-e2e/relay .build-e2e/loadgen
	$(SWIFT) build -c release --product accessory-bridge --scratch-path .build-e2e
	ROUNDS=$(ROUNDS) DURATION=$(DURATION) ACCESSORIES=$(ACCESSORIES) PERF=$(PERF) CALIBRATE=$(CALIBRATE) scripts/bench-e2e.sh

## bench-tail: the tail at 65% of the relay's max, as issue 38 measures it: bench-e2e paced at PACE (65)% of CALIBRATE
## (3) relay floods' median, over ROUNDS (10) rounds; about 10 minutes. With ten, the relay's own p99 repeated within
## ±25% over five runs on 2026-12-01 (three would have done; on 2026-11-29 ten did not: docs/performance-history.md,
## twenty-fifth session). Home automation off: `make bench-tail BRIDGE_ARGS=--no-home-automation`. First, 10 s of bench-stalls: what the host's
## bursts were like (on this VM they set the p99 on both sides).
.PHONY: bench-tail
bench-tail: .build-e2e/stalls
	.build-e2e/stalls --seconds 10
	$(MAKE) bench-e2e PACE=$(or $(PACE),65) CALIBRATE=$(or $(CALIBRATE),3) \
	    ROUNDS=$(if $(filter command line,$(origin ROUNDS)),$(ROUNDS),10)

## bench-stalls: how often this machine runs a fixed piece of work far slower than it should while it reports no steal
## (Benchmarks/Stalls): a piece every 10 ms for DURATION (10) seconds; the share of pieces slower than 4x the median,
## and the bursts they come in. Run it before trusting a tail: on 2026-12-01 every tail at 65% began with such a burst.
.PHONY: bench-stalls
bench-stalls: .build-e2e/stalls
	.build-e2e/stalls --seconds $(DURATION)

.build-e2e/stalls: Benchmarks/Stalls/stalls.c | deps
	@mkdir -p $(@D)
	$(E2E_CC) $(E2E_CFLAGS) -o $@ $<

.build-e2e/relay: Benchmarks/Relay/relay.c $(E2E_URL) $(E2E_WIRE) | deps
	@mkdir -p $(@D)
	$(E2E_CBUILD)

## bench-cluster: the cluster (docs/scale-out.md), release bridges on one mosquitto and etcd: the same load (HUBS 12
## hubs x ACCESSORIES 100, RATE 3000 reports/s, a DURATION 20 s window) through 1, 2 and 3 members and one member of 64 and 256 slots (SHAPES), ROUNDS (3) times (the members' and the broker's CPU per report, the median of the rounds' ratios: no fan-out), failover gaps over KILLS (20) kills of a member of three with FAILOVER_SLOTS (12) slots,
## and a SIGKILLed member's slots rebuilt at REBUILD_ACCESSORIES (1,000,000; 0 skips it; about 15 minutes) accessories
## (scripts/bench-cluster.sh).
.PHONY: bench-cluster
bench-cluster: deps hub-sdk .build-e2e/loadgen
	$(SWIFT) build -c release --product accessory-bridge --scratch-path .build-e2e
	HUBS=$(or $(HUBS),12) KILLS=$(or $(KILLS),20) REBUILD_ACCESSORIES=$(or $(REBUILD_ACCESSORIES),1000000) ROUNDS=$(ROUNDS) \
	    $(if $(filter command line,$(origin ACCESSORIES)),ACCESSORIES=$(ACCESSORIES)) \
	    $(if $(filter command line,$(origin RATE)),RATE=$(RATE)) \
	    $(if $(filter command line,$(origin DURATION)),DURATION=$(DURATION)) \
	    $(if $(filter command line,$(origin SHAPES)),SHAPES="$(SHAPES)") \
	    $(if $(filter command line,$(origin FAILOVER_SLOTS)),FAILOVER_SLOTS=$(FAILOVER_SLOTS)) scripts/bench-cluster.sh

## bench-reshard: a reshard of a running cluster (scripts/bench-reshard.sh): two members of FROM (64) slots under
## hub-sim's HUBS (64) x ACCESSORIES (10) accessories that follow the layout, `accessory-bridge reshard` to TO (128)
## AT (15) s into SECONDS (40) s at RATE (200) requests/s: the reshard's time, the gap without service, what hub-sim lost.
.PHONY: bench-reshard
bench-reshard: deps hub-sdk
	$(SWIFT) build -c release --product accessory-bridge --scratch-path .build-e2e
	$(if $(filter command line,$(origin FROM)),FROM=$(FROM)) $(if $(filter command line,$(origin TO)),TO=$(TO)) \
	    $(if $(filter command line,$(origin HUBS)),HUBS=$(HUBS)) \
	    $(if $(filter command line,$(origin ACCESSORIES)),ACCESSORIES=$(ACCESSORIES)) \
	    $(if $(filter command line,$(origin RATE)),RATE=$(RATE)) \
	    $(if $(filter command line,$(origin SECONDS)),SECONDS_RUN=$(SECONDS)) \
	    $(if $(filter command line,$(origin AT)),AT=$(AT)) scripts/bench-reshard.sh

## bench-head-tracking: head tracking's figures (scripts/bench-head-tracking.sh): telemetry (1,000 reports/s) alone and
## while 200 accessories stream 100 frames/s each through the same mosquitto (telemetry p99, also as the median of
## WINDOW-second windows' p99s, 1; the bridge's CPU per report, the frames' latency hub -> host), over ROUNDS (3) rounds
## of DURATION (20) s; a route change's first frame at the new host; the largest stream one broker carries here at
## p99 <= 30 ms. A round with more than STEAL_MAX% (2) steal is measured again (RETRIES, 3).
.PHONY: bench-head-tracking
bench-head-tracking: deps hub-sdk .build-e2e/relay .build-e2e/loadgen
	$(SWIFT) build -c release --product accessory-bridge --scratch-path .build-e2e
	ROUNDS=$(ROUNDS) $(if $(filter command line,$(origin DURATION)),DURATION=$(DURATION)) \
	    $(if $(filter command line,$(origin WINDOW)),WINDOW=$(WINDOW)) scripts/bench-head-tracking.sh

## bench-rebuild: ACCESSORIES (100,000) registered through a release bridge, then three restarts: how long reading the
## retained states and rebuilding took, and the bridge's memory (scripts/rebuild-bench.sh).
.PHONY: bench-rebuild
bench-rebuild: deps .build-e2e/loadgen
	$(SWIFT) build -c release --product accessory-bridge --scratch-path .build-e2e
	scripts/rebuild-bench.sh $(if $(filter command line,$(origin ACCESSORIES)),$(ACCESSORIES),100000)

## bench-memory: the bridge's RSS per accessory, running and after a restart, between COUNTS accessories
## ("100000 1000000"; each lists an idle source of its own, placed once at MEMORY_RATE reports/s), with BRIDGE_ARGS
## (scripts/memory-bench.sh).
COUNTS       ?= 100000 1000000
MEMORY_RATE  ?= 4000
.PHONY: bench-memory
bench-memory: deps .build-e2e/loadgen
	$(SWIFT) build -c release --product accessory-bridge --scratch-path .build-e2e
	COUNTS="$(COUNTS)" RATE=$(MEMORY_RATE) BRIDGE_ARGS="$(BRIDGE_ARGS)" scripts/memory-bench.sh

## bench-overload: ACCESSORIES (100,000) placed once each at OVERLOAD_RATE reports/s (20,000), beyond what the bridge
## sustains: how many answers were lost, the bridge's peak RSS, what it logged about its queue, with BRIDGE_ARGS
## (scripts/overload-bench.sh; compare with and without --publishing-session).
OVERLOAD_RATE ?= 20000
.PHONY: bench-overload
bench-overload: deps .build-e2e/loadgen
	$(SWIFT) build -c release --product accessory-bridge --scratch-path .build-e2e
	ACCESSORIES=$(if $(filter command line,$(origin ACCESSORIES)),$(ACCESSORIES),100000) RATE=$(OVERLOAD_RATE) \
		BRIDGE_ARGS="$(BRIDGE_ARGS)" scripts/overload-bench.sh

## bench-announce: ACCESSORIES (1,000,000) set up with discovery on, then telemetry at RATE reports/s (2,000) for
## WINDOW seconds (120), undisturbed and while Home Assistant's birth message makes the bridge announce every accessory
## again: p50/p99/max of each, and how long the announce took (scripts/announce-bench.sh).
WINDOW ?= 120
.PHONY: bench-announce
bench-announce: deps .build-e2e/loadgen
	$(SWIFT) build -c release --product accessory-bridge --scratch-path .build-e2e
	ACCESSORIES=$(if $(filter command line,$(origin ACCESSORIES)),$(ACCESSORIES),1000000) \
		RATE=$(if $(filter command line,$(origin RATE)),$(RATE),2000) WINDOW=$(WINDOW) BRIDGE_ARGS="$(BRIDGE_ARGS)" \
		scripts/announce-bench.sh

## soak: a release bridge under a steady paced load for MINUTES (60), RSS every minute; fails if a report is lost,
## the bridge dies or logs an error (scripts/soak.sh).
MINUTES      ?= 60
RATE         ?= 1000
.PHONY: soak
soak: deps .build-e2e/loadgen
	$(SWIFT) build -c release --product accessory-bridge --scratch-path .build-e2e
	MINUTES=$(MINUTES) RATE=$(RATE) ACCESSORIES=$(ACCESSORIES) scripts/soak.sh

.build-e2e/loadgen: $(wildcard Benchmarks/LoadGen/*.c Benchmarks/LoadGen/*.h) $(E2E_URL) $(E2E_WIRE) | deps
	@mkdir -p $(@D)
	$(E2E_CBUILD)

# ---------------------------------------------------------------------------------------------------------------------
# The C hub SDK (Sources/CAudioHub, docs/hub-sdk.md), built by plain make with the compiler firmware authors
# use: libaudiohub.a, libaudiohub.so and audiohub.pc in .build-hub/, the generated protobuf-c code compiled in.

HUB_CC      ?= cc
HUB_CFLAGS  ?= -std=c99 -O2 -g -Wall -Wextra -Werror
# 0.2.0: audiohub_stats_get and audiohub_accessory_get take the size of the caller's struct, so that those structs
# can grow without breaking the ABI. No release had the 0.1 calls, so the soname stays libaudiohub.so.0.
# 0.3.0: spatial audio and head tracking (audiohub_register_spatial, audiohub_update_spatial, audiohub_head_tracking_*);
# the structs the library gives or copies grew at their ends only.
# 0.4.0: the bridge's layout (AUDIOHUB_SLOTS_FROM_BRIDGE, audiohub_slots); audiohub_stats grew at its end.
# 0.4.1: a move sends its rebirth on the new connection, not the old one's last moments, and asks with the cached
# configuration first, pairing again only when the new root does not know the accessory (no change to the API).
HUB_VERSION := 0.4.1
HUB_BUILD   := .build-hub
PREFIX      ?= /usr/local
HUB_SRC     := $(wildcard Sources/CAudioHub/src/*.c) $(wildcard Sources/CAccessoryWire/Generated/audioaccessory/v1/*.pb-c.c)
HUB_HEADERS := $(wildcard Sources/CAudioHub/include/*.h Sources/CAudioHub/src/*.h \
                 Sources/CAccessoryWire/Generated/audioaccessory/v1/*.h)
HUB_OBJ     := $(patsubst %.c,$(HUB_BUILD)/obj/%.o,$(notdir $(HUB_SRC)))
HUB_INCLUDE := -I Sources/CAudioHub/include -I Sources/CAccessoryWire/Generated
HUB_LIBS     = $$(pkg-config --libs libmosquitto libprotobuf-c) -pthread
HUB_SIM     := $(HUB_BUILD)/hub-sim
vpath %.c Sources/CAudioHub/src Sources/CAccessoryWire/Generated/audioaccessory/v1
.PHONY: hub-sdk install hub-sim hub-check

## hub-sdk: the SDK's static and shared libraries, and hub-sim, in .build-hub/
hub-sdk: $(HUB_BUILD)/lib/libaudiohub.a $(HUB_BUILD)/lib/libaudiohub.so.$(HUB_VERSION) $(HUB_SIM)

$(HUB_BUILD)/obj/%.o: %.c $(HUB_HEADERS) | deps
	@mkdir -p $(@D)
	$(HUB_CC) $(HUB_CFLAGS) -fPIC -fvisibility=hidden -D_POSIX_C_SOURCE=200809L $(HUB_INCLUDE) \
	    $$(pkg-config --cflags libmosquitto libprotobuf-c) -c -o $@ $<

$(HUB_BUILD)/lib/libaudiohub.a: $(HUB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $(HUB_OBJ)

$(HUB_BUILD)/lib/libaudiohub.so.$(HUB_VERSION): $(HUB_OBJ)
	@mkdir -p $(@D)
	$(HUB_CC) -shared -Wl,-soname,libaudiohub.so.0 -Wl,--no-undefined -o $@ $(HUB_OBJ) $(HUB_LIBS)
	ln -sf libaudiohub.so.$(HUB_VERSION) $(HUB_BUILD)/lib/libaudiohub.so.0
	ln -sf libaudiohub.so.0 $(HUB_BUILD)/lib/libaudiohub.so

## install: the SDK for firmware builds: `make install PREFIX=/some/dir` puts lib/libaudiohub.{a,so},
## include/audiohub.h and lib/pkgconfig/audiohub.pc under PREFIX (default /usr/local; DESTDIR is honoured)
install: $(HUB_BUILD)/lib/libaudiohub.a $(HUB_BUILD)/lib/libaudiohub.so.$(HUB_VERSION)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 Sources/CAudioHub/include/audiohub.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(HUB_BUILD)/lib/libaudiohub.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(HUB_BUILD)/lib/libaudiohub.so.$(HUB_VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libaudiohub.so.$(HUB_VERSION) $(DESTDIR)$(PREFIX)/lib/libaudiohub.so.0
	ln -sf libaudiohub.so.0 $(DESTDIR)$(PREFIX)/lib/libaudiohub.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(HUB_VERSION)|' Sources/CAudioHub/audiohub.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/audiohub.pc

$(HUB_SIM): $(wildcard Sources/hub-sim/*.c Sources/hub-sim/*.h) $(HUB_BUILD)/lib/libaudiohub.a
	$(HUB_CC) $(HUB_CFLAGS) -D_POSIX_C_SOURCE=200809L $(HUB_INCLUDE) $$(pkg-config --cflags libmosquitto libprotobuf-c) \
	    -o $@ $(filter %.c,$^) $(HUB_BUILD)/lib/libaudiohub.a $(HUB_LIBS) -lm

## hub-sim: builds the hub simulator and prints its path (`$(make -s hub-sim) --help`)
hub-sim: $(HUB_SIM)
	@echo $(abspath $(HUB_SIM))

## hub-check: the SDK's checks outside Swift (run by `make test`): an install into a clean temporary directory and
## Examples/hub-c built from it with pkg-config; the SDK under AddressSanitizer and LeakSanitizer for 10,000
## requests against a real mosquitto and bridge (BRIDGE=path of accessory-bridge, built by `swift build`)
BRIDGE ?= .build/debug/accessory-bridge
hub-check: hub-sdk
	scripts/hub-install-check.sh
	BRIDGE=$(BRIDGE) scripts/hub-leak-check.sh

# ---------------------------------------------------------------------------------------------------------------------
# The deploy files (deploy/systemd, deploy/container), checked without a container engine or a running systemd.

DEPLOY_APT_PACKAGES := systemd python3-yaml mosquitto mosquitto-clients
.PHONY: check-deploy check-container

## check-container: the Containerfile's runtime image built with podman on a base made from Debian's packages, and
## deploy/container/cluster.compose.yaml started (mosquitto, etcd, three bridges); one bridge container killed, its
## slots must move (scripts/check-container.sh). Takes ports 1883, 2379, 2380, 9464-9466. Not part of `make test`.
CONTAINER_APT_PACKAGES := podman runc mmdebstrap python3-venv
check-container: deps
	@missing=$$(for p in $(CONTAINER_APT_PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "installing:" $$missing; \
	    $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi
	scripts/check-container.sh

## check-deploy: `systemd-analyze verify` (clean: any message fails) and `systemd-analyze security --offline` (exposure
## at most 2.0) on deploy/systemd's unit, with and without its credentials drop-in; the env example against
## `accessory-bridge --help`; compose.yaml's YAML, services and files; deploy/container/mosquitto.conf in a real
## mosquitto (scripts/check-deploy.sh). Builds the bridge unless BRIDGE=path is given. Not part of `make test`.
check-deploy: deps
	@missing=$$(for p in $(DEPLOY_APT_PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "installing:" $$missing; \
	    $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi
	$(if $(filter command line environment,$(origin BRIDGE)),,$(SWIFT) build --product accessory-bridge)
	BRIDGE=$(BRIDGE) scripts/check-deploy.sh
