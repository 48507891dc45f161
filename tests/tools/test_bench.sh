#!/bin/sh
# pcoll-bench smoke test: every subcommand runs at 4 ranks on tiny sizes and
# prints the JSON fields it documents, with values that make sense; bad flags
# are refused with exit code 2 and a message naming the flag.
#   test_bench.sh PCOLL_BENCH MPIEXEC [MPIEXEC_FLAGS...]
set -eu
bench=$1
shift
mpirun="$*"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() {
    echo "test_bench: FAILED: $*" >&2
    exit 1
}

# "key": number of one JSON line (empty if absent or null)
field() { printf '%s\n' "$1" | sed -n "s/.*\"$2\":\(-\{0,1\}[0-9.e+-]*\).*/\1/p"; }
# the JSON line of a mode and size
line_of() { grep "\"mode\":\"$2\"" "$1" | grep "\"bytes\":$3," || true; }

# ---- allreduce: one line per size, results verified by the bench itself ----
$mpirun -n 4 "$bench" allreduce --json --min-bytes 8 --max-bytes 64K --iters 5 --plan >"$out/ar" ||
    fail "allreduce exited with $?"
[ "$(grep -c '"bench":"allreduce"' "$out/ar")" -eq 14 ] || fail "allreduce: expected 14 sizes (8 B to 64 KiB)"
for key in pcoll_us mpi_us ratio plan_us plan_ratio; do
    [ -n "$(field "$(head -n 1 "$out/ar")" $key)" ] || fail "allreduce: no $key in $(head -n 1 "$out/ar")"
done
# the link limit: one node here, so no link to cross (limit 0)
$mpirun -n 2 "$bench" allreduce --json --min-bytes 1K --max-bytes 1K --iters 2 --link-rate 100mbit >"$out/lr" ||
    fail "allreduce --link-rate exited with $?"
[ "$(field "$(cat "$out/lr")" nodes)" = 1 ] || fail "allreduce --link-rate: nodes is not 1: $(cat "$out/lr")"
[ "$(field "$(cat "$out/lr")" link_limit_us)" = 0 ] || fail "allreduce --link-rate: limit not 0 on one node"
if $mpirun -n 2 "$bench" allreduce --link-rate 1gbt >"$out/bad" 2>&1; then fail "--link-rate 1gbt accepted"; fi
grep -q -- "--link-rate" "$out/bad" || fail "--link-rate 1gbt: the message does not name the flag"

# ---- allreduce --tune: this rank count's rows written, other rows kept, the library follows them ----
# "key": string of one JSON line
sfield() { printf '%s\n' "$1" | sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p"; }
printf '# kept\n2 1 4K recdbl\n4 1 8 direct\n' >"$out/tune"
$mpirun -n 4 "$bench" allreduce --tune "$out/tune" --json --min-bytes 8 --max-bytes 4K --iters 5 >"$out/tj" ||
    fail "allreduce --tune exited with $?"
[ "$(grep -c '"bench":"tune"' "$out/tj")" -eq 10 ] || fail "tune: expected 10 sizes (8 B to 4 KiB)"
grep -q '^# kept$' "$out/tune" && grep -q '^2 1 4K recdbl$' "$out/tune" || fail "tune: other rows were not kept"
if grep -q '^4 1 8 direct$' "$out/tune"; then fail "tune: the old row of 4 ranks was kept"; fi
[ "$(grep '^4 1 ' "$out/tune" | tail -n 1 | cut -d' ' -f3)" = 4096 ] || fail "tune: the last row is not up to 4096"
$mpirun -n 4 -x PCOLL_TUNING_FILE="$out/tune" "$bench" allreduce --json --min-bytes 8 --max-bytes 4K --iters 2 \
    >"$out/ta" || fail "allreduce with PCOLL_TUNING_FILE exited with $?"
b=8
while [ $b -le 4096 ]; do
    won=$(sfield "$(grep "\"bytes\":$b," "$out/tj")" algo)
    took=$(sfield "$(grep "\"bytes\":$b," "$out/ta")" algo)
    [ -n "$won" ] && [ "$won" = "$took" ] || fail "tune: at $b B the table says '$won', the library took '$took'"
    b=$((b * 2))
done
if $mpirun -n 2 -x PCOLL_TUNING_FILE="$out/tune" "$bench" allreduce --tune "$out/t2" >"$out/bad" 2>&1; then
    fail "--tune with PCOLL_TUNING_FILE set was accepted"
fi
grep -q PCOLL_TUNING_FILE "$out/bad" || fail "--tune with PCOLL_TUNING_FILE set: the message does not name it"
printf '2 1 4K fastest\n' >"$out/badtable"
if $mpirun -n 2 -x PCOLL_TUNING_FILE="$out/badtable" "$bench" allreduce --max-bytes 8 >"$out/bad" 2>&1; then
    fail "a malformed tuning table was accepted"
fi
grep -q 'line 1' "$out/bad" && grep -q 'fastest' "$out/bad" || fail "malformed table: $(cat "$out/bad")"

# ---- skew and group: the modes asked for, at every size ----
$mpirun -n 4 "$bench" skew --json --max-bytes 512 --iters 4 --skew-us 200 >"$out/skew" || fail "skew exited with $?"
[ "$(grep -c '"bench":"skew"' "$out/skew")" -eq 6 ] || fail "skew: expected 3 modes x 2 sizes"
for m in mpi solo majority; do
    l=$(line_of "$out/skew" $m 64)
    [ -n "$l" ] || fail "skew: no line for $m at 64 B"
    nap=$(field "$l" nap)
    awk -v n="$nap" 'BEGIN { exit !(n > 0 && n <= 4) }' || fail "skew: $m NAP $nap is not in (0, 4]"
done

# messages only: sync's blocking allreduce would otherwise run in node-shared memory and send nothing
$mpirun -n 4 -x PCOLL_SHM_ALLREDUCE_BYTES=0 "$bench" group --json --max-bytes 512 --iters 16 --skew-us 200 \
    --modes mpi,sync,solo,group:2 --data-phase messages >"$out/group" || fail "group exited with $?"
[ "$(grep -c '"bench":"group"' "$out/group")" -eq 8 ] || fail "group: expected 4 modes x 2 sizes"
for b in 64 512; do
    g=$(line_of "$out/group" group:2 $b)
    s=$(line_of "$out/group" sync $b)
    [ -n "$g" ] && [ -n "$s" ] || fail "group: no group:2 or sync line at $b B"
    [ "$(field "$g" members)" = 2 ] || fail "group:2 rounds summed $(field "$g" members) ranks, not 2"
    [ "$(field "$s" members)" = 4 ] || fail "sync summed $(field "$s" members) ranks, not 4"
    gs=$(field "$g" sent_bytes_per_round)
    ss=$(field "$s" sent_bytes_per_round)
    # a group of 2 exchanges the vector (+ its trailer) once per round, all 4 ranks at least twice as
    # much (the bytes sent while the timed calls ran, over the rounds they delivered: a round at
    # either end of the window may fall out of one count and not the other)
    awk -v g="$gs" -v s="$ss" -v b=$b 'BEGIN { exit !(g >= 0.75 * b && g < s) }' ||
        fail "group: $b B: group:2 sent $gs bytes per round, sync $ss"
    printf '%s\n' "$g" | grep -q '"latency_us_by_rank":\[[^]]*,[^]]*,[^]]*,[^]]*\]' ||
        fail "group: no latency of each of the 4 ranks in $g"
    printf '%s\n' "$(line_of "$out/group" mpi $b)" | grep -q '"sent_bytes_per_round":null' ||
        fail "group: MPI_Allreduce's bytes are not visible, yet a figure was printed"
done
$mpirun -n 4 "$bench" group --max-bytes 64 --iters 2 --skew-us 100 >"$out/group.txt" || fail "group (text) exited"
grep -q "latency per rank" "$out/group.txt" || fail "group: no per-rank table in the text output"

# ---- objects and idle ----
$mpirun -n 4 "$bench" objects --json --counts 2,8 --calls 40 >"$out/obj" || fail "objects exited with $?"
[ "$(grep -c '"bench":"objects"' "$out/obj")" -eq 4 ] || fail "objects: expected 2 counts x 2 kinds"
$mpirun -n 2 "$bench" idle --json --seconds 1 >"$out/idle" || fail "idle exited with $?"
[ -n "$(field "$(cat "$out/idle")" cpu_pct_max)" ] || fail "idle: no cpu_pct_max"

# ---- preduce: a line per policy and one for MPI_Allreduce, with the figures documented ----
$mpirun -n 4 "$bench" preduce --json --calls 50 --policies fifo:2:dyn,ripples:random:2,ripples:smart:2,ripples:static \
    >"$out/pr" || fail "preduce exited with $?"
[ "$(grep -c '"bench":"preduce"' "$out/pr")" -eq 5 ] || fail "preduce: expected MPI_Allreduce + 4 policies"
for p in fifo:2:dyn ripples:random:2 ripples:smart:2; do
    l=$(grep "\"policy\":\"$p\"" "$out/pr" || true)
    [ -n "$l" ] || fail "preduce: no line for $p"
    g=$(field "$l" groups)
    m=$(field "$l" mean_group_size)
    # counted at the controller (rank 0) until its own 50th call: at least
    # its 50 groups, at most one per call of the 4 ranks; calls per group
    # (requests / groups) about S = 2: a division of 3 idle ranks makes a
    # group of 3, and requests still queued have no group yet
    awk -v g="$g" -v m="$m" 'BEGIN { exit !(g >= 50 && g <= 200 && m >= 1 && m <= 3) }' ||
        fail "preduce: $p formed $g groups of $m ranks on average for 200 calls"
    for key in groups_per_s steps_per_s vs_mpi wait_us_median wait_us_p99 ctl_busy_pct ctl_us_per_group; do
        [ -n "$(field "$l" $key)" ] || fail "preduce: $p: no $key in $l"
    done
done
[ -n "$(field "$(grep '"policy":"ripples:static"' "$out/pr")" steps_per_s)" ] || fail "preduce: static has no steps_per_s"

# ---- fusion: a line per strategy; the optimal plan is never predicted slower ----
data=$(cd "$(dirname "$0")/../../data/mgwfbp" && pwd)
$mpirun -n 2 "$bench" fusion --json --profile "$data/googlenet-k80-layers.csv" --model 633.64,0.0035 >"$out/fu" ||
    fail "fusion exited with $?"
[ "$(grep -c '"bench":"fusion"' "$out/fu")" -eq 5 ] || fail "fusion: expected 5 strategies"
opt=$(field "$(grep '"strategy":"optimal"' "$out/fu")" predicted_iter_us)
for s in wfbp single mgwfbp fixed:26214400; do
    l=$(grep "\"strategy\":\"$s\"" "$out/fu" || true)
    [ -n "$l" ] || fail "fusion: no line for $s"
    awk -v o="$opt" -v t="$(field "$l" predicted_iter_us)" 'BEGIN { exit !(o > 0 && o <= t) }' ||
        fail "fusion: optimal predicted $opt us, $s $(field "$l" predicted_iter_us) us"
done
# measured: a small profile, calibrated on the job
printf 'n_params,backward_us\n1000,2000\n50000,3000\n20,1000\n200000,4000\n' >"$out/prof.csv"
$mpirun -n 3 "$bench" fusion --json --profile "$out/prof.csv" --strategies wfbp,single,optimal --measure --iters 3 \
    >"$out/fm" || fail "fusion --measure exited with $?"
[ "$(grep -c '"measured_iter_us"' "$out/fm")" -eq 3 ] || fail "fusion --measure: no measured_iter_us"
for l in $(cat "$out/fm"); do
    awk -v m="$(field "$l" measured_iter_us)" 'BEGIN { exit !(m >= 15000) }' ||
        fail "fusion --measure: an iteration took $(field "$l" measured_iter_us) us, less than its 15 ms of compute (10 backward, 5 forward)"
done

# ---- bad input: exit code 2, the flag named ----
# the yardstick of the node-shared path
$mpirun -n 2 "$bench" cacheline --iters 2000 --json >"$out/cacheline" || fail "cacheline exited with $?"
l=$(grep '"bench":"cacheline"' "$out/cacheline" || true)
for k in rtt_us arrival_us budget_us; do
    v=$(field "$l" $k)
    awk -v v="$v" 'BEGIN { exit !(v > 0 && v < 1000) }' || fail "cacheline: $k is \"$v\" in: $l"
done
[ "$(field "$l" ranks)" = 2 ] || fail "cacheline: ranks in $l"

# what a timeline costs: both sides measured, its files removed afterwards
before=$(ls -d /tmp/pcoll-bench-timeline-* 2>/dev/null | wc -l)
$mpirun -n 2 "$bench" timeline --events 2000 --calls 200 --reps 2 --json >"$out/timeline" || fail "timeline exited with $?"
l=$(grep '"bench":"timeline"' "$out/timeline" || true)
for k in event_ns_on event_ns_off allreduce_us_off allreduce_us_on allreduce_ratio; do
    v=$(field "$l" $k)
    awk -v v="$v" 'BEGIN { exit !(v > 0 && v < 100000) }' || fail "timeline: $k is \"$v\" in: $l"
done
[ "$(ls -d /tmp/pcoll-bench-timeline-* 2>/dev/null | wc -l)" = "$before" ] || fail "timeline: its files were left in /tmp"

for args in "group --modes group:1" "group --data-phase shm" "skew --iters 0" "preduce --policies fifo:x" \
    "preduce --calls 0" "fusion --strategies fixed:0" "fusion --profile /nonexistent" "fusion --cost cubic" "cacheline --iters x" "timeline --bytes 3" "nosuch"; do
    set +e
    # shellcheck disable=SC2086
    $mpirun -n 2 "$bench" $args >"$out/bad" 2>&1
    rc=$?
    set -e
    [ $rc -ne 0 ] || fail "\"$args\" was accepted"
    word=$(printf '%s' "$args" | awk '{ print ($2 == "" ? $1 : $2) }')
    grep -q -- "$word" "$out/bad" || fail "\"$args\": the message does not name $word: $(cat "$out/bad")"
done
echo "test_bench: every subcommand ran; JSON fields and values as documented"
