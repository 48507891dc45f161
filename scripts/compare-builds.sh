#!/bin/sh
# Before/after figures of two builds, measured alternately in one session:
# pcoll-bench allreduce, skew, group and preduce at each P, REPEATS times
# each, then one table per benchmark with the medians.  Ratios and speedups
# are against MPI_Allreduce measured in the same run of the same build.
#
#   scripts/compare-builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [P ...]   (default P: 4 8 16)
#
# Environment: REPEATS (3), MAX_BYTES (allreduce sweep, 4M), SKEW_MAX (skew
# and group, 4M), PREDUCE_CALLS (2000), BENCHES (allreduce skew group
# preduce), MPIRUN (mpirun --oversubscribe --bind-to none, + --allow-run-as-root
# as root), OUT (a directory for the JSON lines, default a temporary one).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
old=$1 new=$2
shift 2
ps=${*:-4 8 16}
repeats=${REPEATS:-3}
max=${MAX_BYTES:-4M}
skew_max=${SKEW_MAX:-4M}
calls=${PREDUCE_CALLS:-2000}
benches=${BENCHES:-allreduce skew group preduce}
if [ -z "${MPIRUN:-}" ]; then
    MPIRUN="mpirun --oversubscribe --bind-to none"
    [ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
fi
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
for b in "$old" "$new"; do
    [ -x "$b/bin/pcoll-bench" ] || { echo "compare-builds: no $b/bin/pcoll-bench" >&2; exit 2; }
done
for bench in $benches; do
    case $bench in allreduce | skew | group | preduce) ;; *) echo "compare-builds: unknown bench $bench" >&2; exit 2 ;; esac
done

flags() {
    case $1 in
        allreduce) echo "--max-bytes $max" ;;
        skew | group) echo "--max-bytes $skew_max" ;;
        preduce) echo "--calls $calls" ;;
    esac
}

for r in $(seq 1 "$repeats"); do
    for p in $ps; do
        for bench in $benches; do
            for tag in old new; do
                b=$old
                [ $tag = new ] && b=$new
                echo "run $r, P=$p, $bench, $tag" >&2
                # shellcheck disable=SC2046,SC2086
                $MPIRUN -np "$p" "$b/bin/pcoll-bench" "$bench" --json $(flags "$bench") >>"$out/$bench.$tag.$p.json"
            done
        done
    done
done

# table BENCH TITLE "KEYS" "FIELDS": one markdown table, every P
table() {
    echo "### pcoll-bench $1: $2"
    echo
    header="| P |" rule="|---|"
    for k in $3; do header="$header $k |" rule="$rule---|"; done
    for f in $4; do header="$header before $f |" rule="$rule---|"; done
    for f in $4; do header="$header after $f |" rule="$rule---|"; done
    echo "$header"
    echo "$rule"
    for p in $ps; do
        compare_medians "$out/$1.old.$p.json" "$out/$1.new.$p.json" "$3" "$4" | sed "s/^|/| $p |/"
    done
    echo
}

echo "medians over $repeats runs of each run's figures; the two builds took turns"
echo
case " $benches " in *" allreduce "*)
    table allreduce "latency (us); ratio = pcoll / MPI_Allreduce of the same run" "bytes algo" "pcoll_us ratio" ;;
esac
case " $benches " in *" skew "*)
    table skew "1 ms skew; speedup = MPI_Allreduce latency / the mode's" "mode bytes" "avg_latency_us nap speedup_vs_mpi" ;;
esac
case " $benches " in *" group "*)
    table group "1 ms skew; speedup = MPI_Allreduce latency / the mode's" "mode bytes" "avg_latency_us nap speedup_vs_mpi" ;;
esac
case " $benches " in *" preduce "*)
    table preduce "groups per second; vs_mpi = steps/s over MPI_Allreduce's" "policy" "groups_per_s wait_us_median vs_mpi" ;;
esac
echo "(JSON lines in $out)"
