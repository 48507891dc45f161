#!/bin/sh
# A rank killed with SIGKILL mid-run: every other rank must fail (a timeout
# or an MPI error naming the dead rank) and nobody may hang.  Open MPI is
# told not to kill the job when a process dies, so that pcoll's behaviour is
# what is tested; `timeout` turns a hang into a failure.
#   kill_test.sh <test_timeout binary> <mode: kill|kill-partial> <np> <mpiexec and its flags...>
set -u
exe=$1 mode=$2 np=$3
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# (mpirun's own status is the victim's, 137; only timeout's 124 means a hang)
timeout 120 "$@" --mca orte_abort_on_non_zero_status 0 -np "$np" "$exe" "$mode" >"$out" 2>&1
rc=$?
cat "$out"
if [ $rc -eq 124 ]; then
    echo "kill_test: FAILED: the job hung (killed by timeout, status $rc)"
    exit 1
fi
survivors=$(grep -c '^SURVIVOR' "$out")
named=$(grep '^SURVIVOR' "$out" | grep -c 'NAMES-VICTIM')
failed=$(grep '^SURVIVOR' "$out" | grep -c 'returned PCOLL_ERR_\(TIMEOUT\|MPI\)')
want=$((np - 1))
if [ "$survivors" -ne "$want" ] || [ "$failed" -ne "$want" ] || [ "$named" -ne "$want" ]; then
    echo "kill_test: FAILED: $survivors of $want survivors reported, $failed with a timeout or MPI error, $named naming rank 1"
    exit 1
fi
echo "kill_test: passed: all $want survivors failed with an error naming the killed rank, no hang"
