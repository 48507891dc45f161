#!/bin/sh
# The demo (scripts/demo.sh: mpi, solo, majority on Fashion-MNIST under
# random:1:STEP) on an emulated cluster of 4 nodes x 2 ranks with 1 Gbit/s
# links (scripts/cluster.sh), made for the run and removed after it.  Needs
# root.  Output in results/cluster-demo/ (table.txt, accuracy.svg).
#
# Environment: BUILD (build), NODES (4), RANKS_PER_NODE (2), RATE (1gbit),
# and demo.sh's DEMO_* variables (DEMO_ALGOS, DEMO_EPOCHS (here 4: a step of
# the synchronous baseline takes about 130 ms over the emulated links, so 4
# epochs take about 8 minutes), DEMO_REPEATS, ...).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
nodes=${NODES:-4}
rpn=${RANKS_PER_NODE:-2}
prefix=cdemo
[ "$(id -u)" -eq 0 ] || { echo "cluster-demo.sh: needs root (network namespaces)" >&2; exit 1; }
trap '"$root/scripts/cluster.sh" --prefix $prefix down >/dev/null 2>&1 || true' EXIT INT TERM
"$root/scripts/cluster.sh" --prefix $prefix up "$nodes" --ranks-per-node "$rpn" --rate "${RATE:-1gbit}"
DEMO_NP=${DEMO_NP:-$((nodes * rpn))} DEMO_EPOCHS=${DEMO_EPOCHS:-4} DEMO_OUT=${DEMO_OUT:-$root/results/cluster-demo} \
    MPIRUN="$root/scripts/cluster.sh --prefix $prefix run" "$root/scripts/demo.sh"
