#!/bin/sh
# WAGMA-SGD against synchronous and eager SGD on Fashion-MNIST, 8 ranks, under
# three kinds of load imbalance (the demo's machinery, scripts/demo.sh):
#   random   one random rank per step sleeps one normal step (random:1:STEP)
#   slow     rank 3 is persistently twice as slow (slow:3:2)
#   dist     every rank's step is delayed by a lognormal draw with mean and
#            standard deviation of one normal step (dist:STEP:STEP)
# Algorithms: mpi, solo, majority, wagma:2, wagma:4, wagma:8; each run
# REPEATS times (taking turns), 12 epochs.  One table (medians; speedups
# against the mpi run of the same turn) and one plot per imbalance, under
# results/wagma/<imbalance>/.
#
#   scripts/wagma-experiment.sh [random] [slow] [dist]     (default: all three)
#
# Environment: BUILD, MPIRUN (as demo.sh), NP (8), REPEATS (3), EPOCHS (12),
# ALGOS ("mpi solo majority wagma:2 wagma:4 wagma:8"), STEP_MS (skip the
# measurement of a normal step), OUT (results/wagma).  Takes about 1.5 hours
# on 2 cores with the defaults.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
BUILD=${BUILD:-build}
export BUILD
np=${NP:-8}
out=${OUT:-$root/results/wagma}
kinds=${*:-random slow dist}
for k in $kinds; do
    case $k in random | slow | dist) ;; *) echo "wagma-experiment.sh: unknown imbalance \"$k\" (random, slow, dist)" >&2; exit 2 ;; esac
done
mkdir -p "$out"

step=${STEP_MS:-}
if [ -z "$step" ]; then
    # one normal step at this rank count: the synchronous baseline without imbalance
    if [ -z "${MPIRUN:-}" ]; then
        MPIRUN="mpirun --oversubscribe --bind-to none"
        [ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
    fi
    # shellcheck disable=SC2086
    $MPIRUN -np "$np" "$BUILD/bin/pcoll-train" --algo mpi --max-steps 250 --epochs 1 --quiet \
        --json "$out/calibrate.json" >"$out/calibrate.txt" 2>&1 || { cat "$out/calibrate.txt" >&2; exit 1; }
    step=$(awk -v w="$(json_field wall_s "$out/calibrate.json")" -v s="$(json_field steps "$out/calibrate.json")" \
        'BEGIN { printf "%.1f", 1000 * w / s }')
    echo "normal step (mpi, $np ranks, no imbalance): $step ms"
fi

for k in $kinds; do
    case $k in
        random) imb="random:1:STEP" ;;
        slow) imb="slow:3:2" ;;
        dist) imb="dist:STEP:STEP" ;;
    esac
    echo "== imbalance $k"
    DEMO_NP=$np DEMO_ALGOS=${ALGOS:-"mpi solo majority wagma:2 wagma:4 wagma:8"} DEMO_REPEATS=${REPEATS:-3} \
        DEMO_EPOCHS=${EPOCHS:-12} DEMO_DELAY_MS=$step DEMO_IMBALANCE=$imb DEMO_OUT="$out/$k" \
        "$root/scripts/demo.sh"
done
