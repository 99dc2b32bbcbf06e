"""Errors users see: unsupported syntax (before any compile), bad arguments, and C++ compile failures."""
import dataclasses
import inspect

import numpy as np
import pytest

import kfuse as pk
from kfuse.compiler import cache, toolchain
from kfuse.backends import kokkos

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler


def line_of(wu, text: str) -> int:
    """Absolute line number of the first line of ``wu``'s body containing ``text``."""
    lines, first = inspect.getsourcelines(wu.fn)
    body = next(n for n, line in enumerate(lines) if line.lstrip().startswith("def ")) + 1
    return first + next(n for n, line in enumerate(lines) if n >= body and text in line)


# --- unsupported constructs -------------------------------------------------------------------------
@pk.workunit
def uses_try(i, x):
    try:
        x[i] = 1.0
    except ValueError:
        x[i] = 2.0


@pk.workunit
def uses_lambda(i, x):
    double_it = lambda v: 2 * v  # noqa: E731
    x[i] = double_it(i)


@pk.workunit
def uses_list(i, x):
    weights = [1.0, 2.0]
    x[i] = weights[0]


@pk.workunit
def uses_print(i, x):
    print(i, x[i])


@pk.workunit
def uses_string(i, x):
    label = "row" + "s"
    x[i] = i


@pk.workunit
def uses_comprehension(i, x):
    x[i] = sum([j for j in range(i)])


@pk.workunit
def uses_tuple_assign(i, x):
    a, b = i, 2 * i
    x[i] = a + b


@pk.workunit
def uses_for_else(i, x):
    for j in range(3):
        x[i] = j
    else:
        x[i] = -1.0


@pytest.mark.parametrize("wu, marker, construct", [
    (uses_try, "try:", "try statement"),
    (uses_lambda, "lambda", "lambda"),
    (uses_list, "[1.0, 2.0]", "list literal"),
    (uses_print, "print(", "print"),
    (uses_string, '"row"', "str"),
    (uses_comprehension, "for j in", "list comprehension"),
    (uses_tuple_assign, "a, b =", "tuple assignment"),
    (uses_for_else, "for j in", "for ... else"),
])
def test_unsupported_construct_is_reported_before_compiling(wu, marker, construct):
    compiles = pk.stats()["compiles"]
    with pytest.raises(pk.UnsupportedSyntaxError) as info:
        pk.parallel_for(4, wu, x=np.zeros(4))
    message = str(info.value)
    assert construct in message
    assert f"'{wu.__name__}'" in message
    assert f"{__file__}:{line_of(wu, marker)}:" in message
    assert marker in message  # the offending source line is quoted
    assert info.value.lineno == line_of(wu, marker)
    assert pk.stats()["compiles"] == compiles


# --- type errors found while translating ---------------------------------------------------------------
@pk.workunit
def bitwise_atomic(i, x):
    pk.atomic_fetch_or(x, [0], 1)


@pk.workunit
def index_scalar(i, x, y):
    y[i] = x[i]


def test_kernel_type_errors_name_the_cause():
    compiles = pk.stats()["compiles"]
    with pytest.raises(pk.KernelTypeError, match=r"atomic_fetch_or needs a View of integers, 'x' holds float64"):
        pk.parallel_for(2, bitwise_atomic, x=np.zeros(2))
    with pytest.raises(pk.KernelTypeError, match=r"'x' is not a View"):
        pk.parallel_for(2, index_scalar, x=1.5, y=np.zeros(2))
    assert pk.stats()["compiles"] == compiles


# --- argument errors ------------------------------------------------------------------------------------
@pk.workunit
def annotated(i, n: int, alpha: float, x: pk.View1D[pk.double]):
    x[i] = alpha * n


def test_argument_errors_name_the_parameter():
    x = np.zeros(3)
    cases = [
        (dict(n=1, alpha=2.0), "missing argument for parameter 'x'"),
        (dict(n=1, alpha=2.0, x=x, beta=3.0), "no parameter 'beta'"),
        (dict(n=1, alpha=2.0, y=x), "missing argument for parameter 'x'"),
        (dict(n=1.5, alpha=2.0, x=x), "parameter 'n' is annotated int64 but got a float"),
        (dict(n=1, alpha=2.0, x=4.0), "parameter 'x' expects a View"),
        (dict(n=1, alpha=x, x=x), "parameter 'alpha' is annotated"),
        (dict(n=1, alpha=2.0, x=np.zeros((3, 3))), "parameter 'x' expects a 1-D View"),
        (dict(n=1, alpha=2.0, x=np.zeros(3, dtype=np.float32)), "parameter 'x' expects pk.float64"),
        (dict(n=1, alpha="2", x=x), "parameter 'alpha' got str"),
    ]
    for kwargs, message in cases:
        with pytest.raises(pk.ArgumentError, match=message.replace("(", r"\(")):
            pk.parallel_for(3, annotated, **kwargs)
    with pytest.raises(pk.ArgumentError, match="takes 3 arguments, 4 given"):
        pk.parallel_for(3, annotated, 1, 2.0, x, x)
    with pytest.raises(pk.ArgumentError, match="not a workunit"):
        pk.parallel_for(3, annotated.fn, n=1, alpha=1.0, x=x)
    assert isinstance(pk.ArgumentError("x"), TypeError)  # PyKokkos callers may catch TypeError
    pk.parallel_for(3, annotated, 2, 1.5, x)  # the same workunit still runs with good arguments
    np.testing.assert_array_equal(x, 3.0)


@pk.workunit
def store(i, x: pk.View1D[pk.double], n: int, small: pk.int32, big: pk.uint64):
    x[i] = n + small + big % 10


def test_integers_that_do_not_fit_their_parameter_type_are_named_errors():
    cases = [
        (dict(n=2**70, small=0, big=0), "parameter 'n' got 1180591620717411303424, which does not fit int64"),
        (dict(n=-2**63 - 1, small=0, big=0), "parameter 'n' got -9223372036854775809, which does not fit int64"),
        (dict(n=0, small=2**31, big=0), "parameter 'small' got 2147483648, which does not fit int32"),
        (dict(n=0, small=0, big=-1), "parameter 'big' got -1, which does not fit uint64"),
    ]
    for fusion in (False, True):
        for kwargs, message in cases:
            if fusion:
                pk.enable_fusion()
            x = pk.View([2])  # a fresh one: a traced failure poisons the View it would have written
            with pytest.raises(pk.KfuseError, match=message):  # traced: raised where the call runs, naming it
                pk.parallel_for(2, store, x=x, **kwargs)
                np.asarray(x)
            pk.disable_fusion()
    x = pk.View([2])
    with pytest.raises(pk.ArgumentError, match="policy bound 1180591620717411303424 does not fit a 64-bit integer"):
        pk.parallel_for(2**70, store, x=x, n=0, small=0, big=0)
    pk.parallel_for(2, store, x=x, n=2**63 - 1, small=-2**31, big=2**64 - 1)  # the extremes themselves fit
    np.testing.assert_array_equal(np.asarray(x), float(2**63 - 1) + float(-2**31) + 5.0)  # (2**64 - 1) % 10 == 5


@pk.workunit
def one_index(i, A, B):
    A[i] = B[i]


@pk.workunit
def two_index_reduction(i, j, acc, A):
    acc += A[i][j]


def test_a_policy_with_more_dimensions_than_the_workunit_says_so():
    with pytest.raises(pk.ArgumentError, match=r"workunit 'one_index': parameter 'A' is a View, but a 2-D "
                                               r"MDRangePolicy passes thread indices to its first 2 parameters "
                                               r"\(i, A\); launch it with a 1-D policy"):
        pk.parallel_for(pk.MDRangePolicy([0, 0], [2, 2]), one_index, A=np.zeros(2), B=np.ones(2))
    with pytest.raises(pk.ArgumentError, match=r"parameter 'A' is a View, but a 3-D MDRangePolicy .* launch it "
                                               r"with a 2-D MDRangePolicy"):
        pk.parallel_reduce(pk.MDRangePolicy([0, 0, 0], [2, 2, 2]), two_index_reduction, A=np.ones((2, 2)))
    assert pk.parallel_reduce(pk.MDRangePolicy([0, 0], [2, 3]), two_index_reduction, A=np.ones((2, 3))) == 6.0


# --- C++ compile errors ---------------------------------------------------------------------------------
@pk.workunit
def will_break(i, x):
    x[i] = 7.0 * i


@pytest.mark.backend("kokkos")  # the C++ compiler's own errors
def test_compile_error_reports_first_errors_and_log_and_leaves_no_cache_entry(monkeypatch):
    real_generate = kokkos.generate
    broken_sources = []

    def broken(src, spec, name, *restrict):
        generated = real_generate(src, spec, name, *restrict)
        source = generated.source.replace("struct Functor {", "struct Functor {\n  kf_no_such_type kf_oops;", 1)
        broken_sources.append(source)
        return dataclasses.replace(generated, source=source)

    monkeypatch.setattr(kokkos, "generate", broken)
    x = np.zeros(4)
    compiles = pk.stats()["compiles"]
    with pytest.raises(pk.CompileError) as info:
        pk.parallel_for(4, will_break, x=x)
    message = str(info.value)
    assert "will_break" in message and "kf_no_such_type" in message and "error" in message
    log = info.value.log_path
    assert log in message
    with open(log) as f:
        assert "kf_no_such_type" in f.read()
    key = cache.kernel_key(broken_sources[0], toolchain.current())
    assert not (cache.cache_root() / "kernels" / key[:2] / key).exists()
    assert not list((cache.cache_root() / "tmp").glob(f"kernel-{key}-*"))  # the failed build left nothing
    assert pk.stats()["compiles"] == compiles

    monkeypatch.setattr(kokkos, "generate", real_generate)
    pk.parallel_for(4, will_break, x=x)  # the failure was not remembered: the good kernel builds and runs
    np.testing.assert_array_equal(x, 7.0 * np.arange(4))


@pk.workunit
def team_noop(team: pk.TeamMember, x):
    x[team.league_rank()] = 1.0


@pytest.mark.backend("kokkos")  # Kokkos refuses the team size
def test_too_large_team_size_raises_launch_error_instead_of_aborting():
    x = np.zeros(2)
    with pytest.raises(pk.LaunchError, match="team_size 100000 is larger than"):
        pk.parallel_for(pk.TeamPolicy(2, 100000), team_noop, x=x)
    pk.parallel_for(pk.TeamPolicy(2, 1), team_noop, x=x)  # the process and Kokkos are still usable
    np.testing.assert_array_equal(x, 1.0)
