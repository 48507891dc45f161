#!/bin/sh
# Merged-gradient plans measured, each run REPEATS times (medians):
#   bench   pcoll-bench fusion --measure on the GoogleNet K80 profile
#           (data/mgwfbp), on an emulated cluster of NODES x 1 ranks with
#           RATE links, the cost model calibrated on the job: predicted and
#           measured iteration per strategy (sleeps for the compute, real
#           allreduces)
#   train   pcoll-train --algo sync with a deep MLP (LAYERS), one run per
#           strategy and one without buckets, on the same emulated cluster:
#           the planned step against the measured one, compute and exposed
#           exchange per step
#   node    the same trainer runs on this machine's one node (NP ranks)
# Tables and JSON under OUT.  bench and train need root (namespaces).
#
#   scripts/fusion-experiment.sh [bench] [train] [node]      (default: all)
#
# Environment: BUILD (build), NODES (4), RATE (1gbit), NP (4), REPEATS (3),
# LAYERS (784,256x20,10), BATCH (128), STEPS (40), STRATEGIES (train and
# node; wfbp single fixed:25M mgwfbp optimal; bench runs pcoll-bench's
# default list), OUT (results/fusion).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
build=${BUILD:-$root/build}
nodes=${NODES:-4}
rate=${RATE:-1gbit}
np=${NP:-4}
repeats=${REPEATS:-3}
layers=${LAYERS:-784,256x20,10}
batch=${BATCH:-128}
steps=${STEPS:-40}
strategies=${STRATEGIES:-wfbp single fixed:25M mgwfbp optimal}
out=${OUT:-$root/results/fusion}
parts=${*:-bench train node}
for p in $parts; do
    case $p in bench | train | node) ;; *) echo "fusion-experiment.sh: unknown part \"$p\" (bench, train, node)" >&2; exit 2 ;; esac
done
mkdir -p "$out"
prefix=fexp
cluster="$root/scripts/cluster.sh --prefix $prefix"
needs_cluster=0
case " $parts " in *" bench "* | *" train "*) needs_cluster=1 ;; esac
if [ $needs_cluster -eq 1 ]; then
    [ "$(id -u)" -eq 0 ] || { echo "fusion-experiment.sh: bench and train need root (network namespaces)" >&2; exit 1; }
    trap '$cluster down >/dev/null 2>&1 || true' EXIT INT TERM
    $cluster up "$nodes" --ranks-per-node 1 --rate "$rate"
fi
mpirun_local="mpirun --oversubscribe --bind-to none $( [ "$(id -u)" -eq 0 ] && echo --allow-run-as-root)"


if echo "$parts" | grep -q bench; then
    json=$out/bench-googlenet-${nodes}x1.json
    : >"$json"
    i=1
    while [ "$i" -le "$repeats" ]; do
        echo "== bench: GoogleNet profile, ${nodes}x1, run $i of $repeats"
        $cluster run -np "$nodes" -- "$build/bin/pcoll-bench" fusion --profile "$root/data/mgwfbp/googlenet-k80-layers.csv" \
            --measure --iters 5 --json >>"$json"
        i=$((i + 1))
    done
    {
        echo "# pcoll-bench fusion --measure: GoogleNet K80 profile (64 layers, 53.5 MB), forward = backward / 2,"
        echo "# on $nodes emulated nodes x 1 rank, $rate links, model calibrated on the job; medians of $repeats runs"
        printf "%-16s %8s %13s %12s %10s %10s %10s\n" strategy buckets predicted_ms measured_ms meas/pred m_vs_wfbp m_vs_single
        for s in wfbp single fixed:26214400 mgwfbp optimal; do
            grep "\"strategy\":\"$s\"" "$json" >"$out/.lines" || continue
            b=$(json_field buckets "$out/.lines" | median)
            p=$(json_field predicted_iter_us "$out/.lines" | median)
            m=$(json_field measured_iter_us "$out/.lines" | median)
            r=$(json_field measured_over_predicted "$out/.lines" | median)
            w=$(json_field measured_speedup_vs_wfbp "$out/.lines" | median)
            g=$(json_field measured_speedup_vs_single "$out/.lines" | median)
            awk -v s="$s" -v b="$b" -v p="$p" -v m="$m" -v r="$r" -v w="$w" -v g="$g" \
                'BEGIN { printf "%-16s %8d %13.1f %12.1f %10.3f %9.2fx %9.2fx\n", s, b, p / 1e3, m / 1e3, r, w, g }'
        done
        echo "# the calibrated models (a us, b us/byte) of the runs:"
        grep '"strategy":"optimal"' "$json" | while IFS= read -r line; do
            echo "#   $(echo "$line" | json_field model_a_us),$(echo "$line" | json_field model_b_us)"
        done
    } >"$out/bench-googlenet-${nodes}x1.txt"
    rm -f "$out/.lines"
    cat "$out/bench-googlenet-${nodes}x1.txt"
fi

# train_runs LABEL LAUNCHER...: the trainer once per strategy and once plain, REPEATS times taking turns
train_runs() {
    label=$1
    shift
    json=$out/train-$label.json
    : >"$json"
    i=1
    while [ "$i" -le "$repeats" ]; do
        for s in none $strategies; do
            echo "== train $label: --fusion $s, run $i of $repeats"
            f=""
            [ "$s" = none ] || f="--fusion $s"
            # shellcheck disable=SC2086
            "$@" "$build/bin/pcoll-train" --algo sync $f --layers "$layers" --batch "$batch" --epochs 1000 --eval-every 1000 \
                --max-steps "$steps" --quiet --json "$out/.run.json" >/dev/null
            sed "s/^{/{\"strategy\":\"$s\",/" "$out/.run.json" >>"$json"
        done
        i=$((i + 1))
    done
    rm -f "$out/.run.json"
    {
        echo "# pcoll-train --algo sync --layers $layers --batch $batch, $steps steps, on $label; medians of $repeats runs"
        echo "# step: wall time per step; compute: forward + backward (+ the buckets' starts); exposed: the wait after"
        printf "%-12s %8s %12s %10s %10s %11s %11s %10s\n" fusion buckets planned_ms step_ms meas/plan compute_ms exposed_ms vs_none
        grep '"strategy":"none"' "$json" >"$out/.lines"
        base=$(json_field step_ms "$out/.lines" | median)
        for s in none $strategies; do
            grep "\"strategy\":\"$s\"" "$json" >"$out/.lines" || continue
            st=$(json_field step_ms "$out/.lines" | median)
            c=$(json_field compute_ms "$out/.lines" | median)
            x=$(json_field exchange_ms "$out/.lines" | median)
            if [ "$s" = none ]; then
                b=1 p=- r=-
            else
                b=$(json_field fusion_buckets "$out/.lines" | median)
                p=$(json_field fusion_predicted_step_ms "$out/.lines" | median)
                r=$(awk -v p="$p" -v st="$st" 'BEGIN { print st / p }')
            fi
            awk -v s="$s" -v b="$b" -v p="$p" -v st="$st" -v r="$r" -v c="$c" -v x="$x" -v base="$base" \
                'BEGIN { printf "%-12s %8d %12s %10.2f %10s %11.2f %11.2f %9.2fx\n", s, b,
                         p == "-" ? "-" : sprintf("%.2f", p), st, r == "-" ? "-" : sprintf("%.3f", r), c, x, base / st }'
        done
    } >"$out/train-$label.txt"
    rm -f "$out/.lines"
    cat "$out/train-$label.txt"
}

if echo "$parts" | grep -q train; then
    train_runs "${nodes}x1-$rate" $cluster run -np "$nodes" --
fi
if echo "$parts" | grep -q node; then
    [ $needs_cluster -eq 1 ] && $cluster down >/dev/null
    # shellcheck disable=SC2086
    train_runs "one-node-np$np" $mpirun_local -np "$np"
fi
