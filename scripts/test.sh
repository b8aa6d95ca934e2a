#!/usr/bin/env bash
# Install phaze-gym with its test extras and run the whole test suite (the README's second command); the docs extra
# lets the suite build the documentation site and run its tutorials (tests/test_docs_*.py).
# Needs no root: the distributed-Optuna test starts its own PostgreSQL server when the server binaries
# (initdb, pg_ctl) are on the machine, and is skipped, saying why, when they are not.
set -uo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q "torch==2.13.0" || exit 1
python -m pip install -q -e ".[test,dist,zigzag,docs]" || exit 1
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "test.sh: no PostgreSQL server binaries (initdb): the distributed-Optuna test will be skipped" >&2
fi
python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
