#!/usr/bin/env bash
# Installs what building and testing plfs needs on Debian 12, and nothing
# when it is all present already (so `make` stays quiet and offline).
set -euo pipefail

# Debian packages the build and the test suite use.
packages=(
  build-essential   # cc for crates with C parts, make
  pkg-config        # locating system libraries
  # The FUSE integration tests (crates/plfs-cli/tests/fuse.rs) mount for real
  # and drive ordinary tools through the mount:
  fuse3             # fusermount3 (AutoUnmount) and /etc/fuse.conf (allow_other)
  fio               # N-1 strided writes with verified read-back
  rsync             # rsync -a round trips
  git               # git init and commit in a working directory inside the mount
  mount             # umount -l, the cleanup of last resort
  util-linux        # runuser, for the non-root permission test; unshare and
                    # nsenter, for the simulated nodes (scripts/plfs-nodes)
  iproute2          # ip netns / veth / bridge, for the simulated nodes
  strace            # the interposer's start-up test (no plfsrc, no thread)
  attr              # setfattr/getfattr, for the user.plfs.layout attribute test
  python3           # scripts in the preload and security tests (os.setxattr, os.open)
  # The collective open (crates/plfs-mpi, crates/plfs-capi): both MPIs, side
  # by side, so the tests prove one libplfs serves either. Each is used
  # through its suffixed name (mpicc.openmpi, mpirun.mpich, ...).
  openmpi-bin       # mpirun.openmpi
  libopenmpi-dev    # mpicc.openmpi and mpi.h
  mpich             # mpirun.mpich
  libmpich-dev      # mpicc.mpich and mpi.h
  # The restart peers `plfs bench restart` compares plfs with (make peers,
  # crates/plfs-bench/peers), both Debian's Open MPI builds:
  libadios-openmpi-dev  # ADIOS 1.x, BP files (the seed's own library)
  libhdf5-openmpi-dev   # parallel HDF5 (h5pcc.openmpi, hdf5-openmpi.pc)
  # What adios-openmpi.pc links (libadios.a is static) that
  # libadios-openmpi-dev does not pull in; the other libraries it names
  # (zlib, szip, ibverbs) come with libhdf5-openmpi-dev and libopenmpi-dev.
  libnetcdf-mpi-dev
  libglib2.0-dev
  liblz4-dev
  libblosc-dev
  libbz2-dev
  # `plfs bench --plot/--report` (plotters' text through FreeType, the font
  # found by fontconfig):
  libfontconfig-dev # fontconfig, linked by plotters' font-kit
  libfreetype-dev   # freetype, likewise
  fonts-dejavu-core # the sans-serif font the figures are drawn in
  # (tar, cp, dd, truncate, cmp and diff are in Essential packages.)
)

# The hdfs:// store's tests run a MiniDFSCluster (tools/minidfs,
# scripts/servers hdfs), which Maven fetches and Java 17 runs. A JDK or
# Maven installed some other way (sdkman, a tarball on PATH) is used as is.
if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  packages+=(openjdk-17-jdk-headless)
fi
if ! command -v mvn >/dev/null 2>&1; then
  packages+=(maven)
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Rust comes from rustup (Debian 12's rustc is too old for edition 2024).
if ! command -v cargo >/dev/null 2>&1; then
  for candidate in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
    if [[ -x "$candidate/cargo" ]]; then
      echo "install-deps: cargo is in $candidate but not on PATH; add it (e.g. source \$HOME/.cargo/env)" >&2
      exit 1
    fi
  done
  echo "install-deps: cargo not found; install Rust >= 1.85 with rustup (https://rustup.rs)" >&2
  exit 1
fi
