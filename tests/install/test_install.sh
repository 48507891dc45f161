#!/bin/sh
# make install into a fresh prefix, then build a program with pkg-config
# against it (shared and static) and run it under MPI.
#   test_install.sh <build-dir> <source-dir> <mpiexec and its flags...>
set -eu
build=$1 src=$2
shift 2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(find "$prefix" -name pcoll.pc)
test -n "$pc" || { echo "pcoll.pc was not installed"; exit 1; }
test -f "$prefix/include/pcoll.h" || { echo "pcoll.h was not installed"; exit 1; }
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
# shellcheck disable=SC2046
cc -o "$prefix/hello" "$src/tests/install/hello.c" $(pkg-config --cflags --libs pcoll)
# shellcheck disable=SC2046
cc -o "$prefix/hello_static" "$src/tests/install/hello.c" $(pkg-config --cflags pcoll) \
   "$(pkg-config --variable=libdir pcoll)/libpcoll.a" $(pkg-config --libs mpi-c) -lpthread -lm
libdir=$(pkg-config --variable=libdir pcoll)
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@" -np 2 "$prefix/hello"
"$@" -np 2 "$prefix/hello_static"
