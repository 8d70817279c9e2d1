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
## integration tests run
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test

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
