# Helpers shared by the scripts; sourced, not run:
#   . "$(dirname "$0")/lib.sh"
# The JSON they read is the tools' (pcoll-bench, pcoll-train, bench_step.py):
# one flat object per line, numbers, strings and null.

# json_field KEY [FILE...]: KEY's value in each line that has it, one per
# line (strings without their quotes, null as null)
json_field() {
    _key=$1
    shift
    sed -n "s/.*\"$_key\": *\(\"[^\"]*\"\|[^,}]*\).*/\1/p" "$@" | tr -d '"'
}

# The awk functions behind median and medians: field(line, key) as
# json_field; med(list) the median of the numbers in a space-separated list,
# null and inf counting as infinite, "-" if there are none or it is infinite.
PC_AWK_LIB='
function field(line, key,    m) {
    if (match(line, "\"" key "\": *(\"[^\"]*\"|[^,}]*)")) {
        m = substr(line, RSTART, RLENGTH); sub(/^"[^"]*": */, "", m); gsub(/"/, "", m); return m
    }
    return ""
}
function med(list,    n, a, x, i, j, t, k, m) {
    n = split(list, a, " "); k = 0
    for (i = 1; i <= n; i++) {
        if (a[i] == "null" || a[i] == "inf") x[++k] = 1e308 * 10
        else if (a[i] ~ /^[-+]?[0-9.]+([eE][-+]?[0-9]+)?$/) x[++k] = a[i] + 0
    }
    if (k == 0) return "-"
    for (i = 2; i <= k; i++) { t = x[i]; for (j = i - 1; j >= 1 && x[j] > t; j--) x[j + 1] = x[j]; x[j + 1] = t }
    m = k % 2 ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
    return m > 1e300 ? "-" : m
}'

# median: of the numbers on stdin, one per line (as med above)
median() {
    awk "$PC_AWK_LIB"'{ all = all " " $1 } END { print med(all) }'
}

# medians FILE "KEYS" "FIELDS": FILE's lines grouped by the values of KEYS;
# per group, in the order the groups first came: the keys' values, then the
# median of each field (%.6g), space-separated
medians() {
    awk -v keys="$2" -v fields="$3" "$PC_AWK_LIB"'
    BEGIN { nk = split(keys, K, " "); nf = split(fields, F, " ") }
    { g = ""; for (i = 1; i <= nk; i++) g = g field($0, K[i]) " "
      if (!(g in seen)) { seen[g] = 1; order[++ng] = g }
      for (i = 1; i <= nf; i++) v[g, i] = v[g, i] " " field($0, F[i]) }
    END { for (o = 1; o <= ng; o++) {
              g = order[o]; line = g
              for (i = 1; i <= nf; i++) { m = med(v[g, i]); line = line (m == "-" ? " -" : sprintf(" %.6g", m)) }
              sub(/  /, " ", line); print line } }' "$1"
}

# compare_medians OLD NEW "KEYS" "FIELDS": one markdown row per group of
# OLD: | keys | each field's median in OLD | ... in NEW |
compare_medians() {
    medians "$1" "$3" "$4" >"$1.medians"
    medians "$2" "$3" "$4" >"$2.medians"
    awk -v nk="$(echo "$3" | wc -w)" '
        NR == FNR { k = ""; for (i = 1; i <= nk; i++) k = k $i " "; rest = ""
                    for (i = nk + 1; i <= NF; i++) rest = rest " | " $i; new[k] = rest; next }
        { k = ""; row = "|"; for (i = 1; i <= nk; i++) { k = k $i " "; row = row " " $i " |" }
          for (i = nk + 1; i <= NF; i++) row = row " " $i " |"
          print row substr((k in new ? new[k] : " | -"), 3) " |" }' "$2.medians" "$1.medians"
    rm -f "$1.medians" "$2.medians"
}
