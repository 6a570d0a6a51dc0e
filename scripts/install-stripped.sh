#!/usr/bin/env bash
# install-stripped.sh SOURCE DESTINATION [MODE]
#
# Installs an ELF file (a program or a shared library) without its debug
# info, which goes into .debug/<name>.debug beside it and is named in the
# installed file's .gnu_debuglink section: gdb looks there
# (<dir>/.debug/<debuglink>), and so does the Rust backtrace code. The symbol
# table stays, so backtraces name functions even without the .debug file.
#
# Why: the release profile keeps line tables (debug = 1), which made
# libplfs.so about 100 MB; every process under the interposer maps
# libplfs_preload.so, and the debug sections only slowed its start with
# cold caches.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 SOURCE DESTINATION [MODE]" >&2
  exit 2
fi
source=$1
destination=$2
mode=${3:-755}
directory=$(dirname "$destination")
name=$(basename "$destination")
debug_dir=$directory/.debug

install -d "$directory" "$debug_dir"
objcopy --only-keep-debug "$source" "$debug_dir/$name.debug"
chmod 644 "$debug_dir/$name.debug"
# Through a temporary name, so a running program never maps half a file.
objcopy --strip-debug --add-gnu-debuglink="$debug_dir/$name.debug" "$source" "$directory/.$name.tmp"
chmod "$mode" "$directory/.$name.tmp"
mv -f "$directory/.$name.tmp" "$destination"
