"""Calls not worth tracing (kfuse/untraced.py): a kernel whose calls keep running alone runs untraced, at once,
for a while (doubling each time), and only when nothing is pending; its results equal eager's in every case."""
from __future__ import annotations

import numpy as np
import pytest

import kfuse as pk
from kfuse import context, untraced
from fusion_check import assert_same, kick, push, run_eager_and_fused, view_of

pytestmark = pytest.mark.backend("python")
N = 16


@pk.workunit
def ut_double(i: int, x: pk.View1D[pk.double]):
    x[i] = 2.0 * x[i]


@pk.workunit
def ut_sum(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i]


def read_after_each(calls: int):
    """Each call read at once: every flush is that call alone."""
    x = view_of(np.linspace(0.0, 1.0, N))
    seen = []
    for _ in range(calls):
        pk.parallel_for(N, ut_double, x=x)
        seen.append(float(x[1]))
    return seen, x.copy()


def test_a_kernel_that_keeps_running_alone_runs_untraced_with_backoff():
    expected, got, stats, _ = run_eager_and_fused(lambda: read_after_each(60))
    assert_same(expected, got)
    # traced 3 times (alone each time), 16 untraced, 3 traced, 32 untraced, 3 traced, the last 3 untraced
    assert stats["calls_untraced"] == 60 - 3 * untraced.STREAK
    assert stats["ops_traced"] == 3 * untraced.STREAK


def test_a_kernel_that_fuses_stays_traced():
    def loop():
        x, v = view_of(np.ones(N)), view_of(np.zeros(N))
        for _ in range(40):
            pk.parallel_for(N, push, dt=0.5, x=x, v=v)
            pk.parallel_for(N, kick, dt=0.5, x=x, v=v)
            pk.fence()
        return x.copy(), v.copy()

    expected, got, stats, _ = run_eager_and_fused(loop)
    assert_same(expected, got)
    assert stats["calls_untraced"] == 0


def test_an_untraced_kernel_is_traced_while_something_is_pending():
    pk.enable_fusion()
    x, y = view_of(np.ones(N)), view_of(np.ones(N))
    for _ in range(untraced.STREAK):
        pk.parallel_for(N, ut_double, x=x)
        float(x[0])
    assert context.current().trace.entries == [] and pk.stats()["calls_untraced"] == 0
    pk.parallel_for(N, ut_double, x=x)  # untraced: nothing pending
    assert pk.stats()["calls_untraced"] == 1 and np.asarray(x)[0] == 2.0 ** (untraced.STREAK + 1)
    pk.parallel_for(N, push, dt=1.0, x=y, v=x)  # pending: y += x
    pk.parallel_for(N, ut_double, x=x)  # must wait for the push, which reads x: traced behind it
    assert pk.stats()["calls_untraced"] == 1 and len(context.current().trace.entries) == 2
    np.testing.assert_array_equal(np.asarray(y), 1.0 + 2.0 ** (untraced.STREAK + 1))
    np.testing.assert_array_equal(np.asarray(x), 2.0 ** (untraced.STREAK + 2))
    pk.disable_fusion()


def test_reductions_stay_traced():
    pk.enable_fusion()
    x = view_of(np.ones(N))
    for _ in range(3 * untraced.STREAK):
        total = pk.parallel_reduce(N, ut_sum, x=x)
        assert isinstance(total, pk.Future) and float(total) == N
    assert pk.stats()["calls_untraced"] == 0
    pk.disable_fusion()
