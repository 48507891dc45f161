#!/bin/sh
# Failures in the middle of pcoll-train runs on Fashion-MNIST.
#
#   scripts/failure-experiment.sh [kill] [stop] [restart] [churn]   (default: the first three)
#
# kill: a rank killed with SIGKILL: --on-failure shrink goes on with the
#   others (pcoll_shrink), against the same run without the failure; per
#   rank count and algorithm, REPEATS runs of each, taking turns.  The victim
#   (rank VICTIM, not 0) kills itself (--inject) half-way through the second
#   epoch.  A table of medians (wall time, test accuracy, time to TARGET,
#   pcoll_shrink's and the rebuild's time) and the time the failure cost;
#   the runs' JSON lines (with "failure": "none" or "kill") go to
#   OUT/runs.jsonl.
# stop: rank STOP_VICTIM (VICTIM unless set; rank 0 may be stopped: it is
#   the views' coordinator and the leader) stopped with SIGSTOP for STOP_S seconds half-way through
#   the first epoch, per rank count, partial kind (STOP_ALGOS; wagma-tau0 is
#   wagma with --sync-every 0, no synchronous rounds) and data phase
#   (node-shared memory, messages): the other ranks' steps/s while it was
#   stopped and before, when its next step ended after SIGCONT, the rounds
#   that went on without it (PCOLL_EXCLUDE_MS) and were kept for it, and the
#   gradients handed over against those delivered at each rank (REPEATS runs
#   each, 1 epoch, medians); JSON lines in OUT/stop.jsonl.
# restart: the restart path, which works with any MPI and any victim (rank
#   0 too): runs checkpoint at every epoch's end (--checkpoint); the victim
#   kills itself as in kill, the job ends (--on-failure abort), and a new
#   job of one rank less resumes from the checkpoint (--resume).  Against
#   the same run with checkpoints and no failure: the script's clock from
#   the first mpirun to the end of the last (process starts and data loading
#   included), and the test accuracy; OUT/restart.jsonl.
# churn: nobody stops, but PCOLL_EXCLUDE_MS is set below what a busy
#   machine reaches (CHURN_MS; 0, no views, is the peer), rounds by messages, CHURN_NPS ranks, each
#   kind of CHURN_ALGOS (wagma-tau0 as in stop): healthy ranks are left out and come back.  Per run
#   (1 epoch, 8,000 images, within CHURN_TIMEOUT_S): whether it ended, the
#   views rank 0 installed, the limit the back-off reached, steps/s and the
#   test accuracy; OUT/churn.jsonl.
#
# Environment: BUILD, MPIRUN (as demo.sh), NPS ("4 8"), ALGOS ("solo sync"),
# REPEATS (3), EPOCHS (3), TARGET (0.82), VICTIM (1), STOP_VICTIM (VICTIM), TIMEOUT_S (2: the
# PCOLL_TIMEOUT_S that finds the dead rank), STOP_S (5), STOP_ALGOS ("solo
# majority quorum:2 wagma wagma-tau0"), STOP_PHASES ("shm messages"),
# RESTART_VICTIM (0), CHURN_NPS ("8 16 32"), CHURN_MS ("0 3 5 10"), CHURN_ALGOS
# ("solo majority quorum:4"), CHURN_TIMEOUT_S (120), OUT
# (results/failure).  About 45 minutes on 2 cores with the defaults.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
BUILD=${BUILD:-$root/build}
nps=${NPS:-4 8}
algos=${ALGOS:-solo sync}
reps=${REPEATS:-3}
epochs=${EPOCHS:-3}
target=${TARGET:-0.82}
victim=${VICTIM:-1}
stop_victim=${STOP_VICTIM:-$victim}
tmo=${TIMEOUT_S:-2}
out=${OUT:-$root/results/failure}
[ "$victim" -ge 1 ] || { echo "failure-experiment.sh: VICTIM must not be rank 0 (it keeps the records)" >&2; exit 2; }
if [ -z "${MPIRUN:-}" ]; then
    MPIRUN="mpirun --oversubscribe --bind-to none"
    [ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
fi
train="$BUILD/bin/pcoll-train"
[ -x "$train" ] || { echo "failure-experiment.sh: no $train (build first, or BUILD=DIR)" >&2; exit 1; }
mkdir -p "$out"
exps=${*:-kill stop restart}
for e in $exps; do
    case $e in kill | stop | restart | churn) ;;
    *) echo "failure-experiment.sh: unknown experiment \"$e\" (kill, stop, restart, churn)" >&2; exit 2 ;;
    esac
done

# run NAME FLAGS...: one pcoll-train run; its JSON line into OUT/NAME.json
run() {
    name=$1
    shift
    # mpirun's status is the victim's (137) when it kills itself
    # shellcheck disable=SC2086
    $MPIRUN --mca orte_abort_on_non_zero_status 0 "$@" --quiet --json "$out/$name.json" >"$out/run.log" 2>&1 || true
    if [ ! -s "$out/$name.json" ]; then
        echo "failure-experiment.sh: the run wrote no JSON:" >&2
        tail -20 "$out/run.log" >&2
        exit 1
    fi
}

# cost JSONL KEY FAILURE: per rank count and algo, the median of KEY with
# "failure": FAILURE minus its median with "failure": "none"
cost() {
    medians "$1" "np algo failure" "$2" |
        awk -v f="$3" '{ k = $1 " " $2; w[k, $3] = $4; if (!(k in seen)) { seen[k] = 1; o[++n] = k } }
             END { for (i = 1; i <= n; i++) printf "  %s ranks, %s: %.2f s\n", substr(o[i], 1, index(o[i], " ") - 1),
                       substr(o[i], index(o[i], " ") + 1), w[o[i], f] - w[o[i], "none"] }'
}

case " $exps " in *" stop "*)
stops="$out/stop.jsonl"
: >"$stops"
stop_s=${STOP_S:-5}
for np in $nps; do
    at=$((60000 / np / 32 / 2))
    for rep in $(seq "$reps"); do
        for algo in ${STOP_ALGOS:-solo majority quorum:2 wagma wagma-tau0}; do
            flags="--algo $algo"
            [ "$algo" = wagma-tau0 ] && flags="--algo wagma --sync-every 0"
            for phase in ${STOP_PHASES:-shm messages}; do
                echo "failure-experiment: stop, $np ranks, $algo, $phase, run $rep" >&2
                shm=""
                [ $phase = messages ] && shm="-x PCOLL_PARTIAL_SHM_BYTES=0"
                # shellcheck disable=SC2086
                run stop $shm -np "$np" "$train" $flags --epochs 1 --inject "stop:$stop_victim:$at:$stop_s"
                sed "s/^{/{\"run\": \"$algo\", \"phase\": \"$phase\", \"np\": $np, /" "$out/stop.json" >>"$stops"
                rm -f "$out/stop.json"
            done
        done
    done
done
echo "| ranks | algo | data phase | stopped (s) | others' steps/s during the stop | before it | its next step after SIGCONT (s) | rounds left it out / kept for it | gradients made / delivered (fewest-most at a rank) |"
echo "|---|---|---|---|---|---|---|---|---|"
medians "$stops" "np run phase" "stop_s others_steps_per_s_during_stop others_steps_per_s_before_stop resume_step_s left_out_rounds caught_up_rounds contributions_made contributions_delivered_min contributions_delivered_max" |
    awk '{ printf "| %s | %s | %s | %.2f | %.1f | %.1f | %.3f | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7,
           ($8 == "-" ? "0 / 0" : $8 " / " $9), ($10 == "-" ? "- (models)" : $10 " / " $11 "-" $12) }'
echo ;;
esac

case " $exps " in *" kill "*)
runs="$out/runs.jsonl"
: >"$runs"
for np in $nps; do
    spe=$((60000 / np / 32))
    at=$((spe + spe / 2))
    for rep in $(seq 1 "$reps"); do
        for algo in $algos; do
            for failure in none kill; do
                inject=""
                [ "$failure" = kill ] && inject="--inject kill:$victim:$at"
                echo "failure-experiment: $np ranks, $algo, $failure, run $rep" >&2
                # shellcheck disable=SC2086
                run run -np "$np" "$train" --algo "$algo" --epochs "$epochs" --target "$target" --on-failure shrink \
                    --failure-timeout "$tmo" $inject
                sed "s/^{/{\"failure\": \"$failure\", \"np\": $np, /" "$out/run.json" >>"$runs"
                rm -f "$out/run.json"
            done
        done
    done
done
echo "| ranks | algo | failure | wall s | test accuracy | time to $target (s) | ranks at the end | shrink + rebuild (s) |"
echo "|---|---|---|---|---|---|---|---|"
medians "$runs" "np algo failure" "wall_s test_accuracy time_to_target_s ranks_at_end recovery_s" |
    awk '{ printf "| %s | %s | %s | %.2f | %.4f | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, ($8 == "-" ? "-" : sprintf("%.2f", $8)) }'
echo
echo "time the failure cost (median wall time with it minus without it):"
cost "$runs" wall_s kill
;;
esac

case " $exps " in *" restart "*)
restarts="$out/restart.jsonl"
: >"$restarts"
rv=${RESTART_VICTIM:-0}
now() { date +%s.%N; }
for np in $nps; do
    spe=$((60000 / np / 32))
    at=$((spe + spe / 2))
    for rep in $(seq 1 "$reps"); do
        for algo in $algos; do
            for failure in none restart; do
                echo "failure-experiment: restart, $np ranks, $algo, $failure, run $rep" >&2
                rm -rf "$out/ckpt"
                t0=$(now)
                if [ "$failure" = restart ]; then
                    # the job ends with the victim (status 137): no JSON; a
                    # launcher that kept the survivors waiting is stopped
                    timeout 600 $MPIRUN -np "$np" "$train" --algo "$algo" --epochs "$epochs" --checkpoint "$out/ckpt" \
                        --inject "kill:$rv:$at" --quiet >"$out/run.log" 2>&1 || true
                    [ -s "$out/ckpt/checkpoint" ] || { tail -20 "$out/run.log" >&2; exit 1; }
                    run run -np $((np - 1)) "$train" --algo "$algo" --epochs "$epochs" --target "$target" \
                        --checkpoint "$out/ckpt" --resume "$out/ckpt"
                else
                    run run -np "$np" "$train" --algo "$algo" --epochs "$epochs" --target "$target" \
                        --checkpoint "$out/ckpt"
                fi
                t=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
                sed "s/^{/{\"failure\": \"$failure\", \"np\": $np, \"elapsed_s\": $t, /" "$out/run.json" >>"$restarts"
                rm -f "$out/run.json"
            done
        done
    done
done
rm -rf "$out/ckpt"
echo "| ranks | algo | failure | elapsed s (all jobs) | test accuracy | checkpoints | in them (s) |"
echo "|---|---|---|---|---|---|---|"
medians "$restarts" "np algo failure" "elapsed_s test_accuracy checkpoints checkpoint_s" |
    awk '{ printf "| %s | %s | %s | %.2f | %.4f | %s | %.2f |\n", $1, $2, $3, $4, $5, $6, $7 }'
echo
echo "time the failure cost (median elapsed time with it minus without it):"
cost "$restarts" elapsed_s restart
;;
esac

case " $exps " in *" churn "*)
churns="$out/churn.jsonl"
: >"$churns"
echo "| ranks | PCOLL_EXCLUDE_MS | algo | ended | views at rank 0 | limit reached (ms) | steps/s | test accuracy |"
echo "|---|---|---|---|---|---|---|---|"
for np in ${CHURN_NPS:-8 16 32}; do
    for ms in ${CHURN_MS:-0 3 5 10}; do
        for algo in ${CHURN_ALGOS:-solo majority quorum:4}; do
            echo "failure-experiment: churn, $np ranks, $ms ms, $algo" >&2
            rm -f "$out/churn.json"
            ended=yes
            flags="--algo $algo"
            [ "$algo" = wagma-tau0 ] && flags="--algo wagma --sync-every 0"
            # shellcheck disable=SC2086
            timeout "${CHURN_TIMEOUT_S:-120}" $MPIRUN -x PCOLL_EXCLUDE_MS="$ms" -x PCOLL_PARTIAL_SHM_BYTES=0 \
                -x PCOLL_LOG_LEVEL=info -np "$np" "$train" $flags --epochs 1 --train-limit 8000 \
                --json "$out/churn.json" >"$out/run.log" 2>&1 || ended=no
            [ -s "$out/churn.json" ] || ended=no
            views=$(grep -c 'pcoll\[0\] info: partial ch[0-9]*: view ' "$out/run.log" || true)
            limit=$(grep -o 'the limit is now [0-9]*' "$out/run.log" | tail -1 | awk '{ print $5 }')
            rate=- acc=-
            if [ "$ended" = yes ]; then
                rate=$(grep -o '"steps_per_s": *[0-9.e+-]*' "$out/churn.json" | awk -F: '{ printf "%.1f", $2 }')
                acc=$(grep -o '"test_accuracy": *[0-9.e+-]*' "$out/churn.json" | awk -F: '{ printf "%.4f", $2 }')
            fi
            echo "{\"np\": $np, \"exclude_ms\": $ms, \"algo\": \"$algo\", \"ended\": \"$ended\", \"views\": $views, \"limit_ms\": ${limit:-$ms}, \"steps_per_s\": \"$rate\", \"test_accuracy\": \"$acc\"}" >>"$churns"
            echo "| $np | $ms | $algo | $ended | $views | ${limit:-$ms} | $rate | $acc |"
        done
    done
done
rm -f "$out/churn.json"
echo ;;
esac
