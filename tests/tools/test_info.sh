#!/bin/sh
# pcoll-info: it prints the build and every variable of the library's table;
# the README's table of variables is its --markdown output, word for word;
# a value from the environment is shown normalized, a malformed one named.
#   test_info.sh <pcoll-info> <README.md>
set -eu
info=$1 readme=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$info" >"$out"
grep -q '^pcoll [0-9]' "$out" || { cat "$out"; echo "test_info: no version line"; exit 1; }
grep -q '^  MPI  ' "$out" || { echo "test_info: no MPI line"; exit 1; }
grep -q 'partial kinds *solo, majority, quorum, group' "$out" || { echo "test_info: no partial kinds"; exit 1; }
n=$("$info" --json | grep -c '"name":"PCOLL_')
[ "$n" -ge 10 ] || { echo "test_info: only $n variables"; exit 1; }
# the README's block between the markers is the --markdown output
awk '/<!-- pcoll-info --markdown/ {on = 1; next} /<!-- end of pcoll-info --markdown -->/ {on = 0} on' "$readme" >"$out.readme"
"$info" --markdown >"$out.info"
if ! cmp -s "$out.readme" "$out.info"; then
    diff "$out.readme" "$out.info" || true
    rm -f "$out.readme" "$out.info"
    echo "test_info: README.md's table of variables is not pcoll-info --markdown (regenerate it)"
    exit 1
fi
rm -f "$out.readme" "$out.info"
# values from the environment
PCOLL_PARTIAL_SHM_BYTES=4K "$info" --json | grep -q '"name":"PCOLL_PARTIAL_SHM_BYTES","value":"4096"' \
    || { echo "test_info: 4K not shown as 4096"; exit 1; }
PCOLL_TIMEOUT_S=soon "$info" | grep -q '^PCOLL_TIMEOUT_S *invalid (pcoll_config_get: PCOLL_TIMEOUT_S="soon"' \
    || { echo "test_info: a malformed value is not named"; exit 1; }
"$info" --bogus 2>/dev/null && { echo "test_info: a bad flag was accepted"; exit 1; }
echo "test_info: passed ($n variables; the README agrees)"
