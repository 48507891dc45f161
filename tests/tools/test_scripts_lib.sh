#!/bin/sh
# The scripts' shared helpers (scripts/lib.sh) on known JSON lines, and
# every script parses.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/scripts/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # what got wanted
    if [ "$2" != "$3" ]; then
        printf 'FAILED %s: got "%s", wanted "%s"\n' "$1" "$2" "$3"
        fail=1
    fi
}
cat >"$tmp/old.json" <<'J'
{"bench":"skew","mode":"solo","bytes":64,"us":10.5,"tag":"a b","x":null}
{"bench":"skew","mode":"solo","bytes":64,"us":12,"tag":"a b","x":3}
{"bench":"skew","mode":"solo","bytes":64,"us":11,"tag":"c","x":4}
{"bench":"skew","mode":"majority","bytes":64,"us":-2.5e-1,"x":null}
J
cat >"$tmp/new.json" <<'J'
{"mode":"majority","bytes":64,"us":7}
{"mode":"solo","bytes":64,"us":9}
J
expect "json_field string" "$(json_field tag "$tmp/old.json" | tr '\n' ';')" "a b;a b;c;"
expect "json_field number" "$(json_field us "$tmp/old.json" | tr '\n' ';')" "10.5;12;11;-2.5e-1;"
expect "json_field stdin" "$(head -1 "$tmp/old.json" | json_field bytes)" "64"
expect "json_field missing" "$(json_field nothing "$tmp/old.json")" ""
expect "median odd" "$(printf '3\n1\n2\n' | median)" "2"
expect "median even" "$(printf '4\n1\n2\n10\n' | median)" "3"
expect "median null is infinite" "$(printf 'null\n1\n5\n' | median)" "5"
expect "median infinite" "$(printf 'null\nnull\n1\n' | median)" "-"
expect "median none" "$(printf '' | median)" "-"
expect "medians" "$(medians "$tmp/old.json" "mode bytes" "us x" | tr '\n' ';')" "solo 64 11 4;majority 64 -0.25 -;"
expect "compare_medians" "$(compare_medians "$tmp/old.json" "$tmp/new.json" "mode bytes" "us" | tr '\n' ';')" \
    "| solo | 64 | 11 | 9 |;| majority | 64 | -0.25 | 7 |;"
for s in "$root"/scripts/*.sh; do
    shell=sh
    head -1 "$s" | grep -q bash && shell=bash
    $shell -n "$s" || { echo "FAILED: $s does not parse"; fail=1; }
done
[ $fail -eq 0 ] && echo "scripts/lib.sh: every helper as expected; every script parses"
exit $fail
