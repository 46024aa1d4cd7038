# The two commands of the README: `make run` and `make test`. Both set up a fresh
# Debian 12 machine first (scripts/bootstrap installs only what is missing).
BUILD ?= build
JOBS ?= $(shell nproc)
CONFIG ?=
# make run's data folder (workspaces, state, quota images, uploads): inside the build
# folder, never the checkout's top level; DATA=DIR moves it.
DATA ?= $(BUILD)/data

.PHONY: all bootstrap configure build run test bench deb package-test image clean test-asan test-tsan fuzz fuzz-build fuzz-smoke soak

all: build

bootstrap:
	@scripts/bootstrap

$(BUILD)/build.ninja:
	@scripts/bootstrap
	cmake -S . -B $(BUILD) -G Ninja

configure: $(BUILD)/build.ninja

build: bootstrap configure
	@scripts/fetch-nsjail $(BUILD)
	cmake --build $(BUILD) -j $(JOBS)

run: build
	@if [ -x $(BUILD)/boxd ]; then exec $(BUILD)/boxd --data-dir $(abspath $(DATA)) $(if $(CONFIG),--config $(CONFIG)); \
	else echo "boxd is not built yet"; exit 1; fi

test: build
	scripts/run-tests $(BUILD)
	$(MAKE) --no-print-directory fuzz-smoke

# The Debian package (app/cmake/package.cmake): $(BUILD)/package/boxrt_<version>_amd64.deb.
deb: build
	cd $(BUILD) && cpack -G DEB

# The package installed, run and purged in a debootstrap chroot (root, network; not part
# of make test): scripts/package-test.
package-test: deb
	scripts/package-test $(BUILD)

# boxd's container image, built with podman from a debootstrap base and smoke-tested
# (root, network; not part of make test): scripts/make-image.
image: deb
	scripts/make-image $(BUILD)

bench: build
	scripts/run-benchmarks $(BUILD)

# The C++ suites and the wire suite under AddressSanitizer + UndefinedBehaviorSanitizer,
# in their own build folder (not part of `make test`).
ASAN_BUILD ?= build-asan
test-asan: bootstrap
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DBOXRT_SANITIZE=address,undefined
	@scripts/fetch-nsjail $(ASAN_BUILD)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	scripts/run-sanitized $(ASAN_BUILD)

# The CAF-free suites (messages; backends with the worker pool and the skill store)
# under ThreadSanitizer, in their own build folder (not part of `make test`).
TSAN_BUILD ?= build-tsan
test-tsan: bootstrap
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DBOXRT_SANITIZE=thread
	@scripts/fetch-nsjail $(TSAN_BUILD)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target test_messages test_backends boxrt-init
	scripts/run-sanitized $(TSAN_BUILD) thread

# libFuzzer targets (tests/fuzz/README.md), built with Debian's clang into their own
# folder. `make fuzz` runs each for FUZZ_SECONDS (FUZZ_PARALLEL at once); `make test`
# runs the smoke: every target for a few seconds.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_PARALLEL ?= 1
FUZZ_SMOKE_SECONDS ?= 5
fuzz-build: bootstrap
	@[ -f $(FUZZ_BUILD)/build.ninja ] || cmake -S . -B $(FUZZ_BUILD) -G Ninja -DBOXRT_FUZZ=ON \
	  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(FUZZ_BUILD) --target fuzz -j $(JOBS)

fuzz: fuzz-build
	scripts/run-fuzz $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_PARALLEL)

fuzz-smoke: fuzz-build
	scripts/run-fuzz $(FUZZ_BUILD) $(FUZZ_SMOKE_SECONDS) 2

# A long mixed workload on real sandboxes that counts what leaks (benchmarks/soak.cpp).
SOAK_SECONDS ?= 600
soak: build
	SOAK_SECONDS=$(SOAK_SECONDS) $(BUILD)/benchmarks/boxsoak

clean:
	rm -rf $(BUILD)
