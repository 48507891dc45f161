#!/bin/sh
# Measurements on the emulated cluster (scripts/cluster.sh) that pcoll-sim is
# calibrated and validated against: for each node count and link rate, an
# allreduce sweep (8 B .. 64 MiB), the skew microbenchmark (mpi, sync, solo,
# majority) and WAGMA's group rounds, as pcoll-bench --json lines.
#
#   scripts/sim-measure.sh [--nodes "2 4 8"] [--rates "100mbit 1gbit"]
#                          [--ranks-per-node K] [--out DIR] [--bin DIR]
#                          [--keep] [--suffix S] [--large-max B]
#
# Output: DIR/<bench>-<N>x<K>-<rate>[.S].json (default DIR data/cluster;
# pcoll-sim calibrate takes the median of a point over the files of one
# configuration, e.g. runs .r1, .r2); --keep leaves files that exist alone
# (an interrupted run goes on).  Sizes from 4 MiB up to --large-max
# (default 64M) take 10 repetitions and one warm-up call per block (at 100
# Mbit/s a 64 MiB allreduce over 8 nodes takes about 10 s).
# Needs root (network namespaces); removes the cluster it made.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
nodes="2 4 8"; rates="100mbit 1gbit"; rpn=1; keep=0; suffix=""; large_max=64M
out="$here/../data/cluster"; bin="$here/../build/bin"
while [ $# -gt 0 ]; do
    case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --ranks-per-node) rpn=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --suffix) suffix=.$2; shift 2 ;;
    --large-max) large_max=$2; shift 2 ;;
    -h|--help) sed -n 2,19p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
        np=$((n * rpn)); tag="${n}x${rpn}-${rate}${suffix}"
        todo=""
        for b in allreduce skew group; do
            [ "$b" = group ] && [ "$np" -lt 4 ] && continue
            [ "$keep" = 1 ] && [ -s "$out/$b-$tag.json" ] && continue
            todo="$todo $b"
        done
        [ -z "$todo" ] && continue
        cleanup
        "$here/cluster.sh" --prefix $prefix up "$n" --ranks-per-node "$rpn" --rate "$rate" >/dev/null
        run() { "$here/cluster.sh" --prefix $prefix run -np "$np" -- "$bench" "$@"; }
        for b in $todo; do
            echo "sim-measure: $tag $b" >&2
            case $b in
            allreduce)
                run allreduce --json --no-verify --min-bytes 8 --max-bytes 2M --link-rate "$rate" >"$out/$b-$tag.tmp"
                run allreduce --json --no-verify --min-bytes 4M --max-bytes "$large_max" --iters 10 --warmup 1 \
                    --link-rate "$rate" >>"$out/$b-$tag.tmp" ;;
            skew) run skew --json --modes mpi,sync,solo,majority --min-bytes 64 --max-bytes 32K --iters 32 \
                      >"$out/$b-$tag.tmp" ;;
            group) run group --json --modes mpi,sync,group --min-bytes 64 --max-bytes 32K --iters 32 \
                       >"$out/$b-$tag.tmp" ;;
            esac
            mv "$out/$b-$tag.tmp" "$out/$b-$tag.json"
        done
    done
done
