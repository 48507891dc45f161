#!/bin/sh
# Prints the path of a Python 3 interpreter that can run pcoll's Python
# package: it imports mpi4py and numpy, and (unless --no-torch) torch.
# The first `python3` on PATH may be one that cannot import Debian's
# packages (a pyenv or venv interpreter), so candidates are tried in turn:
#   $PCOLL_PYTHON, /usr/bin/python3 (Debian's: python3-torch, python3-mpi4py),
#   then every python3 / python3.N found on PATH.
# Exit 1, naming what is missing, if none does.
#   scripts/find-python.sh              needs torch too (the examples, the tests)
#   scripts/find-python.sh --no-torch   the package alone
set -u
modules="mpi4py, numpy, torch"
[ "${1:-}" = "--no-torch" ] && modules="mpi4py, numpy"

candidates="${PCOLL_PYTHON:-} /usr/bin/python3"
old_ifs=$IFS
IFS=:
for dir in $PATH; do
    for exe in "$dir"/python3 "$dir"/python3.[0-9] "$dir"/python3.[0-9][0-9]; do
        [ -x "$exe" ] && candidates="$candidates $exe"
    done
done
IFS=$old_ifs

tried=""
for py in $candidates; do
    [ -x "$py" ] || continue
    case " $tried " in *" $py "*) continue ;; esac
    tried="$tried $py"
    if "$py" -c "import sys; assert sys.version_info >= (3, 8); import $modules" >/dev/null 2>&1; then
        echo "$py"
        exit 0
    fi
done
echo "find-python: no Python 3 interpreter here imports $modules (tried:${tried:- none});" \
     "install the Debian packages python3-mpi4py python3-numpy python3-torch (scripts/install-deps.sh)," \
     "or set PCOLL_PYTHON" >&2
exit 1
