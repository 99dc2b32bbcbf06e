"""Fusion never changes what a program computes (issue 11): kfuse.check's cases must agree with eager.

Hand-written cases for every way fused runs were seen to differ from eager ones (NumPy arrays passed to
kernels, kept ``np.asarray`` aliases, ``pk.array`` bases, failing calls, threads, fork, failures at exit,
Futures printed), then random cases from kfuse.check's generator through Hypothesis, then checks that
the checker itself catches what it must (a changed value, a wrong error, a lost failure) and that the
command line counts crashes and hangs.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings

import kfuse as pk
from marks import host_kokkos_only
from kfuse.check import CAPTURED, EAGER, FUSED, Case, as_python, case_for, compare, run, shrink
from kfuse.check import __main__ as cli
from kfuse.check.program import AUTO_TEAM, HUGE_TEAM, from_json, to_json, validate, without
from kfuse.check.runner import ERROR, LAUNCH_SITE
from programs import (Call, Export, Fence, Read, Realloc, UseResult, Write, assert_case_agrees, random_cases,
                      runs_clean_up)  # noqa: F401 - runs_clean_up is autouse

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler


CASES = {
    # NumPy arrays passed straight to kernels, then used by the host with no kfuse barrier
    "numpy_argument_read_by_host": Case.of([Call("scale", ("a", "raw")), Read("raw", "asarray"), Call("sin", ("raw",)),
                                            Read("raw", "item")]),
    "numpy_argument_written_by_host_before_a_pending_reader": Case.of([Call("scale", ("raw", "b")),
                                                                       Write("raw", "fill", 7.0), Read("b", "asarray")]),
    "numpy_argument_written_by_host_before_a_pending_writer": Case.of([Call("sin", ("raw",)),
                                                                       Write("raw", "setitem", 3.0, 2),
                                                                       Read("raw", "asarray")]),
    # a kept np.asarray(view) alias
    "kept_alias_written_after_a_kernel_writes_the_view": Case.of([Export("b"), Call("scale", ("a", "b")),
                                                                  Write("@b", "setitem", 5.0, 3), Read("b", "asarray"),
                                                                  Read("@b", "asarray")]),
    "kept_alias_read_after_a_kernel": Case.of([Export("c"), Call("sin", ("c",)), Read("@c", "item")]),
    "kept_alias_of_a_subview_outlives_its_parent": Case.of([Export("lo"), Call("scale", ("b", "a")), Realloc("a"),
                                                            Write("@lo", "fill", 2.0), Call("stencil", ("hi", "c")),
                                                            Read("c", "asarray"), Read("@lo", "asarray")]),
    # the NumPy array behind pk.array(base)
    "array_base_changed_after_a_kernel_reads_it": Case.of([Call("scale", ("d", "b")), Write("buf", "fill", -1.25),
                                                           Read("b", "asarray")]),
    "array_base_read_after_a_kernel_writes_it": Case.of([Call("sin", ("d2",)), Read("buf", "npsum")]),
    # failing calls: unrelated work survives, dependent data raises naming the culprit
    "refused_team_size_keeps_unrelated_calls": Case.of([Call("team_scale", ("b", "M"), 0.5, team=HUGE_TEAM),
                                                        Call("scale", ("a", "c")), Read("c", "asarray"),
                                                        Read("M", "item")]),
    "compile_error_keeps_unrelated_calls": Case.of([Call("broken", ("a", "b")), Call("sin", ("c",)),
                                                    Read("c", "asarray"), Read("b", "asarray")]),
    "compile_error_inside_a_fused_group": Case.of([Call("scale", ("a", "c")), Call("broken", ("a", "b")),
                                                   Call("sin", ("c",)), Read("c", "asarray"), Read("b", "item")]),
    "fault_inside_a_fused_group_names_the_culprit": Case.of([Call("scale", ("a", "c")), Call("divide", ("a", "b"), 3),
                                                             Call("sin", ("c",)), Read("c", "asarray"),
                                                             Read("b", "asarray")]),
    "debug_space_exception": Case.of([Call("debug", ("b",), 3), Call("scale", ("a", "c")), Read("c", "asarray"),
                                      Read("b", "asarray")]),
    "failure_poisons_only_its_dependents": Case.of([Call("divide", ("a", "b"), 3), Call("scale", ("b", "c")),
                                                    Call("sin", ("a",)), Read("a", "asarray"), Read("c", "asarray")]),
    "failed_reduction_feeds_a_call": Case.of([Call("team_total", ("M",), team=HUGE_TEAM),
                                              Call("axpy", ("a", "b"), ("r", 0)), UseResult(0, "float"),
                                              Read("b", "asarray"), Read("a", "asarray")]),
    "host_overwrites_failed_data": Case.of([Call("broken", ("a", "b")), Write("b", "fill", 1.0),
                                            Read("b", "asarray")]),
    "two_failures_both_reported": Case.of([Call("broken", ("a", "b")), Call("debug", ("c",), 3),
                                           Call("scale", ("a", "lo"))]),
    "two_failures_reported_when_their_data_is_gone": Case.of([Call("debug", ("a",), 3), Call("broken", ("b", "c")),
                                                              Realloc("c")]),
    # Futures print as the number eager returns
    "futures_print_like_numbers": Case.of([Call("dot", ("a", "b")), UseResult(0, "repr"), UseResult(0, "str"),
                                           UseResult(0, "fstring"), Call("isum", ("i64",)), UseResult(1, "repr"),
                                           UseResult(1, "str")]),
    # the rest of the DSL the issue names
    "team_kernels": Case.of([Call("team_rowsum", ("M", "c")), Call("team_scale", ("c", "M"), 0.5, team=AUTO_TEAM),
                             Call("team_total", ("M",)), UseResult(0, "float"), Read("M", "asarray")]),
    "helper_taking_views": Case.of([Call("helper", ("a", "b")), Call("scale", ("b", "c")), Call("helper", ("c", "b")),
                                    Read("b", "asarray")]),
    "float32_bool_int_views": Case.of([Call("to_f32", ("a", "f32")), Call("from_f32", ("f32", "b")),
                                       Call("flag", ("b", "flag")), Call("count", ("flag", "i32")),
                                       Call("widen", ("i32", "i64")), Call("isum", ("i64",)), Call("fsum", ("f32",)),
                                       UseResult(0, "int"), UseResult(1, "repr"), Read("flag", "asarray"),
                                       Read("i32", "tolist")]),
    "max_trace_1": Case.of([Call("scale", ("a", "b")), Call("dot", ("a", "b")), Call("axpy", ("b", "c"), ("r", 0)),
                            Export("c"), Call("sin", ("c",)), Read("@c", "item"), Call("broken", ("c", "d"))],
                           max_trace=1),
    "max_trace_2": Case.of([Call("sin", ("raw",)), Call("scale", ("raw", "a")), Call("divide", ("a", "b"), 3),
                            Call("stencil", ("a", "c")), Read("c", "asarray"), Call("scan", ("c", "d"))],
                           max_trace=2),
    # pk.fence(): a delayed failure is reported there; a fenced time-step loop is each time a whole flush
    "fence_reports_a_delayed_failure": Case.of([Call("scale", ("a", "c")), Call("broken", ("a", "b")), Fence(),
                                                Read("c", "asarray"), Read("b", "item")]),
    "fenced_loop_on_new_arrays": Case.of([step for _ in range(6) for step in (
        Realloc("a"), Call("scale", ("a", "b")), Call("axpy", ("b", "c"), 0.5), Fence(), Read("c", "asarray"))]),
    # recorded array operations after a failed call (two programs of fuzzer seed 2333, shrunk)
    "array_ops_after_a_failed_call": Case.of([Call("debug", ("a",), 3), Call("ops_chain", ("a", "c"), 0.5)],
                                             max_trace=1),
    "array_ops_after_a_failed_call_unrelated_read": Case.of(
        [Call("team_total", ("M",)), Call("debug", ("c",), 3), Call("fsum", ("f32",)), Call("rowsum", ("M", "c")),
         Call("ops_shift", ("b", "c"), ("r", 0)), Read("i64", "tolist")], max_trace=2),
    # a fault in a fused kernel writing one column of M, a later member writing the next (seed 127163 case 1988,
    # shrunk: run four times, the calls on host memory run at once and the column calls fuse into one kernel)
    "fault_in_a_fused_column_keeps_the_next_column": Case.of([Call("blend", ("c", "m1"), -1.25),
                                                              Call("divide_by", ("d2", "buf"), -1),
                                                              Call("divide", ("m0", "m0"), 3)]),
    # a failed call writing column 0 of M, then row sums of columns 1-2 broadcasting their first row (seed 150463
    # case 444, shrunk: that row's two elements lie between the column's, so they hold nothing the failure lost)
    "failed_column_beside_a_broadcast_row_of_the_next_columns": Case.of([Call("ops_rows", ("Mc", "lo"), 3.0),
                                                                         Call("debug", ("m0",), 0)]),
}

_CHAIN = (Call("scale", ("a", "b")), Call("axpy", ("b", "c"), 0.5), Call("dot", ("b", "c")), Export("b"),
          Call("axpy", ("c", "b"), ("r", 0)), Write("raw", "fill", 0.5), Call("sin", ("raw",)), Read("@b", "item"),
          Call("team_rowsum", ("M", "d")), Call("to_f32", ("d", "f32")), UseResult(0, "repr"), Read("f32", "npsum"))
_OTHER = (Call("dot", ("c", "a")), Call("sin", ("raw",)), Call("axpy", ("a", "b"), ("r", 0)), Export("a"),
          Write("@a", "fill", 0.25), Call("stencil", ("a", "c")), Read("c", "asarray"), Call("team_total", ("M",)),
          UseResult(1, "str"), Call("helper", ("buf", "lo")), Read("d", "item"))
_TYPED = (Call("to_f32", ("b", "f32")), Call("fsum", ("f32",)), Call("widen", ("i32", "i64")), Call("isum", ("i64",)),
          UseResult(0, "repr"), UseResult(1, "repr"), Call("flag", ("b", "flag")), Read("i64", "tolist"))
THREAD_CASES = {
    "threads_run_their_own_programs": Case((_CHAIN, _OTHER, _TYPED)),
    "threads_with_a_small_trace": Case((_CHAIN * 3, _OTHER * 2), max_trace=2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hand_written_case_agrees_with_eager(name):
    assert_case_agrees(CASES[name])


@pytest.mark.backend("kokkos")
def test_float32_values_summed_as_doubles_fused_with_their_stores_agree_compiled():
    """Fuzzer seed 24863 case 1362, shrunk: g++ 12's SLP vectoriser summed the fused kernel's float32 values
    unrounded (kfuse/compiler/toolchain.py), which only the compiled kernels show."""
    assert_case_agrees(Case.of([Call("to_f32", ("a", "f32")), Call("fsum", ("f32",)), Call("to_f32", ("a", "f32")),
                                Call("fsum", ("f32",))]))


@pytest.mark.backend("kokkos")
def test_array_operations_overwriting_lost_data_keep_their_independent_statements_compiled():
    """Fuzzer seed 71363 case 634, shrunk: run twice, the second ops_rows overwrites the row sums the failed team
    call lost, in one array-operations kernel with ops_sum's independent statements, whose sum must not be lost
    (the team size is refused by the compiled backend only)."""
    assert_case_agrees(Case.of([Call("ops_rows", ("M", "b"), -1.25), Call("ops_sum", ("a", "c"), -1.25),
                                Call("team_rowsum", ("M", "b"), team=100000)]))


def test_a_sum_of_array_operations_after_a_failed_call_reports_it_after_its_kernel_ran_untraced():
    """Fuzzer seed 2648, case 1268, shrunk: once ops_sum's kernel ran untraced (kfuse/untraced.py), a failure
    standing made the group's call raise inside the batch's run, leaving the program's Future without a value or a
    failure; while a failure stands, calls now go through the trace, which reports it where the result is read."""
    case = Case.of([Call("ops_sum", ("lo", "lo"), -1.25), Call("broken", ("c", "a")), Fence()])
    for _ in range(3):  # the first check's runs start the kernel's streak
        assert_case_agrees(case)


@pytest.mark.parametrize("name", sorted(THREAD_CASES))
def test_threads_agree_with_eager(name):
    for _ in range(3):  # interleavings differ from run to run
        assert_case_agrees(THREAD_CASES[name])


def test_the_captured_mode_replays_its_sequences_of_calls(monkeypatch):
    """The fuzzer's captured mode must reach replays (kfuse/capturing.py), not only record, and in a program with no
    call that may fail, replays of blocks over scratch copies: new memory made inside a captured function."""
    from kfuse import capturing

    made = []
    make = capturing._Made.make
    monkeypatch.setattr(capturing._Made, "make", lambda self: made.append(self) or make(self))
    case = Case.of([Call("scale", ("a", "b")), Call("axpy", ("b", "c"), 0.5), Call("dot", ("a", "c")),
                    Read("c", "asarray")])
    pk.reset_stats()
    run(Case(tuple(steps * CAPTURED.captured for steps in case.threads)), CAPTURED)
    assert pk.stats()["calls_captured"] >= 3
    assert len(made) >= 2  # the plan's check, then at least one replay
    assert_case_agrees(case)


@pytest.mark.backend("kokkos")
@pytest.mark.parametrize("flag", [3, -1, 0])
def test_divisions_by_an_argument_agree_queued_and_reach_the_queued_entry(monkeypatch, flag):
    """The fuzzer gives host kernels the GPU loops' queued entry (``python -m kfuse.check``: ``_launch_as_on_a_gpu``);
    a loop dividing by its argument takes it in reruns and replays, checked on the host first (-1 goes to the
    waiting entry; a fault by 0 is reported as eager does: tests/test_queued_launch.py queues that one too)."""
    from kfuse.codegen import kernel as codegen
    from kfuse.runtime import launch

    monkeypatch.setattr(codegen, "QUEUED_SPACES", codegen.QUEUED_SPACES | {"OpenMP"})
    queued, real = [], launch.CompiledKernel.launch

    def counted(self, bounds, args, packed=None, wait=True):
        if not wait and self._queued is not None and "divide_by" in self.name:
            queued.append(self.name)
        return real(self, bounds, args, packed, wait)

    monkeypatch.setattr(launch.CompiledKernel, "launch", counted)
    case = Case.of([Call("scale", ("a", "b")), Call("divide_by", ("b", "c"), flag), Read("c", "asarray")])
    assert_case_agrees(case)
    assert bool(queued) == (flag != 0)  # reruns and replays; none once a call failed (nothing is rerun then)


def test_fault_case_really_fails_inside_a_fused_kernel():
    """The fused-group case above must test a fused kernel that faults, not lone calls."""
    pk.reset_stats()
    run(CASES["fault_inside_a_fused_group_names_the_culprit"], FUSED)
    assert pk.stats()["fused_kernels_launched"] >= 1


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=random_cases())
def test_random_cases_agree_with_eager(case):
    assert_case_agrees(case)


# --- fork and interpreter exit: whole processes -----------------------------------------------------
def _python(script: str, *args, timeout: float = 60):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True,
                          timeout=timeout)


FORK_SCRIPT = """
    import os
    import signal
    import sys
    import numpy as np
    import kfuse as pk
    from kfuse.check.kernels import k_scale, k_sin

    pk.enable_fusion()
    x, y = pk.View(32), pk.View(32)
    x[:] = np.arange(32.0)
    pk.parallel_for(32, k_scale, x=x, y=y)
    np.asarray(y)  # kernels ran: Kokkos and its threads are up
    pk.parallel_for(32, k_sin, x=y)  # pending at the fork
    pid = os.fork()
    if pid == 0:
        signal.alarm(40)  # a hung child ends itself, so a failing test leaves no process behind
    pk.parallel_for(32, k_scale, x=y, y=x)
    mine = np.asarray(x).tobytes()
    if pid == 0:
        with open(sys.argv[1], "wb") as f:
            f.write(mine)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    with open(sys.argv[1], "rb") as f:
        print("same" if status == 0 and f.read() == mine else f"differs (child status {status})")
"""


@host_kokkos_only
@pytest.mark.backend("kokkos")  # a child process on the default backend
def test_fork_after_kernels_ran_child_computes_what_the_parent_does(tmp_path):
    proc = _python(FORK_SCRIPT, str(tmp_path / "child.bin"))
    assert proc.returncode == 0 and proc.stdout.strip() == "same", proc.stdout + proc.stderr


EXIT_SCRIPT = """\
import kfuse as pk
from kfuse.check.kernels import k_team_scale

pk.enable_fusion()
x, m = pk.View(32), pk.View((32, 4))
pk.parallel_for(pk.TeamPolicy(32, 100000), k_team_scale, alpha=0.5, x=x, m=m)
"""


@pytest.mark.backend("kokkos")  # a child process on the default backend
def test_pending_failure_at_exit_fails_the_process():
    proc = _python(EXIT_SCRIPT)
    assert proc.returncode != 0, proc.stderr
    assert "k_team_scale" in proc.stderr and "<string>:6" in proc.stderr, proc.stderr


# --- the checker catches what it must -----------------------------------------------------------------
def _replace_event(got, index: int, event):
    steps = [list(events) for events in got.steps]
    steps[0][index] = event
    return dataclasses.replace(got, steps=steps)


SIMPLE = Case.of([Call("scale", ("a", "b")), Call("broken", ("a", "c")), Read("b", "asarray"), Read("c", "item")])


def test_checker_catches_a_changed_value():
    expected, got = run(SIMPLE, EAGER), run(SIMPLE, EAGER)
    label, status, value = got.steps[0][2]
    mismatches = compare(expected, _replace_event(got, 2, (label, status, value + 1.0)))
    assert any("read b (asarray) differs from eager" in m for m in mismatches), mismatches


def test_checker_catches_an_error_on_data_that_does_not_depend_on_the_failure():
    expected, got = run(SIMPLE, EAGER), run(SIMPLE, EAGER)
    error = ("DeferredError", f"this read depends on kernel 'k_broken' called at {LAUNCH_SITE}, which failed")
    flagged = compare(expected, _replace_event(got, 2, (got.steps[0][2][0], ERROR, error)))
    assert any("read b (asarray) raised DeferredError" in m for m in flagged), flagged
    allowed = compare(expected, _replace_event(got, 3, (got.steps[0][3][0], ERROR, error)))
    assert not allowed  # c depends on k_broken: raising there is the contract (and reports the failure)


def test_checker_catches_a_wrong_culprit_and_a_lost_failure():
    expected, got = run(SIMPLE, EAGER), run(SIMPLE, EAGER)
    wrong = ("DeferredError", f"this read depends on kernel 'k_scale' called at {LAUNCH_SITE}, which failed")
    flagged = compare(expected, _replace_event(got, 3, (got.steps[0][3][0], ERROR, wrong)))
    assert any("read c (item) raised DeferredError" in m for m in flagged), flagged
    silent = _replace_event(got, 1, (got.steps[0][1][0], "ok", None))  # the failing call "worked"
    assert any("no error of this run named k_broken" in m for m in compare(expected, silent))


def test_eager_runs_are_deterministic():
    """The oracle compares bit for bit: the fixture itself must be deterministic."""
    for index in range(15):
        case = case_for(7, index)
        assert compare(run(case, EAGER), run(case, EAGER)) == [], as_python(case)


# --- program plumbing and the command line -----------------------------------------------------------
def test_cases_round_trip_through_json_and_python():
    for index in range(30):
        case = case_for(11, index)
        assert from_json(to_json(case)) == case
        namespace = {name: getattr(sys.modules["kfuse.check"], name) for name in
                     ("Case", "Call", "Read", "Write", "UseResult", "Realloc", "Export", "Fence")}
        assert eval(as_python(case), namespace) == case  # noqa: S307 - our own output


def test_generated_programs_are_valid():
    for index in range(300):
        for steps in case_for(13, index).threads:
            validate(steps)


@pytest.mark.parametrize("steps, problem", [
    ([UseResult(0, "float")], "no result 0 yet"),
    ([Call("axpy", ("a", "b"), ("r", 0))], "refers to no earlier result"),
    ([Read("@b", "item")], "no array '@b' here"),
    ([Call("stencil", ("lo", "hi"))], "must not share memory"),
    ([Call("rowsum", ("a", "b"))], "parameter 'm' takes M"),
    ([Call("scale", ("a", "b"), team=4)], "not a TeamPolicy kernel"),
    ([Read("a", "peek")], "no access path 'peek'"),
])
def test_invalid_programs_are_refused_with_the_step(steps, problem):
    with pytest.raises(ValueError, match="step 0 .*" + problem):
        run(Case.of(steps), EAGER)


def test_removing_a_step_keeps_references_valid():
    steps = (Call("dot", ("a", "b")), Export("c"), Call("dot", ("b", "c")), Call("axpy", ("a", "c"), ("r", 1)),
             UseResult(0, "float"), UseResult(1, "repr"), Write("@c", "fill", 1.0), Read("@c", "item"))
    assert without(steps, 0) == (Export("c"), Call("dot", ("b", "c")), Call("axpy", ("a", "c"), ("r", 0)),
                                 UseResult(0, "repr"), Write("@c", "fill", 1.0), Read("@c", "item"))
    assert without(steps, 2) == (Call("dot", ("a", "b")), Export("c"), Call("axpy", ("a", "c"), 0.5),
                                 UseResult(0, "float"), Write("@c", "fill", 1.0), Read("@c", "item"))
    assert without(steps, 1) == steps[:1] + steps[2:6]


def test_shrink_keeps_only_what_the_failure_needs():
    case = Case.of([Call("scale", ("a", "b")), Read("b", "item"), Call("sin", ("c",)), Realloc("a"),
                    Call("broken", ("c", "d"))], max_trace=2)
    small = shrink(case, lambda c: any(s.kernel == "broken" for s in c.threads[0] if isinstance(s, Call)))
    assert small == Case.of([Call("broken", ("c", "d"))])


def test_command_line_reports_counts_with_no_compiler(tmp_path):
    """``--backend python`` fuzzes on the reference interpreter, so no C++ compiler is needed (/bin/false here)."""
    env = dict(os.environ, KFUSE_CXX="/bin/false", KFUSE_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "kfuse.check", "--programs", "20", "--seed", "5", "--backend",
                           "python"], capture_output=True, text=True, timeout=600, env=env)
    summary = proc.stdout.splitlines()[0]
    assert summary.startswith("kfuse.check: 20 programs run (seed 5): 0 mismatches, 0 crashes, 0 hangs; "), \
        proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout


def _scripted_worker(behaviour: str):
    """A stand-in worker command: answers like a worker for every case except 1, where it crashes or hangs."""
    script = textwrap.dedent(f"""
        import json, sys, time
        start, stop = int(sys.argv[-2]), int(sys.argv[-1])
        for i in range(start, stop):
            print(json.dumps({{"start": i}}), flush=True)
            if i == 1:
                {"sys.exit(7)" if behaviour == "crash" else "time.sleep(60)"}
            print(json.dumps({{"done": i, "kind": "ok", "details": []}}), flush=True)
    """)
    return lambda *args: [sys.executable, "-c", script, *map(str, args[-2:])]


@pytest.mark.parametrize("behaviour", ["crash", "hang"])
def test_driver_counts_a_crash_or_hang_and_goes_on(monkeypatch, behaviour):
    monkeypatch.setattr(cli, "_worker_command", _scripted_worker(behaviour))
    outcomes: list = []
    cli._drive(seed=0, start=0, stop=4, timeout=2.0, outcomes=outcomes, progress=lambda: None)
    assert sorted((o.index, o.kind) for o in outcomes) == [(0, "ok"), (1, behaviour), (2, "ok"), (3, "ok")]


def test_worker_answers_one_json_line_per_case():
    proc = subprocess.run([sys.executable, "-m", "kfuse.check", "--seed", "2", "--worker", "0", "2"],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, KFUSE_BACKEND="python"))
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r.get("start", r.get("done")) for r in records] == [0, 0, 1, 1], proc.stderr
    assert all(r["kind"] in ("ok", "mismatch") for r in records if "done" in r)
