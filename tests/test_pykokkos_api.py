"""PyKokkos programs as their authors write them: parameter names, scalar types, name resolution and atomics.

Each program runs eagerly and fused, on the Kokkos backend and the python backend, against NumPy.
"""
from math import sin  # noqa: F401 - the workunit ``sin`` below rebinds it, as PyKokkos programs do

import numpy as np
import pytest

import kfuse as pk

from fusion_check import assert_same, run_eager_and_fused, view_of

BACKENDS = [pytest.param("kokkos"), pytest.param("python", marks=pytest.mark.backend("python"))]
N = 16


def eager_and_fused(program, expected):
    """``program`` gives the same result eagerly and fused, and that result is ``expected``."""
    eager, fused, _, _ = run_eager_and_fused(program)
    assert_same(eager, fused)
    if np.asarray(expected).dtype.kind in "iub":
        assert_same(np.asarray(expected), eager)
    else:
        np.testing.assert_allclose(eager, expected, rtol=1e-14)


@pk.workunit
def scale_by_init(i, x: pk.View1D[pk.double], init: float):
    x[i] = x[i] * init


@pk.workunit
def sum_with_init(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], init: float):
    acc += init + x[i]


@pk.workunit
def scan_with_init(i, acc: pk.Acc[pk.double], last_pass: bool, x: pk.View1D[pk.double], init: float):
    acc += init + x[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameter_named_init(backend):
    """``init`` is also the name of a reducer's ``init()`` in the generated functor."""
    def program():
        x = view_of(np.arange(N, dtype=float))
        pk.parallel_for(N, scale_by_init, x=x, init=2.0)
        total = pk.parallel_reduce(N, sum_with_init, x=x, init=0.5)
        scanned = pk.parallel_scan(N, scan_with_init, x=x, init=0.25)
        return np.array([float(total), float(scanned)])

    x = 2.0 * np.arange(N)
    eager_and_fused(program, [np.sum(x + 0.5), np.sum(x + 0.25)])


@pk.workunit
def fill_scalar(i, a: pk.View1D[pk.uint64], v):
    a[i] = v


@pk.workunit
def fill_annotated(i, a: pk.View1D[pk.uint64], v: pk.uint64):
    a[i] = v - i


@pytest.mark.parametrize("backend", BACKENDS)
def test_uint64_scalar_argument(backend):
    """An unannotated parameter keeps a NumPy uint64 value's type: it does not fit the int64 integers widen to."""
    def program():
        a, b = pk.View((N,), pk.uint64), pk.View((N,), pk.uint64)
        pk.parallel_for(N, fill_scalar, a=a, v=np.uint64(2**64 - 1))
        pk.parallel_for(N, fill_annotated, a=b, v=np.uint64(2**64 - 1))
        return np.concatenate([np.asarray(a), np.asarray(b)])

    eager_and_fused(program, np.concatenate([np.full(N, 2**64 - 1, np.uint64),
                                             np.uint64(2**64 - 1) - np.arange(N, dtype=np.uint64)]))


@pk.workunit
def sin(i, y: pk.View1D[pk.double], x: pk.View1D[pk.double]):  # noqa: F811
    y[i] = sin(x[i])


@pk.workunit
def add_one(i, y: pk.View1D[pk.double]):
    y[i] = y[i] + 1.0


@pytest.mark.parametrize("backend, space", [("kokkos", "openmp"), pytest.param("python", "openmp",
                         marks=pytest.mark.backend("python")), ("kokkos", "debug")])
def test_math_call_inside_a_workunit_of_the_same_name(backend, space):
    """``sin(...)`` inside the workunit ``sin`` is the math function, not the workunit (also when the Debug space
    runs the workunit's own Python)."""
    if space == "debug":
        pk.set_default_space(pk.Debug)

    def program():
        x, y = view_of(np.linspace(0.0, 3.0, N)), pk.View((N,), pk.double)
        pk.parallel_for(N, sin, y=y, x=x)
        pk.parallel_for(N, add_one, y=y)
        return np.asarray(y).copy()

    eager_and_fused(program, np.sin(np.linspace(0.0, 3.0, N)) + 1.0)


@pk.workunit
def bare_double(i, y: "pk.View1D[double]", x: "double"):
    t: double = x * i  # noqa: F821 - a local's annotation is never evaluated by Python
    y[i] = t


@pk.workunit
def string_double(i, y: "pk.View1D[double]", x: "double"):
    y[i] = y[i] + x


@pytest.mark.parametrize("backend", BACKENDS)
def test_bare_double_annotation(backend):
    """``double`` the program never bound, in a local's annotation or a string one, is ``pk.double``."""
    def program():
        y = pk.View((N,), pk.double)
        pk.parallel_for(N, bare_double, y=y, x=1.5)
        pk.parallel_for(N, string_double, y=y, x=0.25)
        return np.asarray(y).copy()

    eager_and_fused(program, 1.5 * np.arange(N) + 0.25)


# --- Atomics: many threads race on few elements, so a non-atomic update would lose some ------------------------
SPACES = [pytest.param("kokkos", "openmp"), pytest.param("python", "openmp", marks=pytest.mark.backend("python")),
          pytest.param("kokkos", "debug")]
BINS = 4
THREADS = 64
i = np.arange(THREADS)
bins = i % BINS
#: op -> (NumPy ufunc applied in any order, initial bins, values per thread) for int64; floats for the ops C++ has
ATOMIC_CASES = {
    "add": (np.add, np.zeros(BINS), (i * 7) % 13 - 5),
    "sub": (np.subtract, np.zeros(BINS), (i * 7) % 13 - 5),
    "mul": (np.multiply, np.ones(BINS), np.array([1, 2, -1])[i % 3]),
    "div": (np.floor_divide, np.full(BINS, 2**40), np.array([1, 2, 4])[i % 3]),
    "mod": (np.remainder, 1000 + 37 * np.arange(BINS), 7 + bins),
    "max": (np.maximum, np.zeros(BINS), (i * 7) % 13 - 5),
    "min": (np.minimum, np.zeros(BINS), (i * 7) % 13 - 5),
    "and": (np.bitwise_and, np.full(BINS, -1), -1 ^ (1 << (i % 60))),
    "or": (np.bitwise_or, np.zeros(BINS), 1 << (i % 60)),
    "xor": (np.bitwise_xor, np.zeros(BINS), i * 2654435761 % 2**31),
    "lshift": (np.left_shift, 1 + np.arange(BINS), i % 2),
    "rshift": (np.right_shift, 2**62 - 1 - np.arange(BINS), i % 3),
}
FLOAT_OPS = ("add", "sub", "mul", "div", "max", "min")


@pk.workunit
def fetch_add(i, hist, old, v):
    old[i] = pk.atomic_fetch_add(hist, [i % BINS], v[i])


@pk.workunit
def plain_add(i, hist, v):
    pk.atomic_add(hist, [i % BINS], v[i])


@pk.workunit
def fetch_sub(i, hist, old, v):
    old[i] = pk.atomic_fetch_sub(hist, [i % BINS], v[i])


@pk.workunit
def plain_sub(i, hist, v):
    pk.atomic_sub(hist, [i % BINS], v[i])


@pk.workunit
def fetch_mul(i, hist, old, v):
    old[i] = pk.atomic_fetch_mul(hist, [i % BINS], v[i])


@pk.workunit
def plain_mul(i, hist, v):
    pk.atomic_mul(hist, [i % BINS], v[i])


@pk.workunit
def fetch_div(i, hist, old, v):
    old[i] = pk.atomic_fetch_div(hist, [i % BINS], v[i])


@pk.workunit
def plain_div(i, hist, v):
    pk.atomic_div(hist, [i % BINS], v[i])


@pk.workunit
def fetch_mod(i, hist, old, v):
    old[i] = pk.atomic_fetch_mod(hist, [i % BINS], v[i])


@pk.workunit
def plain_mod(i, hist, v):
    pk.atomic_mod(hist, [i % BINS], v[i])


@pk.workunit
def fetch_max(i, hist, old, v):
    old[i] = pk.atomic_fetch_max(hist, [i % BINS], v[i])


@pk.workunit
def plain_max(i, hist, v):
    pk.atomic_max(hist, [i % BINS], v[i])


@pk.workunit
def fetch_min(i, hist, old, v):
    old[i] = pk.atomic_fetch_min(hist, [i % BINS], v[i])


@pk.workunit
def plain_min(i, hist, v):
    pk.atomic_min(hist, [i % BINS], v[i])


@pk.workunit
def fetch_and(i, hist, old, v):
    old[i] = pk.atomic_fetch_and(hist, [i % BINS], v[i])


@pk.workunit
def plain_and(i, hist, v):
    pk.atomic_and(hist, [i % BINS], v[i])


@pk.workunit
def fetch_or(i, hist, old, v):
    old[i] = pk.atomic_fetch_or(hist, [i % BINS], v[i])


@pk.workunit
def plain_or(i, hist, v):
    pk.atomic_or(hist, [i % BINS], v[i])


@pk.workunit
def fetch_xor(i, hist, old, v):
    old[i] = pk.atomic_fetch_xor(hist, [i % BINS], v[i])


@pk.workunit
def plain_xor(i, hist, v):
    pk.atomic_xor(hist, [i % BINS], v[i])


@pk.workunit
def fetch_lshift(i, hist, old, v):
    old[i] = pk.atomic_fetch_lshift(hist, [i % BINS], v[i])


@pk.workunit
def plain_lshift(i, hist, v):
    pk.atomic_lshift(hist, [i % BINS], v[i])


@pk.workunit
def fetch_rshift(i, hist, old, v):
    old[i] = pk.atomic_fetch_rshift(hist, [i % BINS], v[i])


@pk.workunit
def plain_rshift(i, hist, v):
    pk.atomic_rshift(hist, [i % BINS], v[i])


ATOMIC_WORKUNITS = {op: (globals()[f"fetch_{op}"], globals()[f"plain_{op}"]) for op in ATOMIC_CASES}


def use_space(space):
    if space == "debug":
        pk.set_default_space(pk.Debug)


def atomic_cases():
    for op in ATOMIC_CASES:
        for dtype in (np.int64, np.float64) if op in FLOAT_OPS else (np.int64,):
            for space in SPACES:
                yield pytest.param(op, dtype, *space.values, marks=space.marks, id=f"{op}-{dtype.__name__}-"
                                   f"{space.values[0]}-{space.values[1]}")


@pytest.mark.parametrize("op, dtype, backend, space", list(atomic_cases()))
def test_atomic_against_numpy(op, dtype, backend, space):
    """``pk.atomic_fetch_<op>`` returns each thread's old value and ``pk.atomic_<op>`` nothing; both leave what
    NumPy's unbuffered ``ufunc.at`` leaves."""
    ufunc, start, values = ATOMIC_CASES[op]
    use_space(space)
    fetch, plain = ATOMIC_WORKUNITS[op]

    def program():
        a, b = view_of(start.astype(dtype), dtype), view_of(start.astype(dtype), dtype)
        v, old = view_of(values.astype(dtype), dtype), pk.View((THREADS,), dtype)
        pk.parallel_for(THREADS, fetch, hist=a, old=old, v=v)
        pk.parallel_for(THREADS, plain, hist=b, v=v)
        return np.asarray(a).copy(), np.asarray(b).copy(), np.asarray(old).copy()

    expected = start.astype(dtype)
    ufunc.at(expected, bins, values.astype(dtype))
    eager, fused, _, _ = run_eager_and_fused(program)
    np.testing.assert_array_equal(eager[0], expected)
    np.testing.assert_array_equal(eager[1], expected)
    np.testing.assert_array_equal(fused[0], expected)
    np.testing.assert_array_equal(fused[1], expected)


@pk.workunit
def take_ticket(i, hist, old):
    old[i] = pk.atomic_fetch_add(hist, [i % BINS], 1)


@pk.workunit
def swap_in(i, hist, old, v):
    old[i] = pk.atomic_exchange(hist, [i % BINS], v[i])


@pk.workunit
def claim(i, hist, old, v):
    old[i] = pk.atomic_compare_exchange(hist, [i % BINS], 0, v[i])


@pk.workunit
def count_up_down(i, up, down):
    pk.atomic_increment(up, [i % BINS])
    pk.atomic_decrement(down, [i % BINS])


@pytest.mark.parametrize("backend, space", [s.values for s in SPACES[:1]] + SPACES[1:])
def test_fetching_atomics_hand_out_each_old_value_once(backend, space):
    """Tickets of fetch_add are 0..k-1 per element; exchange hands each value on once; one compare_exchange
    per element wins; increment and decrement count every thread."""
    use_space(space)

    def program():
        hist, tickets = pk.View((BINS,), pk.int64), pk.View((THREADS,), pk.int64)
        pk.parallel_for(THREADS, take_ticket, hist=hist, old=tickets)
        swapped, swaps, v = pk.View((BINS,), pk.int64), pk.View((THREADS,), pk.int64), view_of(i + 1, pk.int64)
        pk.parallel_for(THREADS, swap_in, hist=swapped, old=swaps, v=v)
        claimed, claims = pk.View((BINS,), pk.int64), pk.View((THREADS,), pk.int64)
        pk.parallel_for(THREADS, claim, hist=claimed, old=claims, v=v)
        up, down = pk.View((BINS,), pk.int64), pk.View((BINS,), pk.int64)
        pk.parallel_for(THREADS, count_up_down, up=up, down=down)
        return tuple(np.asarray(x).copy() for x in (hist, tickets, swapped, swaps, claimed, claims, up, down))

    per_bin = THREADS // BINS
    for hist, tickets, swapped, swaps, claimed, claims, up, down in run_eager_and_fused(program)[:2]:
        assert_same(np.full(BINS, per_bin), hist)
        for b in range(BINS):
            mine = bins == b
            assert sorted(tickets[mine]) == list(range(per_bin))
            assert sorted([*swaps[mine], swapped[b]]) == sorted([0, *(i[mine] + 1)])
            assert list(claims[mine]).count(0) == 1 and claimed[b] == (i[mine] + 1)[claims[mine] == 0][0]
        assert_same(np.full(BINS, per_bin), up)
        assert_same(np.full(BINS, -per_bin), down)


@pk.workunit
def histogram(i, hist, x):
    pk.atomic_add(hist, [x[i] % BINS], 1)


@pk.workunit
def read_bins(i, hist, out):
    out[i] = hist[i % BINS]


def test_atomics_are_not_fused_with_a_conflicting_call():
    """A read of the elements others update atomically must wait for the whole update."""
    def program():
        hist, out, x = pk.View((BINS,), pk.int64), pk.View((THREADS,), pk.int64), view_of(i * 3, pk.int64)
        pk.parallel_for(THREADS, histogram, hist=hist, x=x)
        pk.parallel_for(THREADS, read_bins, hist=hist, out=out)
        return np.asarray(out).copy()

    eager, fused, stats, text = run_eager_and_fused(program)
    assert_same(np.bincount(i * 3 % BINS, minlength=BINS)[bins], fused)
    assert_same(eager, fused)
    assert "atomic update of 'hist'" in text, text


@pk.workunit
def xor_floats(i, hist: pk.View1D[pk.double], v: pk.View1D[pk.double]):
    pk.atomic_fetch_xor(hist, [i % BINS], v[i])


@pytest.mark.backend("python")
def test_integer_atomic_on_floats_is_a_type_error():
    hist, v = pk.View((BINS,), pk.double), pk.View((THREADS,), pk.double)
    with pytest.raises(pk.KernelTypeError, match=r"test_pykokkos_api.py:\d+:\d+: in workunit 'xor_floats': "
                       r"'pk.atomic_fetch_xor\(hist, \[i % 4\], v\[i\]\)': pk.atomic_fetch_xor needs a View of "
                       r"integers, 'hist' holds float64"):
        pk.parallel_for(THREADS, xor_floats, hist=hist, v=v)


@pytest.mark.parametrize("op", ["div", "mod"])
@pytest.mark.parametrize("backend, space", [s.values for s in SPACES[:1]] + SPACES[1:])
def test_integer_atomic_division_by_zero_is_a_fault(op, backend, space):
    """As for ``//`` and ``%``: a ZeroDivisionError naming the workunit and line; the element divided by zero
    keeps its value."""
    use_space(space)
    hist, old, v = view_of([7, 7, 7, 7], pk.int64), pk.View((THREADS,), pk.int64), view_of(i % 2, pk.int64)
    with pytest.raises(pk.KernelZeroDivisionError, match=rf"in workunit 'fetch_{op}': integer .* by zero \(7 .+ 0\)"):
        pk.parallel_for(THREADS, ATOMIC_WORKUNITS[op][0], hist=hist, old=old, v=v)
    # Odd bins are divided by 1 only; the Debug space stops at the first fault, thread 0's.
    assert list(np.asarray(hist)) == ([7, 7, 7, 7] if op == "div" or space == "debug" else [7, 0, 7, 0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_atomic_division_by_minus_one_wraps(backend):
    hist, old, v = view_of([-2**63, 5], pk.int64), pk.View((2,), pk.int64), view_of([-1, -1], pk.int64)
    pk.parallel_for(2, ATOMIC_WORKUNITS["div"][1], hist=hist, v=v)
    assert list(np.asarray(hist)) == [-2**63, -5]
