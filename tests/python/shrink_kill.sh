#!/bin/sh
# Context.shrink after a SIGKILL (shrink_kill.py): every survivor must go on
# with the others and say so; nobody may hang.
#   shrink_kill.sh <python3> <script dir> <np> <mpiexec and its flags...>
set -u
py=$1 dir=$2 np=$3
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
timeout 200 "$@" --mca orte_abort_on_non_zero_status 0 -x PYTHONPATH -x PYTHONDONTWRITEBYTECODE -np "$np" \
    "$py" "$dir/shrink_kill.py" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 124 ] && { echo "shrink_kill: FAILED: the job hung"; exit 1; }
want=$((np - 1))
# count the reports, not the lines: mpirun may join two ranks' lines into one
got=$(grep -o "SHRUNK [0-9]*: $want survivors" "$out" | wc -l)
[ "$got" -eq "$want" ] || { echo "shrink_kill: FAILED: $got of $want survivors went on"; exit 1; }
echo "shrink_kill: passed: $want survivors went on"
