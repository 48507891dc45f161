#!/bin/sh
# Dynamic-group partial reduce (Partial Reduce, Ripples) against synchronous
# SGD, eager-SGD and WAGMA-SGD on Fashion-MNIST, 8 ranks, under three kinds
# of heterogeneity (the demo's machinery, scripts/demo.sh), STEP being one
# normal step (ms):
#   slow     rank 7 takes 3 normal steps per step (slow:7:3:STEP; Ripples'
#            setting: one worker with an extra 2x iteration time)
#   hl3      ranks 5, 6, 7 take 2 normal steps (slow:5,6,7:2:STEP; Partial
#            Reduce's HL3: three slow workers of eight)
#   random   one random rank per step sleeps one normal step (random:1:STEP)
# Algorithms: mpi, majority, wagma:4, preduce fifo:3 const and dyn, ripples
# random:3, smart:3 and static; each run REPEATS times (taking turns), 12
# epochs.  One table (medians; speedups against the mpi run of the same
# turn) and one plot per setting, under results/preduce/<setting>/.
#
#   scripts/preduce-experiment.sh [slow] [hl3] [random]   (default: all three)
#
# Environment: BUILD, MPIRUN (as demo.sh), NP (8), REPEATS (3), EPOCHS (12),
# ALGOS (the list above), STEP_MS (skip the measurement of a normal step),
# OUT (results/preduce).  About 20 minutes per setting on 2 cores.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
export BUILD
np=${NP:-8}
out=${OUT:-$root/results/preduce}
kinds=${*:-slow hl3 random}
for k in $kinds; do
    case $k in slow | hl3 | random) ;; *) echo "preduce-experiment.sh: unknown setting \"$k\" (slow, hl3, random)" >&2; exit 2 ;; esac
done
[ "$np" -ge 8 ] || { echo "preduce-experiment.sh: NP must be >= 8 (ranks 5-7 are the slow ones)" >&2; exit 2; }
mkdir -p "$out"
algos=${ALGOS:-"mpi majority wagma:4 preduce:fifo:3:const preduce:fifo:3:dyn preduce:ripples:random:3 preduce:ripples:smart:3 preduce:ripples:static"}

for k in $kinds; do
    case $k in
        slow) imb="slow:7:3:STEP" ;;
        hl3) imb="slow:5,6,7:2:STEP" ;;
        random) imb="random:1:STEP" ;;
    esac
    echo "== setting $k"
    # STEP_MS unset: demo.sh measures a normal step (mpi, no imbalance)
    DEMO_NP=$np DEMO_ALGOS=$algos DEMO_REPEATS=${REPEATS:-3} DEMO_EPOCHS=${EPOCHS:-12} \
        DEMO_DELAY_MS=${STEP_MS:-} DEMO_IMBALANCE=$imb DEMO_OUT="$out/$k" "$root/scripts/demo.sh"
done
