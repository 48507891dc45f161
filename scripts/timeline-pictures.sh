#!/bin/bash
# The README's timeline pictures: the same 4-rank pcoll-train run (one rank
# at random 9 ms late each step) under MPI_Allreduce and under majority,
# recorded with --timeline, merged and drawn by pcoll-trace over the same
# 200 ms window.  Writes docs/img/timeline-{mpi,majority}.svg and prints
# each run's straggler report.
# usage: scripts/timeline-pictures.sh [BUILD_DIR]   (default build)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
mpirun=${MPIRUN:-mpirun}
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
work=$(mktemp -d /tmp/pcoll-timeline-pictures.XXXXXX)
trap 'rm -rf "$work"' EXIT
for algo in mpi majority; do
    "$mpirun" "${flags[@]}" -np 4 "$build/bin/pcoll-train" --algo $algo --epochs 1 --max-steps 300 \
        --imbalance random:1:9 --quiet --timeline "$work/$algo" | grep '^final'
    "$build/bin/pcoll-trace" merge "$work/$algo" -o "$work/$algo.json"
    "$build/bin/pcoll-trace" svg "$work/$algo.json" -o "$root/docs/img/timeline-$algo.svg" --from 1500 --to 1700 \
        --width 900 --title "$algo: 4 ranks, one rank at random 9 ms late each step"
    "$build/bin/pcoll-trace" report "$work/$algo.json" | grep straggler
done
