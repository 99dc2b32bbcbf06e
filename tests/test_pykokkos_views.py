"""The PyKokkos View API outside kernels: layouts, memory spaces, dtype spellings, fill, deep_copy,
create_mirror_view and asarray, against NumPy, eager and fused (host accesses run pending kernels first)."""
import numpy as np
import pytest

import kfuse as pk

from fusion_check import assert_same, run_eager_and_fused

pytestmark = pytest.mark.backend("python")
M, N = 5, 7


@pk.workunit
def fill_2d(i, a: pk.View2D[pk.double]):
    for j in range(a.extent(1)):
        a[i][j] = i * 10.0 + j


@pk.workunit
def double_2d(i, out: pk.View2D[pk.double], a: pk.View2D[pk.double]):
    for j in range(a.extent(1)):
        out[i][j] = 2.0 * a[i][j] + 1.0


@pk.workunit
def scale_1d(i, out: pk.View1D[pk.double], a: pk.View1D[pk.double]):
    out[i] = 3.0 * a[i]


def expected_2d():
    a = np.add.outer(np.arange(M) * 10.0, np.arange(N, dtype=np.float64))
    return a, 2.0 * a + 1.0


def layout_program(layout):
    def program():
        a = pk.View([M, N], pk.double, layout=layout)
        out = pk.View([M, N], pk.double, pk.HostSpace, layout)
        pk.parallel_for(M, fill_2d, a=a)
        pk.parallel_for(M, double_2d, out=out, a=a)
        return np.array(a), np.array(out)
    return program


@pytest.mark.parametrize("layout", [pk.Layout.LayoutLeft, pk.LayoutLeft, pk.Layout.LayoutRight, pk.LayoutDefault])
def test_kernels_on_each_layout_give_numpys_result(layout):
    eager, fused, _, _ = run_eager_and_fused(layout_program(layout))
    assert_same(eager, fused)
    assert_same(expected_2d(), eager)


def test_layout_left_is_column_major_memory():
    v = pk.View([M, N], pk.int32, layout=pk.Layout.LayoutLeft)
    v[:] = np.arange(M * N).reshape(M, N)
    assert v.shape == (M, N) and np.asarray(v).flags.f_contiguous
    assert_same(np.arange(M * N, dtype=np.int32).reshape(M, N).ravel(order="F"), np.asarray(v).ravel(order="K"))
    assert pk.View([M, N], pk.int32, layout=pk.Layout.LayoutRight).strides == (N, 1)


def test_unknown_layout_and_space_are_named():
    with pytest.raises(TypeError, match="unknown layout 'left'.*pk.Layout.LayoutLeft"):
        pk.View([M], pk.double, layout="left")
    with pytest.raises(TypeError, match="pk.MemorySpace.*ExecutionSpace.OpenMP"):
        pk.View([M], pk.double, pk.OpenMP)


@pytest.mark.parametrize("space", list(pk.MemorySpace) + [pk.HostSpace, pk.CudaSpace])
def test_every_memory_space_is_host_memory(space):
    v = pk.View([M], pk.double, space)
    v.fill(2.5)
    assert_same(np.full(M, 2.5), np.asarray(v).copy())


@pytest.mark.parametrize("spelling, np_dtype", [
    (pk.double, np.float64), (pk.float, np.float32), (pk.float32, np.float32), (pk.float64, np.float64),
    (pk.real, np.float64), (pk.bool, np.bool_), (pk.int8, np.int8), (pk.int16, np.int16), (pk.int32, np.int32),
    (pk.int64, np.int64), (pk.uint8, np.uint8), (pk.uint16, np.uint16), (pk.uint32, np.uint32),
    (pk.uint64, np.uint64), (pk.DataType.double, np.float64), (pk.DataType.float, np.float32),
    (pk.DataType.int32, np.int32), (pk.DataType.uint64, np.uint64), (pk.DataType.bool, np.bool_),
    (pk.DataType.float32, np.float32), (pk.DataType.real, np.float64),
])
def test_dtype_spellings(spelling, np_dtype):
    v = pk.View([M], spelling)
    assert np.asarray(v).dtype == np_dtype and v.dtype is spelling


def test_view_dtype_is_pykokkos_datatype():
    assert pk.View([M], pk.int32).dtype is pk.DataType.int32
    assert pk.View([M], pk.float).dtype is pk.DataType.float


def deep_copy_program():
    """deep_copy reads a View a pending kernel writes, and overwrites one a pending kernel reads."""
    a = pk.View([M, N], pk.double, layout=pk.LayoutLeft)
    pk.parallel_for(M, fill_2d, a=a)
    copied = pk.View([M, N], pk.double)
    pk.deep_copy(copied, a)
    out = pk.View([M, N], pk.double)
    pk.parallel_for(M, double_2d, out=out, a=copied)
    pk.deep_copy(copied, np.ones((M, N)))
    return np.array(copied), np.array(out)


def test_deep_copy_runs_pending_kernels_first():
    eager, fused, _, _ = run_eager_and_fused(deep_copy_program)
    assert_same(eager, fused)
    assert_same((np.ones((M, N)), expected_2d()[1]), eager)


def fill_program():
    """fill and deep_copy of a scalar overwrite Views pending kernels read."""
    a, b = pk.View([M]), pk.View([M])
    a[:] = np.arange(M, dtype=np.float64)
    out_a, out_b = pk.View([M]), pk.View([M])
    pk.parallel_for(M, scale_1d, out=out_a, a=a)
    pk.parallel_for(M, scale_1d, out=out_b, a=b)
    a.fill(7)
    pk.deep_copy(b, 4)
    pk.parallel_for(M, scale_1d, out=b, a=a)
    return np.array(a), np.array(out_a), np.array(b), np.array(out_b)


def test_fill_and_scalar_deep_copy_run_pending_kernels_first():
    eager, fused, _, _ = run_eager_and_fused(fill_program)
    assert_same(eager, fused)
    assert_same((np.full(M, 7.0), 3.0 * np.arange(M), np.full(M, 21.0), np.zeros(M)), eager)


def test_deep_copy_converts_dtype():
    dst = pk.View([M], pk.int32)
    pk.deep_copy(dst, np.arange(M) + 0.5)
    assert_same(np.arange(M, dtype=np.int32), np.asarray(dst).copy())


def test_deep_copy_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match=r"source's shape \(7, 5\) differs from the destination's \(5, 7\)"):
        pk.deep_copy(pk.View([M, N]), pk.View([N, M]))
    with pytest.raises(TypeError, match="destination must be a pk.View, got ndarray"):
        pk.deep_copy(np.zeros(M), pk.View([M]))
    with pytest.raises(TypeError, match="source must be a pk.View, a NumPy array or a scalar, got list"):
        pk.deep_copy(pk.View([M]), [1.0] * M)


def test_create_mirror_view_is_the_same_host_data():
    v = pk.View([M, N], pk.double, layout=pk.LayoutLeft)
    mirror = pk.create_mirror_view(v)
    pk.parallel_for(M, fill_2d, a=v)
    assert_same(expected_2d()[0], np.array(mirror))
    with pytest.raises(TypeError, match="expects a pk.View, got ndarray"):
        pk.create_mirror_view(np.zeros(M))


def test_asarray_shares_memory_and_converts_dtype():
    base = np.arange(M, dtype=np.float64)
    shared = pk.asarray(base)
    shared[0] = 9.0
    assert base[0] == 9.0
    assert_same(np.arange(M, dtype=np.int32), np.array(pk.asarray([0, 1, 2, 3, 4], dtype=pk.int32)))


@pytest.mark.backend("kokkos")
def test_compiled_kernels_on_layout_left():
    eager, fused, _, _ = run_eager_and_fused(layout_program(pk.Layout.LayoutLeft))
    assert_same(eager, fused)
    assert_same(expected_2d(), eager)


def test_python_int_is_pykokkos_int32_for_view_elements():
    assert pk.View([3], int).dtype is pk.int32 and np.asarray(pk.View([3], int)).dtype == np.int32
    assert pk.View1D[int].dtype is pk.int32 and pk.View1D[float].dtype is pk.double


def test_view_layout_is_a_pykokkos_layout():
    assert pk.View([3, 4], pk.double).layout is pk.Layout.LayoutRight
    assert pk.View([3, 4], pk.double, layout=pk.Layout.LayoutLeft).layout is pk.Layout.LayoutLeft
    assert pk.View([5], pk.double, layout=pk.Layout.LayoutLeft).layout is pk.Layout.LayoutRight  # 1-D: both orders
    assert pk.View([4, 6], pk.double)[:, 1:3].layout is pk.Layout.LayoutStride
