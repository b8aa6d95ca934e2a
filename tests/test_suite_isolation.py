"""The test session's cache is its own: a user's PHAZE_CACHE_DIR (or PHAZE_CACHE=0) does not leak in."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from phaze_env.cache import cache_enabled, cache_root

REPO = Path(__file__).resolve().parents[1]


def test_session_uses_a_fresh_temporary_cache():
    root = cache_root()
    assert root.name.startswith("phaze-test-cache-") and root.parent == Path(tempfile.gettempdir())
    assert cache_enabled()


@pytest.mark.slow
def test_users_cache_dir_is_ignored_and_left_untouched(tmp_path):
    """A session started with the user's PHAZE_CACHE_DIR set (cache on) writes nothing there."""
    users = tmp_path / "users-cache"
    users.mkdir()
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    (tmp_path / "test_probe.py").write_text("from phaze_env.cache import DiskCache\n"
                                            "def test_probe():\n    DiskCache('probe').put('key', 1)\n"
                                            "    assert DiskCache('probe').get('key') == 1\n")
    env = os.environ | {"PHAZE_CACHE_DIR": str(users), "PHAZE_CACHE": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert list(users.iterdir()) == []
