#!/bin/sh
# Measurements on the emulated cluster (scripts/cluster.sh) that pcoll-sim is
# calibrated and validated against: for each node count and link rate, an
# allreduce sweep (8 B .. 64 MiB), the skew microbenchmark (mpi, sync, solo,
# majority) and WAGMA's group rounds, as pcoll-bench --json lines.
#
#   scripts/sim-measure.sh [--nodes "2 4 8"] [--rates "100mbit 1gbit"]
#                          [--ranks-per-node K] [--out DIR] [--bin DIR]
#
# Output: DIR/<bench>-<N>x<K>-<rate>.json (default DIR results/sim/measured).
# Needs root (network namespaces); removes the cluster it made.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
nodes="2 4 8"; rates="100mbit 1gbit"; rpn=1
out="$here/../results/sim/measured"; bin="$here/../build/bin"
while [ $# -gt 0 ]; do
    case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --ranks-per-node) rpn=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    -h|--help) sed -n 2,11p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sim-measure.sh: unknown argument \"$1\"" >&2; exit 2 ;;
    esac
done
bench="$bin/pcoll-bench"
[ -x "$bench" ] || { echo "sim-measure.sh: no $bench (build first, or --bin DIR)" >&2; exit 1; }
mkdir -p "$out"
prefix=pclsim
cleanup() { "$here/cluster.sh" --prefix $prefix down >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
for rate in $rates; do
    for n in $nodes; do
        np=$((n * rpn)); tag="${n}x${rpn}-${rate}"
        cleanup
        "$here/cluster.sh" --prefix $prefix up "$n" --ranks-per-node "$rpn" --rate "$rate" >/dev/null
        run() { "$here/cluster.sh" --prefix $prefix run -np "$np" -- "$bench" "$@"; }
        echo "sim-measure: $tag allreduce" >&2
        run allreduce --json --no-verify --min-bytes 8 --max-bytes 64M --link-rate "$rate" >"$out/allreduce-$tag.json"
        echo "sim-measure: $tag skew" >&2
        run skew --json --modes mpi,sync,solo,majority --min-bytes 64 --max-bytes 32K --iters 32 >"$out/skew-$tag.json"
        echo "sim-measure: $tag group" >&2
        [ "$np" -ge 4 ] && run group --json --modes mpi,sync,group --min-bytes 64 --max-bytes 32K --iters 32 >"$out/group-$tag.json"
    done
done
