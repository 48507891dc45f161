#!/bin/sh
# Installs the Debian packages pcoll needs that are missing.  Idempotent and
# silent when everything is present; called by `make` before every build.
#   scripts/install-deps.sh          install what is missing (needs root or sudo)
#   scripts/install-deps.sh --check  only report what is missing (exit 1 if any)
set -eu

# build: compiler, cmake, MPI, zlib (gzip-compressed dataset); demo/train: dataset
# and plotting; tests: pkg-config; the emulated cluster: iproute2 (ip, tc);
# the Python package and pcoll.torch (python/, examples/torch): Python's
# headers, numpy, mpi4py (the same Open MPI), PyTorch and torchvision (CPU),
# pytest; the simulator (tools/sim, pcoll-sim): SimGrid
PACKAGES="gcc make cmake pkgconf zlib1g-dev libopenmpi-dev openmpi-bin dataset-fashion-mnist gnuplot-nox iproute2
python3-dev python3-numpy python3-mpi4py python3-torch python3-torchvision python3-pytest libsimgrid-dev"

missing=""
for pkg in $PACKAGES; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    case "$status" in
        *"install ok installed"*) ;;
        *) missing="$missing $pkg" ;;
    esac
done

[ -z "$missing" ] && exit 0

if [ "${1:-}" = "--check" ]; then
    echo "missing Debian packages:$missing" >&2
    exit 1
fi

echo "install-deps: installing Debian packages:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install-deps: not root and no sudo; please install:$missing" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
if ! $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null; then
    # package lists may be missing or stale on a fresh machine
    $SUDO apt-get update -q >/dev/null
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null
fi
