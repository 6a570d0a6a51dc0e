# The two commands the README promises: `make demo` and `make test`.
CARGO ?= cargo
PLFS := target/release/plfs

.PHONY: all deps test-tools build demo test clippy fmt clean

all: build

deps:
	@scripts/install-deps.sh

# fsx and pjdfstest for the FUSE tests, built once into target/tools/bin.
test-tools: deps
	@CARGO="$(CARGO)" scripts/install-test-tools.sh

build: deps
	$(CARGO) build --release --workspace

# The main job on an embedded default: no configuration needed.
demo: build
	$(PLFS) demo

# The whole test suite (release: the property and multi-process tests do
# real I/O and run several times faster optimised). The FUSE tests find fsx
# and pjdfstest through PLFS_TEST_TOOLS and fail, naming this target, without it.
test: export PLFS_TEST_TOOLS := $(CURDIR)/target/tools/bin
test: deps test-tools
	$(CARGO) test --release --workspace

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
