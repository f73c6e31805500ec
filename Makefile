# kiln: the two commands a new user needs are `make run` and `make test`.
# Both start by installing whatever Debian packages are missing.

BUILD     ?= build
SAN_BUILD ?= build-san
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += --no-print-directory
MODEL     ?= resnet-50

.PHONY: all deps build run test test-fast sanitize clean bench bench-venv

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

# Not part of `make test`: kiln against ONNX Runtime, OpenVINO and PyTorch
# (bench/compare.py; options in BENCH_ARGS, e.g. BENCH_ARGS="--rounds 5").
# The peers, pinned in bench/requirements.txt, go into a venv over Debian's
# python3 that still sees Debian's torch, onnx and numpy; it is made again only
# when the requirements change.
BENCH_VENV ?= bench/.venv
BENCH_ARGS ?=

bench: build bench-venv
	$(BENCH_VENV)/bin/python bench/compare.py --kiln $(BUILD)/kiln $(BENCH_ARGS)

bench-venv: deps $(BENCH_VENV)/.installed

$(BENCH_VENV)/.installed: bench/requirements.txt
	rm -rf $(BENCH_VENV)
	/usr/bin/python3 -m venv --system-site-packages $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --disable-pip-version-check -q -r bench/requirements.txt
	touch $@

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
