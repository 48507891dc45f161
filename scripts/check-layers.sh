#!/bin/sh
# The include graph of src/ runs one way (docs/design.md, section 1):
#   util < engine < algo < core < partial, preduce, groups, fusion
# A file may include files of its own layer or a lower one, never a higher
# one; src/groups (pure decision logic: who reduces with whom) and the pure
# part of src/fusion (costmodel.c, planner.c: the cost model and the merge
# planner) and partial/park_ledger (the leader's count of blocked calls)
# include only util and themselves; and the modules of src/partial (a .c
# with its .h) include each other without a cycle.  Prints the graph's
# violations; exit 1 if there are any.
#   scripts/check-layers.sh [source dir]          (default: the repository's src/)
#   scripts/check-layers.sh --graph [source dir]  the house drawn from the code:
#       per folder, its files and lines, and the folders it includes (how
#       many #include lines), lowest layer first
set -eu
graph=0
if [ "${1:-}" = --graph ]; then
    graph=1
    shift
fi
src=${1:-$(dirname "$0")/../src}
cd "$src"

# every edge "from to": files relative to src/, includes resolved
edges() {
for f in */*.c */*.h; do
    dir=${f%%/*}
    sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | while read -r inc; do
        case $inc in
            ../*) to=${inc#../} ;;
            */*) to=$inc ;;
            *) to=$dir/$inc ;;
        esac
        [ "$inc" = pcoll.h ] && continue
        echo "$f $to"
    done
done
}

if [ $graph -eq 1 ]; then
    for d in util engine algo core groups fusion partial preduce; do
        [ -d "$d" ] || continue
        files=$(ls "$d"/*.c "$d"/*.h 2>/dev/null | wc -l)
        lines=$(cat "$d"/*.c "$d"/*.h 2>/dev/null | wc -l)
        uses=$(edges | awk -v d="$d" '{ a = $1; b = $2; sub(/\/.*/, "", a); sub(/\/.*/, "", b)
                                        if (a == d && b != d) n[b]++ }
                                      END { for (b in n) printf "%s(%d) ", b, n[b] }')
        printf "%-8s %3d files %6d lines   includes: %s\n" "$d" "$files" "$lines" "${uses:-nothing}"
    done
    exit 0
fi

edges | awk '
function layer(path,    d) {
    d = path; sub(/\/.*/, "", d)
    if (d == "util") return 0; if (d == "engine") return 1; if (d == "algo") return 2
    if (d == "core") return 3; if (d == "partial" || d == "groups" || d == "preduce" || d == "fusion") return 4
    return -1
}
function module(path,    m) { m = path; sub(/\.[ch]$/, "", m); return m }
{
    from = $1; to = $2; edges++
    if (layer(to) < 0) { printf "unknown include: %s includes %s\n", from, to; bad++; next }
    if (layer(to) > layer(from)) { printf "layer violation: %s includes %s\n", from, to; bad++ }
    else if (from ~ /^groups\// && to !~ /^(groups|util)\//) { printf "groups/ is pure: %s includes %s\n", from, to; bad++ }
    else if (from ~ /^fusion\/(costmodel|planner)\./ && to !~ /^(fusion\/(costmodel|planner)\.|util\/)/) {
        printf "the fusion planner is pure: %s includes %s\n", from, to; bad++ }
    else if (from ~ /^partial\/park_ledger\./ && to !~ /^(partial\/park_ledger\.|util\/)/) {
        printf "the park ledger is pure: %s includes %s\n", from, to; bad++ }
    if (layer(from) == 4 && layer(to) == 4 && module(from) != module(to)) {
        a = module(from); b = module(to)
        if (!((a, b) in adj)) { adj[a, b] = 1; succ[a] = succ[a] " " b }
        mods[a] = 1; mods[b] = 1
    }
}
function visit(m,    n, s, i) {
    color[m] = 1
    n = split(succ[m], s, " ")
    for (i = 1; i <= n; i++) {
        if (color[s[i]] == 1) { printf "cycle in src/partial: %s -> %s\n", m, s[i]; cycles++ }
        else if (color[s[i]] == 0) visit(s[i])
    }
    color[m] = 2
}
END {
    for (m in mods) color[m] = 0
    for (m in mods) if (color[m] == 0) visit(m)
    printf "check-layers: %d includes checked, %d layer violations, %d cycles among src/partial modules\n", edges, bad, cycles
    exit (bad + cycles) ? 1 : 0
}'
