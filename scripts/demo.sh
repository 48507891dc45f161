#!/bin/sh
# The main job: eager-SGD against synchronous SGD on Fashion-MNIST under load
# imbalance, the eager-SGD paper's light-imbalance experiment (section 7.2) in
# small.  4 ranks train the default MLP with
#   mpi       MPI_Allreduce of the gradients every step (synchronous baseline)
#   solo      eager-SGD, pcoll solo partial allreduce
#   majority  eager-SGD, pcoll majority partial allreduce
# while in every step one rank drawn at random sleeps MS milliseconds
# (random:1:MS, as the paper's 1-of-8 runs).  MS is about one normal step:
# it is measured first (a short mpi run without imbalance), so that the slow
# rank doubles the step of a synchronous algorithm.  Then it prints a table
# (steps/s, speedup over mpi, wall time, final test accuracy, time to 88%
# test accuracy, mpi's time to it over the algorithm's) and plots test
# accuracy against wall time (gnuplot, SVG).
#
#   scripts/demo.sh            the full demo (under 10 minutes on 2 cores)
#   scripts/demo.sh --smoke    a tiny variant for `make test` (seconds)
#
# Environment: BUILD (build directory, default build), MPIRUN (launcher and its
# flags), DEMO_NP (ranks, 4), DEMO_ALGOS ("mpi solo majority"; any --algo, e.g.
# "mpi majority wagma:4"), DEMO_EPOCHS (12), DEMO_DELAY_MS (skip the
# measurement), DEMO_IMBALANCE (the --imbalance spec, in which STEP stands for
# the step time in ms; default random:1:STEP, e.g. slow:7:3:STEP or dist:STEP:STEP),
# DEMO_REPEATS (runs of every algorithm, taking turns; the table gives medians,
# speedups against the mpi run of the same turn; default 1), DEMO_TARGET (0.88),
# DEMO_OUT (output directory, default results/demo; smoke: $BUILD/demo-smoke),
# DEMO_ARGS (more pcoll-train flags, e.g. "--lr 0.05 --batch 64").
set -eu

smoke=0
for arg in "$@"; do
    case "$arg" in
        --smoke) smoke=1 ;;
        -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "demo.sh: unknown argument \"$arg\" (--smoke, --help)" >&2; exit 2 ;;
    esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
BUILD=${BUILD:-build}
if [ -z "${MPIRUN:-}" ]; then
    MPIRUN="mpirun --oversubscribe --bind-to none"
    [ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
fi
train="$BUILD/bin/pcoll-train"
[ -x "$train" ] || { echo "demo.sh: $train not found: build first (make, or cmake --build $BUILD)" >&2; exit 1; }
command -v "${MPIRUN%% *}" >/dev/null 2>&1 || { echo "demo.sh: launcher \"${MPIRUN%% *}\" not found (set MPIRUN)" >&2; exit 1; }

np=${DEMO_NP:-4}
algos=${DEMO_ALGOS:-"mpi solo majority"}
repeats=${DEMO_REPEATS:-1}
case "$repeats" in '' | *[!0-9]* | 0) echo "demo.sh: DEMO_REPEATS \"$repeats\" is not a whole number >= 1" >&2; exit 2 ;; esac
# pcoll-train's defaults otherwise (batch 32 per rank, lr 0.02 with cosine
# decay, momentum 0.9): 12 epochs reach ~89% and keep the three runs near
# 4 minutes on 2 idle cores
if [ "$smoke" -eq 1 ]; then
    out=${DEMO_OUT:-$BUILD/demo-smoke}
    epochs=${DEMO_EPOCHS:-2}
    extra="--train-limit 2048"
    delay=${DEMO_DELAY_MS:-2}
else
    out=${DEMO_OUT:-$root/results/demo}
    epochs=${DEMO_EPOCHS:-12}
    extra=""
    delay=${DEMO_DELAY_MS:-}
fi
mkdir -p "$out"

# $MPIRUN is a command line: word splitting is wanted
# shellcheck disable=SC2086
run() { $MPIRUN -np "$np" "$train" "$@"; }

start=$(date +%s)
echo "== pcoll demo: Fashion-MNIST MLP, $np ranks, algorithms: $algos"

if [ -z "$delay" ]; then
    # one normal step: the mpi baseline without imbalance, 250 steps (~2 s)
    run --algo mpi --max-steps 250 --epochs 1 --quiet --json "$out/calibrate.json" >"$out/calibrate.txt" 2>&1 ||
        { cat "$out/calibrate.txt" >&2; exit 1; }
    step_ms=$(awk -v s="$(json_field steps "$out/calibrate.json")" -v w="$(json_field wall_s "$out/calibrate.json")" \
        'BEGIN { printf "%.1f", 1000 * w / s }')
    delay=$step_ms
    echo "normal step (mpi, no imbalance): $step_ms ms"
fi
imbalance=$(printf '%s' "${DEMO_IMBALANCE:-random:1:STEP}" | sed "s/STEP/$delay/g")
echo "imbalance: --imbalance $imbalance"
target=${DEMO_TARGET:-0.88}

# run i of an algorithm: $out/ALGO.json (the first) or $out/ALGO.rI.json
name() { if [ "$2" -eq 1 ]; then echo "$out/$1"; else echo "$out/$1.r$2"; fi; }

ran=""
for i in $(seq 1 "$repeats"); do
    for algo in $algos; do
        f=$(name "$algo" "$i")
        echo "-- $algo: $epochs epochs, --imbalance $imbalance$([ "$repeats" -gt 1 ] && echo ", run $i of $repeats")"
        # shellcheck disable=SC2086
        if ! run --algo "$algo" --epochs "$epochs" --imbalance "$imbalance" --target "$target" $extra ${DEMO_ARGS:-} \
            --csv "$f.csv" --json "$f.json" >"$f.txt" 2>&1; then
            cat "$f.txt" >&2
            echo "demo.sh: the $algo run failed (log: $f.txt)" >&2
            exit 1
        fi
        grep '^final:' "$f.txt" | sed 's/^/   /'
        [ "$i" -eq 1 ] && ran="$ran $algo"
    done
done
[ -n "$ran" ] || { echo "demo.sh: nothing ran" >&2; exit 1; }

# (median, lib.sh: a target not reached, null, counts as infinite)
# one field of every run of an algorithm, a line each
runs_of() {
    for i in $(seq 1 "$repeats"); do json_field "$2" "$(name "$1" "$i").json"; done
}

echo
[ "$repeats" -gt 1 ] && echo "medians of $repeats runs; speedup: steps/s over the mpi run of the same turn" | tee "$out/table.txt"
[ "$repeats" -gt 1 ] || : >"$out/table.txt"
# the algorithm column as wide as the longest name
w=4
for algo in $ran; do [ "${#algo}" -gt "$w" ] && w=${#algo}; done
printf '%-*s %9s %16s %9s %14s %12s %12s\n' "$w" algo steps/s "speedup vs mpi" wall_s test_accuracy \
    "t_$target"_s "t vs mpi" | tee -a "$out/table.txt"
for algo in $ran; do
    rate=$(runs_of "$algo" steps_per_s | median)
    speedup="-"
    case " $ran " in *" mpi "*)
        speedup=$(for i in $(seq 1 "$repeats"); do
            awk -v r="$(json_field steps_per_s "$(name "$algo" "$i").json")" \
                -v m="$(json_field steps_per_s "$(name mpi "$i").json")" 'BEGIN { print r / m }'
        done | median)
        speedup=$(printf '%.2fx' "$speedup") ;;
    esac
    ttt=$(runs_of "$algo" time_to_target_s | median)
    [ "$ttt" = "-" ] || ttt=$(printf '%.1f' "$ttt")
    # mpi's time to the target over this one's, per turn (a run that missed
    # the target counts as 0x; turns where mpi missed it are left out)
    tspeed="-"
    case " $ran " in *" mpi "*)
        tspeed=$(for i in $(seq 1 "$repeats"); do
            m=$(json_field time_to_target_s "$(name mpi "$i").json")
            a=$(json_field time_to_target_s "$(name "$algo" "$i").json")
            [ "$m" = null ] && continue
            if [ "$a" = null ]; then echo 0; else awk -v m="$m" -v a="$a" 'BEGIN { print m / a }'; fi
        done | median)
        [ "$tspeed" = "-" ] || tspeed=$(printf '%.2fx' "$tspeed") ;;
    esac
    printf '%-*s %9.1f %16s %9.1f %14.4f %12s %12s\n' "$w" "$algo" "$rate" "$speedup" \
        "$(runs_of "$algo" wall_s | median)" "$(runs_of "$algo" test_accuracy | median)" "$ttt" "$tspeed" |
        tee -a "$out/table.txt"
done

svg="$out/accuracy.svg"
if command -v gnuplot >/dev/null 2>&1; then
    plot=""
    for algo in $ran; do
        plot="$plot${plot:+, }'$out/$algo.csv' using 2:6 with linespoints title '$algo'"
    done
    gnuplot <<EOF
set terminal svg size 800,500 dynamic
set output '$svg'
set datafile separator ','
set key bottom right
set grid
set title "Fashion-MNIST MLP, $np ranks, --imbalance $imbalance (first run of each)"
set xlabel 'wall time (s)'
set ylabel 'test accuracy'
plot $plot
EOF
    [ -s "$svg" ] || { echo "demo.sh: gnuplot wrote no $svg" >&2; exit 1; }
    echo
    echo "plot: $svg"
else
    echo "demo.sh: gnuplot not found (Debian package gnuplot-nox): no plot" >&2
fi
echo "logs: $out/   (total $(($(date +%s) - start)) s)"
