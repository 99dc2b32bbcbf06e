"""Replay of a repeated partition (kfuse/fuser/replay.py): a partition whose signature was seen reuses the earlier
graph, plan and fused-kernel keys, so it must replay only when everything those depend on is equal.

The property test draws partitions and variations of them (another View over the same or other memory, another
shape, aliasing, a scalar value, an offset, a kernel, a range, a Future) and checks that equal signatures always
mean equal graphs and equal fused-kernel keys; the end-to-end tests check values against NumPy and eager, and
that each kind of change is planned afresh.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import kfuse as pk
from kfuse import context
from kfuse.calls import prepare
from kfuse.fuser import graph as graphs
from kfuse.fuser.replay import signature
from kfuse.pipeline import group_key
from fusion_check import assert_same, kick, push, run_eager_and_fused, view_of

N = 32


@pk.workunit
def rp_shift(i: int, k: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i + k]


@pk.workunit
def rp_scale(i: int, a: float, b: float, x: pk.View1D[pk.double]):
    x[i] = a * x[i] + b


@pk.workunit
def rp_sum(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i]


def how(last: int = 1) -> list:
    """How the last flushes were scheduled: "replayed", "cached" or ""."""
    return [r.how for r in list(context.current().records)[-last:]]


# --- equal signatures mean equal graphs and keys (no compiler, no data) ---------------------------------------
class _Pool:
    """Views a partition may use: two of one shape, a second View over the first one's memory, two subviews of it
    that start at one address (one strided), one of another shape, two strided subviews of one array that start
    at one address and have one shape."""

    def __init__(self):
        x, big = pk.View(N), pk.View(3 * N)
        self.views = [x, pk.View(N), pk.View.wrap(x._array), x.subview(slice(0, N // 2)),
                      x.subview(slice(0, N, 2)), pk.View(N // 2), big.subview(slice(0, 2 * N, 2)),
                      big.subview(slice(0, 3 * N, 3))]


CHOICES = {"dt": [0.5, 1.0, -0.0, 0.0], "k": [0, 1], "a": [1.0, 2.0, -0.0], "b": [1.0, 2.0, 0.0]}
SIZES = [N // 2 - 1, N // 2 - 2]  # every View has room for x[i + 1]


def _call(rng: random.Random, pool: _Pool) -> tuple:
    """(workunit, thread count, arguments) of one call."""
    wu = rng.choice([push, kick, rp_shift, rp_scale, rp_sum])
    names = {rp_shift: ["k", "x", "y"], rp_scale: ["a", "b", "x"], rp_sum: ["x"]}.get(wu, ["dt", "x", "v"])
    return wu, rng.choice(SIZES), {name: _value(rng, pool, name) for name in names}


def _value(rng: random.Random, pool: _Pool, name: str):
    return rng.choice(CHOICES[name]) if name in CHOICES else rng.choice(pool.views)


def _vary(rng: random.Random, pool: _Pool, spec: list) -> list:
    """``spec`` with one call, one call's range or one argument drawn again (often to what it was)."""
    spec = [(wu, n, dict(args)) for wu, n, args in spec]
    k = rng.randrange(len(spec))
    wu, n, args = spec[k]
    what = rng.choice(["call", "argument", "argument", "range"])
    if what == "call":
        spec[k] = _call(rng, pool)
    elif what == "range":
        spec[k] = (wu, rng.choice(SIZES), args)
    else:
        name = rng.choice(sorted(args))
        args[name] = _value(rng, pool, name)
    return spec


def _calls(spec: list) -> list:
    return [prepare(wu, "reduce" if wu is rp_sum else "for", n, (), dict(args)) for wu, n, args in spec]


@pytest.mark.backend("null")
@pytest.mark.parametrize("seed", range(20))
def test_equal_signatures_mean_equal_graphs_and_keys(seed):
    rng = random.Random(seed)
    pool = _Pool()
    equal = different = 0
    for _ in range(40):
        spec = [_call(rng, pool) for _ in range(rng.randint(2, 6))]
        first = _calls(spec)
        second = _calls(_vary(rng, pool, spec))
        if len(first) != len(second):
            continue
        align = rng.choice(("none", "all"))  # "all": the graphs hold the storages' frames too
        a, b = graphs.of(first, align), graphs.of(second, align)
        if signature(first, 32, align) == signature(second, 32, align):
            equal += 1
            everything = list(range(len(first)))
            assert a == b
            assert group_key(a, everything, first, tuple(x for c in first for x in c.args)) == \
                group_key(b, everything, second, tuple(x for c in second for x in c.args))
        else:
            different += 1
    assert equal and different  # both cases were met


@pytest.mark.backend("null")
def test_a_call_taking_a_future_has_no_signature():
    pk.enable_fusion()
    x = pk.View(N)
    total = pk.parallel_reduce(N, rp_sum, x=x)
    assert isinstance(total, pk.Future)
    calls = [prepare(rp_scale, "for", N, (), {"a": 1.0, "b": total, "x": x}),
             prepare(rp_scale, "for", N, (), {"a": 1.0, "b": 1.0, "x": x})]
    assert signature(calls, 32) is None and signature(calls[1:], 32) is not None


# --- end to end ---------------------------------------------------------------------------------------------------
@pytest.mark.backend("python")
def test_a_replayed_loop_computes_what_numpy_and_eager_compute():
    """Every step's partition, once seen, is replayed with that step's own time step ``dt``."""
    x0, v0 = np.linspace(0.5, 1.5, N), np.linspace(0.2, -0.1, N)

    def program():
        x, v = view_of(x0), view_of(v0)
        seen = []
        for step in range(12):
            dt = 0.01 * (1 + step % 3)
            pk.parallel_for(N, push, dt=dt, x=x, v=v)
            pk.parallel_for(N, kick, dt=dt, x=x, v=v)
            seen.append(float(pk.parallel_reduce(N, rp_sum, x=x)))
        return np.asarray(seen), x.copy(), v.copy()

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    x, v, sums = x0.copy(), v0.copy(), []
    for step in range(12):
        dt = 0.01 * (1 + step % 3)
        x = x + dt * v
        v = v - dt * x
        sums.append(x.sum())
    np.testing.assert_allclose(got[0], sums, rtol=1e-12)
    np.testing.assert_allclose(got[1], x, rtol=1e-13)
    np.testing.assert_allclose(got[2], v, rtol=1e-13)
    # flush 1 runs push and sum; flushes 2-12 the kick left pending, push and sum; the last the final kick
    heads = [line for line in text.splitlines() if line.startswith("flush #")]
    assert [h.endswith("(replayed)") for h in heads] == [False, False] + [True] * 10 + [False]
    assert stats["fused_kernels_launched"] == 12


@pytest.mark.backend("python")
def test_changes_the_plan_depends_on_are_not_replayed():
    """Each change runs after the unchanged partition was replayed, is planned afresh (not replayed) and
    computes what NumPy computes; run again, it is replayed in turn."""
    pk.enable_fusion()
    base = np.arange(2 * N, dtype=float)
    x, y, other = view_of(base), view_of(-base), view_of(2 * base)
    short = view_of(base[:N])
    expect = {"x": base.copy(), "y": -base.copy(), "other": 2 * base, "short": base[:N].copy()}
    views = {"x": x, "y": y, "other": other, "short": short}

    def step(src, dst, k=0, n=N, a=2.0, b=1.0, kernel=rp_shift):
        """Two calls (one a kernel taking scalars a and b) and a read; returns how they were scheduled."""
        pk.parallel_for(n, rp_scale, a=a, b=b, x=views[src])
        expect[src][:n] = a * expect[src][:n] + b
        if kernel is rp_shift:
            pk.parallel_for(n, rp_shift, k=k, x=views[src], y=views[dst])
            expect[dst][:n] = expect[src][k:k + n]
        else:
            pk.parallel_for(n, kernel, dt=0.5, x=views[src], v=views[dst])
            expect[src][:n] = expect[src][:n] + 0.5 * expect[dst][:n]
        np.testing.assert_array_equal(np.asarray(views[dst]), expect[dst])
        np.testing.assert_array_equal(np.asarray(views[src]), expect[src])
        return how()[0]

    changes = {
        "another View": dict(src="x", dst="other"),
        "another shape": dict(src="short", dst="y", n=N),
        "aliasing": dict(src="x", dst="x", k=0),
        "an offset": dict(src="x", dst="y", k=1),
        "equal scalars": dict(src="x", dst="y", a=1.0, b=1.0),
        "another kernel": dict(src="x", dst="y", kernel=push),
        "another range": dict(src="x", dst="y", n=N - 1),
    }
    # a rerun (kfuse/rerun.py) also skips planning: it may run an unchanged partition, or one on another View of
    # the same geometry that aliases nothing ("another View"), but no change the plan depends on
    again = ("replayed", "rerun")
    assert step("x", "y") in ("", "cached")
    for change, args in changes.items():
        assert step("x", "y") in again, change
        assert step("x", "y", a=3.0, b=0.5) == "replayed", change  # new values, the same pattern
        assert step(**args) not in (("replayed",) if change == "another View" else again), change
        assert step(**args) in again, change


@pytest.mark.backend("python")
def test_another_group_bound_is_not_replayed(monkeypatch):
    pk.enable_fusion()
    x, v = view_of(np.ones(N)), view_of(np.zeros(N))
    # back at 32, the template kept under that bound is rerun (kfuse/rerun.py keeps one per settings)
    for bound, expected in (("32", ["", "replayed"]), ("1", ["", "replayed"]), ("32", ["rerun"])):
        monkeypatch.setenv("KFUSE_MAX_GROUP", bound)
        for _ in expected:
            for _ in range(2):
                pk.parallel_for(N, push, dt=0.5, x=x, v=v)
                pk.parallel_for(N, kick, dt=0.5, x=x, v=v)
            pk.fence()
        assert how(len(expected)) == expected
        assert len(context.current().records[-1].groups) == (1 if bound == "32" else 4)
