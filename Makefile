# The two commands the README promises: `make demo` and `make test`.
CARGO ?= cargo
PLFS := target/release/plfs

.PHONY: all deps build demo test clippy fmt clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(CARGO) build --release --workspace

# The main job on an embedded default: no configuration needed.
demo: build
	$(PLFS) demo

# The whole test suite (release: the property and multi-process tests do
# real I/O and run several times faster optimised).
test: deps
	$(CARGO) test --release --workspace

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
