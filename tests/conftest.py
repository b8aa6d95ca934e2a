import os
import shutil
import tempfile

import pytest

# Tests never touch the user's cache, even when PHAZE_CACHE_DIR is set: one fresh cache directory per test
# session (removed at its end), with the cache on whatever PHAZE_CACHE says. Set at import, before any test
# module, so subprocesses started by tests inherit it too.
SESSION_CACHE_DIR = tempfile.mkdtemp(prefix="phaze-test-cache-")
os.environ["PHAZE_CACHE_DIR"] = SESSION_CACHE_DIR
os.environ.pop("PHAZE_CACHE", None)


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(SESSION_CACHE_DIR, ignore_errors=True)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A private, empty cache directory for one test."""
    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"
