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
# the Python package, when it was built: installed next to the library it
# finds by RPATH, importable from the prefix
if [ -n "${PCOLL_PYTHON:-}" ]; then
    init=$(find "$prefix" -path '*/pcoll/__init__.py' | head -n 1)
    test -n "$init" || { echo "the pcoll Python package was not installed"; exit 1; }
    find "$(dirname "$init")" -name '_pcoll*.so' | grep -q . || { echo "pcoll/_pcoll*.so was not installed"; exit 1; }
    PYTHONPATH=$(dirname "$(dirname "$init")") "$@" -np 2 "$PCOLL_PYTHON" -c '
import numpy as np, pcoll
assert pcoll.__file__.startswith("'"$prefix"'"), pcoll.__file__
ctx = pcoll.Context()
a = np.ones(3, np.float32)
ctx.allreduce(a)
assert a[0] == 2, a
if ctx.rank == 0: print("installed Python package: allreduce at 2 ranks gives", a)
'
fi
