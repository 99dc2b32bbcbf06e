"""Shared test set-up: one compile cache for the whole run, and a fresh kfuse runtime for every test.

A test marked ``@pytest.mark.backend("python")`` (or a module with ``pytestmark = pytest.mark.backend(...)``)
runs its kernels on that backend: "python" interprets the kernel AST (no C++ compiler; kfuse/backends/python.py),
"null" runs nothing and records launches (schedule tests), "kokkos" (the default) compiles C++.
"""
import os
from pathlib import Path

import pytest

# Keep the suite's kernels in one cache under the repository so CI re-runs and parallel workers share it.
os.environ.setdefault("KFUSE_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".kfuse_cache"))


def pytest_configure(config):
    config.addinivalue_line("markers", "backend(name): run the test's kernels on backend name (python, null, kokkos)")


def _backend(name: str):
    if name == "kokkos":
        from kfuse.backends.kokkos import KOKKOS

        return KOKKOS
    if name == "python":
        from kfuse.backends.python import PYTHON

        return PYTHON
    if name == "null":
        from kfuse.backends.null import NullBackend

        return NullBackend()
    raise ValueError(f"unknown backend {name!r}")


@pytest.fixture(autouse=True)
def kfuse_runtime(request):
    """The runtime the test runs on: fresh (empty trace, caches, records and counters, tracing as
    KFUSE_FUSION says), installed as the process's so threads the test starts use it too."""
    from kfuse import context, engine

    marker = request.node.get_closest_marker("backend")
    with context.installed(engine.Runtime(backend=_backend(marker.args[0] if marker else "kokkos"))) as runtime:
        yield runtime


@pytest.fixture
def fresh_stats():
    import kfuse as pk

    pk.reset_stats()
    return pk
