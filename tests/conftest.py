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


@pytest.fixture(autouse=True)
def kfuse_runtime(request, monkeypatch):
    """The runtime the test runs on: fresh (eager, nothing pending, empty caches, records and counters, the
    default transforms and space, whatever the environment says), installed as the process's so threads the
    test starts use it too. Tests turn fusion on themselves; what they leave pending goes with their runtime.
    Every group the fuser forms runs fused (KFUSE_PROFIT=off): tests of fusion ask for what the fuser does,
    and tests/test_profitability.py sets the profitability modes it tests."""
    from kfuse import backends, context, engine

    for name in ("KFUSE_FUSION", "KFUSE_MAX_TRACE", "KFUSE_MAX_GROUP", "KFUSE_TRANSFORMS", "KFUSE_PROFIT_TRIALS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KFUSE_PROFIT", "off")
    from kfuse import spaces

    marker = request.node.get_closest_marker("backend")
    with context.installed(engine.Runtime(backend=backends.named(marker.args[0] if marker else "kokkos"))) as runtime:
        if marker and spaces.on_device(runtime.default_space.value):  # KFUSE_DEFAULT_SPACE=Cuda on a GPU machine:
            runtime.default_space = spaces.ExecutionSpace.OpenMP  # the python and null backends run on the host
        yield runtime


@pytest.fixture
def break_builds(kfuse_runtime):
    """``break_builds(*workunits, message=...)``: on the test's backend, building a kernel of one of these
    workunits (alone, or fused with others) fails as a compiler rejecting it would: a CompileError carrying
    ``message`` (kfuse.check.faults.failing_builds). Their earlier specialisations are forgotten, so no kernel
    built before is reused."""
    import contextlib

    from kfuse.check.faults import failing_builds

    with contextlib.ExitStack() as stack:
        def break_(*workunits, message="kfuse test breakage"):
            names = [wu.__name__ for wu in workunits]
            for wu in workunits:
                wu.specializations.clear()
                wu.__dict__.pop("_kfuse_plans", None)
            stack.enter_context(failing_builds(lambda lowered: any(n in lowered.name.split("__") for n in names),
                                               message))
        yield break_


@pytest.fixture
def fresh_stats():
    import kfuse as pk

    pk.reset_stats()
    return pk


@pytest.fixture
def fake_cuda(monkeypatch):
    """A stand-in for the CUDA library behind kfuse/runtime/device.py: no device, host-to-device copies recorded
    (the list returned). Kernels run on the host (default space OpenMP); only the mirror bookkeeping is exercised."""
    import kfuse as pk
    from kfuse.runtime import device

    copies = []

    class FakeCuda:
        def kfuse_device_malloc(self, nbytes):
            return 1 << 40

        def kfuse_copy_to_device(self, dst, src, nbytes):
            copies.append(nbytes)

    monkeypatch.setattr(device, "_lib", lambda: FakeCuda())
    monkeypatch.setattr(device, "_mirrors", {})
    pk.set_default_space(pk.OpenMP)
    return copies
