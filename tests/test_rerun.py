"""Rerun of a repeated flush (kfuse/rerun.py): the calls of a time-step loop that match the last replayed flush
are only counted, and the kept kernels run again at the next host access.

Every test compares the fused run with the eager run of the same program bit for bit (and the plain loop with
NumPy); the changes that must leave the rerun -- another value, View, policy, kernel, an extra or missing call,
new memory under a View, an escaped View, array operations, fusion switched, other transforms, a failed launch --
are made at a cycle after reruns began, and at a call in the middle of a cycle.
"""
from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kfuse as pk
from kfuse import config, context, rerun
from kfuse.transforms import manager as transforms
from kfuse.errors import DeferredError, KernelFault, LaunchError
from fusion_check import assert_same, kick, push, run_eager_and_fused, view_of

N = 16
X0, V0 = np.linspace(-1.0, 1.0, N), np.linspace(0.5, -0.5, N)


@pk.workunit
def kick_too(i: int, dt: float, x: pk.View1D[pk.double], v: pk.View1D[pk.double]):
    v[i] = v[i] - dt * x[i]


@pk.workunit
def shift_into(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i + 1]


def hows(text: str) -> list:
    """How each flush of an explain text ran: "rerun", "replayed", "cached" or ""."""
    out = []
    for line in text.splitlines():
        if line.startswith("flush #"):
            out.append("rerun" if "(rerun" in line else "replayed" if "(replayed)" in line
                       else "cached" if "(plan cached)" in line else "")
    return out


def loop(steps: int, every: int, change=None):
    """The push/kick loop, read every ``every`` steps; ``change(step, x, v)`` may make the step's calls
    itself (returns True) or act around them. Returns the reads and the final x and v."""
    x, v = view_of(X0), view_of(V0)
    seen = []
    for step in range(steps):
        if not (change and change(step, x, v)):
            pk.parallel_for(N, push, dt=0.01, x=x, v=v)
            pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
        if step % every == every - 1:
            seen.append(float(x[3]))
    return seen, x.copy(), v.copy()


def numpy_pushes(steps: int, x0=X0):
    """Per step of the push/kick loop, as NumPy computes it: (x after the push, v before the kick)."""
    x, v = x0.copy(), V0.copy()
    for _ in range(steps):
        x = x + 0.01 * v
        yield x, v
        v = v - 0.01 * x


def numpy_loop(steps: int, every: int):
    x, v, seen = X0.copy(), V0.copy(), []
    for step in range(steps):
        x = x + 0.01 * v
        v = v - 0.01 * x
        if step % every == every - 1:
            seen.append(float(x[3]))
    return seen, x, v


pytestmark = pytest.mark.backend("python")


def test_a_loop_read_every_few_steps_is_rerun_and_computes_what_numpy_and_eager_compute():
    expected, got, stats, text = run_eager_and_fused(lambda: loop(40, 5))
    assert_same(expected, got)
    want = numpy_loop(40, 5)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-13)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-13)
    flushes = hows(text)
    # flush 1 is planned, 2 planned (it starts with the kick left pending), 3 replayed; then every one is rerun
    assert flushes[:3] == ["", "", "replayed"] and flushes[3:-1] == ["rerun"] * (len(flushes) - 4)
    assert stats["ops_traced"] == 80  # every call counted, matched or traced
    assert "rerun" in text and "kick + push" in text


def _rerunning():
    """x, v and the template of a loop (two steps per read) that is being rerun."""
    pk.enable_fusion()
    x, v = view_of(X0), view_of(V0)
    for _ in range(4):
        for _ in range(2):
            pk.parallel_for(N, push, dt=0.01, x=x, v=v)
            pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
        float(x[0])
    assert context.current().records[-1].how == "rerun"
    return x, v, next(iter(context.current().rerun.templates.values()))[-1]


def test_a_rerun_flush_leaves_the_calls_the_read_does_not_need_pending():
    """The read of x needs the last push, not the last kick: that kick stays pending after a rerun, as it does
    after a traced flush, and runs when v is read."""
    x, v, _ = _rerunning()
    assert [e.call.prepared.name for e in context.current().trace.entries] == ["kick"]
    got_v = v.copy()
    pk.disable_fusion()
    want = numpy_loop(8, 8)
    np.testing.assert_allclose(got_v, want[2], rtol=1e-13)


def _scalar(value):
    def change(step, x, v):
        if step == 17:
            pk.parallel_for(N, push, dt=value, x=x, v=v)
            pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
            return True
    return change


def _view_over_same_memory(step, x, v):
    if step in (17, 18):
        other = x.subview(slice(0, N))  # the same bytes, another View object
        pk.parallel_for(N, push, dt=0.01, x=other, v=v)
        pk.parallel_for(N, kick, dt=0.01, x=other, v=v)
        return True


def _policy(step, x, v):
    if step == 17:
        pk.parallel_for(pk.RangePolicy(0, N), push, dt=0.01, x=x, v=v)
        pk.parallel_for(N - 1, kick, dt=0.01, x=x, v=v)
        return True


def _workunit(step, x, v):
    if step == 17:
        pk.parallel_for(N, push, dt=0.01, x=x, v=v)
        pk.parallel_for(N, kick_too, dt=0.01, x=x, v=v)
        return True


def _extra_call(step, x, v):
    if step == 17:
        y = view_of(np.zeros(N))
        pk.parallel_for(N - 1, shift_into, x=x, y=y)
        assert float(y[0]) == float(x[1])


def _missing_call(step, x, v):
    if step == 17:
        pk.parallel_for(N, push, dt=0.01, x=x, v=v)
        return True


def _early_read(step, x, v):
    if step == 16:
        float(v[2])  # in the middle of a cycle: the matched calls so far run through the trace


def _resize(step, x, v):
    if step == 15:
        x.resize(0, N)  # the same extent: nothing happens
    if step == 16:
        x.resize(0, N + 4)  # new memory under the same View
        x.resize(0, N)


def _escaped(step, x, v):
    if step == 17:
        raw = np.asarray(x)  # the host can read x without a barrier now
        pk.parallel_for(N, push, dt=0.01, x=x, v=v)
        assert raw[3] == float(x[3])  # the push ran at once
        pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
        del raw
        return True


def _array_operation(step, x, v):
    if step == 17:
        pk.parallel_for(N, push, dt=0.01, x=x, v=v)
        w = pk.multiply(v, 1.0)  # recorded between two matched calls
        pk.parallel_for(N, kick, dt=0.01, x=x, v=w)
        pk.parallel_for(N, kick, dt=0.0, x=x, v=v)
        pk.deep_copy(v, w)
        return True


def _fusion_off_and_on(step, x, v):
    if step == 17:
        pk.parallel_for(N, push, dt=0.01, x=x, v=v)
        pk.disable_fusion()
        pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
        pk.enable_fusion()
        return True


def _trace_only(step, x, v):
    if step == 17:
        pk.parallel_for(N, push, dt=0.01, x=x, v=v)
        pk.enable_fusion(trace_only=True)
        pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
        float(x[0])
        pk.enable_fusion()
        return True


def _transforms(step, x, v):
    if step == 16:
        pk.set_transforms("none")
    if step == 27:
        pk.set_transforms(None)


CHANGES = {"another scalar value": _scalar(0.02), "negative zero": _scalar(-0.0), "an int for a float": _scalar(1),
           "another View over the same memory": _view_over_same_memory, "another policy": _policy,
           "another workunit": _workunit, "an extra call": _extra_call, "a call missing": _missing_call,
           "a read in the middle of a cycle": _early_read, "new memory under a View": _resize,
           "an escaped View": _escaped, "an array operation": _array_operation, "fusion off and on": _fusion_off_and_on,
           "tracing only": _trace_only, "other transforms": _transforms}


@pytest.mark.parametrize("name", list(CHANGES))
def test_a_change_leaves_the_rerun_and_computes_what_eager_computes(name):
    change = CHANGES[name]
    expected, got, _, text = run_eager_and_fused(lambda: loop(40, 5, change))
    pk.set_transforms(None)
    assert_same(expected, got)
    flushes = hows(text)
    assert flushes[-2] == "rerun", flushes  # the loop is rerun again after the change (the last flush: the kick)


@pytest.mark.backend("kokkos")  # (compiled kernels take pointers, which the kept launches keep)
def test_a_view_given_new_memory_between_reruns_leaves_them_and_computes_what_eager_computes():
    """A loop rerun at every step (each step's calls match the kept flush whole) whose View gets new memory of
    another extent between two steps: the kept launches took its old memory, so the next step is traced, and the
    loop then reruns on the new memory."""
    def grown(step, x, v):
        if step == 10:
            x.resize(0, N + 4)

    expected, got, _, text = run_eager_and_fused(lambda: loop(20, 1, grown))
    assert_same(expected, got)
    assert hows(text)[-2] == "rerun"


@pytest.mark.parametrize("kept, given", [(0.0, -0.0), (-0.0, 0.0), (True, 1), (1, True), (2.5, np.float64(2.5))])
def test_a_scalar_equal_under_eq_but_another_value_leaves_the_rerun(kept, given):
    """A loop's scalar and one ``==`` calls equal to it that is another value to a kernel (a zero of the other sign,
    a bool for an int, a NumPy float for a float): the cycle with it is not rerun, and the loop is rerun again after."""
    def program():
        x, v = view_of(X0), view_of(V0)
        hows_seen = []
        for step in range(50):
            pk.parallel_for(N, push, dt=given if step == 32 else kept, x=x, v=v)
            pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
            if step % 5 == 4:
                float(x[3])
                hows_seen.append(hows(list(context.current().records)[-1].text())[0])
        return hows_seen, x.copy(), v.copy()

    pk.enable_fusion()
    try:
        flushes, _, _ = program()
    finally:
        pk.disable_fusion()
    assert flushes[5] == "rerun" and flushes[6] != "rerun" and flushes[-1] == "rerun", flushes


def test_a_launch_that_fails_to_start_hands_its_calls_back_to_the_trace(monkeypatch):
    """The failed launch's calls and the later ones run through the trace (which reports their failures)."""
    x, v, template = _rerunning()
    kernel, rt = template.launches[0][0], context.current()
    original = kernel.launch
    failed = []

    def fail_once(slots, args):
        if not failed:
            failed.append(True)
            raise LaunchError("stand-in: the launch did not start")
        return original(slots, args)

    monkeypatch.setattr(kernel, "launch", fail_once)
    for _ in range(2):
        pk.parallel_for(N, push, dt=0.01, x=x, v=v)
        pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
    got = float(x[3])
    assert failed and "rerun launch 1 failed" in "\n".join(rt.records[-2].notes)
    monkeypatch.undo()
    pk.disable_fusion()
    want = numpy_loop(10, 10)
    assert got == pytest.approx(numpy_loop(10, 10)[1][3], rel=1e-13)
    np.testing.assert_allclose(x.copy(), want[1], rtol=1e-13)


def _fault_in_a_rerun(monkeypatch):
    """x, v and the template of a rerun loop whose fused launch then faulted (the read raised); the fault undone
    (the kernel's own launch back, the test's other patches, KFUSE_PROFIT=off among them, kept)."""
    x, v, template = _rerunning()
    kernel = template.launches[0][0]
    launch = kernel.launch

    def fault(slots, args):
        raise KernelFault("stand-in fault: index out of bounds", workunit="push", filename=__file__, lineno=1,
                          kernel=kernel.name, member=0)

    monkeypatch.setattr(kernel, "launch", fault)
    for _ in range(2):
        pk.parallel_for(N, push, dt=0.01, x=x, v=v)
        pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
    with pytest.raises(DeferredError, match="push"):
        float(x[3])
    monkeypatch.setattr(kernel, "launch", launch)
    return x, v, template


def test_a_fault_in_a_rerun_launch_loses_what_it_wrote(monkeypatch):
    x, v, template = _fault_in_a_rerun(monkeypatch)
    assert template not in context.current().rerun.templates.get(id(template.steps[0].workunit), [])


def test_after_a_failure_whose_memory_is_gone_loops_rerun_again(monkeypatch, tmp_path):
    monkeypatch.setenv("KFUSE_CACHE_DIR", str(tmp_path))  # no profitability decision from another test's runs
    x, v, template = _fault_in_a_rerun(monkeypatch)
    pk.disable_fusion()
    failures = context.current().failures
    assert failures
    del x, v, template
    gc.collect()  # the poisoned memory is gone (the DeferredError's traceback was a cycle): nothing can read it
    assert not failures
    expected, got, _, text = run_eager_and_fused(lambda: loop(40, 5))
    assert_same(expected, got)
    assert "rerun" in hows(text), hows(text)


@pytest.mark.parametrize("known_contents", [False, True], indirect=True)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_loops_with_random_changes_compute_what_eager_computes(known_contents, data):
    """A loop body of 1-4 calls over three Views (reductions among them, their Futures read at once or steps
    later), read every few steps; at random steps a call's scalar,
    View, range or kernel changes, a call is added or dropped, or the host writes or reads another View."""
    body = data.draw(st.lists(st.sampled_from(["push", "kick", "shift", "norm"]), min_size=1, max_size=4),
                     label="body")
    pairs = data.draw(st.lists(st.sampled_from([(0, 1), (1, 0), (1, 2), (2, 0), (0, 0)]), min_size=len(body),
                               max_size=len(body)), label="views")
    every = data.draw(st.integers(1, 4), label="every")
    steps = 24
    changes = data.draw(st.dictionaries(st.integers(0, steps - 1), st.sampled_from(
        ["dt", "-0.0", "view", "range", "kernel", "extra", "drop", "host write", "read another"]), max_size=3),
        label="changes")

    def program():
        views = [view_of(X0), view_of(V0), view_of(X0[::-1].copy())]
        seen, pending = [], []
        for step in range(steps):
            what = changes.get(step)
            for k, (name, (a, b)) in enumerate(zip(body, pairs)):
                first = k == 0
                dt = 0.02 if what == "dt" and first else -0.0 if what == "-0.0" and first else 0.01
                x = views[a].subview(slice(0, N)) if what == "view" and first else views[a]
                n = N - 2 if what == "range" and first else N - 1
                if what == "drop" and first:
                    continue
                if name == "norm":
                    pending.append(pk.parallel_reduce(n, rr_norm, x=x))
                    if step % 3 == b:
                        seen.append(float(pending.pop(0)))
                elif name == "shift":
                    pk.parallel_for(n, shift_into, x=x, y=views[b])
                else:
                    kernel = {"push": push, "kick": kick_too if what == "kernel" and first else kick}[name]
                    pk.parallel_for(n, kernel, dt=dt, x=x, v=views[b])
            if what == "extra":
                pk.parallel_for(N, push, dt=0.5, x=views[2], v=views[0])
            if what == "host write":
                views[1][0] = float(step)
            if what == "read another":
                seen.append(float(views[1 + step % 2][step % N]))
            if step % every == every - 1:
                seen.append(float(views[0][step % N]))
        seen += [float(f) for f in pending]
        return seen, *(v.copy() for v in views)

    expected, got, _, _ = run_eager_and_fused(program)
    assert_same(expected, got)


@pytest.mark.backend("kokkos")
def test_a_compiled_loop_is_rerun_and_equals_eager():
    expected, got, stats, text = run_eager_and_fused(lambda: loop(30, 3))
    assert_same(expected, got)
    assert hows(text).count("rerun") >= 6
    assert stats["fused_kernels_launched"] >= 6


@pytest.mark.backend("null")
def test_a_group_the_model_keeps_apart_is_rerun_apart_until_its_compile_is_repaid(monkeypatch):
    """Cost model: a 10.5 s compile, 1 s saved a run (one launch): occurrences 1-10 run apart (3-10 rerun, each
    counted), the 11th fuses through the trace (a template again, fused) and the later ones are rerun fused."""
    from kfuse.fuser import cost

    monkeypatch.setenv("KFUSE_PROFIT", "model")
    backend = context.current().backend
    monkeypatch.setattr(type(backend), "compile_seconds", 10.5, raising=False)
    monkeypatch.setattr(type(backend), "built", lambda self, rendered: False)
    monkeypatch.setattr(cost, "LAUNCH_SECONDS", 1.0)
    monkeypatch.setattr(cost, "BYTES_PER_SECOND", float("inf"))
    x, v = view_of(X0), view_of(V0)
    pk.parallel_for(N, push, dt=0.01, x=x, v=v)  # eager: both members are built
    pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
    pk.enable_fusion()
    for _ in range(15):
        pk.parallel_for(N, push, dt=0.01, x=x, v=v)
        pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
        pk.fence()
    records = list(context.current().records)[-15:]
    assert [r.how for r in records] == ["", "replayed"] + ["rerun"] * 8 + ["replayed"] + ["rerun"] * 4
    assert [r.apart(r.groups[0]) for r in records] == [True] * 10 + [False] * 5
    fused = [launch.fused for launch in backend.launches[2:]]
    assert fused == [False, False] * 10 + [True] * 5


def test_a_labelled_loop_is_rerun():
    """PyKokkos's optional kernel label, ``pk.parallel_for("name", n, workunit, ...)``, is matched too."""
    def labelled():
        x, v = view_of(X0), view_of(V0)
        for step in range(20):
            pk.parallel_for("push", N, push, dt=0.01, x=x, v=v)
            pk.parallel_for("kick", N, kick, dt=0.01, x=x, v=v)
            if step % 4 == 3:
                pk.fence()
        return x.copy(), v.copy()

    expected, got, _, text = run_eager_and_fused(labelled)
    assert_same(expected, got)
    assert hows(text)[3:] == ["rerun"] * 2


@pk.workunit
def rr_norm(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i] * x[i]


@pk.workunit
def rr_scale(i: int, s: float, x: pk.View1D[pk.double]):
    x[i] = s * x[i]


def test_a_loop_reading_a_reduction_each_step_is_rerun():
    """The common convergence loop: update, reduce, read the Future; the reduction's value comes from the rerun."""
    def converge():
        x, v = view_of(X0), view_of(V0)
        norms = []
        for _ in range(25):
            pk.parallel_for(N, push, dt=0.01, x=x, v=v)
            pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
            norm = pk.parallel_reduce(N, rr_norm, x=x)
            norms.append(float(norm))
        return norms, x.copy(), v.copy()

    expected, got, _, text = run_eager_and_fused(converge)
    assert_same(expected, got)
    norms = [float(np.sum(x * x)) for x, _ in numpy_pushes(25)]
    np.testing.assert_allclose(got[0], norms, rtol=1e-12)
    assert hows(text)[:-1] == ["rerun"] * 15  # explain keeps the last 16 flushes; the last runs the final kick


def test_a_flush_whose_head_takes_new_views_each_run_is_rerun():
    """ExaMiniMD's set-up shape, on arrays made anew each run: two calls on x and v, a reduction over another
    array read at once (its flush leaves the two pending: a head), then a call on x, and x read. From the third
    run the head's new Views fill its slots and that flush is rerun; every run computes what eager and NumPy do."""
    def run_once(k):
        x, v, w = view_of(X0 * (k + 1)), view_of(V0), view_of(X0 + k)
        pk.parallel_for(N, push, dt=0.01, x=x, v=v)
        pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
        norm = float(pk.parallel_reduce(N, rr_norm, x=w))
        pk.parallel_for(N, rr_scale, s=2.0, x=x)
        return norm, x.copy(), v.copy()

    def program():
        return [run_once(k) for k in range(6)]

    expected, got, _, text = run_eager_and_fused(program)
    assert_same(expected, got)
    for k, (norm, x, v) in enumerate(got):
        (x_want, v_want), = numpy_pushes(1, X0 * (k + 1))
        np.testing.assert_array_equal(x, 2.0 * x_want)
        np.testing.assert_array_equal(v, v_want - 0.01 * x_want)
        assert norm == pytest.approx(float(np.sum((X0 + k) ** 2)), rel=1e-12)
    flushes = [line for line in text.splitlines() if line.startswith("flush #")]
    with_head = [line for line in flushes if " 3 call(s)" in line]
    assert len(with_head) == 6 and all("(rerun" in line for line in with_head[2:]), "\n".join(flushes)


@pytest.mark.parametrize("change", ["escaped", "aliased", "scalar", "fewer"])
def test_a_head_that_differs_leaves_the_rerun_and_computes_what_eager_computes(change):
    """The set-up shape above, with run 4's head changed: its x over a NumPy array the program holds (escaped), v
    the same View as x (two slots, one memory), another scalar, or one call fewer: that run is traced."""
    held = []

    def run_once(k):
        x, v, w = view_of(X0 * (k + 1)), view_of(V0), view_of(X0 + k)
        dt = 0.01
        if k == 4 and change == "escaped":
            held.append(X0 * (k + 1))
            x = pk.from_numpy(held[-1])
        elif k == 4 and change == "aliased":
            v = x
        elif k == 4 and change == "scalar":
            dt = 0.02
        pk.parallel_for(N, push, dt=dt, x=x, v=v)
        if not (k == 4 and change == "fewer"):
            pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
        norm = float(pk.parallel_reduce(N, rr_norm, x=w))
        pk.parallel_for(N, rr_scale, s=2.0, x=x)
        return norm, x.copy(), v.copy()

    def program():
        held.clear()
        return [run_once(k) for k in range(7)]

    expected, got, _, text = run_eager_and_fused(program)
    assert_same(expected, got)
    assert "(rerun" in _flush_with_scale(text, 3) and "(rerun" not in _flush_with_scale(text, 4), text


def _flush_with_scale(text: str, run: int) -> str:
    """The header of the flush that ran run ``run``'s rr_scale (each run has one; explain keeps the last 16)."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("flush #"):
            current = [line]
            blocks.append(current)
        elif current is not None:
            current.append(line)
    with_scale = [block[0] for block in blocks if any("rr_scale" in line for line in block[1:])]
    return with_scale[run]


def test_reductions_taken_by_later_calls_or_left_pending_compute_what_eager_computes():
    """A reduction whose Future a later call takes (that call is not matched: the Future is new each step), and
    one left pending by the read (its value is read a step later)."""
    def program():
        x, y = view_of(X0), view_of(V0)
        seen, late = [], None
        for step in range(16):
            norm = pk.parallel_reduce(N, rr_norm, x=x)
            pk.parallel_for(N, rr_scale, s=0.5, x=x)
            other = pk.parallel_reduce(N, rr_norm, x=y)  # not needed by the read of x: stays pending
            if step % 4 == 3:
                pk.parallel_for(N, rr_scale, s=norm, x=y)  # takes a Future
            seen.append(float(x[2]))
            if late is not None:
                seen.append(float(late))
            late = other
        return seen, x.copy(), y.copy()

    expected, got, _, text = run_eager_and_fused(program)
    assert_same(expected, got)
    assert "rerun" in text


# --- new Views in a template's slots ---------------------------------------------------------------------
def _runs(make, count: int = 6, steps: int = 3):
    """``count`` runs of the push/kick loop, each on the Views ``make(run)`` returns (x, v), read at the end."""
    out = []
    for run in range(count):
        x, v = make(run)
        for _ in range(steps):
            pk.parallel_for(N, push, dt=0.01, x=x, v=v)
            pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
        pk.fence()
        out.append((x.copy(), v.copy()))
    return out


def test_runs_on_new_views_of_the_same_geometry_are_rerun_and_compute_what_eager_computes():
    """A program that makes its arrays anew for each run: the later runs are rerun on the new Views."""
    expected, got, _, text = run_eager_and_fused(lambda: _runs(lambda run: (view_of(X0 + run), view_of(V0))))
    assert_same(expected, got)
    x, v = X0 + 5, V0.copy()
    for _ in range(3):
        x = x + 0.01 * v
        v = v - 0.01 * x
    np.testing.assert_allclose(got[-1][0], x, rtol=1e-13)
    assert hows(text)[-3:] == ["rerun"] * 3


def _halves(run):
    base = view_of(np.concatenate([X0 + run, V0]))
    return base.subview(slice(0, N)), base.subview(slice(N, 2 * N))


def _one_view_twice(run):
    x = view_of(X0 + run)
    return (x, x) if run == 4 else (x, view_of(V0))


def _over_the_same_memory(run):
    x = view_of(X0 + run)
    return (x, x.subview(slice(0, N))) if run == 4 else (x, view_of(V0))


def _overlapping(run):
    base = view_of(np.concatenate([X0 + run, V0]))
    return (base.subview(slice(0, N)), base.subview(slice(N // 2, N // 2 + N))) if run == 4 else _halves(run)


def _strided(run):
    if run == 4:
        wide = view_of(np.repeat(X0, 2))
        return wide.subview(slice(0, 2 * N, 2)), view_of(V0)
    return view_of(X0 + run), view_of(V0)


def _swapped(run):
    pair = [view_of(X0 + run), view_of(V0)]
    return tuple(reversed(pair)) if run % 2 else tuple(pair)


def _atomic(run):
    x = view_of(X0 + run)
    if run == 4:
        v = pk.View([N], pk.double, trait=pk.Atomic)  # another specialisation: atomic stores
        v[:] = V0
        return x, v
    return x, view_of(V0)


NEW_VIEWS = {"two halves of one array": _halves, "one View in both slots": _one_view_twice,
             "a second View over the same memory": _over_the_same_memory, "overlapping windows": _overlapping,
             "a strided View": _strided, "the slots' Views swapped": _swapped, "an Atomic View": _atomic}


@pytest.mark.parametrize("name", list(NEW_VIEWS))
def test_new_views_that_alias_or_differ_are_never_rerun_wrongly(name):
    """Runs 0-3 and 5 make fresh Views of one pattern, run 4 another (aliasing, strided, atomic): every run
    computes what eager computes, bit for bit."""
    expected, got, _, text = run_eager_and_fused(lambda: _runs(NEW_VIEWS[name]))
    assert_same(expected, got)
    assert "rerun" in hows(text)


def _same_memory_each_run(run):
    x = view_of(X0 + run)
    return x, x.subview(slice(0, N))


def _overlapping_each_run(run):
    base = view_of(np.concatenate([X0 + run, V0]))
    return base.subview(slice(0, N)), base.subview(slice(N // 2, N // 2 + N))


@pytest.mark.parametrize("make", [_same_memory_each_run, _overlapping_each_run], ids=["same memory", "windows"])
def test_new_views_overlapping_as_the_templates_did_are_rerun(make):
    """Each run's Views are new and share memory (two Views over one array; two overlapping windows of one array):
    they overlap as the template's did, so the later runs are rerun on them (rerun.py ``_layout``), and every run
    computes what eager does. (A run whose overlap differs is traced anew: test_new_views_that_alias_or_differ_...)"""
    expected, got, _, text = run_eager_and_fused(lambda: _runs(make, count=8))
    assert_same(expected, got)
    assert hows(text)[-4:] == ["rerun"] * 4, hows(text)


@pytest.mark.backend("kokkos")
@pytest.mark.parametrize("name", ["fresh Views", "the slots' Views swapped", "two halves of one array",
                                  "one View in both slots"])
def test_compiled_reruns_launch_from_buffers_packed_for_their_own_views(monkeypatch, name):
    """A compiled kernel's rerun launches from an argument buffer packed when the template took its Views; new
    Views pack a new one. Runs on fresh, swapped, aliased Views compute what eager computes, bit for bit. Host
    kernels whatever KFUSE_DEFAULT_SPACE says: a device kernel packs at each launch (its Views' device copies)."""
    from kfuse.runtime.launch import CompiledKernel
    pk.set_default_space(pk.OpenMP)
    buffers = []
    original = CompiledKernel.launch

    def launch(self, bounds, args, packed=None, wait=True):
        if packed is not None:
            buffers.append(packed)
        return original(self, bounds, args, packed, wait)
    monkeypatch.setattr(CompiledKernel, "launch", launch)
    make = (lambda run: (view_of(X0 + run), view_of(V0))) if name == "fresh Views" else NEW_VIEWS[name]
    expected, got, _, text = run_eager_and_fused(lambda: _runs(make))
    assert_same(expected, got)
    assert "rerun" in hows(text) and buffers
    assert len(set(buffers)) > 1  # each run's new Views: a buffer of their own pointers


@pytest.mark.parametrize("known_contents", [False, True], indirect=True)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_runs_on_new_and_aliased_views_compute_what_eager_computes(known_contents, data):
    """Several runs of a random loop body over three Views; before each run every View is kept, made anew, made
    a window of a shared array (apart or overlapping another), made another View over an earlier one's memory,
    or replaced by another slot's View. Overlapping windows make some kernels read elements other threads write:
    such a program is deterministic only when its kernels run in order, so this runs on the reference interpreter
    (module mark); compiled with one thread it passes too."""
    body = data.draw(st.lists(st.sampled_from(["push", "kick", "shift", "norm"]), min_size=1, max_size=4),
                     label="body")
    pairs = data.draw(st.lists(st.sampled_from([(0, 1), (1, 0), (1, 2), (2, 0), (0, 0)]), min_size=len(body),
                               max_size=len(body)), label="views")
    runs = data.draw(st.lists(st.lists(st.sampled_from(["keep", "new", "new", "window", "overlap", "same memory",
                                                        "other slot"]), min_size=3, max_size=3),
                              min_size=2, max_size=6), label="runs")

    def program():
        shared = view_of(np.linspace(-2.0, 2.0, 4 * N))
        now = [view_of(X0), view_of(V0), view_of(X0[::-1].copy())]
        seen = []
        for run, choices in enumerate(runs):
            for k, what in enumerate(choices):
                if what == "new":
                    now[k] = view_of(np.roll(X0, run + k))
                elif what == "window":
                    now[k] = shared.subview(slice(k * N, (k + 1) * N))
                elif what == "overlap":
                    now[k] = shared.subview(slice(k * N + N // 2, (k + 1) * N + N // 2))
                elif what == "same memory":
                    now[k] = now[(k + 1) % 3].subview(slice(0, N))
                elif what == "other slot":
                    now[k] = now[(k + 2) % 3]
            for _ in range(2):
                for name, (a, b) in zip(body, pairs):
                    if name == "norm":
                        seen.append(pk.parallel_reduce(N - 1, rr_norm, x=now[a]))
                    elif name == "shift":
                        pk.parallel_for(N - 1, shift_into, x=now[a], y=now[b])
                    else:
                        pk.parallel_for(N - 1, push if name == "push" else kick, dt=0.01, x=now[a], v=now[b])
            pk.fence()
            seen += [v.copy() for v in now]
        return [float(s) if not isinstance(s, np.ndarray) else s for s in seen], shared.copy()

    expected, got, _, _ = run_eager_and_fused(program)
    assert_same(expected, got)


@pk.workunit
def rr_prefix(i: int, acc: pk.Acc[pk.double], last_pass: bool, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    acc += x[i]
    if last_pass:
        y[i] = acc


def test_a_loop_with_a_scan_is_rerun_and_its_totals_are_delivered():
    """A scan (a neighbour-list build's bin offsets) in the loop: matched like a reduction, its total delivered."""
    def program():
        x, v, y = view_of(X0 + 1.0), view_of(V0), view_of(np.zeros(N))
        totals = []
        for _ in range(12):
            pk.parallel_for(N, push, dt=0.01, x=x, v=v)
            total = pk.parallel_scan(N, rr_prefix, x=x, y=y)
            pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
            totals.append(float(total))
        return totals, y.copy(), v.copy()

    expected, got, _, text = run_eager_and_fused(program)
    assert_same(expected, got)
    pushed = [x for x, _ in numpy_pushes(12, X0 + 1.0)]
    np.testing.assert_allclose(got[0], [float(np.sum(x)) for x in pushed], rtol=1e-12)
    np.testing.assert_allclose(got[1], np.cumsum(pushed[-1]), rtol=1e-12)
    assert "rerun" in hows(text)


def test_runs_under_two_transform_sets_keep_a_template_each():
    """A program run alternately with all transforms and none (as kfuse.bench does) reruns under both."""
    def program():
        out = []
        for run in range(8):
            pk.set_transforms("none" if run % 2 else None)
            out += _runs(lambda r: (view_of(X0 + run), view_of(V0)), count=1)
        pk.set_transforms(None)
        return out

    expected, got, _, text = run_eager_and_fused(program)
    assert_same(expected, got)
    assert hows(text)[-4:] == ["rerun"] * 4


def test_a_new_view_over_an_array_the_program_holds_is_not_deferred():
    """A new View in a slot whose memory the program reaches directly (an array it keeps): the call writing it runs
    at once, so the program's direct read of its array sees the result, as eager."""
    def program():
        x, v = view_of(X0), view_of(V0)
        seen = []
        for run in range(8):
            arr = np.zeros(N)
            w = pk.from_numpy(arr if run >= 5 else arr.copy())  # from run 5 on, the program holds w's memory
            pk.parallel_for(N, push, dt=0.01, x=x, v=v)
            pk.parallel_for(N - 1, shift_into, x=x, y=w)
            seen.append(float(arr[3]))  # no barrier: NumPy reads the memory directly
            pk.fence()
        return seen, x.copy()

    expected, got, _, text = run_eager_and_fused(program)
    assert_same(expected, got)
    assert 0.0 not in got[0][5:] and "rerun" in hows(text)


def test_array_operation_reductions_a_rerun_matches_deliver_their_value():
    """An array operation's reduction logged behind a pending call is a call like any other: when a rerun matches
    it, the Future the program holds still gets its value."""
    def program():
        x, v = view_of(X0), view_of(V0)
        sums = []
        for _ in range(8):
            pk.parallel_for(N, push, dt=0.01, x=x, v=v)
            total = pk.sum(pk.multiply(v, 2.0))
            pk.parallel_for(N, kick, dt=0.01, x=x, v=v)
            sums.append(float(total))
        return sums, x.copy(), v.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    sums = [float(np.sum(2.0 * v)) for _, v in numpy_pushes(8)]
    np.testing.assert_allclose(got[0], sums, rtol=1e-12, atol=1e-12)
    assert stats["array_ops_recorded"] == 16  # the reductions were logged behind the pending push


def test_array_operations_recorded_before_a_call_are_logged_first_and_the_loop_is_rerun():
    """A step that starts with array operations on new memory (a prediction's, say: recorded, not yet a call) and
    then makes kernel calls: the operations are logged as the call before them, so from the second step on the
    rerun meets the calls in the program's order and its flushes are rerun, not traced again."""
    def program():
        v = view_of(V0)
        seen = []
        for step in range(8):
            v[step] = 0.5 * step  # new data each step
            scaled = pk.log(pk.add(pk.multiply(v, v), 1.0))  # new memory each step
            y = pk.empty(N - 1)
            pk.parallel_for(N - 1, shift_into, x=scaled, y=y)
            seen.append(y.copy())
        return seen

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    assert hows(text)[-4:] == ["rerun"] * 4


def test_the_settings_a_repetition_is_compared_under_follow_the_environment_and_the_runtime(monkeypatch):
    """``rerun._settings`` reads the settings again only when their raw environment values or the runtime's
    transform set changed; every such change shows in its answer, as reading each setting would."""
    rt = context.current()
    for name in ("KFUSE_MAX_GROUP", "KFUSE_TRANSFORMS", "KFUSE_ALIGN_VIEWS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KFUSE_PROFIT", "measure")
    everything = frozenset(transforms.NAMES)
    default = rerun._settings(rt)
    assert default == (config.MAX_GROUP.get(), "measure", everything, "none")
    monkeypatch.setenv("KFUSE_MAX_GROUP", "3")
    assert rerun._settings(rt) == (3, "measure", everything, "none")
    monkeypatch.setenv("KFUSE_PROFIT", "off")
    assert rerun._settings(rt) == (3, "off", everything, "none")
    monkeypatch.setenv("KFUSE_ALIGN_VIEWS", "all")
    assert rerun._settings(rt) == (3, "off", everything, "all")
    monkeypatch.setenv("KFUSE_TRANSFORMS", "args,loops")
    assert rerun._settings(rt) == (3, "off", frozenset({"args", "loops"}), "all")
    pk.set_transforms(["restrict"])
    try:
        assert rerun._settings(rt) == (3, "off", frozenset({"restrict"}), "all")
    finally:
        pk.set_transforms(None)
    monkeypatch.setenv("KFUSE_TRANSFORMS", "none")
    assert rerun._settings(rt) == (3, "off", frozenset(), "all")
    for name in ("KFUSE_MAX_GROUP", "KFUSE_TRANSFORMS", "KFUSE_ALIGN_VIEWS"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("KFUSE_PROFIT", "measure")
    assert rerun._settings(rt) == default
