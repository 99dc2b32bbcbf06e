"""Shared test set-up: one compile cache for the whole run, and a fresh kfuse runtime for every test.

A test marked ``@pytest.mark.backend("python")`` (or a module with ``pytestmark = pytest.mark.backend(...)``)
runs its kernels on that backend: "python" interprets the kernel AST (no C++ compiler; kfuse/backends/python.py),
"null" runs nothing and records launches (schedule tests), "kokkos" (the default) compiles C++.
"""
import contextlib
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
    and tests/test_profitability.py sets the profitability modes it tests. Every array operation goes to its
    kernel (KFUSE_HOST_ELEMENTS=0): tests/test_on_host.py tests the small ones NumPy does on the host."""
    from kfuse import backends, context, engine

    for name in ("KFUSE_FUSION", "KFUSE_MAX_TRACE", "KFUSE_MAX_GROUP", "KFUSE_TRANSFORMS", "KFUSE_PROFIT_TRIALS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KFUSE_PROFIT", "off")
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", "0")
    marker = request.node.get_closest_marker("backend")
    with context.installed(engine.Runtime(backend=backends.named(marker.args[0] if marker else "kokkos"))) as runtime:
        yield runtime  # (the python and null backends run a GPU default space on the host: engine.Runtime)


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
def known_contents(request):
    """Parametrized (``indirect=True``) True: memory whose contents kfuse knows exists meanwhile, as in a GPU
    program (new arrays filled on the device, ``views.constant``; the fuzzer's ``Mode.known_contents``), so the
    paths that drop that knowledge for host kernels' Views run too."""
    from kfuse.check.runner import _contents_known

    with _contents_known(request.param):
        yield request.param


@pytest.fixture
def fresh_stats():
    import kfuse as pk

    pk.reset_stats()
    return pk


class FakeCuda:
    """The CUDA calls of kfuse/runtime/device.py on host memory: "device" buffers are NumPy byte arrays kfuse
    cannot see, and every copy is recorded by direction (byte counts in ``to_device``, ``to_host``,
    ``on_device``; buffers filled there in ``zeroed`` when with zeros, else in ``filled``)."""

    def __init__(self):
        self.buffers: dict = {}  # address -> the bytes behind it
        self.to_device, self.to_host, self.on_device, self.zeroed, self.filled = [], [], [], [], []

    def kfuse_device_malloc(self, nbytes):
        import numpy as np

        buffer = np.full(nbytes, 0xAB, np.uint8)  # garbage, as cudaMalloc gives
        address = buffer.__array_interface__["data"][0]
        self.buffers[address] = buffer
        return address

    def kfuse_device_free(self, pointer):
        self.buffers.pop(pointer.value, None)

    def _copy(self, log, dst, src, nbytes):
        import ctypes

        ctypes.memmove(dst, src, nbytes)
        log.append(nbytes)
        return 0

    def kfuse_copy_to_device(self, dst, src, nbytes):
        return self._copy(self.to_device, dst, src, nbytes)

    def kfuse_copy_to_host(self, dst, src, nbytes):
        return self._copy(self.to_host, dst, src, nbytes)

    def kfuse_copy_on_device(self, dst, src, nbytes):
        return self._copy(self.on_device, dst, src, nbytes)

    def kfuse_device_fill(self, pointer, nbytes, pattern, size):
        import numpy as np

        element = np.frombuffer(int(pattern).to_bytes(8, "little")[:size], np.uint8)
        self.buffers[pointer.value][:nbytes] = np.resize(element, nbytes)
        (self.filled if pattern else self.zeroed).append(nbytes)
        return 0


def install_fake_cuda(patch: pytest.MonkeyPatch) -> FakeCuda:
    """Put a ``FakeCuda`` behind kfuse/runtime/device.py through ``patch`` (undone with it), with no mirrors or spare
    buffers yet, and the default space OpenMP; returns it (the ``fake_cuda`` fixture's, and
    benchmarks/bench_replay_host.py's)."""
    import kfuse as pk
    from kfuse.runtime import device

    cuda = FakeCuda()
    patch.setattr(device, "_lib", lambda: cuda)
    patch.setattr(device, "_mirrors", {})
    patch.setattr(device, "_spare", {})  # (spare buffers belong to the library that made them)
    patch.setattr(device, "_spare_bytes", 0)
    pk.set_default_space(pk.OpenMP)
    return cuda


@pytest.fixture
def fake_cuda(monkeypatch):
    """A stand-in for the CUDA library behind kfuse/runtime/device.py (a ``FakeCuda``): no device, copies
    recorded. Kernels run on the host (default space OpenMP); only the mirror bookkeeping is exercised, unless
    the test also takes ``fake_gpu``."""
    return install_fake_cuda(monkeypatch)


_STAND_IN_GPU_BACKEND = []  # the one Kokkos backend instance of every stand_in_gpu block (made at first use)


@contextlib.contextmanager
def stand_in_gpu():
    """A block where compiled kernels launch as GPU kernels do (device pointers, copies before and after), running
    on the host over ``fake_cuda``'s "device" buffers: whole programs move data as on a GPU (the default space
    counts as a GPU's: array results are first written on the device, none is computed on the host). Its runtime has its
    own Kokkos backend instance, so its kernels (which keep the launch path they were loaded with) are never the
    ones other tests launch. Needs ``fake_cuda``."""
    import types

    from kfuse import context, engine, spaces
    from kfuse.backends.kokkos import KokkosBackend
    from kfuse.runtime import launch

    if not _STAND_IN_GPU_BACKEND:
        _STAND_IN_GPU_BACKEND.append(KokkosBackend())
    from kfuse import views
    from kfuse.fuser import graph as graphs
    from kfuse.ops import _common

    with pytest.MonkeyPatch.context() as patch:
        gpu = types.SimpleNamespace(on_device=lambda space: True)
        patch.setattr(launch, "spaces", gpu)
        # the default space counts as a GPU's too: results are first written there, none computed on the host
        patch.setattr(_common, "on_device", gpu.on_device)
        patch.setattr(_common, "_ON_DEVICE", {})
        patch.setattr(views, "on_device", gpu.on_device)
        patch.setattr(graphs, "on_device", gpu.on_device)  # KFUSE_ALIGN_VIEWS=device lines up Views there
        with context.installed(engine.Runtime(backend=_STAND_IN_GPU_BACKEND[0])) as runtime:
            runtime.default_space = spaces.ExecutionSpace.OpenMP
            yield runtime


@pytest.fixture
def fake_gpu(fake_cuda):
    """The test runs in a ``stand_in_gpu`` block; returns ``fake_cuda``'s recorder."""
    with stand_in_gpu():
        yield fake_cuda

