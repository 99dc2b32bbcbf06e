"""Arrays nothing reads after a fused group are never stored (kfuse/tracer/liveness.py, transforms/memory.py).

Liveness is counted with reference counts, so the unit tests below build the exact situations a program can
make (a dropped intermediate, one still named, one seen through NumPy, one a later call takes) and check what
``unreachable`` reports; the transform tests check that the stores go only when no read is left; the
end-to-end tests check values against NumPy, eager and fused, and that the intermediates were not stored.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import kfuse as pk
from kfuse.transforms import manager
from kfuse.transforms import memory as memory_pass
from kfuse.tracer.liveness import unreachable
from fusion_check import gaussian_chain, gaussian_numpy
from transform_check import assert_launch_matches_eager, call, check_pass, fused, transformed
from ulps import MATH_ULPS, assert_ulps


def calls_of(*arg_tuples):
    """Stand-ins for traced calls: their argument tuples, every View a parameter."""
    return [SimpleNamespace(args=args, prepared=SimpleNamespace(
        view_params=tuple((i, True) for i, a in enumerate(args) if isinstance(a, pk.View)))) for args in arg_tuples]


def fresh(n=8) -> pk.View:
    return pk.View([n])


# --- liveness: who can still reach the memory ------------------------------------------------------------
def test_a_dropped_intermediate_is_unreachable_and_a_named_one_is_not():
    x, kept = fresh(), fresh()
    calls = calls_of((x, fresh()), (kept, x))  # the first call's output View is referred to by its call only
    assert unreachable(calls, [[0, 1]]) == {0: frozenset({1})}
    calls = calls_of((x, kept), (kept, x))
    assert unreachable(calls, [[0, 1]]) == {}


def test_memory_seen_through_numpy_or_another_view_is_reachable():
    tmp = fresh()
    seen = np.asarray(tmp._array[2:])  # an array over the same memory, as np.asarray(view)[2:] would be
    calls = calls_of((tmp,), (tmp,))
    del tmp
    assert unreachable(calls, [[0, 1]]) == {}
    del seen
    assert unreachable(calls, [[0, 1]]) == {0: frozenset({0, 1})}
    tmp = fresh()
    other = pk.View.wrap(tmp._array.reshape(2, 4))  # a second View over the memory, held by the program
    calls = calls_of((tmp,), (tmp,))
    del tmp
    assert unreachable(calls, [[0, 1]]) == {}
    assert other.shape == (2, 4)


def test_a_view_a_later_group_takes_is_stored():
    calls = calls_of((fresh(),), (fresh(),))
    shared = calls[0].args[0]
    calls += calls_of((shared,))
    del shared
    found = unreachable(calls, [[0, 1], [2]])
    assert found == {0: frozenset({1})}  # call 1's output only; call 0's is read by the group after


def test_one_args_tuple_shared_by_two_calls_counts_once():
    tmp = fresh()
    args = (tmp,)
    calls = calls_of(args, args)
    del args
    assert unreachable(calls, [[0, 1]]) == {}  # the program still names tmp: one reference more than the tuple's
    del tmp
    assert unreachable(calls, [[0, 1]]) == {0: frozenset({0, 1})}


def test_user_arrays_and_single_calls_are_never_scratch():
    base = np.zeros(8)
    adopted = pk.array(base)  # memory the program gave kfuse (held through escape's alias)
    del base
    calls = calls_of((adopted,), (adopted,), (fresh(),))
    del adopted
    assert unreachable(calls, [[0, 1], [2]]) == {}


# --- the memory transform: stores go only when nothing reads the View ------------------------------------
pytestmark_python = pytest.mark.backend("python")


@pk.workunit
def scale(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i] * 2.0


@pk.workunit
def combine(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[i] = x[i] + y[i]


@pk.workunit
def neighbour(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[i] = x[i] + y[(i + 1) % y.extent(0)]


@pk.workunit
def sized(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[i] = x[i] + y[i] * y.extent(0)


def with_scratch(kernel, *positions):
    from dataclasses import replace

    return replace(kernel, scratch=frozenset(positions))


def params(kernel) -> list:
    return [n for n, _ in kernel.spec.params]


@pytestmark_python
def test_stores_into_scratch_go_and_the_view_stops_being_a_parameter():
    n = 16
    x, y, z = pk.array(np.linspace(-1, 1, n)), pk.View([n]), pk.View([n])
    calls = [call(scale, n, x=x, y=y), call(combine, n, x=x, y=y, z=z)]
    unmerged = with_scratch(fused(*calls), 1, 3)  # y, in both calls
    # Two parameters over y's memory: combine's read of k1_y sees scale's store into k0_y, so both stay
    check_pass(memory_pass.run, unmerged, False)
    kernel = transformed(unmerged, "args")  # as the pipeline runs it: argument fusion first, one y

    def no_y(out):
        assert "k0_y" not in params(out) and "k1_y" not in params(out)
        assert "y[" not in ast_text(out)

    out = check_pass(memory_pass.run, kernel, True, no_y)
    expected = np.linspace(-1, 1, n) * 3.0
    np.testing.assert_allclose(assert_launch_matches_eager(calls, out, [z])[0], expected)


def ast_text(kernel) -> str:
    import ast

    return ast.unparse(kernel.source.tree).replace("k0_", "").replace("k1_", "")


def scale_then(second, n=16):
    """(calls, z, the transformed fused kernel) of scale (x -> y) then ``second`` (x, y -> z), y scratch."""
    x, y, z = pk.array(np.linspace(-1, 1, n)), pk.View([n]), pk.View([n])
    calls = [call(scale, n, x=x, y=y), call(second, n, x=x, y=y, z=z)]
    return calls, z, transformed_all(with_scratch(fused(*calls), 1, 3))


@pytestmark_python
def test_a_scratch_view_read_at_another_index_keeps_its_stores():
    _, _, out = scale_then(neighbour)
    assert "y[i0] = " in ast_text(out)


@pytestmark_python
def test_a_scratch_view_whose_extent_is_asked_stays_a_parameter_without_stores():
    calls, z, out = scale_then(sized)
    text = ast_text(out)
    assert "y[" not in text and "y.extent(0)" in text
    got = assert_launch_matches_eager(calls, out, [z])[0]
    np.testing.assert_allclose(got, np.linspace(-1, 1, 16) * (1 + 2 * 16))


def transformed_all(kernel):
    out, _ = manager.apply(kernel, frozenset(manager.NAMES) - {"restrict"})
    return out


# --- end to end: values against NumPy, eager and fused -----------------------------------------------------


def data(n=1000, seed=3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n), rng.standard_normal(n), rng.uniform(0.5, 2.0, n)


@pytest.mark.parametrize("backend", ["python", "kokkos"])
def test_a_gaussian_chain_fused_stores_no_intermediate(backend, fresh_stats):
    from kfuse import backends, context, engine

    x, mu, var = data()
    expected = gaussian_numpy(x, mu, var)
    with context.installed(engine.Runtime(backend=backends.named(backend))):
        pk.set_default_space(pk.OpenMP)  # the python backend runs on the host, whatever KFUSE_DEFAULT_SPACE says
        eager = gaussian_chain(pk.array(x), pk.array(mu), pk.array(var))
        pk.enable_fusion()  # the inputs handed over (copies only kfuse holds), so no call runs early
        got = float(gaussian_chain(pk.array(x.copy()), pk.array(mu.copy()), pk.array(var.copy())))
        stats, text = pk.stats(), pk.explain()
    assert eager == pytest.approx(expected, rel=1e-12) and got == pytest.approx(expected, rel=1e-12)
    assert stats["fused_kernels_launched"] == 1 and stats["unstored_arrays"] == 8, text
    assert "8 array(s) nothing reads afterwards never stored" in text


def test_intermediates_the_program_keeps_are_stored_and_right(fresh_stats):
    x, mu, var = data(seed=4)
    X, MU, VAR = pk.array(x.copy()), pk.array(mu.copy()), pk.array(var.copy())
    pk.enable_fusion()
    diff = pk.subtract(X, MU)
    flat = np.asarray  # read after the group ran: the values must be there
    square = pk.square(diff)
    total = pk.sum(pk.divide(square, VAR))
    assert float(total) == pytest.approx(np.sum((x - mu) ** 2 / var), rel=1e-12)
    np.testing.assert_allclose(flat(diff), x - mu, rtol=0, atol=0)
    np.testing.assert_allclose(flat(square), (x - mu) ** 2, rtol=0, atol=0)
    assert pk.stats()["unstored_arrays"] == 1  # only the quotient was dropped


@pk.workunit
def reverse(i: int, src: pk.View1D[pk.double], dst: pk.View1D[pk.double]):
    dst[i] = src[src.extent(0) - 1 - i]


def test_an_intermediate_read_by_a_later_unfusable_call_is_stored(fresh_stats):
    x = np.linspace(0.5, 2.0, 64)
    X, out = pk.array(x.copy()), pk.View([64])
    pk.enable_fusion()
    e = pk.log(pk.exp(X))
    pk.parallel_for(64, reverse, src=e, dst=out)  # reads other threads' elements: cannot join e's group
    del e
    assert_ulps(np.asarray(out), np.log(np.exp(x))[::-1], 2 * MATH_ULPS)  # two functions: their errors add
    assert pk.stats()["unstored_arrays"] == 1, pk.explain()  # exp's result only; log's is read by reverse


def test_an_intermediate_grabbed_with_numpy_between_is_right(fresh_stats):
    x = np.linspace(0.5, 2.0, 64)
    X = pk.array(x.copy())
    pk.enable_fusion()
    e = pk.exp(X)
    seen = np.asarray(e)  # runs e's producer; the program holds its memory from now on
    del e
    total = pk.sum(pk.exp(X))
    assert float(total) == pytest.approx(np.exp(x).sum(), rel=1e-12)
    assert_ulps(seen, np.exp(x))


# --- GPU memory of op results (runtime/device.py), with a stand-in for the CUDA library -------------------
def test_a_host_kernel_writing_memory_left_for_a_gpu_kernel_defines_it(fake_cuda):
    from kfuse.ops._common import new_view
    from kfuse.runtime import device

    pk.set_default_space(pk.Cuda)
    result = new_view((8,), np.float64)  # for a GPU kernel to write first: nothing to copy over before it
    pk.set_default_space(pk.OpenMP)
    pk.parallel_for(8, scale, x=pk.array(np.arange(8.0)), y=result)  # a host kernel writes it instead
    pk.set_default_space(pk.Cuda)
    device.device_pointer(result, writes=False)
    assert fake_cuda.to_device == [64]  # what the host kernel wrote reaches the GPU


def test_an_op_result_is_not_copied_to_the_gpu_before_its_kernel_writes_it(fake_cuda):
    from kfuse.ops._common import new_view
    from kfuse.runtime import device

    device.undefined(new_view((8,), np.float64)._array)  # a mark an earlier use of pooled memory may leave
    host_result = new_view((8,), np.float64)  # default space OpenMP: its contents come from a host kernel
    pk.set_default_space(pk.Cuda)
    result, defined = new_view((8,), np.float64), new_view((8,), np.float64)
    device.device_pointer(result, writes=True)
    assert fake_cuda.to_device == []  # the kernel about to run writes it: nothing to bring over
    defined[:] = 1.0  # a host write defines the contents: they must reach the GPU
    device.device_pointer(defined, writes=False)
    device.device_pointer(host_result, writes=False)
    assert fake_cuda.to_device == [64, 64]
