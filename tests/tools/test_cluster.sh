#!/bin/sh
# Runs one MPI test program across an emulated cluster (scripts/cluster.sh):
# NODES namespaces with K ranks each, made for this test and removed after
# it, also when it fails or is interrupted.  Exit 77 (ctest's skip) with the
# reason where the machine cannot make namespaces (not root, no ip netns).
# The PCOLL_* variables of the environment reach every rank.
#   test_cluster.sh NODES K [-np N] PROGRAM [ARGS...]
#       runs PROGRAM on NODES x K ranks (or the first N of them)
#   test_cluster.sh NODES K --launcher PROGRAM [ARGS...]
#       runs PROGRAM ARGS... followed by the words that launch an MPI job
#       on the cluster (as an mpiexec and its flags: PROGRAM adds -np N ...)
set -eu
[ $# -ge 3 ] || { echo "usage: test_cluster.sh NODES K [-np N | --launcher] PROGRAM [ARGS...]" >&2; exit 2; }
nodes=$1 k=$2
shift 2
launcher=0 np=$((nodes * k))
case $1 in
    --launcher) launcher=1; shift ;;
    -np) np=$2; shift 2 ;;
esac
cluster=$(cd "$(dirname "$0")/../.." && pwd)/scripts/cluster.sh
skip() { echo "test_cluster: SKIPPED: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root to make network namespaces"
command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2)"
probe=tc$$p
ip netns add "$probe" 2>/dev/null || skip "ip netns add fails here (no network namespaces)"
ip netns del "$probe"
# clusters of earlier runs of this script that were killed (a ctest timeout
# kills without running the trap below): their process is gone
for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
    case $ns in
        tc[0-9]*-sw)
            pid=${ns%-sw}
            pid=${pid#tc}
            kill -0 "$pid" 2>/dev/null || "$cluster" --prefix "tc$pid" down >/dev/null 2>&1 || true
            ;;
    esac
done
prefix=tc$$
trap '"$cluster" --prefix "$prefix" down >/dev/null 2>&1 || true' EXIT INT TERM
"$cluster" --prefix "$prefix" up "$nodes" --ranks-per-node "$k" --rate 1gbit
exports=
for v in $(env | sed -n 's/^\(PCOLL_[A-Z0-9_]*\)=.*/\1/p'); do
    exports="$exports -x $v"
done
if [ $launcher -eq 1 ]; then
    # shellcheck disable=SC2086 # one word per flag
    "$@" "$cluster" --prefix "$prefix" run $exports
else
    # shellcheck disable=SC2086
    "$cluster" --prefix "$prefix" run $exports -np "$np" -- "$@"
fi
