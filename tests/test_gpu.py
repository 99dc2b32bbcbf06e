"""GPU-only behaviour: device copies of Views, NumPy arguments, CuPy arrays as kernel arguments.

These need a Kokkos built with CUDA (``python -m kfuse.kokkos install --cuda``, or KFUSE_KOKKOS_ROOT); on a
host-only Kokkos they are skipped. They were
run on an NVIDIA H200 (see README); the rest of the suite runs there too with KFUSE_DEFAULT_SPACE=Cuda.
"""
import numpy as np
import pytest

import kfuse as pk
from kfuse.compiler import toolchain
from kfuse.runtime import device

pytestmark = pytest.mark.skipif("CUDA" not in toolchain.current().backends,
                                reason="needs a Kokkos built with CUDA (python -m kfuse.kokkos install --cuda)")

N = 1000
CUDA_RANGE = lambda n: pk.RangePolicy(pk.Cuda, 0, n)  # noqa: E731


@pk.workunit
def axpy(i, a, x, y):
    y[i] = a * x[i] + y[i]


def test_view_data_moves_only_when_the_other_side_needs_it():
    x, y = pk.View(N), pk.View(N)
    x[:] = np.arange(N)
    y.fill(1.0)
    pk.parallel_for(CUDA_RANGE(N), axpy, a=2.0, x=x, y=y)
    mirror = device._mirrors[y._array.__array_interface__["data"][0]]
    assert mirror.state == device.DEVICE  # result still on the GPU, host copy stale
    np.testing.assert_array_equal(np.asarray(y), 2.0 * np.arange(N) + 1.0)  # the read brings it back
    y[0] = 100.0  # a host write makes the device copy stale: the next launch copies it over
    pk.parallel_for(CUDA_RANGE(N), axpy, a=1.0, x=x, y=y)
    assert y[0] == 100.0 and y[5] == 3.0 * 5 + 1.0


def test_numpy_arguments_are_copied_in_and_out_every_launch():
    x, y = np.arange(N, dtype=np.float64), np.zeros(N)
    pk.parallel_for(CUDA_RANGE(N), axpy, a=1.0, x=x, y=y)
    x[:] = 1.0  # changed behind kfuse's back: must be seen by the next launch
    pk.parallel_for(CUDA_RANGE(N), axpy, a=1.0, x=x, y=y)
    np.testing.assert_array_equal(y, np.arange(N) + 1.0)


def test_cupy_arrays_are_kernel_arguments_eager_and_traced():
    cp = pytest.importorskip("cupy")
    x, y = cp.arange(N, dtype=cp.float64), cp.ones(N)
    pk.parallel_for(CUDA_RANGE(N), axpy, a=2.0, x=x, y=y)
    np.testing.assert_array_equal(cp.asnumpy(y), 2.0 * np.arange(N) + 1.0)
    pk.enable_fusion()
    pk.parallel_for(CUDA_RANGE(N), axpy, a=1.0, x=x, y=y)  # runs at once: CuPy reads have no barrier
    np.testing.assert_array_equal(cp.asnumpy(y), 3.0 * np.arange(N) + 1.0)


def test_fence_makes_numpy_aliases_of_views_current():
    x, y = pk.View(N), pk.View(N)
    alias = np.asarray(y)  # taken before the kernel: no barrier runs when it is read later
    x.fill(1.0)
    pk.parallel_for(CUDA_RANGE(N), axpy, a=3.0, x=x, y=y)
    pk.fence()
    np.testing.assert_array_equal(alias, np.full(N, 3.0))


def test_fence_leaves_results_on_the_gpu_and_deep_copy_stays_there():
    x, y, z = pk.View(N), pk.View(N), pk.View(N)
    x[:] = np.arange(N)
    pk.parallel_for(CUDA_RANGE(N), axpy, a=2.0, x=x, y=y)
    pk.parallel_for(CUDA_RANGE(N), axpy, a=0.0, x=x, y=z)
    pk.fence()
    mirror = lambda v: device._mirrors[v._array.__array_interface__["data"][0]]  # noqa: E731
    assert mirror(y).state == device.DEVICE  # fence copied nothing back
    pk.deep_copy(z, y)  # device to device
    assert mirror(z).state == device.DEVICE and mirror(y).state == device.DEVICE
    np.testing.assert_array_equal(np.asarray(z), 2.0 * np.arange(N))
