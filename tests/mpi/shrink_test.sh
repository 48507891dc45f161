#!/bin/sh
# A rank killed with SIGKILL: every survivor must shrink to the others and
# go on (test_shrink kill says SHRUNK), nobody may hang.  Open MPI is told
# not to end the job when a process dies; `timeout` turns a hang into a
# failure.
#   shrink_test.sh <test_shrink binary> <np> <mpiexec and its flags...>
set -u
exe=$1 np=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
timeout 120 "$@" --mca orte_abort_on_non_zero_status 0 -np "$np" "$exe" kill >"$out" 2>&1
rc=$?
cat "$out"
if [ $rc -eq 124 ]; then
    echo "shrink_test: FAILED: the job hung (killed by timeout, status $rc)"
    exit 1
fi
want=$((np - 1))
# count the reports, not the lines: mpirun may join two ranks' lines into one
shrunk=$(grep -o "SHRUNK [0-9]*: $want survivors" "$out" | wc -l)
if [ "$shrunk" -ne "$want" ]; then
    echo "shrink_test: FAILED: $shrunk of $want survivors went on with $want ranks"
    exit 1
fi
echo "shrink_test: passed: all $want survivors shrank to the others and went on"
