# kiln: the two commands a new user needs are `make run` and `make test`.
# Both start by installing whatever Debian packages are missing.

BUILD     ?= build
SAN_BUILD ?= build-san
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += --no-print-directory
MODEL     ?= resnet-50

.PHONY: all deps build run test test-fast sanitize clean

all: build

deps:
	@scripts/setup-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# Builds and runs the default job: a zoo network, compiled (through the cache) and run.
run: build
	./$(BUILD)/kiln run $(MODEL)

# The whole suite: the release build, then again under ASan + UBSan.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)
	$(MAKE) --no-print-directory sanitize

test-fast: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

sanitize: deps
	@cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON >/dev/null
	@cmake --build $(SAN_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(SAN_BUILD) --output-on-failure -j$(JOBS) -LE nosan

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
