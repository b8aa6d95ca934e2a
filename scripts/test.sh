#!/usr/bin/env bash
# Install phaze-gym with its test extras and run the whole test suite (the README's second command); the docs extra
# lets the suite build the documentation site and run its tutorials (tests/test_docs_*.py).
# Needs no root: the distributed-Optuna test starts its own PostgreSQL server when the server binaries
# (initdb, pg_ctl) are on the machine, and is skipped, saying why, when they are not.
# Progress goes to stderr: each step numbered against the total, with its time and the time elapsed (the installs
# run quietly for minutes; on a terminal a line counts their seconds while they run).
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS=3
started=$(date +%s)
step=0

clock() {  # seconds as "1 min 34 s" / "42 s"
  if [ "$1" -ge 60 ]; then echo "$(($1 / 60)) min $(($1 % 60)) s"; else echo "$1 s"; fi
}

announce() {  # the next step's number and label
  step=$((step + 1))
  echo "test.sh: [$step/$STEPS] $1 (elapsed $(clock $(($(date +%s) - started))))" >&2
}

install_step() {  # LABEL COMMAND...: one install step, its seconds ticking on a terminal; fails the script on failure
  announce "$1"
  shift
  local begun ticker="" rc
  begun=$(date +%s)
  if [ -t 2 ]; then
    (while sleep 1; do printf '\r  … %s' "$(clock $(($(date +%s) - begun)))" >&2; done) &
    ticker=$!
  fi
  "$@"
  rc=$?
  if [ -n "$ticker" ]; then
    kill "$ticker" 2>/dev/null
    wait "$ticker" 2>/dev/null
    printf '\r\033[K' >&2
  fi
  if [ "$rc" -ne 0 ]; then
    echo "test.sh: [$step/$STEPS] failed after $(clock $(($(date +%s) - begun))) (exit $rc)" >&2
    exit 1
  fi
  echo "test.sh: [$step/$STEPS] done in $(clock $(($(date +%s) - begun)))" >&2
}

install_step "installing torch 2.13.0" python -m pip install -q "torch==2.13.0"
install_step "installing phaze-gym with its test, dist, zigzag and docs extras" \
  python -m pip install -q -e ".[test,dist,zigzag,docs]"
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "test.sh: no PostgreSQL server binaries (initdb): the distributed-Optuna test will be skipped" >&2
fi
# every core (pytest-xdist: -n auto), each test file on one worker (--dist loadfile: a file's tests share its fixtures
# and module state as in a serial run); a later -n / -p no:xdist in "$@" overrides it
announce "running the test suite (pytest -n auto --dist loadfile $*)"
python -m pytest -n auto --dist loadfile "$@"
rc=$?
echo "test.sh: finished in $(clock $(($(date +%s) - started))) (pytest exit $rc)" >&2
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
