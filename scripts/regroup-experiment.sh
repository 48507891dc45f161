#!/bin/sh
# Whether the live ranks can go on without a SIGSTOPped rank on a
# communicator of their own and take it back after SIGCONT, with this
# machine's MPI: the mechanism the message data phase's exclusion is to use
# (docs/plan-failures.md, section 2.2).  scripts/regroup-experiment.c, plain
# MPI, built here with mpicc: per message size and transport, P ranks run
# point-to-point rounds on a communicator A; rank 1 stops itself inside one;
# the others give the round up after GIVEUP_MS (receives cancelled, sends
# let go), make B = MPI_Comm_create_group(A, the live ranks), run
# allreduces on it; rank 1, back after STOP_MS, is told it was left out, and
# everyone makes C over all ranks and runs rounds with the tags of the round
# given up on A.  Prints each rank's figures and whether every sum was right.
#
#   scripts/regroup-experiment.sh [P ...]     (default: 4 8)
#
# Environment: SIZES ("1048576 1024": bytes per round), TRANSPORTS ("shm
# tcp": Open MPI's shared-memory BTL, or --mca btl tcp,self), STOP_MS
# (2000), GIVEUP_MS (500), MPIRUN (mpirun --oversubscribe --bind-to none,
# and --allow-run-as-root as root).  About a minute.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
ps=${*:-4 8}
if [ -z "${MPIRUN:-}" ]; then
    MPIRUN="mpirun --oversubscribe --bind-to none"
    [ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
fi
command -v mpicc >/dev/null || { echo "regroup-experiment.sh: mpicc not found (scripts/install-deps.sh)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mpicc -O2 -Wall -o "$dir/regroup" "$root/scripts/regroup-experiment.c"
status=0
for p in $ps; do
    for bytes in ${SIZES:-1048576 1024}; do
        for tr in ${TRANSPORTS:-shm tcp}; do
            btl=""
            [ "$tr" = tcp ] && btl="--mca btl tcp,self"
            echo "== P=$p, $bytes bytes, $tr"
            # shellcheck disable=SC2086
            timeout 120 $MPIRUN $btl -np "$p" "$dir/regroup" "$bytes" "${STOP_MS:-2000}" "${GIVEUP_MS:-500}" \
                >"$dir/out" 2>&1 || status=1
            grep -v "stopping now\|continued" "$dir/out" | sort
        done
    done
done
exit $status
