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
# test accuracy) and plots test accuracy against wall time (gnuplot, SVG).
#
#   scripts/demo.sh            the full demo (under 10 minutes on 2 cores)
#   scripts/demo.sh --smoke    a tiny variant for `make test` (seconds)
#
# Environment: BUILD (build directory, default build), MPIRUN (launcher and its
# flags), DEMO_NP (ranks, 4), DEMO_ALGOS ("mpi solo majority"), DEMO_EPOCHS
# (12), DEMO_DELAY_MS (skip the measurement), DEMO_TARGET (0.88), DEMO_OUT
# (output directory, default results/demo; smoke: $BUILD/demo-smoke),
# DEMO_ARGS (more pcoll-train flags, e.g. "--lr 0.05 --batch 64").
set -eu

smoke=0
for arg in "$@"; do
    case "$arg" in
        --smoke) smoke=1 ;;
        -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "demo.sh: unknown argument \"$arg\" (--smoke, --help)" >&2; exit 2 ;;
    esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
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

# a value from pcoll-train's one-line JSON summary
json_get() {
    sed -n "s/.*\"$1\":\(\"[^\"]*\"\|[^,}]*\).*/\1/p" "$2" | tr -d '"'
}

# $MPIRUN is a command line: word splitting is wanted
# shellcheck disable=SC2086
run() { $MPIRUN -np "$np" "$train" "$@"; }

start=$(date +%s)
echo "== pcoll demo: Fashion-MNIST MLP, $np ranks, algorithms: $algos"

if [ -z "$delay" ]; then
    # one normal step: the mpi baseline without imbalance, 250 steps (~2 s)
    run --algo mpi --max-steps 250 --epochs 1 --quiet --json "$out/calibrate.json" >"$out/calibrate.txt" 2>&1 ||
        { cat "$out/calibrate.txt" >&2; exit 1; }
    step_ms=$(awk -v s="$(json_get steps "$out/calibrate.json")" -v w="$(json_get wall_s "$out/calibrate.json")" \
        'BEGIN { printf "%.1f", 1000 * w / s }')
    delay=$step_ms
    echo "normal step (mpi, no imbalance): $step_ms ms -> injected delay $delay ms in one random rank per step"
else
    echo "injected delay: $delay ms in one random rank per step"
fi
imbalance="random:1:$delay"
target=${DEMO_TARGET:-0.88}

ran=""
for algo in $algos; do
    echo "-- $algo: $epochs epochs, --imbalance $imbalance"
    log="$out/$algo.txt"
    # shellcheck disable=SC2086
    if ! run --algo "$algo" --epochs "$epochs" --imbalance "$imbalance" --target "$target" $extra ${DEMO_ARGS:-} \
        --csv "$out/$algo.csv" --json "$out/$algo.json" >"$log" 2>&1; then
        cat "$log" >&2
        echo "demo.sh: the $algo run failed (log: $log)" >&2
        exit 1
    fi
    grep '^final:' "$log" | sed 's/^/   /'
    ran="$ran $algo"
done
[ -n "$ran" ] || { echo "demo.sh: nothing ran" >&2; exit 1; }

echo
mpi_rate=""
[ -f "$out/mpi.json" ] && case " $ran " in *" mpi "*) mpi_rate=$(json_get steps_per_s "$out/mpi.json") ;; esac
printf '%-10s %9s %16s %9s %14s %12s\n' algo steps/s "speedup vs mpi" wall_s test_accuracy \
    "t_$target"_s | tee "$out/table.txt"
for algo in $ran; do
    j="$out/$algo.json"
    rate=$(json_get steps_per_s "$j")
    speedup=$(awk -v r="$rate" -v m="$mpi_rate" 'BEGIN { if (m == "") print "-"; else printf "%.2fx", r / m }')
    ttt=$(json_get time_to_target_s "$j")
    if [ "$ttt" = null ]; then ttt="-"; else ttt=$(printf '%.1f' "$ttt"); fi
    printf '%-10s %9.1f %16s %9.1f %14.4f %12s\n' "$algo" "$rate" "$speedup" "$(json_get wall_s "$j")" \
        "$(json_get test_accuracy "$j")" "$ttt" | tee -a "$out/table.txt"
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
set title "Fashion-MNIST MLP, $np ranks, one random rank per step delayed $delay ms"
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
