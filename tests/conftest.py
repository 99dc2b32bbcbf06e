"""Shared test set-up: one compile cache for the whole run, reused by later runs."""
import os
from pathlib import Path

import pytest

# Keep the suite's kernels in one cache under the repository so CI re-runs and parallel workers share it.
os.environ.setdefault("KFUSE_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".kfuse_cache"))


@pytest.fixture
def fresh_stats():
    import kfuse as pk

    pk.reset_stats()
    return pk
