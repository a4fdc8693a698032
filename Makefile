# dtrain: `make` builds build/dtrain; `make run` trains the reference CNN on
# Fashion-MNIST; `make test` runs every test (release, ASan+UBSan, TSan).
# `make run` and `make test` first install missing Debian packages; `make
# install PREFIX=...` installs the command, libdtrain.so and the Python package. `make fuzz`
# runs the fuzz harnesses (FUZZ_SECONDS each).
BUILD      ?= build
JOBS       ?= 2
PREFIX     ?= /usr/local
CMAKE_ARGS ?=
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export OMPI_MCA_rmaps_base_oversubscribe := 1
# Sanitizer runs: one BLAS/OpenMP thread (libgomp is not built with TSan, so
# its workers would look like races). Open MPI's own start-up allocations are not ours; full
# (slow) unwinding and no plugin unloading let the suppressions see them.
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 \
          LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
          UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
          TSAN_OPTIONS=suppressions=$(CURDIR)/tests/tsan.supp:halt_on_error=1 \
          OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMPI_MCA_mca_base_component_disable_dlclose=1

.PHONY: all build install deps run test test-release test-asan test-tsan soak fuzz bench clean

all: build

deps:
	@bash scripts/install-deps.sh

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# PREFIX/bin/dtrain, PREFIX/lib/libdtrain.so, PREFIX/include/dtrain.h, the
# pkg-config file and the Python package (PREFIX/lib/python3/dist-packages).
install:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	@cmake --install $(BUILD)

run: deps build
	@bash scripts/run.sh

test: deps test-release test-asan test-tsan

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Fast tests (not the real-data training ones) under ASan+UBSan.
test-asan:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDT_SANITIZE=address >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -LE slow

# Threaded parts (the loader's prefetch thread, the trainer) under TSan.
test-tsan:
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DDT_SANITIZE=thread >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	cd build-tsan && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -L threads

# The signal test at length: SIGINT/SIGTERM under a 100 Hz SIGUSR1 burst,
# SOAK_RUNS runs per mode (serial, allreduce, ps-sync); prints runs and crashes.
SOAK_RUNS ?= 20
soak: deps build
	DT_SOURCE_DIR=$(CURDIR) DT_SIGNAL_RUNS=$(SOAK_RUNS) bash tests/test_signals.sh $(BUILD)/dtrain

# libFuzzer harnesses (fuzz/, needs clang): each runs FUZZ_SECONDS from its
# seeds, then a table of executions, time and crashes. See docs/FUZZING.md.
FUZZ_SECONDS ?= 60
FUZZERS      ?= model idx cifar checkpoint json image
fuzz: deps
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDT_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzzers
	@bash fuzz/run.sh build-fuzz $(FUZZ_SECONDS) $(FUZZERS)

bench: build
	/usr/bin/python3 bench/bench_engine.py

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
