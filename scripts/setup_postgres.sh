#!/usr/bin/env bash
# Make PostgreSQL usable by tests/test_distributed_optuna.py (which starts its own throw-away server on
# loopback): server binaries on the machine, and — when running as root, which initdb refuses — a
# non-root 'postgres' system user to run it as. Idempotent; safe to run on every CI job.
set -euo pipefail
find_initdb() {
  command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1
}
if [ -z "$(find_initdb)" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null
  else
    echo "setup_postgres: no PostgreSQL server binaries (initdb) and cannot install them" >&2
    exit 1
  fi
fi
if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin postgres
fi
python -c "import psycopg2" 2>/dev/null || python -m pip install -q "psycopg2-binary>=2.9"
echo "setup_postgres: initdb at $(find_initdb)"
