# The two commands that matter: `make demo` runs boxlayer's demonstration on embedded data,
# `make test` runs the test suite. Both run `make setup` first (idempotent, quick when done).
CARGO ?= cargo
export ORT_DYLIB_PATH ?= $(CURDIR)/.ort/libonnxruntime.so

.PHONY: setup demo test lint bench

setup:
	@bash tools/setup.sh

demo: setup
	$(CARGO) run --release --locked -- demo

test: setup
	$(CARGO) test --release --locked

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --release --locked --all-targets -- -D warnings

bench: setup
	$(CARGO) bench --locked
