#!/bin/sh
# Before/after figures of two builds, measured alternately in one session:
# pcoll-bench allreduce and pcoll-bench skew at each P, REPEATS times each,
# then one table per benchmark with the medians.  Ratios are against
# MPI_Allreduce measured in the same run of the same build.
#
#   scripts/compare-builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [P ...]   (default P: 4 8 16)
#
# Environment: REPEATS (3), MAX_BYTES (allreduce sweep, 4M), SKEW_MAX (4M),
# MPIRUN (mpirun --oversubscribe --bind-to none, + --allow-run-as-root as root),
# OUT (a directory for the JSON lines, default a temporary one).
set -eu
old=$1 new=$2
shift 2
ps=${*:-4 8 16}
repeats=${REPEATS:-3}
max=${MAX_BYTES:-4M}
skew_max=${SKEW_MAX:-4M}
if [ -z "${MPIRUN:-}" ]; then
    MPIRUN="mpirun --oversubscribe --bind-to none"
    [ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
fi
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
for b in "$old" "$new"; do
    [ -x "$b/bin/pcoll-bench" ] || { echo "compare-builds: no $b/bin/pcoll-bench" >&2; exit 2; }
done

for r in $(seq 1 "$repeats"); do
    for p in $ps; do
        for tag in old new; do
            b=$old
            [ $tag = new ] && b=$new
            echo "run $r, P=$p, $tag" >&2
            $MPIRUN -np "$p" "$b/bin/pcoll-bench" allreduce --json --max-bytes "$max" >>"$out/allreduce.$tag.$p.json"
            $MPIRUN -np "$p" "$b/bin/pcoll-bench" skew --json --max-bytes "$skew_max" >>"$out/skew.$tag.$p.json"
        done
    done
done

# field "key": value of one JSON line
median_awk='
function field(line, key,    m) {
    if (match(line, "\"" key "\": *\"?[^,\"}]*")) {
        m = substr(line, RSTART, RLENGTH); sub(/^[^:]*: *"?/, "", m); return m
    }
    return ""
}
function median(list,    n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}'

echo "### pcoll-bench allreduce: median over $repeats runs of the per-run medians (us); ratio = pcoll / MPI_Allreduce of the same run"
echo
echo "| P | bytes | algo | before pcoll_us | before ratio | after pcoll_us | after ratio |"
echo "|---|---|---|---|---|---|---|"
for p in $ps; do
    awk -v P="$p" "$median_awk"'
        FNR == 1 { tag = (FILENAME ~ /\.old\./) ? "old" : "new" }
        { b = field($0, "bytes"); us[tag, b] = us[tag, b] " " field($0, "pcoll_us");
          ra[tag, b] = ra[tag, b] " " field($0, "ratio"); algo[b] = field($0, "algo"); sizes[b] = 1 }
        END { n = 0; for (b in sizes) order[++n] = b + 0
              for (i = 2; i <= n; i++) for (j = i; j > 1 && order[j-1] > order[j]; j--) { t = order[j]; order[j] = order[j-1]; order[j-1] = t }
              for (i = 1; i <= n; i++) { b = order[i]
                  printf "| %s | %d | %s | %.1f | %.2f | %.1f | %.2f |\n", P, b, algo[b], median(us["old", b]), median(ra["old", b]), median(us["new", b]), median(ra["new", b]) } }
    ' "$out/allreduce.old.$p.json" "$out/allreduce.new.$p.json"
done
echo
echo "### pcoll-bench skew (1 ms skew): median over $repeats runs; speedup = MPI_Allreduce latency / mode latency of the same run"
echo
echo "| P | mode | bytes | before latency_us | before NAP | before speedup | after latency_us | after NAP | after speedup |"
echo "|---|---|---|---|---|---|---|---|---|"
for p in $ps; do
    awk -v P="$p" "$median_awk"'
        FNR == 1 { tag = (FILENAME ~ /\.old\./) ? "old" : "new" }
        { m = field($0, "mode"); b = field($0, "bytes"); k = m SUBSEP b; keys[k] = 1
          lat[tag, k] = lat[tag, k] " " field($0, "avg_latency_us"); nap[tag, k] = nap[tag, k] " " field($0, "nap")
          s = field($0, "speedup_vs_mpi"); if (s == "") s = 1; sp[tag, k] = sp[tag, k] " " s }
        END { for (k in keys) { split(k, kk, SUBSEP)
                  printf "| %s | %s | %d | %.0f | %.2f | %.2f | %.0f | %.2f | %.2f |\n", P, kk[1], kk[2], median(lat["old", k]), median(nap["old", k]), median(sp["old", k]), median(lat["new", k]), median(nap["new", k]), median(sp["new", k]) } }
    ' "$out/skew.old.$p.json" "$out/skew.new.$p.json" | sort -t'|' -k3,3 -k4,4n
done
echo
echo "(JSON lines in $out)"
