"""PyKokkos's class-style programs: ``@pk.workload`` classes run by ``pk.execute`` and ``@pk.functor`` objects whose
workunit methods read ``self.`` fields. Each is checked eager and fused against NumPy; method kernels are traced and
fused like standalone workunits (their fields are their arguments)."""
from typing import List

import numpy as np
import pytest

import kfuse as pk
from kfuse import context
from kfuse.errors import ArgumentError, UnsupportedSyntaxError

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

N = 40


def data(seed: int, n: int = N) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, n)


@pk.functor
class Stream:
    def __init__(self, a: np.ndarray, scalar: float):
        self.a: pk.View1D[pk.double] = pk.array(a.copy())
        self.b: pk.View1D[pk.double] = pk.View([len(a)], pk.double)
        self.c: pk.View1D[pk.double] = pk.View([len(a)], pk.double)
        self.scalar: float = scalar

    @pk.workunit
    def mul(self, i: int):
        self.b[i] = self.scalar * self.a[i]

    @pk.workunit
    def add(self, i: int):
        self.c[i] = self.a[i] + self.b[i]

    @pk.workunit
    def dot(self, i: int, acc: pk.Acc[pk.double]):
        acc += self.a[i] * self.c[i]


@pytest.mark.parametrize("fusion", [False, True])
def test_functor_methods_read_fields_and_fuse(fusion):
    a = data(1)
    if fusion:
        pk.enable_fusion()
    s = Stream(a, 0.4)
    pk.parallel_for(N, s.mul)
    pk.parallel_for(N, s.add)
    total = pk.parallel_reduce(N, s.dot)
    b = 0.4 * a
    assert float(total) == pytest.approx(np.dot(a, a + b), rel=1e-12)
    np.testing.assert_array_equal(np.asarray(s.c), a + b)
    if fusion:
        names = list(context.current().records)[-1].fused_names
        assert names == ["mul__add__dot"], pk.explain()


def test_scalar_field_value_is_taken_at_each_call_even_when_delayed():
    pk.enable_fusion()
    a = data(2)
    s = Stream(a, 2.0)
    pk.parallel_for(N, s.mul)
    s.scalar = 3.0  # a later call sees the new value; the delayed one keeps the value it was called with
    first = np.asarray(s.b).copy()
    pk.parallel_for(N, s.mul)
    np.testing.assert_array_equal(first, 2.0 * a)
    np.testing.assert_array_equal(np.asarray(s.b), 3.0 * a)


def test_two_objects_of_one_class_share_the_kernel_not_the_data():
    a1, a2 = data(3), data(4)
    s1, s2 = Stream(a1, 1.5), Stream(a2, -2.0)
    pk.parallel_for(N, s1.mul)
    pk.parallel_for(N, s2.mul)
    np.testing.assert_array_equal(np.asarray(s1.b), 1.5 * a1)
    np.testing.assert_array_equal(np.asarray(s2.b), -2.0 * a2)
    assert s1.mul.kernel is s2.mul.kernel


@pk.workload
class Norms:
    def __init__(self, x: np.ndarray):
        self.n: int = len(x)
        self.x: pk.View1D[pk.double] = pk.array(x.copy())
        self.y: pk.View1D[pk.double] = pk.View([len(x)], pk.double)
        self.half: float = 1  # annotated float: kernels compute with 1.0, not the integer 1
        self.result: float = 0
        self.log: List[str] = []

    @pk.main
    def run(self):
        pk.parallel_for(self.n, self.square)
        self.result = pk.parallel_reduce("sum", self.n, self.total)

    @pk.callback
    def report(self):
        self.log.append(f"sum={float(self.result):.6f}")

    @pk.callback
    def second(self):
        self.log.append("second")

    @pk.workunit
    def square(self, i: int):
        self.y[i] = self.scaled(self.x[i]) * self.x[i]

    @pk.workunit
    def total(self, i: int, acc: pk.Acc[pk.double]):
        acc += self.y[i]

    @pk.function
    def scaled(self, v: float) -> float:
        return v * self.half / 2  # 0.5 * v: self.half is a float field holding 1


@pytest.mark.parametrize("fusion", [False, True])
def test_workload_runs_main_then_callbacks_in_order(fusion):
    x = data(5)
    if fusion:
        pk.enable_fusion()
    w = Norms(x)
    pk.execute(pk.ExecutionSpace.Default, w)
    expected = float(np.sum(0.5 * x * x))
    assert float(w.result) == pytest.approx(expected, rel=1e-12)
    assert w.log == [f"sum={expected:.6f}", "second"]
    np.testing.assert_array_equal(np.asarray(w.y), 0.5 * x * x)


def test_function_method_runs_from_host_code_as_a_method():
    w = Norms(data(6))
    assert w.scaled(4.0) == 2.0


class Base:
    def __init__(self, n: int):
        self.n: int = n
        self.out: pk.View1D[pk.int64] = pk.View([n], pk.int64)
        self.offsets: List[int] = [10, 20, 30]


@pk.workload
class Derived(Base):
    def __init__(self, n: int):
        super().__init__(n)
        self.step: int = 3
        self.x: int = 7  # a field and a local of the same name: the kernel's local stays the local

    @pk.main
    def run(self):
        pk.parallel_for(self.n, self.fill)

    @pk.workunit
    def fill(self, i: int):
        x: int = i % 3
        self.out[i] = self.offsets[x] + self.x * self.step + self.twice(i)

    @pk.function
    def twice(self, i: int) -> int:
        return self.once(i) + self.once(i)

    @pk.function
    def once(self, i: int) -> int:
        return i * self.step


@pytest.mark.parametrize("fusion", [False, True])
def test_inherited_fields_list_fields_name_clashes_and_nested_method_helpers(fusion):
    if fusion:
        pk.enable_fusion()
    w = Derived(N)
    pk.execute(w)
    i = np.arange(N)
    expected = np.array([10, 20, 30])[i % 3] + 7 * 3 + 2 * i * 3
    np.testing.assert_array_equal(np.asarray(w.out), expected)


def test_list_field_is_read_as_it_is_at_the_call():
    w = Derived(6)
    w.offsets = [1, 2, 3]
    pk.execute(w)
    i = np.arange(6)
    np.testing.assert_array_equal(np.asarray(w.out), np.array([1, 2, 3])[i % 3] + 21 + 6 * i)


def test_execute_runs_kernels_in_the_given_space_and_restores_the_default():
    before = pk.get_default_space()
    w = Derived(5)
    pk.execute(pk.ExecutionSpace.Serial, w)
    assert pk.get_default_space() is before
    assert np.asarray(w.out)[1] == 20 + 21 + 6


def test_explicit_fusion_takes_bound_methods():
    a = data(7)
    s = Stream(a, 0.5)
    pk.parallel_for(N, [s.mul, s.add], args_0={}, args_1={})
    np.testing.assert_array_equal(np.asarray(s.c), a + 0.5 * a)


# --- errors ----------------------------------------------------------------------------------
@pk.functor
class Bad:
    def __init__(self):
        self.v: pk.View1D[pk.double] = pk.View([4], pk.double)
        self.k: int = 1

    @pk.workunit
    def rebinds(self, i: int):
        self.k = i

    @pk.workunit
    def calls_plain(self, i: int):
        self.v[i] = self.plain(i)

    @pk.workunit
    def uses_self(self, i: int):
        other = self
        other.v[i] = 1.0

    @pk.workunit
    def missing(self, i: int):
        self.v[i] = self.nothing

    def plain(self, i):
        return i


def test_assigning_a_field_in_a_kernel_is_an_error_at_its_line():
    with pytest.raises(UnsupportedSyntaxError, match=r"self\.k.*is assigned in a kernel") as info:
        pk.parallel_for(4, Bad().rebinds)
    assert "test_workloads.py" in str(info.value) and "rebinds" in str(info.value)


def test_calling_a_plain_method_is_an_error():
    with pytest.raises(UnsupportedSyntaxError, match=r"self\.plain\(\.\.\.\), which is not a @pk.function method"):
        pk.parallel_for(4, Bad().calls_plain)


def test_self_outside_field_access_is_an_error():
    with pytest.raises(UnsupportedSyntaxError, match="'self' can only be used"):
        pk.parallel_for(4, Bad().uses_self)


def test_a_field_the_object_lacks_is_an_error_naming_it():
    with pytest.raises(ArgumentError, match=r"uses self\.nothing, which this Bad object does not have"):
        pk.parallel_for(4, Bad().missing)


def test_execute_needs_exactly_one_main():
    with pytest.raises(ArgumentError, match="0 methods marked @pk.main"):
        pk.execute(pk.ExecutionSpace.Default, Bad())


def test_debug_space_runs_method_kernels_as_python():
    x = data(8)
    w = Norms(x)
    pk.execute(pk.ExecutionSpace.Debug, w)
    assert float(w.result) == pytest.approx(float(np.sum(0.5 * x * x)), rel=1e-12)


@pytest.mark.backend("kokkos")
@pytest.mark.parametrize("fusion", [False, True])
def test_compiled_workload_and_functor(fusion):
    if fusion:
        pk.enable_fusion()
    x = data(9)
    w = Norms(x)
    pk.execute(w)
    assert float(w.result) == pytest.approx(float(np.sum(0.5 * x * x)), rel=1e-12)
    d = Derived(N)
    pk.execute(d)
    i = np.arange(N)
    np.testing.assert_array_equal(np.asarray(d.out), np.array([10, 20, 30])[i % 3] + 21 + 6 * i)


@pk.workload
class MemberScope:
    """Written as PyKokkos allows, for C++ member scope: bare field names in kernels and main, bare printf."""

    def __init__(self, n: int):
        self.n: int = n
        self.factor: float = 3
        self.A: pk.View1D[pk.double] = pk.View([n], pk.double)

    @pk.main
    def run(self):
        printf("member scope %d\n", n)
        pk.parallel_for(n, self.fill)

    @pk.workunit
    def fill(self, i: int):
        A[i] = factor * i


@pytest.mark.parametrize("fusion", [False, True])
def test_bare_field_names_read_the_fields_as_in_pykokkos(fusion, capsys):
    if fusion:
        pk.enable_fusion()
    w = MemberScope(7)
    pk.execute(w)
    np.testing.assert_array_equal(np.asarray(w.A), 3.0 * np.arange(7))
    assert "member scope 7" in capsys.readouterr().out
