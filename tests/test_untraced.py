"""Calls not worth tracing (kfuse/untraced.py): a kernel whose calls keep running alone runs untraced, at once,
for a while (doubling each time), and only when nothing is pending; its results equal eager's in every case."""
from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kfuse as pk
from kfuse import config, context, rerun, untraced
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
    evidence = untraced.EVIDENCE * untraced.STREAK  # more than the first backoffs (16, 32)
    calls = 2 * untraced.STREAK + 2 * evidence - 5  # ends inside the second untraced stretch
    expected, got, stats, _ = run_eager_and_fused(lambda: read_after_each(calls))
    assert_same(expected, got)
    # traced 3 times (alone each time), untraced for 64 x 3 calls, traced 3 times, untraced for the rest
    assert stats["ops_traced"] == 2 * untraced.STREAK
    assert stats["calls_untraced"] == calls - 2 * untraced.STREAK


@pk.workunit
def ut_average(i: int, src: pk.View1D[pk.double], dst: pk.View1D[pk.double]):
    dst[i] = 0.5 * (src[i - 1] + src[i + 1])


def sweeps(times: int, growing: bool):
    """Stencil sweeps read after each of ``times`` rounds (each call reads its neighbours' values from the call before:
    no fusion); ``growing``: each round two calls longer than the one before, so no flush repeats."""
    a, b = view_of(np.linspace(0.0, 1.0, N)), view_of(np.zeros(N))
    for t in range(times):
        for _ in range(20 + t * growing):
            pk.parallel_for(pk.RangePolicy(1, N - 1), ut_average, src=a, dst=b)
            pk.parallel_for(pk.RangePolicy(1, N - 1), ut_average, src=b, dst=a)
        float(a[3])
    return a.copy(), b.copy()


def test_the_calls_the_flushes_ran_alone_count_as_evidence():
    expected, got, stats, _ = run_eager_and_fused(lambda: sweeps(5, growing=True))
    assert_same(expected, got)
    # two flushes traced (40 and 42 calls alone), then 64 x 82 calls untraced: the rest
    assert stats["ops_traced"] == 40 + 42 and stats["calls_untraced"] == 44 + 46 + 48, stats


def test_a_repeated_flush_of_lone_calls_is_rerun_not_left_to_the_streaks():
    """Its second occurrence is kept as a template: its calls are compared and launched back to back at the read
    (kfuse/rerun.py), which the measured setting then times against running them untraced."""
    expected, got, stats, text = run_eager_and_fused(lambda: sweeps(5, growing=False))
    assert_same(expected, got)
    assert stats["calls_untraced"] == 0 and stats["ops_traced"] == 5 * 40, stats
    assert "(rerun:" in text, text


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


def test_a_reduction_that_keeps_running_alone_runs_untraced_and_returns_a_known_future():
    def sums():
        x, seen = view_of(np.ones(N)), []
        for k in range(4 * untraced.STREAK):
            x[k % N] = float(k)  # a host write, then a reduction read at once: each flush is the reduction alone
            total = pk.parallel_reduce(N, ut_sum, x=x)
            seen.append((type(total).__name__, float(total)))
        return seen

    expected, got, stats, _ = run_eager_and_fused(sums)
    assert [v for _, v in got] == [v for _, v in expected]
    assert {kind for kind, _ in got} == {"Future"}  # fused, traced or not, a reduction returns a Future
    assert stats["calls_untraced"] == 3 * untraced.STREAK and stats["ops_traced"] == untraced.STREAK


# --- a repeated flush judged whole: rerun (traced, fused) or untraced ----------------------------------------------
def costed_clock(per_traced_call: float, fused: float = 1.0, single: float = 1.0):
    """A clock that advances per launch (fused or not) and per call counted by the tracer, and by nothing else."""
    counts = context.current().counts
    return lambda: (per_traced_call * counts["ops_traced"] + fused * counts["fused_kernels_launched"]
                    + single * (counts["kernels_launched"] - counts["fused_kernels_launched"]))


@pytest.fixture
def measured(monkeypatch, tmp_path):
    monkeypatch.setenv("KFUSE_PROFIT", "measure")
    monkeypatch.setenv("KFUSE_PROFIT_TRIALS", "2")
    monkeypatch.setenv("KFUSE_CACHE_DIR", str(tmp_path / "cache"))


def time_steps(steps: int, fresh: bool = False, dt=lambda step: 0.5):
    """``push`` + ``kick`` + a reduction of ``v``, read every step; with ``fresh``, each step on new Views."""
    x, v = view_of(np.linspace(0.0, 1.0, N)), view_of(np.ones(N))
    seen = []
    for step in range(steps):
        if fresh:
            x, v = view_of(np.asarray(x).copy()), view_of(np.asarray(v).copy())
        pk.parallel_for(N, push, dt=dt(step), x=x, v=v)
        pk.parallel_for(N, kick, dt=dt(step), x=x, v=v)
        total = pk.parallel_reduce(N, ut_sum, x=v)  # needs both calls: one partition, read whole
        seen.append((float(total), float(x[2])))
    return seen, x.copy(), v.copy()


def fused_under(clock, program):
    """``program`` eagerly, then fused with ``clock`` as the runtime's profitability clock."""
    expected = program()
    pk.reset_stats()
    pk.enable_fusion()
    context.current().profit.clock = clock()
    try:
        got = program()
        return expected, got, pk.stats(), pk.explain()
    finally:
        pk.disable_fusion()


@pytest.mark.parametrize("fresh", [False, True])
def test_a_repetition_that_costs_more_traced_than_untraced_runs_untraced(measured, fresh):
    expected, got, stats, text = fused_under(lambda: costed_clock(10.0), lambda: time_steps(12, fresh))
    assert_same(expected, got)
    # steps 1-4 time the fused group, 5 runs it fused; then 6 rerun, 7 untraced, 8 rerun, 9 untraced: decided
    assert stats["profit_decided"] == 2 and stats["ops_traced"] == 3 * 7, (stats, text)
    assert stats["calls_untraced"] == 3 * 5, (stats, text)
    assert "run untraced, measured" in text and "(run untraced:" in text, text


def test_a_repetition_cheaper_rerun_keeps_being_rerun(measured):
    expected, got, stats, text = fused_under(lambda: costed_clock(0.0, fused=1.0, single=5.0),
                                             lambda: time_steps(12))
    assert_same(expected, got)
    assert stats["calls_untraced"] == 3 * 2 and stats["profit_decided"] == 2  # the two untraced timings only
    assert "run untraced" not in text


def test_after_the_decision_repetitions_run_untraced_and_other_calls_go_the_ordinary_way(measured):
    """Decided untraced, each repetition runs as the timings did (every call compared with the template and launched
    at once: counted untraced, none traced); a step that passes another scalar is no repetition and is traced."""
    runs = []  # per run of the program: step -> (calls traced, calls untraced) as the step began

    def program():
        marks = {}
        runs.append(marks)

        def dt(step):
            stats = pk.stats()
            marks.setdefault(step, (stats["ops_traced"], stats["calls_untraced"]))
            return 0.5 if step < 12 else 0.25
        return time_steps(14, dt=dt)

    expected, got, stats, text = fused_under(lambda: costed_clock(10.0), program)
    assert_same(expected, got)
    fused = runs[1]
    per_step = [(fused[k + 1][0] - fused[k][0], fused[k + 1][1] - fused[k][1]) for k in range(13)]
    assert "run untraced" in text and stats["profit_decided"] >= 1
    assert per_step[5:9] == [(0, 3), (3, 0), (3, 0), (0, 3)], per_step  # timings: untraced, rerun, rerun, untraced
    assert per_step[9:12] == [(0, 3)] * 3, per_step  # steps 9-11: decided, untraced repetitions
    assert per_step[12] == (3, 0), per_step  # step 12 (dt 0.25): traced
    assert context.current().rerun.templates  # the decided template stays


def test_a_decided_repetition_resumes_its_template_and_a_changed_setting_ends_it_within_the_checks(measured,
                                                                                                  monkeypatch):
    """Once a repetition ran untraced, decided so, the next one starts from that template at once (``Rerun.resume``);
    the settings it was made under are asked at every ``RESUME_CHECKS``-th repetition, so a setting changed between
    two (KFUSE_MAX_GROUP here) ends the untraced repetitions within that many, after which the steps are traced;
    every step equals eager's."""
    changed = 12
    steps = changed + rerun.RESUME_CHECKS + 3
    runs = []  # per run of the program: step -> (calls traced, calls untraced, a template to resume) as it began

    def program():
        marks = {}
        runs.append(marks)

        def dt(step):
            if step == changed:
                monkeypatch.setenv("KFUSE_MAX_GROUP", "2")
            stats, rt = pk.stats(), context.current()
            marks.setdefault(step, (stats["ops_traced"], stats["calls_untraced"], rt.rerun.resume is not None))
            return 0.5
        monkeypatch.delenv("KFUSE_MAX_GROUP", raising=False)
        return time_steps(steps, dt=dt)

    expected, got, stats, text = fused_under(lambda: costed_clock(10.0), program)
    assert_same(expected, got)
    fused = runs[1]
    per_step = [(fused[k + 1][0] - fused[k][0], fused[k + 1][1] - fused[k][1]) for k in range(steps - 1)]
    assert per_step[9:changed] == [(0, 3)] * (changed - 9), per_step  # decided: untraced repetitions
    assert all(fused[k][2] for k in range(10, changed + 1)), fused  # each after an untraced one: resumed
    after = per_step[changed:]
    noticed = after.index((3, 0))  # the first traced step after the change: no template of these settings
    assert 0 <= noticed < rerun.RESUME_CHECKS and after[:noticed] == [(0, 3)] * noticed, per_step


def test_a_resumed_repetition_asks_the_settings_at_every_check(measured, monkeypatch):
    """With a check at every repetition, the step right after the change is traced."""
    monkeypatch.setattr(rerun, "RESUME_CHECKS", 1)
    runs = []  # per run of the program: step -> calls traced as it began

    def program():
        marks = {}
        runs.append(marks)

        def dt(step):
            if step == 12:
                monkeypatch.setenv("KFUSE_MAX_GROUP", "2")
            marks.setdefault(step, pk.stats()["ops_traced"])
            return 0.5
        monkeypatch.delenv("KFUSE_MAX_GROUP", raising=False)
        return time_steps(14, dt=dt)

    expected, got, stats, text = fused_under(lambda: costed_clock(10.0), program)
    assert_same(expected, got)
    fused = runs[1]
    traced = [fused[k + 1] - fused[k] for k in range(13)]
    assert traced[9:12] == [0, 0, 0] and traced[12] == 3, traced


def test_an_untraced_repetition_keeps_one_view_where_the_template_had_one(measured):
    """Steps 0-11 pass one View as both ``x`` and ``v`` of ``kick`` (one slot in two places); once decided untraced,
    a repetition passing two Views there is no repetition of that template: it is traced, and every step still
    equals eager's."""
    def program():
        x, v = view_of(np.linspace(0.0, 1.0, N)), view_of(np.ones(N))
        seen, marks = [], []
        for step in range(16):
            pk.parallel_for(N, push, dt=0.5, x=x, v=v)
            pk.parallel_for(N, kick, dt=0.25, x=v if step < 12 else x, v=v)
            total = pk.parallel_reduce(N, ut_sum, x=v)  # needs both calls: one partition
            seen.append((float(total), float(x[2])))
            stats = pk.stats()
            marks.append((stats["ops_traced"], stats["calls_untraced"]))
        return seen, marks

    (expected, _), (got, marks), stats, text = fused_under(lambda: costed_clock(10.0), program)
    assert got == expected
    per_step = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(marks, marks[1:])]  # per_step[k]: step k + 1
    assert per_step[9:11] == [(0, 3)] * 2, (per_step, text)  # steps 10 and 11: decided, untraced
    assert per_step[11] == (2, 1), (per_step, text)  # step 12: push untraced, then kick with two Views where the
    # template had one is no repetition: it and the reduction are traced


@pk.workunit
def ut_shift(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i + 1]


def test_a_repeated_flush_that_fuses_nothing_runs_untraced_without_timings(measured):
    """``ut_shift`` reads x[i + 1], which ``ut_double`` then writes: no group forms. The flush's rerun could only
    launch the same two kernels later, so its repetitions run untraced at once (untraced.lone), whatever a timing
    would say (here traced calls cost nothing on the clock), and explain() says why."""
    def program():
        x, y = view_of(np.linspace(0.0, 1.0, N + 1)), view_of(np.zeros(N))
        seen, marks = [], []
        for _ in range(6):
            pk.parallel_for(N, ut_shift, x=x, y=y)
            pk.parallel_for(N + 1, ut_double, x=x)
            pk.fence()
            seen.append((float(y[3]), float(x[5])))
            stats = pk.stats()
            marks.append((stats["ops_traced"], stats["calls_untraced"]))
        return seen, marks

    (expected, _), (got, marks), stats, text = fused_under(lambda: costed_clock(0.0, fused=1.0, single=5.0),
                                                           program)
    assert got == expected
    per_step = [(b[0] - a[0], b[1] - a[1]) for a, b in zip([(0, 0)] + marks, marks)]
    assert per_step == [(2, 0), (2, 0)] + [(0, 2)] * 4, per_step  # traced, kept (replayed), then untraced
    assert stats["profit_trials"] == 0, stats
    assert "! run untraced: none of its kernels runs fused" in text, text


def test_a_call_that_leaves_an_untraced_timing_goes_the_ordinary_way(measured):
    def program():  # step 7 would be the first untraced timing; its first call passes another dt
        return time_steps(12, dt=lambda step: 0.25 if step == 6 else 0.5)

    expected, got, stats, _ = fused_under(lambda: costed_clock(10.0), program)
    assert_same(expected, got)
    assert stats["profit_decided"] == 2 and stats["calls_untraced"] > 0, stats


def test_a_trial_goes_untraced_rerun_rerun_untraced_keeps_its_timings_bounded_and_decides_once():
    trial = untraced.Trial()
    sides = []
    for seconds in (1.0, 3.0, 2.0, 1.5):  # untraced, rerun, rerun, untraced
        side = untraced.runs_untraced(trial, 2)
        sides.append(side)
        words = untraced.timed(trial, side, seconds, 2)
    assert sides == [True, False, False, True]  # each side meets both kinds of a repetition of period 2
    assert trial.untraced and words == ("unfused: run untraced, measured 2.00x faster than tracing and fusing (best "
                                        "of 2 repetition(s) each way)")
    assert untraced.timed(trial, False, 0.1, 2) is None and len(trial.traced_s) == 2 and trial.untraced
    tie = untraced.Trial()
    for side in (True, False) * untraced.MORE:  # a tie is a close call: timed MORE times each
        words = untraced.timed(tie, side, 1.0, 1)
    assert tie.untraced is True  # a tie goes untraced: it costs what eager calls cost
    assert words == "unfused: run untraced, measured within 5% of tracing and fusing (best of 3 repetition(s) each way)"
    warming = untraced.Trial()  # equal costs, each repetition faster than the one before: untraced has the last
    sides = []
    for seconds in (6.0, 5.0, 4.0, 3.0, 2.0, 1.0):
        sides.append(untraced.runs_untraced(warming, 3))
        untraced.timed(warming, sides[-1], seconds, 3)
    assert sides == [True, False, False, True, False, True]
    assert warming.untraced is True and min(warming.untraced_s) == 1.0


def test_a_close_trial_times_more_repetitions_and_a_clear_one_does_not():
    clear = untraced.Trial()
    for seconds in (1.0, 2.0, 2.1, 1.1):  # untraced, rerun, rerun, untraced: untraced 2x faster
        untraced.timed(clear, untraced.runs_untraced(clear, 2), seconds, 2)
    assert clear.untraced is True and len(clear.untraced_s) == len(clear.traced_s) == 2
    close = untraced.Trial()  # rerun 3% faster at two each: six each, still 3%: a near tie, run untraced
    times = {True: iter([1.03, 1.04, 1.05, 1.03, 1.04, 1.06]), False: iter([1.0, 1.02, 1.01, 1.0, 1.02, 1.01])}
    sides = []
    while close.untraced is None:
        side = untraced.runs_untraced(close, 2)
        sides.append(side)
        untraced.timed(close, side, next(times[side]), 2)
    assert close.untraced is True and sides.count(True) == sides.count(False) == 2 * untraced.MORE
    assert sides[:4] == [True, False, False, True]
    faster = untraced.Trial()  # rerun 8% faster, best and median: rerun at two each
    for side, seconds in ((True, 1.08), (False, 1.0), (False, 1.01), (True, 1.09)):
        untraced.timed(faster, side, seconds, 2)
    assert faster.untraced is False and len(faster.traced_s) == 2
    turned = untraced.Trial()  # close at two each; the next untraced timings pull clear: decided at three each
    for side, seconds in ((True, 0.98), (False, 1.0), (False, 1.0), (True, 1.03), (False, 1.01), (True, 0.8)):
        assert untraced.runs_untraced(turned, 2) is side
        untraced.timed(turned, side, seconds, 2)
    assert turned.untraced is True and len(turned.untraced_s) == 3
    split = untraced.Trial()  # one lucky untraced timing makes its best while its median is worse than rerun's
    for side, seconds in ((True, 1.02), (False, 1.0), (False, 1.0), (True, 1.03), (False, 1.01), (True, 0.8)):
        untraced.timed(split, side, seconds, 2)
    assert split.untraced is None  # clear by the best alone, which turned's same timings but one would decide
    for k in range(3):  # timed on, up to MORE times as many, each side having its chance of a lucky timing
        assert split.untraced is None, k
        untraced.timed(split, False, 1.0, 2)
        untraced.timed(split, True, 1.03, 2)
    assert split.untraced is True and len(split.untraced_s) == len(split.traced_s) == 2 * untraced.MORE


def test_a_flush_decided_untraced_is_timed_again_after_its_repetitions():
    trial = untraced.Trial()
    for side, seconds in ((False, 2.0), (True, 1.0)):
        untraced.timed(trial, side, seconds, 1, steps=untraced.MAX_BACKOFF // 4)
    assert trial.untraced and trial.left == 4
    for _ in range(3):
        untraced.ran_untraced(trial)
        assert trial.untraced and untraced.runs_untraced(trial, 1)
    untraced.ran_untraced(trial)
    assert trial.untraced is None and not trial.traced_s and not trial.untraced_s  # timed again from scratch


def random_loop(body: list, times: int, fresh: bool, fence: bool):
    """``body`` (kernel names) repeated ``times`` times, each repetition read on the host (after ``pk.fence()`` if
    ``fence``: the whole repetition is one flush); with ``fresh``, each on new Views."""
    x, v, w = view_of(np.linspace(0.0, 1.0, N)), view_of(np.ones(N)), view_of(np.zeros(N))
    seen = []
    for _ in range(times):
        if fresh:
            x, v = view_of(np.asarray(x).copy()), view_of(np.asarray(v).copy())
        for name in body:
            if name == "push":
                pk.parallel_for(N, push, dt=0.5, x=x, v=v)
            elif name == "kick":
                pk.parallel_for(N, kick, dt=0.25, x=x, v=v)
            elif name == "average":
                pk.parallel_for(pk.RangePolicy(1, N - 1), ut_average, src=x, dst=w)
            else:
                seen.append(pk.parallel_reduce(N, ut_sum, x=w))
        if fence:
            pk.fence()
        seen.append(float(x[2]))
    return [float(s) for s in seen], x.copy(), v.copy(), w.copy()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.lists(st.sampled_from(["push", "kick", "average", "sum"]), min_size=1, max_size=4),
       times=st.integers(4, 10), fresh=st.booleans(), fence=st.booleans(), seed=st.integers(0, 2 ** 32 - 1))
def test_random_loops_timed_rerun_and_untraced_agree_with_eager(tmp_path, body, times, fresh, fence, seed):
    """Whichever side each timing favours (a clock of random steps), every repetition -- traced, rerun, untraced
    while timing, untraced after the decision -- computes what eager does."""
    program = lambda: random_loop(body, times, fresh, fence)  # noqa: E731
    expected = program()
    with config.overridden(config.PROFIT, "measure"), config.overridden(config.PROFIT_TRIALS, 1), \
            config.overridden(config.CACHE_DIR, str(tmp_path)):  # its random decisions stay its own
        pk.enable_fusion()
        runtime = context.current()
        ticks = iter(np.cumsum(np.random.default_rng(seed).random(100_000)).tolist())
        runtime.profit.clock = lambda: next(ticks)
        try:
            got = program()
        finally:
            pk.disable_fusion()
            runtime.profit.clock = time.perf_counter
    assert_same(expected, got)
