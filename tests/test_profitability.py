"""Profitability (kfuse/fuser/profit.py, fuser/cost.py, compiler/decisions.py): whether a group the fuser proved
safe runs fused or as its members apart.

Timings are injected: the runtime's ``profit.clock`` is replaced by a clock that advances by a chosen cost per
launch (fused or not), read from the launch counters, so the tests decide which side is faster and assert the
decision, the launches, explain() and pk.stats(), never a real time. The results must equal eager execution
whichever way the decision goes, also for kernels like ``A += B`` that must not run twice.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import kfuse as pk
from kfuse import config, context
from kfuse.compiler import decisions
from kfuse.fuser import cost, profit
from fusion_check import assert_same, run_eager_and_fused, view_of

N = 64


@pk.workunit
def pf_add(i: int, a: pk.View1D[pk.double], b: pk.View1D[pk.double]):
    a[i] += b[i]


@pk.workunit
def pf_scale(i: int, s: float, a: pk.View1D[pk.double], c: pk.View1D[pk.double]):
    c[i] = s * a[i] + c[i]


def costed_clock(fused: float, single: float):
    """A clock that advances by ``fused`` per fused launch and ``single`` per other launch, and by nothing else."""
    counts = context.current().counts
    return lambda: fused * counts["fused_kernels_launched"] + single * (counts["kernels_launched"]
                                                                        - counts["fused_kernels_launched"])


def costed(fused: float, single: float) -> None:
    """The runtime's profitability timed by ``costed_clock`` alone: its kernels have no timer of their own (the
    reference interpreter times its kernels with the real clock, which a loaded machine moves: the kernel-time rule
    then decided a group apart that the costs make faster fused)."""
    book = context.current().profit
    book.clock = costed_clock(fused, single)
    book.kernel_time = lambda kernels: None


def steps(n: int, a, b, c) -> list:
    """``n`` time steps of ``a += b; c = 2 a + c``, each read on the host (one flush each); the values read."""
    seen = []
    for _ in range(n):
        pk.parallel_for(N, pf_add, a=a, b=b)
        pk.parallel_for(N, pf_scale, s=2.0, a=a, c=c)
        seen.append(float(c[3]))
    return seen


def fresh_views():
    return view_of(np.arange(N, dtype=float)), view_of(np.linspace(0, 1, N)), view_of(np.ones(N))


def last_choices(n: int) -> list:
    """The profitability text of the one fused group of each of the last ``n`` flushes."""
    return [next(iter(r.choices.values()), "") for r in list(context.current().records)[-n:]]


@pytest.fixture
def measure(monkeypatch, tmp_path):
    """Measurement with two trials each way, in a cache folder of the test's own (no decision from elsewhere)."""
    monkeypatch.setenv("KFUSE_PROFIT", "measure")
    monkeypatch.setenv("KFUSE_PROFIT_TRIALS", "2")
    monkeypatch.setenv("KFUSE_CACHE_DIR", str(tmp_path / "cache"))


# --- the rules themselves, without kernels ----------------------------------------------------------------------
def test_trials_go_fused_apart_apart_fused_then_the_faster_side_is_kept():
    entry = profit.Entry()
    always = lambda runs: (True, "fused: model")  # noqa: E731
    sides = []
    for seconds in (3.0, 1.0, 1.5, 2.5):
        choice = profit.choose(entry, "measure", 2, always)
        assert choice.rule == "trial" and choice.timed
        sides.append(choice.fused)
        decision = profit.timed(entry, choice.fused, seconds, 2)
    assert sides == [True, False, False, True]  # each side meets both kinds of a step that repeats every 2
    assert decision is not None and not decision.fused and decision.rule == "measured"
    assert decision.text == "unfused: measured 2.50x slower fused (best of 2 trial(s) each way)"
    later = profit.choose(entry, "measure", 2, always)
    assert later is decision and not later.timed and entry.seen == 5


def test_a_tie_fuses_and_model_mode_never_times():
    assert profit.decided(1.0, 1.0, 3, "measured").fused
    assert profit.decided(1.0, 2.0, 2, "rechecked").text == (
        "fused: measured 2.00x faster fused (best of 2 trial(s) each way; one each way remembered from an earlier "
        "process)")
    entry = profit.Entry()
    choice = profit.choose(entry, "model", 3, lambda runs: (False, "unfused: model"))
    assert not choice.fused and not choice.timed and choice.rule == "model"


def test_a_kernel_slower_fused_runs_apart_whatever_the_launches_saved():
    # fused saves launches (faster by wall time) but its kernel takes 1.10x its members': apart
    slower = profit.decided(1.0, 1.6, 3, "measured", 0.33, 0.30)
    assert not slower.fused
    assert slower.text == ("unfused: measured 1.10x slower fused in kernel time, though 1.60x faster fused with the "
                           "launches (the launches saved do not grow with the data) (best of 3 trial(s) each way)")
    within = profit.decided(1.0, 1.6, 3, "measured", 0.31, 0.30)  # within KERNEL_SLACK: wall time decides
    assert within.fused and within.text == "fused: measured 1.60x faster fused (best of 3 trial(s) each way)"
    assert not profit.decided(2.0, 1.0, 3, "measured", 0.1, 0.3).fused  # a faster kernel, a slower whole: apart
    assert profit.decided(1.0, 1.6, 3, "measured", None, 0.30).fused  # a kernel without a timer: wall time alone


def test_three_trials_each_run_in_the_thue_morse_order_so_a_warming_process_keeps_a_tie_fused():
    """Each side meets both kinds of a repetition whose cost alternates, and fused has the first and the last timing:
    a process that gets faster as it warms up (equal costs, each timing faster than the one before) stays fused,
    where the order fused, apart, apart, fused, fused, apart gave apart the last, best timing."""
    entry = profit.Entry()
    always = lambda runs: (True, "fused: model")  # noqa: E731
    sides = []
    for seconds in (6.0, 5.0, 4.0, 3.0, 2.0, 1.0):
        choice = profit.choose(entry, "measure", 3, always)
        sides.append(choice.fused)
        decision = profit.timed(entry, choice.fused, seconds, 3, seconds)
    assert sides == [True, False, False, True, False, True]
    assert decision.fused
    period_two = [k % 2 for k, fused in enumerate(sides) if fused]
    assert sorted(set(period_two)) == [0, 1]  # fused met both kinds of step (so did apart: the rest)


def test_a_close_group_measurement_takes_more_trials_and_a_clear_one_does_not():
    always = lambda runs: (True, "fused: model")  # noqa: E731

    def measured(costs) -> tuple:
        entry, texts = profit.Entry(), []
        while entry.decision is None:
            choice = profit.choose(entry, "measure", 3, always)
            texts.append(choice.text)
            profit.timed(entry, choice.fused, costs(choice.fused, len(texts)), 3)
        return entry, texts

    clear, _ = measured(lambda fused, k: 1.0 if fused else 1.3)
    assert clear.decision.fused and len(clear.fused_s) == len(clear.apart_s) == 3
    close, texts = measured(lambda fused, k: (1.0 if fused else 1.02) + 0.01 * (k % 2))  # apart 2% slower
    assert close.decision.fused and len(close.fused_s) == len(close.apart_s) == 3 * profit.MORE
    assert texts[6] == "fused: timing trial 4 of 9 fused" and "(best of 9 trial(s) each way)" in close.decision.text


def test_each_side_decides_by_its_best_kernel_time_and_an_untimed_one_leaves_wall_time_alone():
    entry = profit.Entry()
    always = lambda runs: (True, "fused: model")  # noqa: E731
    for wall, kernel in ((1.0, 0.40), (1.6, 0.31), (1.7, 0.30), (1.1, 0.35)):  # fused, apart, apart, fused
        choice = profit.choose(entry, "measure", 2, always)
        decision = profit.timed(entry, choice.fused, wall, 2, kernel)
    assert profit.best_kernel_times(entry) == (0.35, 0.30)
    assert not decision.fused and "1.17x slower fused in kernel time" in decision.text
    untimed = profit.Entry()
    for wall, kernel in ((1.0, 0.40), (1.6, None), (1.7, 0.30), (1.1, 0.35)):
        choice = profit.choose(untimed, "measure", 2, always)
        decision = profit.timed(untimed, choice.fused, wall, 2, kernel)
    assert profit.best_kernel_times(untimed) == (None, None) and decision.fused


def test_runs_the_model_keeps_apart_are_timings_of_that_side():
    entry = profit.Entry()
    judge = lambda runs: (runs >= 3, "model says")  # noqa: E731
    sides = []
    for _ in range(6):
        choice = profit.choose(entry, "measure", 2, judge)
        sides.append((choice.fused, choice.rule))
        profit.timed(entry, choice.fused, 1.0 if choice.fused else 2.0, 2)
    assert sides == [(False, "model"), (False, "model"), (True, "trial"), (True, "trial"),
                     (True, "measured"), (True, "measured")]
    never = profit.Entry()  # kept apart for good: timed only until its side has its timings
    timed = []
    for _ in range(5):
        choice = profit.choose(never, "measure", 2, lambda runs: (False, "no"))
        timed.append(choice.timed)
        if choice.timed:
            profit.timed(never, False, 1.0, 2)
    assert timed == [True, True, False, False, False] and len(never.apart_s) == 2


def test_the_cost_model_rents_until_the_runs_repay_the_compile():
    # two members, both built; the fused kernel would cost 1 s to compile and saves 0.4 s a run
    est = cost.Estimate(launches_saved=0, bytes_saved=int(0.4 * cost.BYTES_PER_SECOND), compile_seconds=1.0)
    assert [cost.judge(est, runs)[0] for runs in (1, 2, 3)] == [False, False, True]
    assert cost.judge(est, 1)[1] == "unfused: a 1 s compile not repaid by 1 run(s) (saves ~0.4 s a run; cost model)"
    assert cost.judge(cost.Estimate(1, 0, 0.0), 1) == (True, "fused: costs no compile beyond its members'")


def test_traffic_fused_loads_what_no_member_wrote_before_and_stores_what_is_read_afterwards():
    a, b, t = (0, 800), (800, 1600), (1600, 2400)
    footprints = [((a,), (t,)), ((t, b), (b,))]  # t = f(a); b = g(t, b)
    assert cost.traffic(footprints) == (5 * 800, 4 * 800)  # fused, t is not loaded again
    assert cost.traffic(footprints, unstored=(t,)) == (5 * 800, 3 * 800)  # nor stored


def test_an_unknown_mode_is_an_error_naming_the_choices(monkeypatch):
    monkeypatch.setenv("KFUSE_PROFIT", "sometimes")
    with pytest.raises(ValueError, match="off, model, measure"):
        config.PROFIT.get()


# --- in the pipeline, with injected timings ---------------------------------------------------------------------
@pytest.mark.backend("null")
def test_a_group_faster_by_its_launches_but_slower_in_kernel_time_runs_apart(measure, fresh_stats):
    pk.enable_fusion()
    book = context.current().profit
    book.clock = costed_clock(1.0, 1.0)  # fused: one launch against two, so faster by wall time
    book.kernel_time = lambda kernels: sum(1.2 if k.fused else 0.5 for k in kernels)  # its kernel 1.2x slower
    launches = context.current().backend.launches
    steps(7, *fresh_views())  # 4 trials, the decision planned (step 5), untraced (6, a flush timing), rerun (7)
    assert [l.fused for l in launches] == [True, False, False, False, False, True] + [False] * 6
    decision = ("unfused: measured 1.20x slower fused in kernel time, though 2.00x faster fused with the launches "
                "(the launches saved do not grow with the data) (best of 2 trial(s) each way)")
    assert last_choices(2) == [decision] * 2
    assert "2 calls run apart; calls 0..1; unfused: measured 1.20x slower fused in kernel time" in pk.explain(1)


@pytest.mark.backend("null")
@pytest.mark.parametrize("fused_cost, decided_fused", [(10.0, False), (1.0, True)])
def test_measurement_decides_and_later_occurrences_follow_without_timing(measure, fresh_stats, fused_cost,
                                                                         decided_fused):
    pk.enable_fusion()
    costed(fused_cost, 1.0)
    launches = context.current().backend.launches
    steps(7, *fresh_views())  # 4 trials, the decision planned (step 5), untraced (6, a flush timing), rerun (7)
    per_step = [tuple(l.fused for l in launches[k:k + 2]) for k in range(0, len(launches), 2)]
    fused_step, apart_step = (True,), (False, False)
    trials = [fused_step, apart_step, apart_step, fused_step]
    decided = fused_step if decided_fused else apart_step
    assert [l.fused for l in launches] == [s for step in trials for s in step] + \
        [s for step in [decided, apart_step, decided] for s in step], per_step
    stats = pk.stats()
    # decided fused, steps 6 and 7 are the kept flush's timings, untraced then rerun (test_untraced.py): untraced,
    # its calls run as they come, each its own kernel, which no group's decision counts; decided apart, the kept
    # flush runs no kernel fused, so its repetitions run untraced without timings (untraced.lone)
    assert stats["profit_trials"] == (6 if decided_fused else 4) and stats["profit_decided"] == 1
    assert stats["calls_untraced"] == (2 if decided_fused else 4)
    assert stats["groups_unfused"] == (2 if decided_fused else 3)
    ratio = f"{fused_cost / 2.0:.2f}x slower fused" if not decided_fused else f"{2.0 / fused_cost:.2f}x faster fused"
    word = "fused" if decided_fused else "unfused"
    assert last_choices(6) == ["fused: timing trial 1 of 2 fused", "unfused: timing trial 1 of 2 apart",
                               "unfused: timing trial 2 of 2 apart", "fused: timing trial 2 of 2 fused"] + \
        [f"{word}: measured {ratio} (best of 2 trial(s) each way)"] * 2
    text = pk.explain(1)
    assert (f"pf_add + pf_scale  [{'fused 2 calls' if decided_fused else '2 calls run apart'}; calls 0..1; "
            f"{word}: measured {ratio}") in text, text


@pytest.mark.backend("null")
def test_off_fuses_every_time_and_times_nothing(monkeypatch, fresh_stats):
    monkeypatch.setenv("KFUSE_PROFIT", "off")
    pk.enable_fusion()
    steps(5, *fresh_views())
    assert [l.fused for l in context.current().backend.launches] == [True] * 5
    assert pk.stats()["profit_trials"] == 0 and "measured" not in pk.explain()


@pytest.mark.backend("null")
def test_the_model_keeps_a_group_of_built_kernels_apart_until_its_compile_would_be_repaid(monkeypatch, fresh_stats):
    monkeypatch.setenv("KFUSE_PROFIT", "model")
    backend = context.current().backend
    monkeypatch.setattr(type(backend), "compile_seconds", 2.5, raising=False)
    monkeypatch.setattr(type(backend), "built", lambda self, rendered: False)
    monkeypatch.setattr(cost, "LAUNCH_SECONDS", 1.0)  # the group saves one launch: 1 s a run
    monkeypatch.setattr(cost, "BYTES_PER_SECOND", float("inf"))
    views = fresh_views()
    steps(1, *views)  # eager: both members are built now
    pk.enable_fusion()
    steps(4, *views)
    assert [l.fused for l in backend.launches[2:]] == [False, False, False, False, True, True]
    assert last_choices(4)[:3] == ["unfused: a 2.5 s compile not repaid by 1 run(s) (saves ~1 s a run; cost model)",
                                   "unfused: a 2.5 s compile not repaid by 2 run(s) (saves ~1 s a run; cost model)",
                                   "fused: a 2.5 s compile repaid by 3 run(s) (saves ~1 s a run)"]
    assert context.current().records[-1].how == "rerun"  # the model's yes stands: the step is rerun (kfuse/rerun.py)
    assert pk.stats()["groups_unfused"] == 2 and pk.stats()["profit_trials"] == 0


def test_a_repetition_whose_group_waits_for_its_compile_is_not_timed_untraced(monkeypatch, measure, fresh_stats):
    backend = context.current().backend
    monkeypatch.setattr(type(backend), "compile_seconds", 1000.0, raising=False)
    monkeypatch.setattr(type(backend), "built", lambda self, rendered: False)
    views = fresh_views()
    steps(1, *views)  # eager: both members are built now
    pk.enable_fusion()
    steps(8, *views)  # the model keeps the group apart until its compile is repaid: a provisional choice
    assert pk.stats()["calls_untraced"] == 0 and pk.stats()["profit_trials"] == 2  # the apart side's, by the model
    assert all(t.trial is None for listed in context.current().rerun.templates.values() for t in listed)


@pytest.mark.backend("python")
@pytest.mark.parametrize("mode", ["model", "measure"])
def test_a_captured_function_fuses_without_waiting_for_its_compile_to_be_repaid(monkeypatch, tmp_path, mode,
                                                                                 fresh_stats):
    """The same step the model keeps apart (a 1000 s compile saving microseconds) fuses once captured: capturing
    says it repeats, as torch.compile and jax.jit compile up front; measured, its trials still run both ways."""
    monkeypatch.setenv("KFUSE_PROFIT", mode)
    monkeypatch.setenv("KFUSE_PROFIT_TRIALS", "2")
    monkeypatch.setenv("KFUSE_CACHE_DIR", str(tmp_path / "cache"))
    backend = context.current().backend
    monkeypatch.setattr(type(backend), "compile_seconds", 1000.0, raising=False)
    monkeypatch.setattr(type(backend), "built", lambda self, rendered: False)

    def step(a, b, c):
        pk.parallel_for(N, pf_add, a=a, b=b)
        pk.parallel_for(N, pf_scale, s=2.0, a=a, c=c)

    costed(1.0, 1.0)  # fused: one launch against two
    a, b, c = fresh_views()
    want_a, want_b, want_c = (np.asarray(v).copy() for v in (a, b, c))
    step(a, b, c)  # eager: both members are built now
    pk.enable_fusion()
    try:
        step(a, b, c)
        np.asarray(c)
        assert last_choices(1)[0].startswith("unfused: a 1e+03 s compile not repaid by 1 run(s)")
        captured = pk.capture(step)
        for _ in range(16):
            captured(a, b, c)
        got = [np.asarray(v).copy() for v in (a, b, c)]
    finally:
        pk.disable_fusion()
    for _ in range(18):
        want_a += want_b
        want_c = 2.0 * want_a + want_c
    assert_same([want_a, want_b, want_c], got)
    texts = [t for r in context.current().records for t in r.choices.values()]
    if mode == "model":
        assert texts[-1] == "fused: compiled up front, as for a captured function (pk.capture)"
    else:  # timed both ways, then decided by the times alone
        assert any(t.startswith("fused: timing trial") for t in texts)
        assert any(t.startswith("unfused: timing trial") for t in texts)
        assert texts[-1] == "fused: measured 2.00x faster fused (best of 2 trial(s) each way)"
    assert pk.stats()["fused_kernels_launched"] >= 1 and pk.stats()["calls_captured"] >= 2


@pytest.mark.backend("null")
def test_new_members_make_fusing_the_cheaper_compile(monkeypatch):
    monkeypatch.setenv("KFUSE_PROFIT", "model")
    monkeypatch.setattr(type(context.current().backend), "compile_seconds", 100.0, raising=False)
    pk.enable_fusion()
    steps(1, *fresh_views())  # nothing built yet: one fused compile instead of two
    assert last_choices(1) == ["fused: costs no compile beyond its members'"]
    assert [l.fused for l in context.current().backend.launches] == [True]


# --- results equal eager whichever way it goes ------------------------------------------------------------------
@pytest.mark.backend("python")
@pytest.mark.parametrize("fused_cost", [10.0, 1.0])
def test_values_equal_eager_through_trials_and_either_decision(measure, fused_cost):
    def program():
        costed(fused_cost, 1.0)
        a, b, c = fresh_views()
        seen = steps(6, a, b, c)
        return seen, np.asarray(a).copy(), np.asarray(c).copy()

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    a = np.arange(N, dtype=float) + 6 * np.linspace(0, 1, N)  # a += b ran exactly once per step
    np.testing.assert_allclose(got[1], a)
    assert stats["profit_decided"] == 1 and "measured" in text


@pytest.mark.backend("python")
def test_a_reduction_in_a_group_run_apart_delivers_its_value(measure):
    @pk.workunit
    def pf_total(i: int, acc: pk.Acc[pk.double], a: pk.View1D[pk.double]):
        acc += a[i]

    def program():
        costed(10.0, 1.0)
        a, b, _ = fresh_views()
        totals = []
        for _ in range(6):
            pk.parallel_for(N, pf_add, a=a, b=b)
            totals.append(float(pk.parallel_reduce(N, pf_total, a=a)))
        return totals

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["groups_unfused"] >= 3


@pytest.mark.backend("python")
def test_a_cache_folder_that_fails_keeps_the_decision_in_memory_and_runs_nothing_twice(measure, monkeypatch):
    from kfuse.compiler.trust import CacheError

    def refuse(*args):
        raise CacheError("the cache folder failed")

    monkeypatch.setattr(decisions, "save", refuse)

    def program():
        costed(1.0, 1.0)
        a, b, c = fresh_views()
        return steps(5, a, b, c), np.asarray(a).copy()

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["profit_decided"] == 1 and "decision not kept across processes: the cache folder failed" in text


# --- across processes -------------------------------------------------------------------------------------------
_SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    import kfuse as pk
    from kfuse import context

    @pk.workunit
    def px_add(i: int, a: pk.View1D[pk.double], b: pk.View1D[pk.double]):
        a[i] += b[i]

    @pk.workunit
    def px_scale(i: int, a: pk.View1D[pk.double], c: pk.View1D[pk.double]):
        c[i] = 2.0 * a[i] + c[i]

    counts = context.current().counts
    context.current().profit.kernel_time = lambda kernels: None  # the costed clock alone times (see ``costed``)
    if sys.argv[1] == "slow-fused":
        context.current().profit.clock = lambda: 9 * counts["fused_kernels_launched"] + counts["kernels_launched"]
    elif sys.argv[1] == "fast-fused":
        context.current().profit.clock = lambda: counts["kernels_launched"] - 0.5 * counts["fused_kernels_launched"]
    pk.enable_fusion()
    a, b, c = pk.View([256]), pk.View([256]), pk.View([256])
    b.fill(1.0)
    for _ in range(int(sys.argv[2])):
        pk.parallel_for(256, px_add, a=a, b=b)
        pk.parallel_for(256, px_scale, a=a, c=c)
        float(c[0])
    print(json.dumps({"stats": pk.stats(), "explain": pk.explain(1), "a0": float(a[0])}))
''')


def _run(tmp_path: Path, *args) -> dict:
    env = config.child_environment(BACKEND="python", PROFIT="measure", PROFIT_TRIALS=1, CACHE_DIR=tmp_path / "cache")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    proc = subprocess.run([sys.executable, str(tmp_path / "prog.py"), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_measured_decision_is_kept_for_the_next_process(tmp_path):
    (tmp_path / "prog.py").write_text(_SCRIPT)
    first = _run(tmp_path, "slow-fused", 3)
    assert first["stats"]["profit_decided"] == 1 and first["stats"]["profit_remembered"] == 0
    assert "unfused: measured 5.00x slower fused (best of 1 trial(s) each way)" in first["explain"]
    files = list((tmp_path / "cache" / "decisions").rglob("*.json"))
    assert len(files) == 1 and oct(files[0].stat().st_mode & 0o777) == "0o600"

    second = _run(tmp_path, "slow-fused", 3)  # starts from the kept times, times one more each way, decides again
    assert second["stats"]["profit_remembered"] == 1 and second["stats"]["profit_trials"] == 2
    assert second["stats"]["profit_decided"] == 1 and second["stats"]["fused_kernels_launched"] == 1
    assert second["stats"]["groups_unfused"] == 2  # its timing apart, then the decision's
    assert ("2 calls run apart; calls 0..1; unfused: measured 5.00x slower fused (best of 2 trial(s) each way; one "
            "each way remembered from an earlier process)") in second["explain"]
    assert second["a0"] == 3.0

    files[0].write_text(files[0].read_text().replace('"fused_s": 10.0', '"fused_s": 1000.0'))  # as if measured
    # while the machine was disturbed: the next process times on (best and median disagree: timings_wanted) and
    # its own fused timings replace it
    fourth = _run(tmp_path, "fast-fused", 8)
    assert fourth["stats"]["profit_remembered"] == 1
    assert ("fused 2 calls; calls 0..1; fused: measured 4.00x faster fused (best of 3 trial(s) each way; one each way "
            "remembered from an earlier process)") in fourth["explain"], fourth["explain"]
    kept = json.loads(files[0].read_text())["entry"]
    assert kept["fused"] is True and (kept["fused_s"], kept["apart_s"], kept["trials"]) == (0.5, 2.0, 3)

    files[0].write_text(files[0].read_text().replace("true", "1").replace("false", "0"))  # damaged: measured again
    third = _run(tmp_path, "slow-fused", 2)
    assert third["stats"]["profit_remembered"] == 0 and third["stats"]["profit_decided"] == 1


def test_decision_files_are_checked_before_use(tmp_path, monkeypatch):
    monkeypatch.setenv("KFUSE_CACHE_DIR", str(tmp_path))
    key = decisions.digest("group", "python", (7, 12))
    decisions.save(key, False, 2.0, 1.0, 3)
    assert decisions.load(key) == {"fused": False, "fused_s": 2.0, "apart_s": 1.0, "fused_k": None, "apart_k": None,
                                   "trials": 3}
    decisions.save(key, True, 1.0, 2.0, 3, 0.5, 0.25)
    assert decisions.load(key)["fused_k"] == 0.5 and decisions.load(key)["apart_k"] == 0.25
    path = next(tmp_path.rglob("*.json"))
    assert decisions.problem(path) is None
    os.chmod(path, 0o666)
    with pytest.warns(UserWarning, match="writable by other users"):
        assert decisions.load(key) is None
    os.chmod(path, 0o600)
    path.write_text(json.dumps({"format": decisions.FORMAT, "key": key, "entry": {"fused": "yes"}}))
    assert "damaged" in decisions.problem(path)
    entry = {"fused": True, "fused_s": 1.0, "apart_s": 2.0, "fused_k": -1.0, "apart_k": None, "trials": 3}
    path.write_text(json.dumps({"format": decisions.FORMAT, "key": key, "entry": entry}))
    assert "damaged" in decisions.problem(path)
    entry["fused_k"] = 1.0
    path.write_text(json.dumps({"format": 1, "key": key, "entry": entry}))  # an older kfuse's: measured again, quietly
    assert decisions.problem(path) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert decisions.load(key) is None


# --- compiled kernels, real clock (no assertion on which side wins) ---------------------------------------------
def test_compiled_kernels_measured_with_the_real_clock_equal_eager(measure, monkeypatch):
    def program():  # steps enough for both trials at their longest (12 timings each, then a decided run)
        a, b, c = fresh_views()
        return steps(4 * 3 * profit.MORE, a, b, c), np.asarray(a).copy(), np.asarray(c).copy()

    with config.overridden(config.PROFIT, "off"), pk.fusion():
        steps(1, *fresh_views())  # the fused kernel is built: the cost model lets the group be timed
    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    # the group is timed 2 times each way; a side within 5% of the other is timed up to 3 times as often
    # (profit.timings_wanted): the real clock decides. Fused, its repetition is then timed rerun and untraced 2 times
    # each (test_untraced.py); apart, no kernel of the repeated flush runs fused, so it runs untraced by rule, untimed
    # (untraced.lone)
    (kept,) = Path(os.environ["KFUSE_CACHE_DIR"]).rglob("decisions/*/*.json")
    group_trials = json.loads(kept.read_text())["entry"]["trials"]
    (trial,) = [t.trial for ts in context.current().rerun.templates.values() for t in ts if t.trial is not None]
    repetitions = len(trial.traced_s) + len(trial.untraced_s)
    assert 2 <= group_trials <= 2 * profit.MORE, text
    if trial.settled:
        assert "unfused: measured" in text and repetitions == 0 and stats["profit_decided"] == 1, text
    else:
        assert 4 <= repetitions <= 4 * profit.MORE and stats["profit_decided"] == 2, text
    # at least those timings: on a loaded machine (a fresh clone's tests beside another run) one more occurrence was
    # timed once (11 against 10); the exact counts are checked under costed clocks (test_measurement_decides_..., and
    # test_untraced.py), where the clock cannot change them
    assert stats["profit_trials"] >= 2 * group_trials + repetitions, text
    assert last_choices(1)[0].startswith(("fused: measured", "unfused: measured", "unfused: run untraced")), text


def test_a_compile_the_runs_do_not_repay_is_not_made(measure):
    def program():
        a, b, c = fresh_views()
        return steps(3, a, b, c), np.asarray(a).copy()

    expected, got, stats, text = run_eager_and_fused(program)  # eager built the members; 64 elements save ~5 us
    assert_same(expected, got)
    assert stats["fused_kernels_launched"] == 0 and stats["groups_unfused"] == 3 and stats["compiles"] == 0, text
    compile_seconds = context.current().backend.compile_seconds  # g++ 0.4 s, nvcc (a CUDA Kokkos) 7 s
    assert f"unfused: a {compile_seconds:.2g} s compile not repaid by 3 run(s)" in text


def test_the_model_sees_a_fused_kernel_already_in_the_compile_cache(monkeypatch):
    monkeypatch.setenv("KFUSE_PROFIT", "off")
    views = fresh_views()
    pk.enable_fusion()
    steps(1, *views)  # builds the fused kernel (and nothing else)
    pk.disable_fusion()
    steps(1, *views)  # eager: builds both members
    context.current().fused.clear()  # as in a new process: only the disk cache has the fused kernel
    monkeypatch.setenv("KFUSE_PROFIT", "model")
    pk.enable_fusion()
    steps(1, *views)
    assert last_choices(1) == ["fused: costs no compile beyond its members'"]


# --- what reports say -------------------------------------------------------------------------------------------
def _record(number: int, choice: str, kernel: str | None):
    from kfuse.fuser.explain import FlushRecord

    rec = FlushRecord(number, ["add", "mul", "c"], [[0, 1], [2]], [], 0.0, "", True)
    rec.choices[0] = choice
    if kernel:
        rec.kernels[0] = kernel
    return rec


def test_summaries_and_launch_counts_show_groups_run_apart():
    from kfuse.fuser.explain import summary

    apart = _record(1, "unfused: measured 2.00x slower fused (best of 3 trial(s) each way)", None)
    fused = _record(2, "fused: timing trial 1 of 3 fused", "add__mul")
    assert apart.text().startswith("flush #1: 3 call(s) -> 3 kernel launch(es)")
    assert fused.text().startswith("flush #2: 3 call(s) -> 2 kernel launch(es)")
    text = summary([apart, fused, apart])
    assert "3 flushes, 9 calls -> 8 kernel launches" in text
    assert "fused groups (times formed):\n         1x  add + mul" in text
    assert "groups run apart, not worth fusing (times):\n         2x  add + mul" in text


def test_the_bench_reports_each_groups_decision_and_the_groups_run_apart():
    from kfuse.bench import measure, report

    eager = {"seconds": 1.0, "launches": [("add", 0.002, False, 1, None), ("mul", 0.002, False, 2, None)],
             "flushes": [], "first_call": 1}
    apart = {"seconds": 1.0, "launches": [("add", 0.002, False, 2, 1), ("mul", 0.002, False, 2, 1)], "first_call": 1,
             "flushes": [_record(1, "unfused: measured 2.00x slower fused (best of 3 trial(s) each way)", None)]}
    fused = {"seconds": 1.0, "launches": [("add__mul", 0.001, True, 2, 1)], "first_call": 1,
             "flushes": [_record(1, "fused: measured 4.00x faster fused (best of 3 trial(s) each way)", "add__mul")]}
    modes = [("uo", "none"), ("o", "all")]
    (row,) = measure._group_rows({"eager": [eager], "uo": [fused], "o": [apart]}, modes, 1, [])
    assert (row["run"], row["kernel"], row["fused_o_ms"], row["speedup_chosen"]) == ("apart", None, None, 1.0)
    assert row["decision"].startswith("unfused: measured 2.00x slower fused") and row["unfused_ms"] == 4.0
    (row,) = measure._group_rows({"eager": [eager], "uo": [fused], "o": [fused]}, modes, 1, [])
    assert (row["run"], row["kernel"], row["speedup_o"], row["speedup_chosen"]) == ("fused", "add__mul", 4.0, 4.0)
    # a repeated flush decided untraced leaves no record in the timed runs: its decision's record reports it
    words = "unfused: run untraced, measured 1.50x faster than tracing and fusing (best of 3 repetition(s) each way)"
    (row,) = measure._group_rows({"eager": [eager], "uo": [fused], "o": [eager]}, modes, 1, [_record(1, words, None)])
    assert (row["run"], row["decision"], row["speedup_chosen"]) == ("apart", words, 1.0)
    data = {"machine": {"platform": "p", "cpus_usable": 2, "cpu_count": 2, "kfuse_num_threads": -1,
                        "load_average_1min": 0.0, "compiler": "g++", "opt_flags": "-O3", "kokkos_version": 1,
                        "kokkos_backends": ["OPENMP"], "python": "3"}, "size": "small", "repeat": 1,
            "subjects": {"s": {"groups": [dict(row, run="apart", decision="unfused: measured 2.00x slower fused")],
                               "eager_s": None, "trace_s": None, "fused_uo_s": None, "fused_s": None,
                               "fused_vs_eager_speedup": None, "trace_overhead_pct": 0.0, "analysis_ms": None}}}
    text = report.markdown(data)
    assert "| apart | unfused: measured 2.00x slower fused |" in text
    assert "Run apart by a profitability decision (1): s: add+mul." in text


def test_the_bench_compares_a_group_with_its_own_calls_run_eagerly():
    """Kernel times change from step to step, and one fused kernel may serve groups of several sizes: a group formed
    at the second of two steps of the same calls (a thermo step, say) is compared with its members eager at that
    step's calls (places 4-6 of the run), and its fused time is its launch at that step."""
    from kfuse.bench import measure
    from kfuse.fuser.explain import FlushRecord

    def record(number, groups, first_call, kernel=None):
        positions = list(range(first_call, first_call + 3))
        rec = FlushRecord(number, ["c", "add", "mul"], groups, [], 0.0, "", True, positions=positions)
        if kernel:
            rec.kernels[groups[0][0]] = kernel
            rec.choices[groups[0][0]] = "fused: KFUSE_PROFIT=off"
        return rec

    eager = {"seconds": 1.0, "flushes": [], "first_call": 101, "launches": [
        ("c", 0.001, False, 101, None), ("add", 0.001, False, 102, None), ("mul", 0.001, False, 103, None),
        ("c", 0.001, False, 104, None), ("add", 0.004, False, 105, None), ("mul", 0.004, False, 106, None)]}
    fused = {"seconds": 1.0, "first_call": 201, "flushes": [
        record(7, [[0], [1], [2]], 201), record(8, [[1, 2], [0]], 204, "add__mul")], "launches": [
        ("c", 0.001, False, 203, 7), ("add", 0.001, False, 203, 7), ("mul", 0.001, False, 203, 7),
        ("add__mul", 0.006, True, 206, 8), ("c", 0.001, False, 206, 8),
        ("add__mul", 0.100, True, 250, 9)]}  # the same fused kernel for a group of other calls, elsewhere
    modes = [("uo", "none"), ("o", "all")]
    runs = {"eager": [eager], "uo": [fused], "o": [fused]}
    (row,) = measure._group_rows(runs, modes, 1, [])
    assert row["unfused_from"] == "the same calls eager" and row["unfused_ms"] == 8.0 and row["fused_o_ms"] == 6.0
    assert abs(row["speedup_o"] - 8.0 / 6.0) < 1e-12  # against every launch's median (5 ms) it would be 0.83x
    assert row["unfused_traced_ms"] is None  # no trace run to pair with
    traced = {"seconds": 1.0, "first_call": 301, "flushes": [
        FlushRecord(3, ["c", "add", "mul"], [[0], [1], [2]], [], 0.0, "", False, positions=[301, 302, 303]),
        FlushRecord(4, ["c", "add", "mul"], [[0], [1], [2]], [], 0.0, "", False, positions=[304, 305, 306])],
        "launches": [
        ("c", 0.001, False, 303, 3), ("add", 0.001, False, 303, 3), ("mul", 0.001, False, 303, 3),
        ("c", 0.001, False, 306, 4), ("add", 0.005, False, 306, 4), ("mul", 0.005, False, 306, 4)]}
    (row,) = measure._group_rows({**runs, "trace": [traced]}, modes, 1, [])
    assert row["unfused_traced_ms"] == 10.0 and abs(row["speedup_o_traced"] - 10.0 / 6.0) < 1e-12
    fused["flushes"][1].positions = None  # (an array operation group: no place in the program's calls)
    (row,) = measure._group_rows(runs, modes, 1, [])
    assert row["unfused_from"] == "all eager launches" and row["unfused_ms"] == 5.0
    assert abs(row["fused_o_ms"] - 53.0) < 1e-9  # the median over every launch of the kernel, both sizes
    fused["flushes"][1].positions = [203, 204, 205]  # places whose eager calls are other kernels: not paired
    (row,) = measure._group_rows(runs, modes, 1, [])
    assert row["unfused_from"] == "all eager launches"


def test_the_bench_pairs_a_group_whose_calls_are_not_the_programs_next_ones():
    """ExaMiniMD's setup: the forces (a, b), two energies read at once (c, d), then the virial sum (e) read: e's
    flush runs a+b+e, the program's calls 1, 2 and 5, and its members eager are those calls, not calls 1-3 (that
    pairing failed on the names and fell back to every launch's median)."""
    from kfuse.bench import measure
    from kfuse.fuser.explain import FlushRecord

    eager = {"seconds": 1.0, "flushes": [], "first_call": 1, "launches": [
        ("a", 0.001, False, 1, None), ("b", 0.010, False, 2, None), ("c", 0.5, False, 3, None),
        ("d", 0.5, False, 4, None), ("e", 0.002, False, 5, None),
        ("a", 0.003, False, 6, None), ("b", 0.030, False, 7, None), ("e", 0.006, False, 8, None)]}
    group = FlushRecord(3, ["a", "b", "e"], [[0, 1, 2]], [], 0.0, "", True, positions=[1, 2, 5],
                        kernels={0: "a__b__e"}, choices={0: "fused: KFUSE_PROFIT=off"})
    fused = {"seconds": 1.0, "first_call": 1, "flushes": [
        FlushRecord(1, ["c"], [[0]], [], 0.0, "", True, positions=[3]),
        FlushRecord(2, ["d"], [[0]], [], 0.0, "", True, positions=[4]), group], "launches": [
        ("c", 0.5, False, 3, 1), ("d", 0.5, False, 4, 2), ("a__b__e", 0.012, True, 5, 3)]}
    (row,) = measure._group_rows({"eager": [eager], "uo": [fused], "o": [fused]}, [("uo", "none"), ("o", "all")], 1,
                                 [])
    assert row["unfused_from"] == "the same calls eager" and abs(row["unfused_ms"] - 13.0) < 1e-9
    assert abs(row["speedup_o"] - 13.0 / 12.0) < 1e-12


def test_flush_records_keep_each_calls_place_in_the_program_traced_and_rerun():
    """A flush runs what the host access depends on: the places of its calls are the program's, in a row or not,
    and a rerun of the flush (kfuse/rerun.py) records the places of its own calls."""
    rt = context.current()
    seen = []
    with pk.fusion():
        a, b, c = fresh_views()
        for _ in range(5):
            first = rt.calls_made + 1
            pk.parallel_for(N, pf_add, a=a, b=b)  # first
            pk.parallel_for(N, pf_scale, s=2.0, a=b, c=c)  # first + 1: only c's flush needs it
            pk.parallel_for(N, pf_add, a=a, b=b)  # first + 2
            float(a[0])
            float(c[0])
            seen.append((first, rt.records[-2].how, rt.records[-2].positions, rt.records[-1].positions))
    for first, _, of_a, of_c in seen:
        assert of_a == [first, first + 2] and of_c == [first + 1], seen
    assert "rerun" in {how for _, how, _, _ in seen}, seen


def test_processes_deciding_the_same_group_at_once_leave_a_whole_decision(tmp_path):
    script = textwrap.dedent('''
        import sys
        from kfuse.compiler import decisions
        for k in range(200):
            decisions.save(sys.argv[1], k % 2 == 0, 1.0 + k, 2.0, int(sys.argv[2]))
    ''')
    env = config.child_environment(CACHE_DIR=tmp_path)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    key = "ab" * 32
    writers = [subprocess.Popen([sys.executable, "-c", script, key, str(n)], env=env) for n in (1, 2, 3)]
    assert all(w.wait(timeout=120) == 0 for w in writers)
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(["ab", "decisions", f"{key}.json"])  # no temporary file
    with config.overridden(config.CACHE_DIR, tmp_path):
        found = decisions.load(key)
    assert found["trials"] in (1, 2, 3) and found["fused_s"] == 200.0 and found["fused"] is False


def test_verify_removes_a_damaged_decision_and_keeps_a_good_one(tmp_path, monkeypatch, capsys):
    from kfuse.compiler import verify

    monkeypatch.setenv("KFUSE_CACHE_DIR", str(tmp_path))
    good, bad = decisions.digest("a", "python", (1, 1)), decisions.digest("b", "python", (1, 1))
    decisions.save(good, True, 1.0, 2.0, 3)
    decisions.save(bad, True, 1.0, 2.0, 3)
    path = next(p for p in tmp_path.rglob("*.json") if p.stem == bad)
    path.write_text(path.read_text().replace('"trials": 3', '"trials": 0'))
    assert verify.main() == 0
    assert [p.stem for p in tmp_path.rglob("*.json")] == [good] and "removed (is damaged" in capsys.readouterr().out


def test_a_measurement_is_timed_longer_while_close_or_while_its_medians_disagree_with_its_best_times():
    from kfuse.fuser import profit

    assert profit.timings_wanted([1.0], [2.0], 3) == 3  # not yet three each
    assert profit.timings_wanted([1.0, 1.0, 1.1], [1.2, 1.3, 1.2], 3) == 3  # clear, best and median agree
    assert profit.timings_wanted([1.0, 1.02, 1.01], [1.03, 1.04, 1.03], 3) == 3 * profit.MORE  # within 5%
    assert profit.timings_wanted([0.8, 1.3, 1.3], [1.0, 1.0, 1.0], 3) == 3 * profit.MORE  # one lucky timing
    assert profit.timings_wanted([1.3, 1.3, 0.8, 0.9, 0.85], [1.0, 1.0, 1.0, 1.0, 1.0], 3) == 3  # the medians agree now
