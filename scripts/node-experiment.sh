#!/bin/sh
# pcoll's blocking allreduce against Open MPI's on this one machine:
# pcoll-bench allreduce at each P, REPEATS runs each, medians per size of
# pcoll_us, mpi_us and their ratio (each run: the median over repetitions
# of the slowest rank), and the points where pcoll is slower; then
# pcoll-bench cacheline at each P (a shared line's round trip, all ranks'
# arrival on one counter, and the budget 2 x P x round trip that the
# smallest message should stay within).
#
#   scripts/node-experiment.sh [P ...]          (default: 2 4 8 16 32)
#
# Environment: BUILD (build), REPEATS (3), MIN_BYTES (8), MAX_BYTES (64M),
# OUT (results/node), MPIRUN (mpirun --oversubscribe --bind-to none, and
# --allow-run-as-root as root).  PCOLL_* variables reach every rank.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
build=${BUILD:-$root/build}
bench=$build/bin/pcoll-bench
ps=${*:-2 4 8 16 32}
repeats=${REPEATS:-3}
minb=${MIN_BYTES:-8}
maxb=${MAX_BYTES:-64M}
out=${OUT:-$root/results/node}
if [ -z "${MPIRUN:-}" ]; then
    MPIRUN="mpirun --oversubscribe --bind-to none"
    [ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
fi
[ -x "$bench" ] || { echo "node-experiment.sh: $bench not found (make first)" >&2; exit 1; }
for p in $ps; do
    case $p in '' | *[!0-9]*) echo "node-experiment.sh: \"$p\" is not a rank count" >&2; exit 2 ;; esac
done
mkdir -p "$out"
for p in $ps; do
    json=$out/allreduce-$p.json
    : >"$json"
    i=1
    while [ "$i" -le "$repeats" ]; do
        echo "== allreduce P=$p, run $i of $repeats" >&2
        $MPIRUN -np "$p" "$bench" allreduce --json --min-bytes "$minb" --max-bytes "$maxb" >>"$json"
        i=$((i + 1))
    done
    $MPIRUN -np "$p" "$bench" cacheline --json >"$out/cacheline-$p.json"
    {
        echo "# pcoll-bench allreduce, P = $p on one machine; medians of $repeats runs"
        printf "%10s %-6s %11s %11s %9s\n" bytes algo pcoll_us mpi_us pcoll/mpi
        medians "$json" "bytes algo" "pcoll_us mpi_us ratio" | awk '{ printf "%10s %-6s %11s %11s %9s\n", $1, $2, $3, $4, $5 }'
        medians "$json" "bytes" "ratio" | awk '$2 > 1.0 { n++; worst = $2 > worst ? $2 : worst }
            END { printf "# sizes where pcoll is slower: %d (worst ratio %s)\n", n, n ? worst : "-" }'
        c=$out/cacheline-$p.json
        echo "# cacheline: rtt_us $(json_field rtt_us "$c"), arrival_us $(json_field arrival_us "$c"), budget_us $(json_field budget_us "$c")"
    } | tee "$out/allreduce-$p.txt"
done
