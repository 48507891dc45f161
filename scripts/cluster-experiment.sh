#!/bin/sh
# The collectives on an emulated cluster (scripts/cluster.sh), each run
# REPEATS times, medians per size:
#   allreduce  pcoll-bench allreduce at NODES x 1 and NODES x 2 ranks, 8 B to
#              MAX_BYTES, against the link's limit (--link-rate)
#   skew       pcoll-bench skew at NODES x 2 ranks (mpi, solo, majority), with
#              the fraction of majority's limit reached: with rank i arriving
#              i x skew, a majority round starts when its initiator (any rank,
#              uniformly) arrives, so the ranks wait (P^2 - 1) / 6P x skew on
#              average however fast the round is
# Tables (and the JSON lines of every run) under OUT.  Needs root.
#
#   scripts/cluster-experiment.sh [allreduce] [skew]     (default: both)
#
# Environment: BUILD (build), NODES (4), RATE (1gbit), REPEATS (3),
# MAX_BYTES (64M), OUT (results/cluster), and PCOLL_* variables, which reach
# every rank.  About 45 minutes for both on two cores.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
build=${BUILD:-$root/build}
bench=$build/bin/pcoll-bench
nodes=${NODES:-4}
rate=${RATE:-1gbit}
repeats=${REPEATS:-3}
maxb=${MAX_BYTES:-64M}
out=${OUT:-$root/results/cluster}
parts=${*:-allreduce skew}
prefix=cexp
for p in $parts; do
    case $p in allreduce | skew) ;; *) echo "cluster-experiment.sh: unknown part \"$p\" (allreduce, skew)" >&2; exit 2 ;; esac
done
[ "$(id -u)" -eq 0 ] || { echo "cluster-experiment.sh: needs root (network namespaces)" >&2; exit 1; }
[ -x "$bench" ] || { echo "cluster-experiment.sh: $bench not found (make first)" >&2; exit 1; }
mkdir -p "$out"
cluster="$root/scripts/cluster.sh --prefix $prefix"
trap '$cluster down >/dev/null 2>&1 || true' EXIT INT TERM
exports=
for v in $(env | sed -n 's/^\(PCOLL_[A-Z0-9_]*\)=.*/\1/p'); do exports="$exports -x $v"; done

if echo "$parts" | grep -q allreduce; then
    for k in 1 2; do
        np=$((nodes * k))
        json=$out/allreduce-${nodes}x$k.json
        : >"$json"
        $cluster up "$nodes" --ranks-per-node "$k" --rate "$rate"
        i=1
        while [ "$i" -le "$repeats" ]; do
            echo "== allreduce ${nodes}x$k, run $i of $repeats"
            # shellcheck disable=SC2086
            $cluster run $exports -np "$np" -- "$bench" allreduce --json --max-bytes "$maxb" --link-rate "$rate" >>"$json"
            i=$((i + 1))
        done
        $cluster down >/dev/null
        {
            echo "# pcoll-bench allreduce on $nodes nodes x $k ranks, links $rate each way; medians of $repeats runs"
            echo "# (each run: the median over repetitions of the slowest rank); limit = 2 (N-1)/N x bytes / rate"
            printf "%10s %-13s %11s %11s %11s %9s %11s %7s %7s %7s\n" bytes algo pcoll_us mpi_us impi_us pcoll/mpi \
                limit_us pcoll% mpi% impi%
            medians "$json" "bytes algo" "pcoll_us mpi_us impi_us ratio link_limit_us pcoll_of_limit mpi_of_limit impi_of_limit" |
                awk '{ printf "%10s %-13s %11.1f %11.1f %11.1f %9.2f %11.1f %6.1f%% %6.1f%% %6.1f%%\n",
                       $1, $2, $3, $4, $5, $6, $7, 100 * $8, 100 * $9, 100 * $10 }'
        } >"$out/allreduce-${nodes}x$k.txt"
        cat "$out/allreduce-${nodes}x$k.txt"
    done
fi

if echo "$parts" | grep -q skew; then
    np=$((nodes * 2))
    json=$out/skew-${nodes}x2.json
    : >"$json"
    $cluster up "$nodes" --ranks-per-node 2 --rate "$rate"
    i=1
    while [ "$i" -le "$repeats" ]; do
        echo "== skew ${nodes}x2, run $i of $repeats"
        # shellcheck disable=SC2086
        $cluster run $exports -np "$np" -- "$bench" skew --json --max-bytes 4M >>"$json"
        i=$((i + 1))
    done
    $cluster down >/dev/null
    {
        echo "# pcoll-bench skew on $nodes nodes x 2 ranks ($np ranks), links $rate, skew 1000 us; medians of $repeats runs"
        echo "# majority's limit: (P^2 - 1) / 6P x skew = $(awk -v p="$np" 'BEGIN { printf "%.1f", (p * p - 1) / (6 * p) * 1000 }') us"
        printf "%-9s %9s %-13s %14s %6s %9s %12s\n" mode bytes data_phase avg_latency_us nap mpi/mode of_limit
        medians "$json" "mode bytes data_phase" "avg_latency_us nap speedup_vs_mpi" |
            awk -v p="$np" '{ lim = (p * p - 1) / (6 * p) * 1000
                   printf "%-9s %9s %-13s %14.1f %6.2f %9.2f %11s\n", $1, $2, $3, $4, $5, $6,
                   $1 == "majority" ? sprintf("%.1f%%", 100 * lim / $4) : "-" }'
    } >"$out/skew-${nodes}x2.txt"
    cat "$out/skew-${nodes}x2.txt"
fi
