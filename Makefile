# The two commands of the README: `make run` and `make test`. Both set up a fresh
# Debian 12 machine first (scripts/bootstrap installs only what is missing).
BUILD ?= build
JOBS ?= $(shell nproc)
CONFIG ?=

.PHONY: all bootstrap configure build run test bench clean test-asan

all: build

bootstrap:
	@scripts/bootstrap

$(BUILD)/build.ninja:
	@scripts/bootstrap
	cmake -S . -B $(BUILD) -G Ninja

configure: $(BUILD)/build.ninja

build: bootstrap configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	@if [ -x $(BUILD)/boxd ]; then exec $(BUILD)/boxd $(if $(CONFIG),--config $(CONFIG)); \
	else echo "boxd is not built yet"; exit 1; fi

test: build
	scripts/run-tests $(BUILD)

bench: build
	scripts/run-benchmarks $(BUILD)

# The C++ suites and the wire suite under AddressSanitizer + UndefinedBehaviorSanitizer,
# in their own build folder (not part of `make test`).
ASAN_BUILD ?= build-asan
test-asan: bootstrap
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DBOXRT_SANITIZE=address,undefined
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	scripts/run-sanitized $(ASAN_BUILD)

clean:
	rm -rf $(BUILD)
