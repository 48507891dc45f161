#!/bin/sh
# An emulated multi-node cluster on one machine: every node is a network
# namespace with its own hostname (a UTS namespace per process tree), linked
# to a switch namespace by a veth pair rate-limited in both directions.
#
#   switch namespace PFX-sw:  bridge br0 --- p0 p1 ... (tbf each: to the node)
#   node namespaces PFX-nI:   eth0 10.99.0.(I+1)/24     (tbf: from the node)
#
# Open MPI runs across them: mpirun starts in node 0, and an rsh agent
# enters a node's namespace (and a fresh UTS namespace named after it) to
# start its daemon; TCP between nodes on the cluster's subnet, shared memory
# inside a node.  Nothing outside the namespaces is touched: no address on
# the host, no change to /etc/hosts; the cluster's state is a directory
# under /run, removed by `down`.
#
#   scripts/cluster.sh [--prefix P] up N [--ranks-per-node K] [--rate R] [--latency L]
#   scripts/cluster.sh [--prefix P] run [--mca K V]... [-x VAR]... -np NP [--] CMD [ARGS...]
#   scripts/cluster.sh [--prefix P] status
#   scripts/cluster.sh [--prefix P] down
#
#   --prefix P          name prefix of the namespaces (default pcl): two
#                       clusters with different prefixes do not meet
#   --ranks-per-node K  slots per node for `run` (default 2)
#   --rate R            link rate, tc units: 1gbit, 100mbit, ... (default 1gbit)
#   --latency L         one-way delay, e.g. 100us, if the kernel has netem;
#                       otherwise refused with the reason (default none)
#   --mca K V, -x VAR   passed to mpirun (an MCA parameter; an environment
#                       variable exported to every rank)
#
# Needs root, ip (iproute2), tc, unshare and Open MPI's mpirun.
set -eu

prefix=pcl
prog=cluster.sh
die() { echo "$prog: $*" >&2; exit 1; }
# the usage is the comment's block from "scripts/cluster.sh [" to the blank line before "Needs root"
usage() { sed -n '/^#   scripts\/cluster.sh \[/,/^# Needs root/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }

while [ $# -gt 0 ]; do
    case $1 in
        --prefix) [ $# -ge 2 ] || usage; prefix=$2; shift 2 ;;
        -h | --help) sed -n '2,/^# Needs root/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done
case $prefix in '' | *[!a-z0-9]* | ?????????*) die "--prefix \"$prefix\": 1 to 8 lower-case letters or digits" ;; esac
[ $# -ge 1 ] || usage
cmd=$1
shift

state=/run/pcoll-cluster-$prefix
sw=$prefix-sw
subnet=10.99.0

need_root() {
    [ "$(id -u)" -eq 0 ] || die "$cmd needs root (network namespaces); run it as root"
    for t in ip tc unshare; do command -v $t >/dev/null 2>&1 || die "$t not found (Debian packages iproute2, util-linux)"; done
}

ns_exists() { ip netns list 2>/dev/null | awk '{ print $1 }' | grep -qx "$1"; }

# tbf needs a bucket of at least a timer tick's worth of bytes: 4 ms of the
# rate, at least 32 KiB
burst_of() {
    awk -v r="$1" 'BEGIN {
        n = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u)
        m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : (u == "bit" || u == "") ? 1 : -1
        if (n <= 0 || m < 0) { print "bad"; exit }
        b = n * m / 8 * 0.004; if (b < 32768) b = 32768
        printf "%d", b }'
}

shape() { # namespace device rate latency
    ip netns exec "$1" tc qdisc add dev "$2" root handle 1: tbf rate "$3" burst "$(burst_of "$3")" latency 50ms
    if [ -n "$4" ]; then
        ip netns exec "$1" tc qdisc add dev "$2" parent 1:1 handle 10: netem delay "$4"
    fi
}

cmd_up() {
    [ $# -ge 1 ] || usage
    n=$1
    shift
    rpn=2 rate=1gbit latency=
    while [ $# -gt 0 ]; do
        case $1 in
            --ranks-per-node) [ $# -ge 2 ] || usage; rpn=$2; shift 2 ;;
            --rate) [ $# -ge 2 ] || usage; rate=$2; shift 2 ;;
            --latency) [ $# -ge 2 ] || usage; latency=$2; shift 2 ;;
            *) die "up: unknown flag \"$1\"" ;;
        esac
    done
    case $n in '' | *[!0-9]*) die "up: N \"$n\" is not a whole number" ;; esac
    [ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "up: N = $n is not in 1..64"
    case $rpn in '' | *[!0-9]* | 0) die "--ranks-per-node \"$rpn\" is not a whole number >= 1" ;; esac
    [ "$(burst_of "$rate")" != bad ] || die "--rate \"$rate\": expected a number with bit, kbit, mbit or gbit"
    need_root
    [ ! -e "$state" ] && ! ns_exists "$sw" || die "a cluster \"$prefix\" exists: $0 --prefix $prefix down first"
    if [ -n "$latency" ]; then
        # does the kernel offer netem?  try it on a throwaway namespace
        probe=$prefix-probe
        ip netns add "$probe"
        if ! ip netns exec "$probe" tc qdisc add dev lo root netem delay "$latency" 2>/dev/null; then
            ip netns del "$probe"
            die "--latency: this kernel has no netem qdisc (tc qdisc ... netem); only the rate (tbf) can be emulated"
        fi
        ip netns del "$probe"
    fi
    mkdir -p "$state"
    # anything that fails from here on leaves a cluster that `down` removes
    trap 'echo "$prog: up failed; removing what was made" >&2; cmd_down >/dev/null 2>&1 || true' EXIT
    ip netns add "$sw"
    ip netns exec "$sw" ip link set lo up
    ip netns exec "$sw" ip link add br0 type bridge
    ip netns exec "$sw" ip link set br0 up
    i=0
    while [ "$i" -lt "$n" ]; do
        node=$prefix-n$i
        ip netns add "$node"
        ip netns exec "$node" ip link set lo up
        ip link add "$prefix-v$i" netns "$node" type veth peer name "p$i" netns "$sw"
        ip netns exec "$node" ip link set "$prefix-v$i" name eth0
        ip netns exec "$node" ip addr add "$subnet.$((i + 1))/24" dev eth0
        ip netns exec "$node" ip link set eth0 up
        ip netns exec "$sw" ip link set "p$i" master br0
        ip netns exec "$sw" ip link set "p$i" up
        shape "$node" eth0 "$rate" "$latency"
        shape "$sw" "p$i" "$rate" "$latency"
        i=$((i + 1))
    done
    cat >"$state/env" <<EOF
nodes=$n
rpn=$rpn
rate=$rate
latency=$latency
EOF
    # the rsh agent Open MPI uses: "agent HOST COMMAND..." with HOST a node's
    # address; the command runs as a remote shell would run it
    cat >"$state/agent" <<EOF
#!/bin/sh
host=\$1
shift
i=\${host##*.}
exec ip netns exec "$prefix-n\$((i - 1))" unshare --uts sh -c "hostname $prefix-n\$((i - 1)); \$*"
EOF
    chmod +x "$state/agent"
    trap - EXIT
    echo "cluster $prefix: $n nodes ($prefix-n0 .. $prefix-n$((n - 1)), $subnet.1 .. $subnet.$n), links $rate" \
        "each way (tbf)${latency:+, delay $latency (netem)}, $rpn ranks per node"
}

cmd_down() {
    need_root
    for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
        case $ns in "$prefix"-n[0-9]* | "$sw" | "$prefix"-probe) ip netns del "$ns" ;; esac
    done
    rm -rf "$state"
    echo "cluster $prefix: removed"
}

cmd_status() {
    [ -f "$state/env" ] || { echo "cluster $prefix: not up"; return 0; }
    . "$state/env"
    echo "cluster $prefix: $nodes nodes, $rpn ranks per node, links $rate${latency:+, delay $latency}"
    i=0
    while [ "$i" -lt "$nodes" ]; do
        q=$(ip netns exec "$prefix-n$i" tc qdisc show dev eth0 2>/dev/null | head -n 1)
        echo "  $prefix-n$i $subnet.$((i + 1))  ${q:-missing}"
        i=$((i + 1))
    done
}

cmd_run() {
    [ -f "$state/env" ] || die "run: cluster \"$prefix\" is not up ($0 --prefix $prefix up N)"
    need_root
    . "$state/env"
    np=
    extra=
    while [ $# -gt 0 ]; do
        case $1 in
            -np | -n) [ $# -ge 2 ] || usage; np=$2; shift 2 ;;
            --mca | -x)
                n=2
                [ "$1" = -x ] || n=3
                [ $# -ge $n ] || usage
                case "$2${3-}" in *[[:space:]\*?[]*) die "run: $1 $2: no blanks or wildcards, please" ;; esac
                if [ $n -eq 3 ]; then extra="$extra --mca $2 $3"; else extra="$extra -x $2"; fi
                shift $n
                ;;
            --) shift; break ;;
            *) break ;;
        esac
    done
    [ $# -ge 1 ] || die "run: no command"
    case $np in '' | *[!0-9]* | 0) die "run: -np \"$np\" is not a whole number >= 1" ;; esac
    [ "$np" -le $((nodes * rpn)) ] || die "run: -np $np is more than $nodes nodes x $rpn ranks"
    hosts=
    i=0
    while [ "$i" -lt "$nodes" ]; do
        hosts="$hosts${hosts:+,}$subnet.$((i + 1)):$rpn"
        i=$((i + 1))
    done
    mpirun=$(command -v mpirun) || die "mpirun not found (Debian package openmpi-bin)"
    # words of CMD survive as the arguments of sh -c
    ip netns exec "$prefix-n0" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$prefix-n0" \
        env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        "$mpirun" --oversubscribe --bind-to none -np "$np" --host "$hosts" --map-by slot \
        --mca plm_rsh_agent "$state/agent" --mca btl self,vader,tcp --mca mpi_yield_when_idle 1 \
        --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" $extra \
        "$@"
}

case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    status) cmd_status ;;
    run) cmd_run "$@" ;;
    *) usage ;;
esac
