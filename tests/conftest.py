import os
import tempfile

import pytest

# Tests never touch the user's cache: one fresh cache directory per test session.
os.environ.setdefault("PHAZE_CACHE_DIR", tempfile.mkdtemp(prefix="phaze-test-cache-"))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A private, empty cache directory for one test."""
    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"
