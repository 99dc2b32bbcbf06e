"""The lazy tracer's contract: what is delayed, what a host access runs (and what it leaves pending),
Futures standing in for numbers, hazards between calls and host accesses, the trace bound, deferred
errors, and the stats counters. Results are checked against NumPy references or eager kfuse runs.
"""
from __future__ import annotations

import inspect
import math
import operator

import numpy as np
import pytest

import kfuse as pk
from kfuse import context
from programs import N, k_axpy, k_dot, k_scale, k_scan, k_sin, k_stencil

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler



def _tracer():
    return context.current()


@pytest.fixture(params=["traced", "fused"])
def tracing(request):
    """Tracing on, partitions run call by call ("traced") or through the fuser ("fused")."""
    pk.enable_fusion(trace_only=request.param == "traced")
    pk.reset_stats()
    return request.param


@pytest.fixture
def traced_only():
    """Tracing on without fusion: every call that runs is exactly one launch, so counts are exact."""
    pk.enable_fusion(trace_only=True)
    pk.reset_stats()


def pending() -> int:
    return len(_tracer().trace)


def view_of(values) -> pk.View:
    v = pk.View(len(values))
    v[:] = values
    return v


def ref_scale(x):
    return 0.5 * x + 1.0


def ref_stencil(x):
    left = np.concatenate([x[:1], x[:-1]])
    right = np.concatenate([x[1:], x[-1:]])
    return (left + x + right) / 3.0


X0 = np.linspace(-2.0, 3.0, N)
Y0 = np.cos(np.arange(N) * 0.7)


# --- switching tracing on and off ---------------------------------------------------------------
def test_enable_disable_and_context_manager():
    assert not pk.fusion_enabled()
    pk.enable_fusion()
    assert pk.fusion_enabled()
    pk.disable_fusion()
    assert not pk.fusion_enabled()
    x, y = view_of(X0), pk.View(N)
    with pk.fusion():
        assert pk.fusion_enabled()
        pk.parallel_for(N, k_scale, x=x, y=y)
        assert pending() == 1
    assert not pk.fusion_enabled() and pending() == 0
    np.testing.assert_array_equal(np.asarray(y), ref_scale(X0))  # ran at the block's end (nothing pending)


def test_nested_fusion_block_keeps_tracing_on():
    pk.enable_fusion()
    x, y = view_of(X0), pk.View(N)
    with pk.fusion():
        pk.parallel_for(N, k_scale, x=x, y=y)
    assert pk.fusion_enabled() and pending() == 1
    pk.disable_fusion()
    assert pending() == 0
    np.testing.assert_array_equal(np.asarray(y), ref_scale(X0))


def test_disable_fusion_flushes_everything(traced_only):
    x, y, z = view_of(X0), pk.View(N), view_of(Y0)
    pk.parallel_for(N, k_scale, x=x, y=y)
    pk.parallel_for(N, k_sin, x=z)
    r = pk.parallel_reduce(N, k_dot, x=x, y=x)
    assert pk.stats()["kernels_launched"] == 0 and pending() == 3 and not r.done
    pk.disable_fusion()
    assert pending() == 0 and r.done and pk.stats()["kernels_launched"] == 3
    np.testing.assert_array_equal(np.asarray(y), ref_scale(X0))
    np.testing.assert_allclose(np.asarray(z), np.sin(Y0) + 0.25, rtol=1e-15)
    # after disable, calls run when made
    pk.parallel_for(N, k_sin, x=z)
    assert pk.stats()["kernels_launched"] == 4 and pending() == 0


def test_fence_runs_everything_pending(tracing):
    x, y = view_of(X0), pk.View(N)
    pk.parallel_for(N, k_scale, x=x, y=y)
    pk.parallel_for(N, k_sin, x=x)
    pk.fence()
    assert pending() == 0 and pk.fusion_enabled()
    np.testing.assert_array_equal(np.asarray(y), ref_scale(X0))
    np.testing.assert_allclose(np.asarray(x), np.sin(X0) + 0.25, rtol=1e-15)


# --- what is delayed ------------------------------------------------------------------------------
def test_parallel_for_returns_at_once_and_is_counted(traced_only):
    x, y = view_of(X0), pk.View(N)
    for k in range(3):
        assert pk.parallel_for(N, k_scale, x=x, y=y) is None
        s = pk.stats()
        assert (s["ops_traced"], s["kernels_launched"], s["flushes"]) == (k + 1, 0, 0)
    np.testing.assert_array_equal(np.asarray(y), ref_scale(X0))
    s = pk.stats()
    assert (s["ops_traced"], s["kernels_launched"], s["flushes"], s["fused_kernels_launched"]) == (3, 3, 1, 0)


def test_eager_calls_run_when_made():
    pk.reset_stats()
    x, y = view_of(X0), pk.View(N)
    pk.parallel_for(N, k_scale, x=x, y=y)
    assert pk.stats()["kernels_launched"] == 1 and pk.stats()["ops_traced"] == 0
    r = pk.parallel_reduce(N, k_dot, x=x, y=y)
    assert isinstance(r, float) and pk.stats()["kernels_launched"] == 2


def test_reduce_and_scan_return_pending_futures(tracing):
    x, y, z = view_of(X0), pk.View(N), view_of(Y0)
    r = pk.parallel_reduce(N, k_dot, x=x, y=x)
    t = pk.parallel_scan(N, k_scan, x=x, y=y)
    pk.parallel_for(N, k_sin, x=z)  # unrelated
    assert isinstance(r, pk.Future) and isinstance(t, pk.Future)
    assert not r.done and not t.done and pk.stats()["kernels_launched"] == 0
    assert pending() == 3
    assert repr(r) == repr(r.value()) and r.done  # repr is a read: it shows the number, as eager does
    np.testing.assert_allclose(float(r), np.dot(X0, X0), rtol=1e-13)
    assert pending() >= 1 and _tracer().trace.entries[-1].call.prepared.workunit is k_sin
    np.testing.assert_allclose(float(t), X0.sum(), rtol=1e-13)
    np.testing.assert_allclose(np.asarray(y), np.cumsum(X0) / np.arange(1, N + 1), rtol=1e-13)


def _eager_dot(x, y) -> float:
    was, fuse = pk.fusion_enabled(), _tracer().fuse
    pk.disable_fusion()
    value = pk.parallel_reduce(N, k_dot, x=view_of(x), y=view_of(y))
    if was:
        pk.enable_fusion(trace_only=not fuse)
    return value


_BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
           operator.pow, divmod, operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]


@pytest.mark.parametrize("op", _BINARY, ids=lambda f: f.__name__)
def test_future_binary_and_reflected_arithmetic(tracing, op):
    expect = _eager_dot(X0, Y0)
    other = 1.75
    x, y = view_of(X0), view_of(Y0)
    r = pk.parallel_reduce(N, k_dot, x=x, y=y)
    assert op(r, other) == op(expect, other)
    r2 = pk.parallel_reduce(N, k_dot, x=x, y=y)
    assert op(other, r2) == op(other, expect)
    r3 = pk.parallel_reduce(N, k_dot, x=x, y=y)
    assert op(r3, r2) == op(expect, expect)


_USES = [
    ("float", float), ("int", int), ("bool", bool), ("format", lambda r: f"{r:.3f}"), ("str", str),
    ("np.float64", np.float64), ("np.sqrt", lambda r: np.sqrt(abs(r))), ("ufunc", lambda r: np.sqrt(r * r)),
    ("np.array", lambda r: np.array([r, 1.0])), ("np.asarray", np.asarray), ("neg", operator.neg), ("abs", abs),
    ("round", lambda r: round(r, 3)), ("floor", math.floor), ("trunc", math.trunc), ("complex", complex),
    ("pos", operator.pos),
]


@pytest.mark.parametrize("name,use", _USES, ids=[n for n, _ in _USES])
def test_future_conversions_and_numpy_use(tracing, name, use):
    expect = _eager_dot(X0, Y0)
    x, y = view_of(X0), view_of(Y0)
    r = pk.parallel_reduce(N, k_dot, x=x, y=y)
    got, want = use(r), use(expect)
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype == np.float64 and np.array_equal(got, want)
    else:
        assert type(got) is type(want) and got == want
    launched = pk.stats()["kernels_launched"]
    assert r.value() == expect and r + 0 == expect and repr(r) == repr(expect)
    assert pk.stats()["kernels_launched"] == launched  # a resolved Future never runs again


def test_int_future_as_index():
    @pk.workunit
    def count_positive(i: int, acc: pk.Acc[pk.int64], x: pk.View1D[pk.double]):
        if x[i] > 0.0:
            acc += 1

    x = view_of(X0)
    pk.enable_fusion()
    c = pk.parallel_reduce(N, count_positive, x=x)
    assert isinstance(c, pk.Future)
    expect = int((X0 > 0).sum())
    assert list(range(N + 1))[c] == expect and c == expect and isinstance(c.value(), int)
    f = pk.parallel_reduce(N, k_dot, x=x, y=x)
    with pytest.raises(TypeError):
        [0, 1][f]


def test_future_feeds_later_kernel_without_resolving(traced_only):
    x, y = view_of(X0), view_of(Y0)
    r = pk.parallel_reduce(N, k_dot, x=x, y=x)
    pk.parallel_for(N, k_axpy, alpha=r, x=x, y=y)
    assert not r.done and pk.stats()["kernels_launched"] == 0 and pending() == 2
    got = np.asarray(y)
    assert r.done and pending() == 0 and pk.stats()["kernels_launched"] == 2
    alpha = _eager_dot(X0, X0)
    np.testing.assert_array_equal(got, 0.5 * (Y0 + X0 / (1.0 + abs(alpha))))


def test_future_chain_matches_eager(tracing):
    def program():
        a, b, c = view_of(X0), view_of(Y0), pk.View(N)
        r1 = pk.parallel_reduce(N, k_dot, x=a, y=b)
        pk.parallel_for(N, k_axpy, alpha=r1, x=a, y=c)
        r2 = pk.parallel_reduce(N, k_dot, x=c, y=c)
        pk.parallel_for(N, k_axpy, alpha=r2, x=c, y=b)
        r3 = pk.parallel_reduce(N, k_dot, x=b, y=a)
        return np.asarray(b).copy(), np.asarray(c).copy(), float(r1), float(r2), float(r3)

    traced = program()
    pk.disable_fusion()
    eager = program()
    for t, e in zip(traced, eager):
        np.testing.assert_array_equal(t, e)


def test_resolved_future_passed_to_an_eager_call():
    pk.enable_fusion()
    x, y = view_of(X0), view_of(Y0)
    r = pk.parallel_reduce(N, k_dot, x=x, y=x)
    pk.disable_fusion()
    assert r.done
    pk.parallel_for(N, k_axpy, alpha=r, x=x, y=y)
    alpha = _eager_dot(X0, X0)
    np.testing.assert_array_equal(np.asarray(y), 0.5 * (Y0 + X0 / (1.0 + abs(alpha))))


# --- host reads run only what they need -----------------------------------------------------------
_READS = {
    "asarray": lambda v: np.asarray(v).copy(),
    "array": np.array,
    "getitem": lambda v: np.array([v[i] for i in range(N)]),
    "slice": lambda v: np.array(v[:]),
    "iter": lambda v: np.array(list(v)),
    "copy": lambda v: v.copy(),
    "tolist": lambda v: np.array(v.tolist()),
    "str": str,
    "repr": repr,
    "np_sum": np.sum,
    "np_add": lambda v: np.add(v, 0.0),
}


@pytest.mark.parametrize("how", sorted(_READS))
def test_host_read_runs_only_its_partition(traced_only, how):
    a, b, c, d = view_of(X0), pk.View(N), view_of(Y0), pk.View(N)
    pk.parallel_for(N, k_scale, x=a, y=b)
    pk.parallel_for(N, k_sin, x=c)  # unrelated
    pk.parallel_for(N, k_stencil, x=b, y=d)
    pk.parallel_for(N, k_scale, x=c, y=a)  # overwrites a after the first call read it (WAR), unrelated to d
    got = _READS[how](d)
    expect_d = ref_stencil(ref_scale(X0))
    if how in ("str", "repr"):
        assert got == (str(expect_d) if how == "str" else f"View({np.array2string(expect_d)}, dtype=pk.float64)")
    elif how == "np_sum":
        assert got == pytest.approx(expect_d.sum(), rel=1e-14)
    else:
        np.testing.assert_array_equal(got, expect_d)
    assert pending() == 2 and pk.stats()["kernels_launched"] == 2
    assert [e.call.prepared.workunit for e in _tracer().trace.entries] == [k_sin, k_scale]
    np.testing.assert_array_equal(np.asarray(a), ref_scale(np.sin(Y0) + 0.25))
    assert pending() == 0


def test_shape_queries_do_not_flush(traced_only):
    m = pk.View((N, 3))
    x, y = view_of(X0), pk.View(N)
    pk.parallel_for(N, k_scale, x=x, y=y)
    assert (y.extent(0), y.shape, len(y), y.size, y.rank(), m.extent(1)) == (N, (N,), N, N, 1, 3)
    sub = y.subview(slice(2, 6))
    assert sub.shape == (4,) and pending() == 1
    np.testing.assert_array_equal(sub.copy(), ref_scale(X0)[2:6])
    assert pending() == 0


def test_interleaved_partitions_only_read_data_runs(traced_only):
    a, b, c = view_of(X0), pk.View(N), pk.View(N)
    p, q = view_of(Y0), pk.View(N)
    pk.parallel_for(N, k_scale, x=a, y=b)
    pk.parallel_for(N, k_scale, x=p, y=q)
    pk.parallel_for(N, k_stencil, x=b, y=c)
    pk.parallel_for(N, k_sin, x=q)
    pk.parallel_for(N, k_sin, x=c)
    pk.parallel_for(N, k_stencil, x=q, y=p)
    np.testing.assert_array_equal(c.copy(), np.sin(ref_stencil(ref_scale(X0))) + 0.25)
    assert pending() == 3 and pk.stats()["kernels_launched"] == 3
    assert q[0] == np.sin(ref_scale(Y0[0])) + 0.25  # q's producers; its reader (stencil q->p) stays pending
    assert pending() == 1
    np.testing.assert_array_equal(p.copy(), ref_stencil(np.sin(ref_scale(Y0)) + 0.25))
    assert pending() == 0 and pk.stats()["kernels_launched"] == 6


# --- hazards ---------------------------------------------------------------------------------------
def test_raw_chain(tracing):
    a, b, c, d = view_of(X0), pk.View(N), pk.View(N), pk.View(N)
    pk.parallel_for(N, k_scale, x=a, y=b)
    pk.parallel_for(N, k_stencil, x=b, y=c)
    pk.parallel_for(N, k_sin, x=c)
    pk.parallel_for(N, k_scale, x=c, y=d)
    np.testing.assert_allclose(np.asarray(d), ref_scale(np.sin(ref_stencil(ref_scale(X0))) + 0.25), rtol=1e-15)
    assert pending() == 0


def test_war_reader_sees_old_value(tracing):
    x, y = view_of(X0), pk.View(N)
    pk.parallel_for(N, k_scale, x=x, y=y)  # reads x
    pk.parallel_for(N, k_sin, x=x)  # then overwrites x
    np.testing.assert_allclose(np.asarray(x), np.sin(X0) + 0.25, rtol=1e-15)
    assert pending() == 0  # the pending reader had to run before the writer
    np.testing.assert_array_equal(y.copy(), ref_scale(X0))


def test_war_on_read_of_other_view(tracing):
    x, y, z = view_of(X0), pk.View(N), view_of(Y0)
    pk.parallel_for(N, k_scale, x=x, y=y)
    pk.parallel_for(N, k_scale, x=z, y=x)  # overwrites x
    np.testing.assert_array_equal(y.copy(), ref_scale(X0))
    np.testing.assert_array_equal(x.copy(), ref_scale(Y0))


def test_waw_last_writer_wins(tracing):
    x, y, z = view_of(X0), pk.View(N), view_of(Y0)
    pk.parallel_for(N, k_scale, x=x, y=z)
    pk.parallel_for(N, k_stencil, x=x, y=z)
    pk.parallel_for(N, k_scale, x=y, y=z)
    np.testing.assert_array_equal(np.asarray(z), np.full(N, 1.0))
    assert pending() == 0


def test_waw_when_only_the_later_writer_is_needed(traced_only):
    """Reading the scan's total runs the scan; the earlier writer of its output must run first."""
    x, y, z = view_of(X0), view_of(Y0), pk.View(N)
    pk.parallel_for(N, k_scale, x=x, y=z)
    t = pk.parallel_scan(N, k_scan, x=y, y=z)
    assert float(t) == pytest.approx(Y0.sum(), rel=1e-13)
    assert pending() == 0
    np.testing.assert_allclose(np.asarray(z), np.cumsum(Y0) / np.arange(1, N + 1), rtol=1e-13)


def _host_writes():
    def via_asarray(v):
        np.asarray(v)[3] = 100.0

    def via_setitem(v):
        v[3] = 100.0

    def via_slice(v):
        v[3:4] = [100.0]

    def via_data(v):
        v.data[3] = 100.0

    def via_fill(v):
        v.fill(100.0)

    def via_asarray_slice(v):
        arr = np.asarray(v)
        arr[3:4] = np.array([100.0])

    return {f.__name__: f for f in (via_asarray, via_setitem, via_slice, via_data, via_fill, via_asarray_slice)}


HOST_WRITES = _host_writes()


@pytest.mark.parametrize("how", sorted(HOST_WRITES))
def test_host_write_between_calls(tracing, how):
    """A pending reader must see the value from before the host write; a later reader sees the new one."""
    x, y, z = view_of(X0), pk.View(N), pk.View(N)
    pk.parallel_for(N, k_scale, x=x, y=y)
    HOST_WRITES[how](x)
    pk.parallel_for(N, k_scale, x=x, y=z)
    new_x = X0.copy()
    if how == "via_fill":
        new_x[:] = 100.0
    else:
        new_x[3] = 100.0
    np.testing.assert_array_equal(np.asarray(z), ref_scale(new_x))
    np.testing.assert_array_equal(np.asarray(y), ref_scale(X0))


def test_host_write_after_pending_writer(tracing):
    """The host's write lands after the pending writer's, not before."""
    x, y = view_of(X0), pk.View(N)
    pk.parallel_for(N, k_scale, x=x, y=y)
    y[5] = -7.0
    expect = ref_scale(X0)
    expect[5] = -7.0
    np.testing.assert_array_equal(np.asarray(y), expect)


def test_host_write_to_unrelated_view_leaves_work_pending(traced_only):
    x, y, z = view_of(X0), pk.View(N), view_of(Y0)
    pk.parallel_for(N, k_scale, x=x, y=y)
    z[0] = 1.0
    z.fill(2.0)
    assert pending() == 1 and pk.stats()["kernels_launched"] == 0


# --- aliasing ---------------------------------------------------------------------------------------
def test_subviews_share_dependencies(traced_only):
    a = view_of(X0)
    lo, hi = a.subview(slice(0, N // 2)), a.subview(slice(N // 2, N))
    out = pk.View(N // 2)
    pk.parallel_for(N // 2, k_sin, x=lo)
    np.testing.assert_array_equal(hi.copy(), X0[N // 2:])  # disjoint bytes: lo's writer stays pending
    assert pending() == 1
    pk.parallel_for(N // 2, k_scale, x=hi, y=out)
    pk.parallel_for(N, k_sin, x=a)  # overwrites hi after the pending read of it (WAR through the parent)
    expect_a = X0.copy()
    expect_a[:N // 2] = np.sin(expect_a[:N // 2]) + 0.25
    expect_a = np.sin(expect_a) + 0.25
    np.testing.assert_array_equal(lo.copy(), expect_a[:N // 2])
    assert pending() == 0
    np.testing.assert_array_equal(out.copy(), ref_scale(X0[N // 2:]))


def test_strided_subview(tracing):
    a = view_of(X0)
    even = a.subview(slice(0, N, 2))
    pk.parallel_for(N // 2, k_sin, x=even)
    expect = X0.copy()
    expect[::2] = np.sin(expect[::2]) + 0.25
    np.testing.assert_array_equal(np.asarray(a), expect)


def test_two_views_over_one_buffer(tracing):
    buf = X0.copy()
    v1, v2 = pk.array(buf), pk.array(buf)
    out = pk.View(N)
    pk.parallel_for(N, k_sin, x=v1)
    pk.parallel_for(N, k_scale, x=v2, y=out)
    np.testing.assert_array_equal(np.asarray(out), ref_scale(np.sin(X0) + 0.25))
    v2[0] = 9.0  # host write through the second View: later reads through the first see it
    pk.parallel_for(N, k_scale, x=v1, y=out)
    assert out[0] == ref_scale(9.0)


def test_numpy_arrays_passed_directly(tracing):
    buf = X0.copy()
    view = pk.array(buf)
    out = np.zeros(N)
    pk.parallel_for(N, k_sin, x=buf)
    pk.parallel_for(N, k_scale, x=buf, y=out)
    res = pk.array(out)  # a View created after the calls still finds their pending writes
    np.testing.assert_array_equal(np.asarray(res), ref_scale(np.sin(X0) + 0.25))
    np.testing.assert_array_equal(np.asarray(view), np.sin(X0) + 0.25)
    assert pending() == 0


def test_fresh_arrays_do_not_inherit_history(traced_only):
    keep = pk.View(N)
    pk.parallel_for(N, k_scale, x=view_of(Y0), y=keep)  # unrelated, stays pending throughout
    outs, uids = [], set()
    for k in range(40):
        t = pk.View(N)  # every other iteration, likely the memory (and id) of the View dropped just before
        uids.add(t.uid)
        launched = pk.stats()["kernels_launched"]
        assert t[0] == 0.0 and pk.stats()["kernels_launched"] == launched
        t.fill(float(k))
        out = pk.View(N)
        pk.parallel_for(N, k_scale, x=t, y=out)
        pk.parallel_for(N, k_sin, x=t)
        if k % 2:
            assert out[1] == ref_scale(float(k))
            assert t[1] == np.sin(float(k)) + 0.25  # now nothing pending refers to t: its memory is freed
        del t  # with work pending the trace keeps t's memory alive
        outs.append(out)
    assert len(uids) == 40
    for k, out in enumerate(outs):
        np.testing.assert_array_equal(out.copy(), ref_scale(np.full(N, float(k))))
    assert pending() == 20 + 1  # the k_sin calls on even-iteration arrays, and `keep`'s writer, were never needed
    np.testing.assert_array_equal(keep.copy(), ref_scale(Y0))


def test_dropped_view_memory_is_kept_until_its_calls_ran(tracing):
    x = view_of(X0)
    out = pk.View(N)
    pk.parallel_for(N, k_scale, x=x, y=out)
    del x
    filler = [np.full(N, 5.0) for _ in range(50)]  # allocations that could take the freed memory
    assert all((f == 5.0).all() for f in filler)
    np.testing.assert_array_equal(np.asarray(out), ref_scale(X0))


# --- the trace bound ----------------------------------------------------------------------------------
def test_max_trace_bounds_pending_work(traced_only, monkeypatch):
    monkeypatch.setenv("KFUSE_MAX_TRACE", "4")
    x = view_of(X0)
    for k in range(10):
        pk.parallel_for(N, k_sin, x=x)
        assert pending() == (k + 1) % 4
    assert pk.stats()["flushes"] == 2 and pk.stats()["kernels_launched"] == 8
    expect = X0.copy()
    for _ in range(10):
        expect = np.sin(expect) + 0.25
    np.testing.assert_allclose(np.asarray(x), expect, rtol=1e-15)
    monkeypatch.setenv("KFUSE_MAX_TRACE", "100")
    for _ in range(10):
        pk.parallel_for(N, k_sin, x=x)
    assert pending() == 10


# --- deferred errors ----------------------------------------------------------------------------------
@pk.workunit
def k_broken(i: int, x: pk.View1D[pk.double]):
    x[i] = x[i] * 3.0


@pk.workunit
def k_broken_reduce(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i] * 3.0


@pytest.fixture
def broken_codegen(break_builds):
    """The k_broken* workunits never build (their kernels fail as a compiler rejecting them would)."""
    break_builds(k_broken, k_broken_reduce)


def _line_after() -> int:
    return inspect.currentframe().f_back.f_lineno + 1


def test_compile_error_surfaces_at_read_with_call_site(traced_only, broken_codegen):
    x, y = view_of(X0), pk.View(N)
    pk.parallel_for(N, k_scale, x=x, y=y)
    line = _line_after()
    pk.parallel_for(N, k_broken, x=y)
    assert pending() == 2  # the call itself raised nothing
    with pytest.raises(pk.DeferredError) as info:
        np.asarray(y)
    msg = str(info.value)
    assert f"{__file__}:{line}" in msg and "k_broken" in msg and "kfuse test breakage" in msg
    assert isinstance(info.value.__cause__, pk.CompileError)


def test_compile_error_of_a_reduction_surfaces_at_its_use(tracing, broken_codegen):
    x = view_of(X0)
    line = _line_after()
    r = pk.parallel_reduce(N, k_broken_reduce, x=x)
    with pytest.raises(pk.DeferredError, match=f"{__file__}:{line}"):
        float(r)
    with pytest.raises(pk.DeferredError):  # still not computed: asking again fails the same way
        r + 1.0


def test_futures_cut_off_by_a_failed_flush_raise(traced_only, broken_codegen):
    x, y = view_of(X0), pk.View(N)
    pk.parallel_for(N, k_broken, x=x)
    line = _line_after()
    r = pk.parallel_reduce(N, k_dot, x=x, y=y)
    with pytest.raises(pk.DeferredError):
        pk.fence()
    with pytest.raises(pk.DeferredError, match=f"{__file__}:{line} depends on kernel 'k_broken'"):
        float(r)  # it reads what the failed call writes
    assert pending() == 0


def test_disable_fusion_turns_off_even_if_flush_fails(traced_only, broken_codegen):
    pk.parallel_for(N, k_broken, x=view_of(X0))
    with pytest.raises(pk.DeferredError):
        pk.disable_fusion()
    assert not pk.fusion_enabled()


# --- stats ------------------------------------------------------------------------------------------
@pytest.mark.backend("kokkos")  # counts compiles and cache hits
def test_stats_counters_and_reset(traced_only):
    @pk.workunit
    def k_probe(i: int, x: pk.View1D[pk.double]):
        x[i] = x[i] + 2.0

    x = view_of(X0)
    pk.initialize()  # Kokkos's own runtime library is built or loaded first, so only k_probe is counted below
    pk.reset_stats()
    assert set(pk.stats()) >= {"ops_traced", "flushes", "kernels_launched", "fused_kernels_launched", "compiles",
                               "cache_hits"}
    assert all(v == 0 for v in pk.stats().values())
    pk.parallel_for(N, k_probe, x=x)
    pk.parallel_for(N, k_probe, x=x)
    s = pk.stats()
    assert (s["ops_traced"], s["kernels_launched"], s["compiles"] + s["cache_hits"]) == (2, 0, 0)
    pk.fence()
    s = pk.stats()
    # the first use of a new specialisation builds or loads it once; the second call reuses it
    assert (s["flushes"], s["kernels_launched"], s["compiles"] + s["cache_hits"]) == (1, 2, 1)
    assert s["fused_kernels_launched"] == 0
    np.testing.assert_array_equal(x.copy(), X0 + 4.0)
    pk.reset_stats()
    assert all(v == 0 for v in pk.stats().values())
