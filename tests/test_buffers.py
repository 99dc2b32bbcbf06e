"""Result memory reused once nothing refers to it (kfuse/buffers.py): when, when not, and values stay right."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import kfuse as pk
from kfuse import buffers
from fusion_check import gaussian_chain, gaussian_numpy
from ulps import assert_ulps

N = 1 << 14  # 128 KiB of doubles: above buffers.MIN_BYTES


def data(seed=0):
    return np.random.default_rng(seed).uniform(0.5, 2.0, N)


def test_a_dropped_result_hands_its_memory_to_the_next_result_of_that_size():
    x = pk.array(data())
    first = pk.exp(x)
    address = first.ptr
    del first
    second = pk.log(x)
    assert second.ptr == address
    assert_ulps(np.asarray(second), np.log(data()))


@pytest.mark.parametrize("fusion", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.bool_])
def test_what_pooled_memory_held_never_reaches_a_result(dtype, fusion):
    """A product's chunk values (one float64 or int64 per chunk) come from the pool: NaN or garbage left there by an
    earlier result must not reach the product."""
    if fusion:
        pk.enable_fusion()
    for held in (np.float64, np.int64):
        dirty = pk.full(1, np.nan if held is np.float64 else -7, dtype=held)
        reused = pk.exp(dirty) if held is np.float64 else pk.multiply(dirty, 3)  # a pooled (1,) result ...
        np.asarray(reused)  # (run)
        del reused  # ... dropped with NaN or -21 in it
    a = np.array([2, 3, 1], dtype=dtype)
    got = pk.prod(pk.array(a))
    got = got.value() if isinstance(got, pk.Future) else got  # (a Future with fusion on)
    assert got == np.prod(a) and type(got) is (float if dtype in (np.float64, np.float32) else int)


def test_memory_something_still_refers_to_is_never_handed_out():
    x = pk.array(data())
    kept_view = pk.exp(x)
    seen = pk.exp(x)
    alias = np.asarray(seen)[10:]  # a NumPy array over the memory, the View dropped
    del seen
    slice_of = pk.exp(x)[5:]  # a subview keeps the memory of a dropped result
    taken = {pk.sqrt(x).ptr for _ in range(3)}
    assert kept_view.ptr not in taken and alias.__array_interface__["data"][0] - 80 not in taken
    assert slice_of.ptr - 40 not in taken
    assert_ulps(alias, np.exp(data())[10:])
    assert_ulps(np.asarray(kept_view), np.exp(data()))


def test_a_pending_call_keeps_its_memory_until_it_has_run(fresh_stats):
    x = pk.array(data())
    pk.enable_fusion()
    out = pk.View([N])
    t = pk.exp(x)
    pk.parallel_for(N, copy_into, src=t, dst=out)  # pending: holds t
    address = t.ptr
    del t
    assert pk.sqrt(x).ptr != address
    assert_ulps(np.asarray(out), np.exp(data()))


@pk.workunit
def copy_into(i: int, src: pk.View1D[pk.double], dst: pk.View1D[pk.double]):
    dst[i] = src[i]


@pytest.mark.parametrize("fusion", [False, True])
def test_a_loop_of_array_statements_over_reused_memory_equals_numpy(fusion, fresh_stats):
    x0, y0 = data(1), data(2)
    x, y = pk.array(x0.copy()), pk.array(y0.copy())
    if fusion:
        pk.enable_fusion()
    for _ in range(6):
        pk.add(x, pk.multiply(pk.sqrt(y), 0.25), out=x)
        pk.subtract(y, pk.divide(x, 64.0), out=y)
        x0 += 0.25 * np.sqrt(y0)
        y0 -= x0 / 64.0
    total = pk.sum(pk.multiply(x, y))
    np.testing.assert_allclose(np.asarray(x), x0, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(y), y0, rtol=1e-13)
    assert float(total) == pytest.approx(np.sum(x0 * y0), rel=1e-12)


def test_intermediates_in_pooled_memory_are_still_never_stored_when_dropped(fresh_stats):
    x, mu, var = (pk.array(data(s).copy()) for s in (3, 4, 5))
    pk.enable_fusion()
    got = float(gaussian_chain(x, mu, var))
    assert got == pytest.approx(gaussian_numpy(data(3), data(4), data(5)), rel=1e-12)
    assert pk.stats()["unstored_arrays"] == 8, pk.explain()


def test_a_pool_of_zero_bytes_allocates_plain_memory(monkeypatch):
    monkeypatch.setenv("KFUSE_POOL_BYTES", "0")
    buffers.release()  # drop what earlier tests left unused, so the pool has no free array of this shape
    result = pk.exp(pk.array(data()))
    assert not buffers.holds(result._array)  # its own allocation, not the pool's


def test_a_reused_array_forgets_what_its_gpu_mirror_held(fake_cuda):
    from kfuse.runtime import device

    buffers.release()  # no other free array of this shape: the next result takes first's
    first = pk.exp(pk.array(data()))
    device.device_pointer(first, writes=True)  # a GPU kernel wrote it: the device copy is newer
    address = first.ptr
    del first
    again = pk.exp(pk.array(data()))  # a host kernel's result in the same memory
    assert again.ptr == address
    assert device._mirrors[address].state == device.HOST  # the old device contents are not the new result's


def test_a_reused_array_for_a_gpu_result_is_not_copied_to_the_gpu(fake_cuda):
    from kfuse.ops._common import new_view
    from kfuse.runtime import device

    buffers.release()  # no other free array of this shape: the next result takes first's
    first = pk.exp(pk.array(data()))
    device.device_pointer(first, writes=False)  # the host's values go over once
    address = first.ptr
    del first
    pk.set_default_space(pk.Cuda)
    again = new_view((N,), np.float64)  # a result a GPU kernel writes first
    assert again.ptr == address and fake_cuda.to_device == [N * 8]
    device.device_pointer(again, writes=True)
    assert fake_cuda.to_device == [N * 8]  # nothing copied for it


def test_shapes_are_taken_as_numpy_takes_them():
    for shape in (N, (N,), [2, N // 2], np.int64(N)):
        array, address = buffers.empty(shape, np.float64)
        assert address == array.__array_interface__["data"][0]
        assert array.shape == np.empty(shape).shape and array.flags.c_contiguous


def test_a_full_pool_runs_the_pending_work_before_taking_fresh_memory(monkeypatch, fresh_stats):
    """With fusion on the trace holds every intermediate of traced kernels (row sums here); once they fill the
    pool, the pending calls run (their dropped intermediates give their memory back) instead of each new result
    taking fresh memory."""
    buffers.release()
    monkeypatch.setenv("KFUSE_POOL_BYTES", str(buffers._held + 6 * N * 8))
    m0 = np.random.default_rng(6).uniform(0.5, 2.0, (N, 2))
    x0 = data(6)
    m, x = pk.array(m0.copy()), pk.array(x0.copy())
    pk.enable_fusion()
    for _ in range(10):
        pk.add(x, pk.sum(m, axis=1), out=x)  # a traced row-sum kernel into a new pooled result per statement
        x0 += m0.sum(axis=1)
    assert pk.stats()["flushes"] >= 1  # the pool filled within the ten statements (six results fit)
    np.testing.assert_allclose(np.asarray(x), x0, rtol=1e-13)
    assert buffers._held <= int(buffers.config.POOL_BYTES.get())


def test_recorded_operations_run_as_one_kernel_even_past_a_full_pool(monkeypatch, fresh_stats):
    """Recorded element-wise operations (kfuse/ops/lazy.py) do not run early when the pool is full: their dropped
    results are never touched, so fresh memory for them costs nothing, while running early would split the
    kernel."""
    buffers.release()
    monkeypatch.setenv("KFUSE_POOL_BYTES", str(buffers._held + 6 * N * 8))
    x0 = data(7)
    x = pk.array(x0.copy())
    pk.enable_fusion()
    for _ in range(10):
        pk.add(x, pk.multiply(pk.sqrt(x), 0.5), out=x)  # two intermediates per statement
        x0 += 0.5 * np.sqrt(x0)
    np.testing.assert_allclose(np.asarray(x), x0, rtol=1e-13)
    assert pk.stats()["flushes"] == 1 and pk.stats()["kernels_launched"] == 1, pk.explain()

def test_small_results_come_from_the_pool_too():
    buffers.release()  # no other free array of this shape: the next result takes first's
    x = pk.array(np.linspace(0.5, 2.0, 5))
    first = pk.exp(x)
    address = first.ptr
    assert buffers.holds(first._array)
    del first
    second = pk.log(x)  # 40 bytes: the array the dropped result left
    assert second.ptr == address
    assert_ulps(np.asarray(second), np.log(np.linspace(0.5, 2.0, 5)))


def test_memory_a_failed_call_lost_is_new_memory_when_handed_out_again():
    """A failed call poisons what reads its lost result, keyed by the memory's owner, which for a pooled result
    is the pooled array: handed out again for a new result, those bytes must not be taken as lost."""
    from kfuse.check.faults import failing_compiles
    from kfuse.check.kernels import k_broken

    x = pk.array(data(7))
    pk.enable_fusion()
    try:
        with failing_compiles():
            lost = pk.exp(x)
            pk.parallel_for(N, k_broken, x=x, y=lost)  # fails when it runs
            derived = pk.multiply(lost, 2.0)  # reads what it lost: poisoned, in memory of its own
            address = derived.ptr
            with pytest.raises(pk.DeferredError, match="k_broken"):
                pk.fence()
        buffers.release()  # no other free array of this shape: the next result takes derived's
        del derived
        gc.collect()  # (the error's traceback held the frames that held it)
        again = pk.log(x)
        assert again.ptr == address
        assert_ulps(np.asarray(again), np.log(data(7)))
    finally:
        pk.disable_fusion()
