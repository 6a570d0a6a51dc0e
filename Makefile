# The two commands the README promises: `make demo` and `make test`.
CARGO ?= cargo
PLFS := target/release/plfs

.PHONY: all deps test-tools test-servers peers build lib install install-lib demo test clippy fmt clean

all: build

deps:
	@scripts/install-deps.sh

# fsx and pjdfstest for the FUSE tests, built once into target/tools/bin.
test-tools: deps
	@CARGO="$(CARGO)" scripts/install-test-tools.sh

# The HDFS (MiniDFSCluster) and S3 servers the store tests start: fetched
# and built once (Maven and Go caches), so no test waits on a download.
test-servers: deps
	scripts/servers hdfs prepare
	scripts/servers s3 prepare

# The restart peers `plfs bench restart` runs beside plfs
# (crates/plfs-bench/peers): ADIOS BP and parallel HDF5 programs, built
# into target/peers/ with Open MPI's compiler by name, since Debian's ADIOS
# and HDF5 -openmpi builds need it and MPICH is installed too. Debian's
# adios-openmpi.pc names the wrong library directory, hence the -L.
PEERS := target/peers
PEER_SOURCES := crates/plfs-bench/peers
PEER_CFLAGS := -O2 -Wall -Wextra -Werror
peers: deps $(PEERS)/adios_restart $(PEERS)/hdf5_restart

$(PEERS)/adios_restart: $(PEER_SOURCES)/adios_restart.c $(PEER_SOURCES)/restart_common.h
	@mkdir -p $(PEERS)
	mpicc.openmpi $(PEER_CFLAGS) $$(pkg-config --cflags adios-openmpi) $< -o $@ \
		-L$$(pkg-config --variable=libdir adios-openmpi)/adios/openmpi \
		$$(pkg-config --variable=ADIOS_CLIB adios-openmpi)

$(PEERS)/hdf5_restart: $(PEER_SOURCES)/hdf5_restart.c $(PEER_SOURCES)/restart_common.h
	@mkdir -p $(PEERS)
	mpicc.openmpi $(PEER_CFLAGS) $$(pkg-config --cflags hdf5-openmpi) $< -o $@ $$(pkg-config --libs hdf5-openmpi)

build: deps
	$(CARGO) build --release --workspace

# libplfs.so and libplfs.a (crates/plfs-capi) and their headers (include/),
# and the LD_PRELOAD interposer libplfs_preload.so (crates/plfs-preload).
lib: deps
	$(CARGO) build --release -p plfs-capi -p plfs-preload

PREFIX ?= /usr/local
install: build install-lib
	install -d $(DESTDIR)$(PREFIX)/bin
	scripts/install-stripped.sh $(PLFS) $(DESTDIR)$(PREFIX)/bin/plfs
	@# MPI-IO PMPI wrappers, one per MPI (crates/plfs-mpi/build.rs puts them
	@# in target/release/mpi/<flavor>/); two levels below libplfs.so, where
	@# libplfs_mpiio.so looks for it.
	for flavor in openmpi mpich; do \
	  if [ -f target/release/mpi/$$flavor/libplfs_mpiio.so ]; then \
	    install -d $(DESTDIR)$(PREFIX)/lib/plfs-mpi/$$flavor && \
	    scripts/install-stripped.sh target/release/mpi/$$flavor/libplfs_mpiio.so \
	      $(DESTDIR)$(PREFIX)/lib/plfs-mpi/$$flavor/libplfs_mpiio.so || exit 1; \
	  fi; \
	done

# The library alone, already built: libplfs.so, libplfs.a, the headers
# (plfs.h includes plfs_error.h, as 2.5's did) and
# pkg-config's plfs.pc. LIBPLFS_DIR: where the build put the libraries (the
# capi tests install from their own target directory).
LIBPLFS_DIR ?= target/release
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
install-lib:
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	@# Programs and shared libraries go in stripped, their debug info in
	@# .debug/ beside them (scripts/install-stripped.sh says why).
	scripts/install-stripped.sh $(LIBPLFS_DIR)/libplfs.so $(DESTDIR)$(PREFIX)/lib/libplfs.so
	# The interposer loads libplfs.so from its own directory.
	if [ -f $(LIBPLFS_DIR)/libplfs_preload.so ]; then \
		scripts/install-stripped.sh $(LIBPLFS_DIR)/libplfs_preload.so $(DESTDIR)$(PREFIX)/lib/libplfs_preload.so; fi
	install -m 644 $(LIBPLFS_DIR)/libplfs.a $(DESTDIR)$(PREFIX)/lib/libplfs.a
	install -m 644 include/plfs.h include/plfs_error.h include/plfs_mpi.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' crates/plfs-capi/plfs.pc.in \
		> $(DESTDIR)$(PREFIX)/lib/pkgconfig/plfs.pc

# The main job on an embedded default: no configuration needed.
demo: build
	$(PLFS) demo

# The whole test suite (release: the property and multi-process tests do
# real I/O and run several times faster optimised). The FUSE tests find fsx
# and pjdfstest through PLFS_TEST_TOOLS and fail, naming this target, without it.
# PLFS_REQUIRE_MPI=1: the MPI tests (both Open MPI and MPICH) fail instead
# of skipping when an MPI is missing, and the MPI shims must build (the
# restart peers' test too, when target/peers/ lacks a program).
# PLFS_REQUIRE_FUSE=1: the FUSE smoke tests fail instead of skipping when
# they cannot mount (no root or no /dev/fuse). The build
# comes first: `cargo test` does not put libplfs.so (a cdylib) where the C
# tests link it.
test: export PLFS_TEST_TOOLS := $(CURDIR)/target/tools/bin
test: export PLFS_REQUIRE_MPI := 1
test: export PLFS_REQUIRE_SERVERS := 1
test: export PLFS_REQUIRE_FUSE := 1
test: deps test-tools test-servers peers
	$(CARGO) build --release --workspace
	$(CARGO) test --release --workspace --no-fail-fast

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
