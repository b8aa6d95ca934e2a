#!/usr/bin/env bash
# Install phaze-gym with its test extras and run the test suite (the README's second command).
set -uo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q "torch==2.13.0" || exit 1
python -m pip install -q -e ".[test,dist,zigzag]" || exit 1
bash scripts/setup_postgres.sh || exit 1  # a real PostgreSQL for the distributed Optuna test
python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
