"""matmul/dot on the host: float products are NumPy's (BLAS) after the barrier, integer ones and GPU spaces keep
their kernels; all against NumPy, eager and with fusion on."""
import numpy as np
import pytest

import kfuse as pk
from kfuse.ops import linalg

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

RNG = np.random.default_rng(7)
M = RNG.standard_normal((9, 6))
N = RNG.standard_normal((6, 11))
X6, X9 = RNG.standard_normal(6), RNG.standard_normal(9)


def close(got, want, rtol=1e-12):
    got = got.copy() if isinstance(got, pk.View) else np.asarray(got)
    assert got.shape == np.shape(want)
    assert got.dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


CASES = [(M, N), (N.T, M.T), (M, X6), (X9, M), (M[::2], N), (M[:, ::2], N[::2, :])]


@pytest.mark.parametrize("a,b", CASES, ids=["2x2", "transposed", "matvec", "vecmat", "row-strided", "col-strided"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_products_are_numpys_and_launch_no_kernel(a, b, dtype):
    a, b = a.astype(dtype), b.astype(dtype)
    pk.reset_stats()
    got = pk.matmul(pk.array(a), pk.array(b))
    assert pk.stats()["kernels_launched"] == 0
    close(got, a @ b, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_vector_dot_is_a_python_float():
    got = pk.dot(pk.array(X6), pk.array(X6.copy()))
    assert type(got) is float
    assert got == pytest.approx(X6 @ X6, rel=1e-13)


def test_mixed_dtypes_follow_numpy():
    ints = np.arange(54, dtype=np.int32).reshape(9, 6)
    close(pk.matmul(ints, N), ints @ N)
    close(pk.matmul(M.astype(np.float32), ints.T.copy()), M.astype(np.float32) @ ints.T, rtol=1e-5)


def test_out_receives_the_product_in_its_dtype_and_layout():
    out = pk.zeros((9, 11))
    assert pk.matmul(M, N, out=out) is out
    close(out, M @ N)
    wide = pk.zeros((11, 9))
    transposed_out = pk.transpose(wide)  # a strided View over wide's memory
    pk.matmul(M, N, out=transposed_out)
    close(wide, (M @ N).T)
    single = pk.zeros(9, dtype=pk.float32)
    pk.matmul(M, X6, out=single)
    close(single, (M @ X6).astype(np.float32), rtol=1e-6)
    with pytest.raises(ValueError, match="out= has shape"):
        pk.matmul(M, N, out=pk.zeros((9, 9)))
    a = pk.array(RNG.standard_normal((4, 4)))
    with pytest.raises(ValueError, match="share memory"):
        pk.matmul(a, a, out=a)


def test_integer_products_keep_their_kernels():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    b = np.arange(8, dtype=np.int32).reshape(4, 2)
    pk.reset_stats()
    got = pk.matmul(a, b)
    assert pk.stats()["kernels_launched"] == 1
    close(got, a @ b)
    assert pk.dot(a[0], b[:, 0].copy()) == int(a[0] @ b[:, 0])


@pytest.mark.parametrize("a,b", CASES[:4], ids=["2x2", "transposed", "matvec", "vecmat"])
def test_gpu_kernel_path_matches_numpy(a, b, monkeypatch):
    """The kernels a GPU space runs for float products, run here by refusing BLAS."""
    monkeypatch.setattr(linalg, "_blas_applies", lambda dtype: False)
    pk.reset_stats()
    close(pk.matmul(a, b), a @ b)
    assert pk.stats()["kernels_launched"] == 1


def test_fused_product_waits_for_its_inputs_and_feeds_later_kernels():
    """A BLAS product in a trace is a barrier: the pending kernel writing its input runs first, the kernels
    after it read the product."""
    x = pk.array(M.copy())
    with pk.fusion():
        shifted = pk.add(x, 1.0)
        product = pk.matmul(shifted, N)
        scaled = pk.multiply(product, 2.0)
        total = pk.sum(scaled)
    close(scaled, 2.0 * ((M + 1.0) @ N))
    assert pk.value(total) == pytest.approx(np.sum(2.0 * ((M + 1.0) @ N)), rel=1e-12)


def test_misaligned_shapes_name_matmul():
    with pytest.raises(ValueError, match="matmul: shapes"):
        pk.matmul(M, M)
    with pytest.raises(ValueError, match="matmul: shapes"):
        pk.matmul(X9, N)
    with pytest.raises(ValueError, match="dot: lengths"):
        pk.dot(X6, X9)
