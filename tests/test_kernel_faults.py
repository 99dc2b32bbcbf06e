"""Kernel faults raise Python exceptions instead of killing the interpreter or touching other memory.

Integer ``//`` and ``%`` by zero (and MIN // -1) raise ZeroDivisionError; under KFUSE_BOUNDS_CHECK=1 an index
outside a View raises IndexError; both name the workunit, file:line and the values. The Debug space behaves
the same, and the rest of a faulting launch still computes what NumPy computes.
"""
import inspect

import numpy as np
import pytest

import kfuse as pk
from kfuse import config
from kfuse.codegen.kernel import generate
from kfuse.errors import KernelFault, KernelIndexError, KernelZeroDivisionError

COMPILED = [pk.OpenMP, pk.Serial]
ALL_SPACES = COMPILED + [pk.Debug]


def line_of(fn, text: str) -> int:
    """Absolute line number of the first line of ``fn``'s source containing ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(n for n, line in enumerate(lines) if text in line)


def fault_of(exc: BaseException) -> KernelFault:
    """The kernel fault itself: raised directly (eager) or the cause of a DeferredError (fusion)."""
    while exc is not None and not isinstance(exc, KernelFault):
        exc = exc.__cause__
    assert exc is not None, "no KernelFault in the exception chain"
    return exc


def cxx_of(wu) -> str:
    """The C++ kfuse generates for the (only) specialisation of ``wu`` made so far."""
    (prepared,) = wu.specializations.values()
    return generate(prepared.source, prepared.spec, prepared.name).source


def run(space, n, fn, **kwargs):
    """A fresh workunit for ``fn`` (so the KFUSE_BOUNDS_CHECK in force now applies), launched over n."""
    wu = pk.workunit(fn)
    pk.parallel_for(pk.RangePolicy(space, 0, n), wu, **kwargs)
    return wu


@pytest.fixture
def bounds_check(monkeypatch):
    monkeypatch.setenv("KFUSE_BOUNDS_CHECK", "1")


# --- integer division -------------------------------------------------------------------------------
def floordiv(i, A, B, C):
    C[i] = A[i] // B[i]


def modulo(i, A, B, C):
    C[i] = A[i] % B[i]


@pytest.mark.parametrize("space", ALL_SPACES, ids=str)
@pytest.mark.parametrize("fn, op", [(floordiv, "//"), (modulo, "%")])
def test_integer_division_by_zero_raises_and_other_threads_compute(space, fn, op):
    a = np.array([7, -7, 9, 4, -5, 6], dtype=np.int64)
    b = np.array([2, 3, 0, -3, 2, 5], dtype=np.int64)
    C = pk.View([6], pk.int64)
    with pytest.raises(ZeroDivisionError) as info:
        run(space, 6, fn, A=pk.array(a), B=pk.array(b), C=C)
    err = info.value
    assert isinstance(err, KernelZeroDivisionError) and isinstance(err, pk.KfuseError)
    assert (err.workunit, err.filename, err.lineno) == (fn.__name__, __file__, line_of(fn, op))
    assert (err.dividend, err.divisor) == (9, 0)
    assert f"{__file__}:{err.lineno}: in workunit '{fn.__name__}'" in str(err)
    assert f"(9 {op} 0)" in str(err)
    # Compiled launches run to the end; Debug stops at the fault (pdb's post-mortem lands on it).
    ok = (b != 0) & (np.arange(6) < 2 if space is pk.Debug else True)
    expected = a[ok] // b[ok] if op == "//" else a[ok] % b[ok]
    np.testing.assert_array_equal(np.asarray(C)[ok], expected)


@pytest.mark.parametrize("space", ALL_SPACES, ids=str)
def test_int64_min_floordiv_minus_one_raises_and_modulo_is_zero(space):
    low = np.iinfo(np.int64).min
    A, B = pk.array(np.array([low, 9, low])), pk.array(np.array([2, -1, -1]))
    C = pk.View([3], pk.int64)
    with pytest.raises(ZeroDivisionError, match=f"integer overflow: {low} // -1 does not fit"):
        run(space, 3, floordiv, A=A, B=B, C=C)
    np.testing.assert_array_equal(np.asarray(C)[:2], [low // 2, -9])
    run(space, 3, modulo, A=A, B=B, C=C)  # Python: x % -1 == 0 (C++ would trap on MIN % -1)
    np.testing.assert_array_equal(np.asarray(C), [0, 0, 0])


@pytest.mark.parametrize("space", ALL_SPACES, ids=str)
@pytest.mark.parametrize("dtype", [np.int8, np.int32])
def test_narrower_min_floordiv_minus_one_wraps_like_numpy(space, dtype):
    """kfuse computes integers in 64 bits, so nothing traps; storing the quotient wraps as NumPy does."""
    a, b = np.array([np.iinfo(dtype).min], dtype=dtype), np.array([-1], dtype=dtype)
    C = pk.array(np.zeros(1, dtype=dtype))
    with np.errstate(over="ignore"):
        expected = a // b
        run(space, 1, floordiv, A=pk.array(a), B=pk.array(b), C=C)
    np.testing.assert_array_equal(np.asarray(C), expected)


def by_literals(i, A, B, C):
    B[i] = i // 4 + i % 3 + (i - 20) // -3
    A[i] = i % 0 if C[i] > 0 else 0


def test_only_divisors_that_can_fault_are_checked():
    n = 16
    A, B, C = pk.View([n], pk.int64), pk.View([n], pk.int64), pk.array(np.zeros(n, dtype=np.int64))
    wu = run(pk.OpenMP, n, by_literals, A=A, B=B, C=C)
    i = np.arange(n)
    np.testing.assert_array_equal(np.asarray(B), i // 4 + i % 3 + (i - 20) // -3)
    cxx = cxx_of(wu)
    assert cxx.count("kf_floordiv_checked") == 0 and cxx.count("kf_mod_checked") == 1  # only `i % 0`
    C[5] = 1
    with pytest.raises(ZeroDivisionError, match=r"\(5 % 0\)"):
        pk.parallel_for(n, wu, A=A, B=B, C=C)


def reduce_div(i, acc, A, d):
    acc += A[i] // d


@pytest.mark.parametrize("space", ALL_SPACES, ids=str)
def test_reduction_fault_raises_and_the_next_launch_is_clean(space):
    """The record is cleared once reported: the same kernel afterwards runs and returns the right sum."""
    a = np.arange(100, dtype=np.int64)
    wu = pk.workunit(reduce_div)
    with pytest.raises(ZeroDivisionError):
        pk.parallel_reduce(pk.RangePolicy(space, 0, 100), wu, A=pk.array(a), d=0)
    assert pk.parallel_reduce(pk.RangePolicy(space, 0, 100), wu, A=pk.array(a), d=3) == (a // 3).sum()


@pk.function
def ratio(a: int, b: int) -> int:
    return a // b


def via_helper(i, A, B, C):
    C[i] = ratio(A[i], B[i])


@pytest.mark.parametrize("space", ALL_SPACES, ids=str)
def test_fault_in_a_helper_names_the_helper_and_its_line(space):
    A, B = pk.array(np.array([4, 5])), pk.array(np.array([2, 0]))
    with pytest.raises(ZeroDivisionError) as info:
        run(space, 2, via_helper, A=A, B=B, C=pk.View([2], pk.int64))
    err = info.value
    assert (err.function, err.workunit, err.lineno) == ("ratio", "via_helper", line_of(ratio.fn, "a // b"))
    assert "in function 'ratio' called from workunit 'via_helper'" in str(err)


def mdrange_div(i, j, A, B):
    B[i][j] = A[i][j] // (j - 2)


def test_mdrange_and_every_thread_faulting_keeps_one_report():
    A, B = pk.array(np.arange(64 * 5).reshape(64, 5)), pk.View([64, 5], pk.int64)
    wu = pk.workunit(mdrange_div)
    with pytest.raises(ZeroDivisionError) as info:
        pk.parallel_for(pk.MDRangePolicy([0, 0], [64, 5]), wu, A=A, B=B)
    assert info.value.divisor == 0 and info.value.dividend % 5 == 2  # one of the 64 faulting (i, 2)
    expected = np.asarray(A) // np.where(np.arange(5) == 2, 1, np.arange(5) - 2)
    np.testing.assert_array_equal(np.asarray(B)[:, [0, 1, 3, 4]], expected[:, [0, 1, 3, 4]])


# --- floats keep IEEE semantics ---------------------------------------------------------------------------
def float_ops(i, A, B, s, T, F, M):
    T[i] = A[i] / s
    F[i] = A[i] // s
    M[i] = A[i] % s
    B[i] = i / 0  # integer true division is a float division


@pytest.mark.parametrize("space", ALL_SPACES, ids=str)
def test_float_division_by_zero_is_inf_or_nan_as_in_numpy(space):
    a = np.array([1.5, -2.0, 0.0])
    T, F, M, B = pk.View([3]), pk.View([3]), pk.View([3]), pk.View([3])
    run(space, 3, float_ops, A=pk.array(a), B=B, s=0.0, T=T, F=F, M=M)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.asarray(T), a / 0.0)
        np.testing.assert_array_equal(np.asarray(F), a // 0.0)
        np.testing.assert_array_equal(np.asarray(M), a % 0.0)
        np.testing.assert_array_equal(np.asarray(B), np.arange(3) / 0)


# --- bounds checks ----------------------------------------------------------------------------------------
def read_next(i, A, C):
    C[i] = A[i + 1]


def write_past(i, A, C):
    C[i + 1] = A[i]


def read_previous(i, A, C):
    C[i] = A[i - 1]


def read_column(i, M, C, j):
    C[i] = M[i][j]


@pytest.mark.parametrize("space", ALL_SPACES, ids=str)
@pytest.mark.parametrize("fn, view, index, text", [(read_next, "A", 8, "A[i + 1]"), (write_past, "C", 8, "C[i + 1]"),
                                                   (read_previous, "A", -1, "A[i - 1]")])
def test_bounds_check_raises_index_error_naming_view_index_and_extent(bounds_check, space, fn, view, index, text):
    A, C = pk.array(np.arange(8.0)), pk.array(np.full(8, -1.0))
    with pytest.raises(IndexError) as info:
        run(space, 8, fn, A=A, C=C)
    err = info.value
    assert isinstance(err, KernelIndexError)
    assert (err.view, err.dim, err.index, err.extent) == (view, 0, index, 8)
    assert (err.workunit, err.lineno) == (fn.__name__, line_of(fn, text))
    assert f"index {index} is out of range for dimension 0 of View '{view}' (extent 8)" in str(err)
    assert ("negative indices are errors" in str(err)) == (index < 0)
    c = np.asarray(C)
    if fn is read_next:  # the threads in range computed their element
        np.testing.assert_array_equal(c[:7], np.arange(1.0, 8.0))
    if fn is write_past:  # the writes inside C happened
        np.testing.assert_array_equal(c[1:], np.arange(7.0))


@pytest.mark.parametrize("space", ALL_SPACES, ids=str)
def test_bounds_check_names_the_dimension_of_a_2d_view(bounds_check, space):
    M = pk.array(np.arange(12.0).reshape(4, 3))
    with pytest.raises(IndexError) as info:
        run(space, 4, read_column, M=M, C=pk.View([4]), j=3)
    assert (info.value.view, info.value.dim, info.value.index, info.value.extent) == ("M", 1, 3, 3)


def atomic_past(i, H):
    pk.atomic_add(H, [i + 1], 1.0)


@pytest.mark.parametrize("space", ALL_SPACES, ids=str)
def test_bounds_check_covers_atomics(bounds_check, space):
    with pytest.raises(IndexError) as info:
        run(space, 4, atomic_past, H=pk.View([4]))
    assert (info.value.view, info.value.index, info.value.extent) == ("H", 4, 4)


def test_without_the_switch_no_check_is_compiled(monkeypatch):
    A, C = pk.array(np.arange(8.0)), pk.View([8])
    monkeypatch.setenv("KFUSE_BOUNDS_CHECK", "0")
    plain = cxx_of(run(pk.OpenMP, 7, read_next, A=A, C=C))
    monkeypatch.setenv("KFUSE_BOUNDS_CHECK", "1")
    checked = cxx_of(run(pk.OpenMP, 7, read_next, A=A, C=C))
    assert "kf_at(" not in plain and "kf_sites" not in plain
    assert "kf_at(A, 0, " in checked


def test_the_switch_is_part_of_the_cache_key(monkeypatch):
    monkeypatch.setenv("KFUSE_BOUNDS_CHECK", "0")
    off = config.cache_key()
    monkeypatch.setenv("KFUSE_BOUNDS_CHECK", "1")
    on = config.cache_key()
    assert config.BOUNDS_CHECK.in_cache_key and on != off and "KFUSE_BOUNDS_CHECK=True" in on


@pytest.mark.parametrize("space", COMPILED, ids=str)
def test_debug_space_checks_negative_indices_without_the_switch(space):
    """Debug always checks (no NumPy wrap-around); a compiled kernel without the switch is not checked, so it
    is given only in-range indices here."""
    A, C = pk.array(np.arange(8.0)), pk.View([8])
    with pytest.raises(IndexError, match="index -1 is out of range"):
        run(pk.Debug, 8, read_previous, A=A, C=C)
    pk.parallel_for(pk.RangePolicy(space, 1, 8), pk.workunit(read_previous), A=A, C=C)
    np.testing.assert_array_equal(np.asarray(C)[1:], np.arange(7.0))


# --- fused kernels name the member --------------------------------------------------------------------------
def scale(i, X, Y):
    Y[i] = 2 * X[i]


def divide_shifted(i, Y, D, Q, X):
    Q[i] = Y[i] // D[i] + X[i + 1]


@pytest.mark.parametrize("transforms", [[], ["args", "loops", "restrict", "memory"]])
def test_fused_kernel_faults_name_the_member_workunit_and_line(monkeypatch, transforms):
    monkeypatch.setenv("KFUSE_BOUNDS_CHECK", "1")
    monkeypatch.setenv("KFUSE_TRANSFORMS", ",".join(transforms) or "none")
    X = pk.array(np.arange(10, dtype=np.int64))
    first, second = pk.workunit(scale), pk.workunit(divide_shifted)
    one_zero = np.ones(10, dtype=np.int64)
    one_zero[4] = 0
    # One fault per launch (which of several threads reports first is not fixed): X[i + 1] only at i = 9.
    for n, d, expected in ((10, np.ones(10, dtype=np.int64), KernelIndexError), (9, one_zero, KernelZeroDivisionError)):
        Y, Q = pk.View([10], pk.int64), pk.View([10], pk.int64)  # a failed call leaves what it writes unusable
        with pytest.raises(pk.KfuseError) as info:
            with pk.fusion():
                pk.parallel_for(n, first, X=X, Y=Y)
                pk.parallel_for(n, second, Y=Y, D=pk.array(d), Q=Q, X=X)
                np.asarray(Q)
        err = fault_of(info.value)
        assert type(err) is expected
        assert (err.workunit, err.lineno, err.kernel) == ("divide_shifted", line_of(divide_shifted, "Q[i] ="),
                                                          "scale__divide_shifted")
        assert "(fused kernel 'scale__divide_shifted')" in str(err)
        if expected is KernelIndexError:
            assert (err.view, err.index, err.extent) == ("X", 10, 10)


def quotient(i, A, D, Q):
    Q[i] = A[i] // D[i]


def remainder(i, A, E, R):
    R[i] = A[i] % E[i]


def doubled(i, A, S):
    S[i] = 2 * A[i]


@pytest.mark.parametrize("zeros", [(2, 7), (7, 2), (5, 5)])
@pytest.mark.parametrize("backend", [pytest.param("kokkos", marks=pytest.mark.backend("kokkos")),
                                     pytest.param("python", marks=pytest.mark.backend("python"))])
def test_every_member_of_a_fused_kernel_that_faults_is_reported_as_its_call_alone_is(monkeypatch, zeros, backend):
    """Two members fault in one launch (at different threads, or the same one), a third does not: each faulting
    call's results raise a fault naming its own workunit and line, as its eager call does, and the third's are
    right."""
    monkeypatch.setenv("KFUSE_PROFIT", "off")  # fused whatever the compile costs
    a = np.arange(1, 11, dtype=np.int64) * 6
    d, e = np.ones(10, dtype=np.int64), np.full(10, 4, dtype=np.int64)
    d[zeros[0]], e[zeros[1]] = 0, 0
    A, D, E = (pk.array(x.copy()) for x in (a, d, e))  # (arrays the program holds would run calls at once)
    first, second, third = pk.workunit(quotient), pk.workunit(remainder), pk.workunit(doubled)
    for fn in (quotient, remainder):  # eager: each call raises its own fault
        Q = pk.View([10], pk.int64)
        with pytest.raises(KernelZeroDivisionError) as info:
            if fn is quotient:
                pk.parallel_for(10, first, A=A, D=D, Q=Q)
            else:
                pk.parallel_for(10, second, A=A, E=E, R=Q)
        assert info.value.workunit == fn.__name__
    Q, R, S = (pk.View([10], pk.int64) for _ in range(3))
    pk.reset_stats()
    with pk.fusion():
        pk.parallel_for(10, first, A=A, D=D, Q=Q)
        pk.parallel_for(10, third, A=A, S=S)
        pk.parallel_for(10, second, A=A, E=E, R=R)
        with pytest.raises(pk.KfuseError):
            pk.fence()
        np.testing.assert_array_equal(np.asarray(S), 2 * a)
        for view, fn in ((Q, quotient), (R, remainder)):
            with pytest.raises(pk.KfuseError) as info:
                np.asarray(view)
            err = fault_of(info.value)
            assert (err.workunit, err.lineno) == (fn.__name__, line_of(fn, "[i] = A[i]")), str(err)
            assert err.kernel == "quotient__doubled__remainder"  # the three calls ran as one kernel


def test_a_fault_record_lists_the_other_members_that_faulted_and_says_when_it_was_cut():
    from kfuse.errors import FAULT_FIELD_SEPARATOR as F, OtherFault, kernel_fault

    head = F.join(["floordiv", "quotient", "", "p.py", "3", "", "0", "6", "0", "0"]) + F
    other = "\x1d".join(["1", "2", "mod", "remainder", "p.py", "7"]) + "\x1e"
    maybe = "\x1d".join(["0", "4", "index", "late", "p.py", "9"]) + "\x1e"
    fault = kernel_fault(head + other + maybe, "quotient__remainder")
    assert (fault.workunit, fault.member, fault.others_known) == ("quotient", 0, True)
    assert fault.others == (OtherFault(True, 2, "mod", "remainder", "p.py", 7),
                            OtherFault(False, 4, "index", "late", "p.py", 9))
    alone = kernel_fault(head, "quotient")
    assert alone.others == () and alone.others_known
    cut = kernel_fault(head + other + maybe[:5], "quotient__remainder")
    assert cut.others == (OtherFault(True, 2, "mod", "remainder", "p.py", 7),) and not cut.others_known


# --- printf ------------------------------------------------------------------------------------------------
def printf_n(i, A):
    pk.printf("%d%n\n", i, A[i])


def printf_positional(i, A):
    pk.printf("%1$d\n", i)


def printf_star(i, A):
    pk.printf("%*d\n", i, i)


def printf_unknown(i, A):
    pk.printf("%y\n", i)


@pytest.mark.parametrize("fn, why", [(printf_n, "'%n' writes through a pointer"),
                                     (printf_positional, "positional arguments"),
                                     (printf_star, "'\\*'"), (printf_unknown, "'%y' is not a conversion")])
def test_printf_formats_are_validated_before_compiling(fn, why):
    with pytest.raises(pk.UnsupportedSyntaxError, match=why) as info:
        run(pk.OpenMP, 1, fn, A=pk.View([1], pk.int64))
    assert f"{__file__}:{line_of(fn, 'pk.printf')}" in str(info.value)


def printf_ok(i, A):
    pk.printf("row %d: %.2f%%\n", i, A[i])


def test_valid_printf_still_prints(capfd):
    run(pk.Serial, 2, printf_ok, A=pk.array(np.array([1.5, 2.25])))
    assert capfd.readouterr().out == "row 0: 1.50%\nrow 1: 2.25%\n"
