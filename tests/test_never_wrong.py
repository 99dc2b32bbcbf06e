"""Fusion never changes a result, whatever path the program takes to memory, and a failure loses nothing else.

Every program here runs eagerly and with fusion on, and each value the program observes must be the
same bit for bit: memory the host reaches past kfuse's barriers (NumPy arrays passed to kernels, kept
``np.asarray`` aliases, ``pk.array`` bases), failing calls, threads, fork, and Futures used as numbers.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import kfuse as pk
from marks import host_kokkos_only

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

N = 64
X0 = np.linspace(-1.0, 2.0, N)


@pk.workunit
def w_affine(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 2.0 * x[i] + 1.0


@pk.workunit
def w_inc(i: int, x: pk.View1D[pk.double]):
    x[i] = x[i] + 1.0


@pk.workunit
def w_sum(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i]


@pk.workunit
def w_bad_affine(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 3.0 * x[i]


@pk.workunit
def w_two(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    y[i] = 3.0 * x[i]
    z[i] = x[i] + 1.0


@pk.workunit
def w_div(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double], d: int):
    y[i] = x[i] + 7 // d


def observe(program) -> tuple:
    """What ``program`` observes eagerly and with fusion on (a list of plain values each)."""
    eager = program()
    pk.enable_fusion()
    try:
        fused = program()
    finally:
        pk.disable_fusion()
    return eager, fused


def assert_same(eager: list, fused: list) -> None:
    assert len(eager) == len(fused)
    for e, f in zip(eager, fused):
        np.testing.assert_array_equal(np.asarray(f), np.asarray(e))


# --- escaped memory ----------------------------------------------------------------------------------
def test_numpy_argument_read_and_written_by_the_host():
    def program():
        buf, out = X0.copy(), pk.View(N)
        pk.parallel_for(N, w_inc, x=buf)  # a plain NumPy array: the host reads it directly next
        seen = [buf.copy()]
        buf[3] = 100.0  # a host write between two kernels that use the array
        pk.parallel_for(N, w_affine, x=buf, y=out)
        seen.append(np.asarray(out).copy())
        return seen

    assert_same(*observe(program))
    eager, _ = observe(program)
    np.testing.assert_array_equal(eager[0], X0 + 1.0)


def test_kept_asarray_alias_written_after_a_pending_kernel():
    def program():
        v, w = pk.View(N), pk.View(N)
        v[:] = X0
        alias = np.asarray(v)  # kept: the host writes v's memory through it without a barrier
        pk.parallel_for(N, w_inc, x=v)
        alias[0] = -5.0
        pk.parallel_for(N, w_affine, x=v, y=w)
        return [alias.copy(), np.asarray(w).copy()]

    assert_same(*observe(program))


def test_alias_of_a_row_and_of_data_escape_too():
    @pk.workunit
    def w_rows(i: int, m: pk.View2D[pk.double]):
        for j in range(m.extent(1)):
            m[i][j] = m[i][j] * 2.0 + j

    def program():
        m = pk.View((4, 8))
        row, whole = m[1], m.data  # a row (shares memory) and the whole array
        pk.parallel_for(4, w_rows, m=m)
        seen = [row.copy(), whole.copy()]
        row[2] = 9.0
        pk.parallel_for(4, w_rows, m=m)
        return seen + [whole.copy()]

    assert_same(*observe(program))


def test_pk_array_base_changed_after_a_pending_reader():
    def program():
        base = X0.copy()
        v, out = pk.array(base), pk.View(N)
        pk.parallel_for(N, w_affine, x=v, y=out)  # reads base's memory
        base[:] = 0.0  # the host changes the base afterwards
        return [np.asarray(out).copy(), base.copy()]

    assert_same(*observe(program))


def test_views_over_temporaries_still_fuse():
    """Memory only kfuse can reach does not escape: a pk.array over a temporary, and an alias that died."""
    pk.enable_fusion()
    v = pk.array(X0.copy())
    np.asarray(v).sum()  # an alias that lives for one expression
    w = pk.View(N)
    pk.reset_stats()
    pk.parallel_for(N, w_inc, x=v)
    pk.parallel_for(N, w_affine, x=v, y=w)
    assert pk.stats()["kernels_launched"] == 0  # both pending
    got = np.asarray(w).copy()
    assert pk.stats()["fused_kernels_launched"] == 1 and pk.stats()["escaped_calls"] == 0
    np.testing.assert_array_equal(got, 2.0 * (X0 + 1.0) + 1.0)


def test_escape_ends_when_the_user_drops_the_base():
    pk.enable_fusion()
    base = X0.copy()
    v = pk.array(base)
    pk.reset_stats()
    pk.parallel_for(N, w_inc, x=v)
    assert pk.stats()["kernels_launched"] == 1  # base is held: ran at once
    del base
    pk.parallel_for(N, w_inc, x=v)
    assert pk.stats()["kernels_launched"] == 1  # nobody else holds the memory now: delayed
    np.testing.assert_array_equal(np.asarray(v), X0 + 2.0)


def test_read_only_inputs_the_program_holds_still_fuse():
    """A read-only array cannot change behind kfuse's back: kernels only reading it stay delayed."""
    def program():
        base = X0.copy()
        base.flags.writeable = False
        v, w, out = pk.array(base), pk.View(N), pk.View(N)
        pk.parallel_for(N, w_affine, x=v, y=w)
        pk.parallel_for(N, w_affine, x=w, y=out)
        launched = pk.stats()["kernels_launched"]
        return [np.asarray(out).copy(), launched]

    pk.reset_stats()
    eager, fused = observe(program)
    assert eager[1] == 2 and fused[1] == 2  # eager ran both; fused ran none before the read (stats cumulative)
    assert_same(eager[:1], fused[:1])


def test_a_kernel_writing_a_held_array_runs_at_once_even_if_read_only_elsewhere():
    pk.enable_fusion()
    base = X0.copy()
    v = pk.array(base)
    pk.reset_stats()
    pk.parallel_for(N, w_inc, x=v)
    assert pk.stats()["kernels_launched"] == 1 and pk.stats()["escaped_calls"] == 1
    np.testing.assert_array_equal(base, X0 + 1.0)  # the program sees it through its own array at once


# --- failures ----------------------------------------------------------------------------------------
@pytest.fixture
def broken(break_builds):
    """w_bad_affine never builds, alone or fused (as a compiler rejecting its code would)."""
    break_builds(w_bad_affine, message="test breakage")


def test_a_failing_call_loses_only_what_depends_on_it(broken):
    pk.enable_fusion(trace_only=True)
    a, b, c, d = pk.array(X0.copy()), pk.View(N), pk.View(N), pk.View(N)
    del_ok = pk.View(N)
    pk.parallel_for(N, w_affine, x=a, y=b)  # before the failure: runs
    line = sys._getframe().f_lineno + 1
    pk.parallel_for(N, w_bad_affine, x=a, y=c)  # fails at its compile
    pk.parallel_for(N, w_affine, x=c, y=d)  # depends on it
    pk.parallel_for(N, w_affine, x=a, y=del_ok)  # does not
    total = pk.parallel_reduce(N, w_sum, x=d)  # depends, through d
    np.testing.assert_array_equal(np.asarray(b), 2.0 * X0 + 1.0)
    np.testing.assert_array_equal(np.asarray(del_ok), 2.0 * X0 + 1.0)
    for lost in (lambda: np.asarray(c), lambda: d[0], lambda: float(total)):
        with pytest.raises(pk.DeferredError, match=f"(?s)w_bad_affine' called at {__file__}:{line}.*test breakage"):
            lost()
    c.fill(1.0)  # a full overwrite makes c valid again
    np.testing.assert_array_equal(np.asarray(c), np.ones(N))
    with pytest.raises(pk.DeferredError):
        d.copy()  # d stays lost


def test_a_call_that_only_overwrites_lost_data_runs_and_the_data_stays_lost(broken):
    """Its other results do not depend on the failure (eager computes them the same), so they stand; the bytes it
    overwrote stay lost (a kernel need not write every element of a View it writes)."""
    pk.enable_fusion(trace_only=True)
    a, c, e = pk.array(X0.copy()), pk.View(N), pk.View(N)
    pk.parallel_for(N, w_bad_affine, x=a, y=c)  # fails at its compile: c lost
    pk.parallel_for(N, w_two, x=a, y=c, z=e)  # writes c without reading it, and e from a
    np.testing.assert_array_equal(np.asarray(e), X0 + 1.0)
    with pytest.raises(pk.DeferredError, match="w_bad_affine"):
        np.asarray(c)


def test_a_failing_member_of_a_fused_group_is_named_and_the_others_run(broken):
    pk.enable_fusion()
    a, b, c, e = pk.View(N), pk.View(N), pk.View(N), pk.View(N)
    a[:] = X0
    pk.parallel_for(N, w_affine, x=a, y=b)
    line = sys._getframe().f_lineno + 1
    pk.parallel_for(N, w_bad_affine, x=a, y=c)
    pk.parallel_for(N, w_affine, x=a, y=e)
    a[:] = 0.0  # overwrites what all three read: they run first, as one planned group
    np.testing.assert_array_equal(np.asarray(b), 2.0 * X0 + 1.0)  # fused attempt failed; b is right anyway
    np.testing.assert_array_equal(np.asarray(e), 2.0 * X0 + 1.0)
    with pytest.raises(pk.DeferredError, match=f"'w_bad_affine' called at {__file__}:{line}"):
        np.asarray(c)
    assert "failed fused, ran its calls one by one" in pk.explain()


def test_a_failing_call_on_a_numpy_array_raises_at_the_call_as_eager_does(broken):
    """The program reads the array directly, where no barrier could raise later: the call that runs at once
    raises at once, and leaves nothing poisoned (eager leaves the output untouched too)."""
    def program():
        buf, out = X0.copy(), np.zeros(N)
        with pytest.raises(pk.CompileError, match="test breakage"):
            pk.parallel_for(N, w_bad_affine, x=buf, y=out)
        pk.parallel_for(N, w_affine, x=buf, y=out)
        return [out.copy()]

    assert_same(*observe(program))


def test_a_fault_in_a_fused_kernel_loses_only_the_faulting_call():
    """Two calls of one workunit fused; the second divides by zero. The first's result stands, as in eager."""
    pk.enable_fusion()
    a, b, c, e = pk.View(N), pk.View(N), pk.View(N), pk.View(N)
    a[:] = X0
    pk.parallel_for(N, w_div, x=a, y=b, d=1)
    line = sys._getframe().f_lineno + 1
    pk.parallel_for(N, w_div, x=a, y=c, d=0)
    pk.parallel_for(N, w_affine, x=c, y=e)  # reads what the faulting call wrote
    total = pk.parallel_reduce(N, w_sum, x=a)
    a[:] = 0.0  # overwrites what all of them read: they run first, fused
    assert "faulted" in pk.explain()
    np.testing.assert_array_equal(np.asarray(b), X0 + 7.0)
    np.testing.assert_allclose(float(total), np.sum(X0), rtol=1e-12)  # its value came back despite the fault
    for lost in (c, e):
        with pytest.raises(pk.DeferredError, match=f"(?s)'w_div' called at {__file__}:{line}.*division by zero"):
            np.asarray(lost)
        with pytest.raises(ZeroDivisionError):  # as eagerly: the builtin kind catches it too
            np.asarray(lost)


def test_a_fault_writing_one_column_loses_that_column_only():
    """Columns of a matrix interleave in memory: a failed call's poison is its column's elements, not the bytes
    between them (a neighbour column reads fine), and a host overwrite of another column leaves it poisoned."""
    pk.enable_fusion()
    m = pk.View((N, 3))
    m[:] = np.arange(3 * N, dtype=float).reshape(N, 3)
    line = sys._getframe().f_lineno + 1
    pk.parallel_for(N, w_div, x=m[:, 0], y=m[:, 1], d=0)
    np.testing.assert_array_equal(np.asarray(m[:, 0]), 3.0 * np.arange(N))  # read by the failed call, not written
    np.testing.assert_array_equal(np.asarray(m[:, 2]), 3.0 * np.arange(N) + 2.0)
    right = m[:, 2]
    right[:] = -1.0  # a full overwrite of the next column: its own elements only
    with pytest.raises(pk.DeferredError, match=f"(?s)'w_div' called at {__file__}:{line}.*division by zero"):
        np.asarray(m[:, 1])
    np.testing.assert_array_equal(np.asarray(right), -np.ones(N))
    middle = m[:, 1]
    middle[:] = 4.0  # the lost column written whole: valid again
    np.testing.assert_array_equal(np.asarray(m), np.stack([3.0 * np.arange(N), np.full(N, 4.0), -np.ones(N)], 1))


def test_a_fault_in_a_fused_kernel_keeps_a_later_member_writing_the_next_column():
    """One fused kernel: a call faults writing column 1 of a matrix, a later one writes column 2. The columns
    interleave in memory, but share no byte: column 2 is right, as in eager (the fuzzer's seed 127163, case 1988)."""
    pk.enable_fusion()
    m, x = pk.View((N, 3)), pk.View(N)
    m[:] = 0.0
    x[:] = X0
    line = sys._getframe().f_lineno + 1
    pk.parallel_for(N, w_div, x=x, y=m[:, 1], d=0)
    pk.parallel_for(N, w_affine, x=x, y=m[:, 2])
    x[:] = 0.0  # overwrites what both read: they run first, fused
    assert "faulted" in pk.explain()
    np.testing.assert_array_equal(np.asarray(m[:, 2]), 2.0 * X0 + 1.0)
    np.testing.assert_array_equal(np.asarray(m[:, 0]), np.zeros(N))
    with pytest.raises(pk.DeferredError, match=f"(?s)'w_div' called at {__file__}:{line}.*division by zero"):
        np.asarray(m[:, 1])


def test_an_eager_call_on_lost_data_raises(broken):
    pk.enable_fusion()
    a, c, d = pk.View(N), pk.View(N), pk.View(N)
    pk.parallel_for(N, w_bad_affine, x=a, y=c)
    with pytest.raises(pk.DeferredError):
        pk.disable_fusion()  # the failure nobody read yet is raised here
    with pytest.raises(pk.DeferredError, match="w_bad_affine"):
        pk.parallel_for(N, w_affine, x=c, y=d)  # eager, but c's contents were lost


def test_fence_reports_a_failure_once(broken):
    pk.enable_fusion()
    a, c = pk.View(N), pk.View(N)
    pk.parallel_for(N, w_bad_affine, x=a, y=c)
    with pytest.raises(pk.DeferredError, match="w_bad_affine"):
        pk.fence()
    pk.fence()  # reported: the program was told and carries on


# --- threads -----------------------------------------------------------------------------------------
def test_threads_with_fusion_on_see_their_own_results():
    def worker(seed: int, out: dict) -> None:
        x, y = pk.View(N), pk.View(N)
        x[:] = X0 + seed
        for _ in range(20):
            pk.parallel_for(N, w_inc, x=x)
            pk.parallel_for(N, w_affine, x=x, y=y)
            s = pk.parallel_reduce(N, w_sum, x=y)
        out[seed] = (np.asarray(y).copy(), float(s))

    def program():
        out: dict = {}
        threads = [threading.Thread(target=worker, args=(k, out)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        return [out[k][0] for k in range(4)] + [out[k][1] for k in range(4)]

    assert_same(*observe(program))


def test_threads_sharing_a_view_serialise_on_reads():
    pk.enable_fusion()
    shared = pk.View(N)
    errors = []

    def bump():
        try:
            for _ in range(50):
                pk.parallel_for(N, w_inc, x=shared)
                shared[0]  # a read must see at least this thread's own increments
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    np.testing.assert_array_equal(np.asarray(shared), np.full(N, 150.0))


# --- subprocesses: fork, exit status -------------------------------------------------------------------
def _run(tmp_path, body: str) -> subprocess.CompletedProcess:
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(body))
    keep = ("KFUSE_CACHE_DIR", "KFUSE_KOKKOS_ROOT")  # where kernels are kept and which Kokkos builds them
    env = {k: v for k, v in os.environ.items() if not k.startswith("KFUSE_") or k in keep}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)


@host_kokkos_only
def test_fork_after_a_kernel_ran_does_not_hang(tmp_path):
    proc = _run(tmp_path, '''
        import os
        import numpy as np
        import kfuse as pk

        @pk.workunit
        def inc(i: int, a: pk.View1D[pk.double]):
            a[i] = a[i] + 1.0

        pk.enable_fusion()
        a = pk.View(100)
        pk.parallel_for(100, inc, a=a)
        print("parent before", np.asarray(a).sum(), flush=True)
        pid = os.fork()
        if pid == 0:
            pk.parallel_for(100, inc, a=a)
            pk.parallel_for(100, inc, a=a)
            print("child", np.asarray(a).sum(), flush=True)
            raise SystemExit(0)  # a normal exit: atexit handlers run in the child
        _, status = os.waitpid(pid, 0)
        pk.parallel_for(100, inc, a=a)
        print("parent after", np.asarray(a).sum(), os.waitstatus_to_exitcode(status), flush=True)
    ''')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["parent before 100.0", "child 300.0", "parent after 200.0 0"]
    assert "forked after Kokkos started" in proc.stderr


@host_kokkos_only
def test_a_captured_function_in_a_forked_child_runs_its_python(tmp_path):
    """A replay would launch the parent's OpenMP kernels in the child, which libgomp cannot run after a fork."""
    proc = _run(tmp_path, '''
        import os
        import numpy as np
        import kfuse as pk

        @pk.workunit
        def inc(i: int, a: pk.View1D[pk.double]):
            a[i] = a[i] + 1.0

        @pk.capture
        def twice(a):
            pk.parallel_for(100, inc, a=a)
            pk.parallel_for(100, inc, a=a)

        pk.enable_fusion()
        a = pk.View(100)
        runs = 0
        while runs < 5 or pk.stats()["calls_captured"] == 0 and runs < 60:  # (timing trials first: KFUSE_PROFIT)
            twice(a)
            runs += 1
        print("parent before", np.asarray(a).sum() == 200.0 * runs, pk.stats()["calls_captured"] > 0, flush=True)
        pid = os.fork()
        if pid == 0:
            twice(a)
            print("child", np.asarray(a).sum() == 200.0 * (runs + 1), flush=True)
            raise SystemExit(0)
        _, status = os.waitpid(pid, 0)
        twice(a)
        print("parent after", np.asarray(a).sum() == 200.0 * (runs + 1), os.waitstatus_to_exitcode(status), flush=True)
    ''')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["parent before True True", "child True", "parent after True 0"]


def test_a_lost_failure_at_exit_fails_the_process(tmp_path):
    proc = _run(tmp_path, '''
        import dataclasses
        import kfuse as pk
        from kfuse.backends import kokkos

        real = kokkos.generate
        kokkos.generate = lambda src, spec, name, *r: dataclasses.replace(
            real(src, spec, name, *r), source=real(src, spec, name, *r).source + 'static_assert(false, "at exit");')

        @pk.workunit
        def inc(i: int, a: pk.View1D[pk.double]):
            a[i] = a[i] + 1.0

        pk.enable_fusion()
        pk.parallel_for(10, inc, a=pk.View(10))
        print("done")
    ''')
    assert proc.returncode == 1 and proc.stdout == "done\n"
    assert "'inc' called at" in proc.stderr and "at exit" in proc.stderr


# --- Futures behave as the numbers they stand for ----------------------------------------------------
FUTURE_USES = {
    "repr": repr, "str": str, "fstring": lambda r: f"{r}", "format": lambda r: f"{r:.3e}",
    "round": lambda r: round(r, 2), "round0": round, "floor": math.floor, "ceil": math.ceil,
    "trunc": math.trunc, "is_integer": lambda r: r.is_integer(), "real": lambda r: r.real,
    "hex": lambda r: r.hex(), "np_sqrt": np.sqrt, "np_add": lambda r: np.float64(2.0) + r,
    "np_array": lambda r: np.array([r, 1.0]), "radd": lambda r: 1 + r, "rdiv": lambda r: 3.0 / r,
    "pow": lambda r: r ** 2, "neg": lambda r: -r, "abs": abs, "cmp": lambda r: (r < 1e9, r == r, r >= 0),
    "divmod": lambda r: divmod(r, 7.0), "float": float, "int": int, "bool": bool, "value": pk.value,
    "max": lambda r: max(r, 0.5) * 1.0, "min": lambda r: min(r, 1e9) - 0.0, "sum": lambda r: sum([r, r]), "math_sqrt": lambda r: math.sqrt(abs(r)),
}


@pytest.mark.parametrize("use", sorted(FUTURE_USES))
def test_future_uses_match_eager(use):
    def program():
        x = pk.View(N)
        x[:] = X0
        pk.parallel_for(N, w_inc, x=x)
        r = pk.parallel_reduce(N, w_sum, x=x)
        return [FUTURE_USES[use](r)]

    eager, fused = observe(program)
    assert type(eager[0]) is type(fused[0]) and repr(eager[0]) == repr(fused[0])


def test_pk_value_gives_a_plain_float():
    pk.enable_fusion()
    x = pk.View(N)
    pk.parallel_for(N, w_inc, x=x)
    r = pk.parallel_reduce(N, w_sum, x=x)
    assert isinstance(r, pk.Future) and type(pk.value(r)) is float and pk.value(r) == float(N)
    assert pk.value(3) == 3


def test_a_future_never_delivered_is_an_internal_error_never_a_made_up_value():
    """Every path that runs a reduction delivers its Future; should one ever not, reading it raises (naming the
    call) instead of handing the program an internal placeholder."""
    from kfuse.future import Future
    from kfuse.types import DType

    future = Future(DType.float64, lambda f: None)  # its run delivered nothing
    with pytest.raises(pk.InternalError, match="never delivered"):
        float(future)
    with pytest.raises(pk.InternalError):
        future + 1


@pk.workunit
def announce(i: int, a: pk.View1D[pk.double]):
    pk.printf("kernel %d %.1f\n", i, a[i])


@pk.workunit
def add_one(i: int, a: pk.View1D[pk.double]):
    a[i] = a[i] + 1.0


@pytest.mark.backend("python")
def test_printf_output_keeps_its_place_among_host_prints(capsys):
    pk.enable_fusion()
    a = pk.View([2], pk.double)
    pk.parallel_for(2, add_one, a=a)  # pending until the printing kernel, which reads it, runs
    print("before")
    pk.parallel_for(2, announce, a=a)
    print("after")
    pk.fence()
    assert capsys.readouterr().out.split("\n") == ["before", "kernel 0 1.0", "kernel 1 1.0", "after", ""]
    assert pk.stats()["printing_calls"] == 1
