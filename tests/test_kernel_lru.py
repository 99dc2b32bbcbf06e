"""Loaded kernel libraries are bounded (KFUSE_MAX_LOADED_KERNELS): the least recently launched are unloaded,
their memory mappings go away, and an unloaded kernel loads again when it is launched, eager or fused."""
import numpy as np
import pytest

import kfuse as pk
from kfuse.runtime import launch

# One workunit, six specialisations (one per element type): six kernel libraries, twice the room left for them.
ELEMENT_TYPES = [np.float64, np.float32, np.int64, np.int32, np.int16, np.uint8]


@pk.workunit
def add_to(i, x, a):
    x[i] = x[i] + a


@pk.workunit
def double_it(i, x):
    x[i] = 2 * x[i]


@pk.workunit
def shift(i, x, a):
    x[i] = x[i] + a


@pk.workunit
def one_off(i, x, a):
    x[i] = x[i] + a


@pytest.fixture
def limit(monkeypatch):
    def set_limit(n: int):
        monkeypatch.setenv("KFUSE_MAX_LOADED_KERNELS", str(n))
    yield set_limit
    pk.disable_fusion()


def mapped_libraries(kernels) -> set:
    """Which of these kernels' shared libraries have at least one mapping in this process now."""
    paths = {str(k.artifact.library) for k in kernels}
    with open("/proc/self/maps") as maps:
        return {line.split()[-1] for line in maps if line.split()[-1] in paths}


def compiled_kernels(wu) -> list:
    return [p.kernel for p in wu.specializations.values() if p.kernel is not None]


def test_many_kernels_stay_within_the_limit_and_reload_on_demand(limit):
    limit(3)
    arrays = [np.zeros(5, dtype=t) for t in ELEMENT_TYPES]
    before = pk.stats()
    for _ in range(3):  # round-robin over six kernels with room for three: every launch reloads
        for x in arrays:
            pk.parallel_for(5, add_to, x=x, a=1)
    for x in arrays:
        np.testing.assert_array_equal(x, np.full(5, 3, dtype=x.dtype))

    kernels = compiled_kernels(add_to)
    assert len(kernels) == 6
    assert launch.loaded_count() <= 3
    assert sum(k.loaded for k in kernels) <= 3
    after = pk.stats()
    assert after["kernels_unloaded"] - before.get("kernels_unloaded", 0) >= 15  # 18 launches, 3 fit
    # dlclose really unmaps them: at most the three loaded ones, plus at most one library glibc pins forever
    # (the first in the process to define a C++ 'unique' symbol from the Kokkos headers).
    assert len(mapped_libraries(kernels)) <= 4
    assert all(k.last_seconds >= 0 for k in kernels)  # readable after unloading (the last C++ timing)


def test_recently_launched_kernel_outlives_one_off_kernels(limit):
    limit(3)
    hot = np.zeros(4)
    pk.parallel_for(4, double_it, x=hot)
    (hot_kernel,) = compiled_kernels(double_it)
    for t in ELEMENT_TYPES[1:]:  # five one-off kernels, the hot one launched between each
        pk.parallel_for(3, one_off, x=np.zeros(3, dtype=t), a=1)
        pk.parallel_for(4, double_it, x=hot)
        assert hot_kernel.loaded
    np.testing.assert_array_equal(hot, 0.0)


def evict_with_other_kernels():
    """Launch four other specialisations one by one (each read flushes only its own call)."""
    for t in ELEMENT_TYPES[2:6]:
        v = pk.View([3], t)
        pk.parallel_for(3, one_off, x=v, a=1)
        assert v[0] == 1


def test_unloaded_kernels_of_pending_and_fused_calls_load_again(limit):
    limit(2)
    x = pk.View([6], pk.float64)
    x[:] = np.arange(6.0)
    pk.parallel_for(6, shift, x=x, a=0.5)  # eager: loads shift's kernel
    (single,) = compiled_kernels(shift)
    pk.enable_fusion()
    pk.parallel_for(6, shift, x=x, a=0.5)  # pending while its kernel is unloaded
    evict_with_other_kernels()
    assert not single.loaded
    expect = np.arange(6.0) + 1.0
    np.testing.assert_array_equal(np.asarray(x), expect)

    for _ in range(2):  # the second round finds the fused kernel in the fuser's cache, unloaded
        pk.parallel_for(6, shift, x=x, a=1.5)
        pk.parallel_for(6, double_it, x=x)  # fused with shift: same range, same element per thread
        np.testing.assert_array_equal(np.asarray(x), 2 * (expect + 1.5))
        expect = 2 * (expect + 1.5)
        evict_with_other_kernels()
        assert launch.loaded_count() <= 2
    assert "shift + double_it  [fused 2 calls" in pk.explain()


def test_a_rerun_launch_from_a_packed_buffer_loads_its_unloaded_kernel_again(limit):
    """A rerun launches its kept fused kernel from the argument buffer packed when the flush was kept
    (kfuse/rerun.py); other kernels unload it between the repetitions, and the launch loads it again."""
    limit(2)
    x = pk.View([6], pk.float64)
    x[:] = np.arange(6.0)
    expect = np.arange(6.0)
    pk.enable_fusion()
    for _ in range(6):
        pk.parallel_for(6, shift, x=x, a=1.5)
        pk.parallel_for(6, double_it, x=x)
        expect = 2 * (expect + 1.5)
        np.testing.assert_array_equal(np.asarray(x), expect)
        evict_with_other_kernels()
        assert launch.loaded_count() <= 2
    assert "(rerun:" in pk.explain()
