"""``@pk.classtype`` values inside kernels: construction, fields, methods, helpers taking and returning them.

Each program is checked against an independent reference: NumPy, or Python itself running the same workunit
one index at a time on NumPy arrays (a classtype is an ordinary class there, with Python's reference
semantics), eager and fused, mostly on the reference interpreter; a few compile with the real compiler.
Programs where Python's shared objects and kfuse's copied structs would differ are errors naming the
workunit, file:line and construct.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kfuse as pk
from kfuse import context
from kfuse.calls import prepare
from kfuse.frontend.workunit import is_classtype
from kfuse.ir import nodes as ir
from kfuse.ir.access import analyse
from kfuse.ir.dump import dump
from kfuse.ir.lower import lower
from kfuse.ir.verify import VerifyError, verify

PY = pytest.mark.backend("python")
N = 24


def data(seed: int, *shape) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2.0, 2.0, shape or (N,))


def python_reference(wu, n: int, **args) -> dict:
    """What Python gives running workunit ``wu`` for indices 0..n-1 on copies of ``args`` (NumPy arrays)."""
    copies = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
    for i in range(n):
        wu.fn(i, **copies)
    return copies


def last_fused_names() -> list:
    return list(context.current().records)[-1].fused_names


# --- classtypes ----------------------------------------------------------------------------------
@pk.classtype
class Vec3:
    def __init__(self, x: float, y: float, z: float):
        self.x: float = x
        self.y: float = y
        self.z: float = z

    def dot(self, other: Vec3) -> float:
        return self.x * other.x + self.y * other.y + self.z * other.z

    def scaled(self, k: float) -> Vec3:
        return Vec3(k * self.x, k * self.y, k * self.z)

    def add(self, other: Vec3):
        self.x += other.x
        self.y += other.y
        self.z += other.z

    def norm2(self) -> float:
        return self.dot(self)


@pk.classtype
class Counter:
    def __init__(self, start: int):
        self.n: int = start
        self.total: float = 0.0

    def tick(self, by: float) -> int:
        self.n += 1
        self.total += by * self.n
        return self.n


@pk.classtype
class t_scalar3:  # ExaMiniMD's types_h.py: methods returning new values of their own class
    def __init__(self):
        self.x: int = 0
        self.y: int = 0
        self.z: int = 0

    def init_copy(self, rhs: t_scalar3) -> t_scalar3:
        init: t_scalar3 = t_scalar3()
        init.x = rhs.x
        init.y = rhs.y
        init.z = rhs.z
        return init

    def init_scalar(self, x_: int, y_: int, z_: int) -> t_scalar3:
        init: t_scalar3 = t_scalar3()
        init.x = x_
        init.y = y_
        init.z = z_
        return init


@pk.classtype
class Particle:  # ExaMiniMD's comm_serial.py
    def __init__(self):
        self.x: float = 0.0
        self.y: float = 0.0
        self.z: float = 0.0
        self.vx: float = 0.0
        self.vy: float = 0.0
        self.vz: float = 0.0
        self.q: float = 0.0
        self.id: int = 0
        self.type: int = 0


@pk.function
def get_particle(i: int, x: pk.View2D[float], v: pk.View2D[float], q: pk.View1D[float], id: pk.View1D[int],
                 type: pk.View1D[int]) -> Particle:
    p: Particle = Particle()
    p.x = x[i][0]
    p.y = x[i][1]
    p.z = x[i][2]
    p.vx = v[i][0]
    p.vy = v[i][1]
    p.vz = v[i][2]
    p.q = q[i]
    p.id = id[i]
    p.type = type[i]
    return p


@pk.function
def set_particle(i: int, p: Particle, x: pk.View2D[float], v: pk.View2D[float], q: pk.View1D[float],
                 id: pk.View1D[int], type: pk.View1D[int]) -> None:
    x[i][0] = p.x
    x[i][1] = p.y
    x[i][2] = p.z
    v[i][0] = p.vx
    v[i][1] = p.vy
    v[i][2] = p.vz
    q[i] = p.q
    id[i] = p.id
    type[i] = p.type


@pk.function
def shift(p: Vec3, by: float):
    p.x += by
    p.z -= by


@pk.function
def vec_of(a: pk.View2D[pk.double], i: int) -> Vec3:
    return Vec3(a[i][0], a[i][1], a[i][2])


# --- workunits -----------------------------------------------------------------------------------
@pk.workunit
def vectors(i: int, a: pk.View2D[pk.double], b: pk.View2D[pk.double], out: pk.View2D[pk.double]):
    u = Vec3(a[i][0], a[i][1], a[i][2])
    v: Vec3 = Vec3(b[i][0], b[i][1], b[i][2])
    w = u.scaled(2.0)
    w.add(v)
    out[i][0] = w.dot(u)
    out[i][1] = w.norm2()
    out[i][2] = Vec3(1.0, 2.0, 3.0).dot(v)


@pk.workunit
def mutations(i: int, a: pk.View2D[pk.double], out: pk.View2D[pk.double]):
    p: Vec3 = vec_of(a, i)
    shift(p, 0.5)  # a helper changing its parameter: the caller sees it (Python passes the object)
    c = Counter(i)
    first: int = c.tick(p.x)
    c.tick(p.y)
    out[i][0] = p.x
    out[i][1] = p.z
    out[i][2] = c.total + first
    p = p.scaled(-1.0)  # a new value: rebinding the local
    out[i][3] = p.x + c.n


@pk.workunit
def scalars3(i: int, out: pk.View2D[pk.int64]):
    s = t_scalar3()
    a: t_scalar3 = s.init_scalar(i, 2 * i, -i)
    b = s.init_copy(a)
    b.y += 7
    out[i][0] = a.x + a.y + a.z
    out[i][1] = b.y
    out[i][2] = s.x


@pk.workunit
def halo_update(i: int, domain_x: float, domain_y: float, x: pk.View2D[float], v: pk.View2D[float],
                q: pk.View1D[float], id: pk.View1D[int], type: pk.View1D[int], phase: int, n_local: int,
                pack: pk.View1D[int]):
    p: Particle = get_particle(pack[i], x, v, q, id, type)
    if phase == 0:
        p.x -= domain_x
    elif phase == 1:
        p.y += domain_y
    set_particle(n_local + i, p, x, v, q, id, type)


@pk.workunit
def make_vectors(i: int, a: pk.View2D[pk.double], w: pk.View2D[pk.double]):
    u = Vec3(a[i][0], a[i][1], a[i][2]).scaled(3.0)
    shift(u, 1.0)
    w[i][0] = u.x
    w[i][1] = u.y
    w[i][2] = u.z


@pk.workunit
def vector_norms(i: int, w: pk.View2D[pk.double], out: pk.View1D[pk.double]):
    u = Vec3(w[i][0], w[i][1], w[i][2])
    out[i] = u.norm2() + u.dot(Vec3(1.0, 0.0, 0.0))  # a temporary passed by reference


@pk.workunit
def counted_sum(i: int, acc: pk.Acc[pk.double], a: pk.View1D[pk.double]):
    c = Counter(0)
    c.tick(a[i])
    c.tick(1.0)
    acc += c.total


def vectors_numpy(a, b):
    w = 2.0 * a + b
    return np.stack([(w * a).sum(1), (w * w).sum(1), b @ np.array([1.0, 2.0, 3.0])], axis=1)


# --- results ------------------------------------------------------------------------------------
@PY
@pytest.mark.parametrize("fusion", [False, True])
def test_construction_fields_and_methods_match_numpy(fusion):
    if fusion:
        pk.enable_fusion()
    a, b = data(1, N, 3), data(2, N, 3)
    out = pk.View([N, 3], pk.double)
    pk.parallel_for(N, vectors, a=pk.array(a), b=pk.array(b), out=out)
    np.testing.assert_allclose(np.asarray(out), vectors_numpy(a, b), rtol=1e-13)


@PY
@pytest.mark.parametrize("fusion", [False, True])
def test_helpers_and_methods_change_the_callers_value_as_python_does(fusion):
    if fusion:
        pk.enable_fusion()
    a = data(3, N, 3)
    out = pk.View([N, 4], pk.double)
    pk.parallel_for(N, mutations, a=pk.array(a), out=out)
    want = python_reference(mutations, N, a=a, out=np.zeros((N, 4)))["out"]
    np.testing.assert_array_equal(np.asarray(out), want)
    np.testing.assert_allclose(want[:, 0], a[:, 0] + 0.5)  # the helper's change reached the caller


@PY
def test_methods_returning_their_own_classtype():
    out = pk.View([N, 3], pk.int64)
    pk.parallel_for(N, scalars3, out=out)
    i = np.arange(N)
    np.testing.assert_array_equal(np.asarray(out), np.stack([2 * i, 2 * i + 7, 0 * i], axis=1))


@PY
def test_a_reduction_over_classtype_values():
    a = data(4)
    total = pk.parallel_reduce(N, counted_sum, a=pk.array(a))
    assert float(total) == pytest.approx(float(np.sum(a + 2.0)), rel=1e-13)


def halo_arrays(n_local: int, n_ghost: int):
    rng = np.random.default_rng(5)
    n = n_local + n_ghost
    x, v = np.zeros((n, 3)), np.zeros((n, 3))
    x[:n_local], v[:n_local] = rng.uniform(0, 10, (n_local, 3)), rng.uniform(-1, 1, (n_local, 3))
    q = np.zeros(n)
    q[:n_local] = rng.uniform(-1, 1, n_local)
    ids, types = np.zeros(n, np.int32), np.zeros(n, np.int32)
    ids[:n_local], types[:n_local] = np.arange(n_local) + 1000, np.arange(n_local) % 3
    pack = rng.permutation(n_local)[:n_ghost].astype(np.int32)
    return x, v, q, ids, types, pack


def halo_numpy(x, v, q, ids, types, pack, n_local, phase, domain_x, domain_y):
    x, v, q, ids, types = x.copy(), v.copy(), q.copy(), ids.copy(), types.copy()
    ghost = slice(n_local, n_local + len(pack))
    x[ghost], v[ghost], q[ghost], ids[ghost], types[ghost] = x[pack], v[pack], q[pack], ids[pack], types[pack]
    if phase == 0:
        x[ghost, 0] -= domain_x
    else:
        x[ghost, 1] += domain_y
    return x, v, q, ids, types


def run_halo(phase: int):
    n_local, n_ghost = 20, 8
    arrays = halo_arrays(n_local, n_ghost)
    views = [pk.array(a.copy()) for a in arrays]
    x, v, q, ids, types, pack = views
    pk.parallel_for(n_ghost, halo_update, domain_x=10.0, domain_y=7.5, x=x, v=v, q=q, id=ids, type=types,
                    phase=phase, n_local=n_local, pack=pack)
    want = halo_numpy(*arrays, n_local, phase, 10.0, 7.5)
    for got, expected in zip(views, want):
        np.testing.assert_array_equal(np.asarray(got), expected)


@PY
@pytest.mark.parametrize("phase", [0, 1])
def test_examinimd_get_particle_set_particle(phase):
    run_halo(phase)


def run_fused_pair(seed: int):
    pk.enable_fusion()
    a = data(seed, N, 3)
    w, out = pk.View([N, 3], pk.double), pk.View([N], pk.double)
    pk.parallel_for(N, make_vectors, a=pk.array(a.copy()), w=w)
    pk.parallel_for(N, vector_norms, w=w, out=out)
    got = np.asarray(out).copy()
    assert last_fused_names() == ["make_vectors__vector_norms"] and "fused 2 calls" in pk.explain(1), pk.explain()
    u = 3.0 * a + np.array([1.0, 0.0, -1.0])
    np.testing.assert_allclose(got, (u * u).sum(1) + u[:, 0], rtol=1e-13)


@PY
def test_two_workunits_using_classtypes_fuse():
    run_fused_pair(6)


@PY
def test_the_debug_space_runs_the_class_itself():
    a, b = data(7, N, 3), data(8, N, 3)
    out = pk.View([N, 3], pk.double)
    pk.parallel_for(pk.RangePolicy(pk.Debug, 0, N), vectors, a=pk.array(a), b=pk.array(b), out=out)
    np.testing.assert_allclose(np.asarray(out), vectors_numpy(a, b), rtol=1e-13)


def test_the_class_stays_an_ordinary_python_class():
    assert is_classtype(Vec3) and not is_classtype(dict)
    u = Vec3(1.0, 2.0, 3.0)
    assert u.dot(Vec3(1.0, 1.0, 1.0)) == 6.0 and isinstance(u.scaled(2.0), Vec3)


@pk.classtype
class Splitter:
    def __init__(self, n: int):
        self.n: int = n

    def split(self, k: int) -> int:
        return self.n // k  # <- fault


@pk.workunit
def splits(i: int, out: pk.View1D[pk.int64]):
    out[i] = Splitter(7).split(i)


@pytest.mark.parametrize("backend", [pytest.param("python", marks=PY), "kokkos"])
def test_a_fault_in_a_method_names_it_and_the_workunit(backend):
    with pytest.raises(ZeroDivisionError) as info:
        pk.parallel_for(N, splits, out=pk.View([N], pk.int64))
    assert f"test_classtypes.py:{_line('fault')}: in function 'Splitter.split' called from workunit 'splits': " \
           "integer division by zero (7 // 0)" in str(info.value)


@pk.classtype
class Mean:
    def __init__(self, start: float):
        self.s: float = start
        self.n: int = 0

    def add(self, v: float):
        self.s += v
        self.n += 1

    def mean(self) -> float:
        return self.s / self.n


@pk.workunit
def team_means(team: pk.TeamMember, m: pk.View2D[pk.double], out: pk.View1D[pk.double]):
    r: int = team.league_rank()
    a: Mean
    if r % 2 == 0:
        a = Mean(0.0)
    else:
        a = Mean(100.0)

    def row(j: int):
        a.add(m[r][j])  # the nested body changes the enclosing workunit's value

    pk.parallel_for(pk.TeamThreadRange(team, m.extent(1)), row)
    k: int = 0
    while k < 4:
        b = Mean(1.0)
        b.add(2.0)
        k += b.n
    out[r] = a.mean() + k


@pytest.mark.parametrize("backend", [pytest.param("python", marks=PY), "kokkos"])
def test_a_team_kernel_and_its_nested_body_share_a_classtype_local(backend):
    m = data(13, 5, 6)
    out = pk.View([5], pk.double)
    pk.parallel_for(pk.TeamPolicy(5, 1), team_means, m=pk.array(m.copy()), out=out)
    np.testing.assert_allclose(np.asarray(out), (m.sum(1) + 100.0 * (np.arange(5) % 2)) / 6 + 4, rtol=1e-13)


# --- PyKokkos's functor style (tests/test_classtypes_translator.py there) ---------------------------
@pk.classtype
class DepOne:
    def __init__(self, i: int, j: float, k: bool):
        self.i: int = i
        self.j: float = j
        self.k: bool = k

    def sum(self) -> float:
        if self.k:
            return self.i + self.j
        else:
            return self.j


@pk.functor
class DepFunctor:
    def __init__(self, i_1: int, i_2: int, f_1: float, b_1: bool):
        self.i_1: int = i_1
        self.i_2: int = i_2
        self.f_1: float = f_1
        self.b_1: bool = b_1

    @pk.function
    def mutate(self, dep_one: DepOne) -> None:
        dep_one.i = self.i_2

    @pk.function
    def ret(self) -> DepOne:
        return DepOne(self.i_1, self.f_1, self.b_1)

    @pk.workunit
    def mutated(self, i: int, acc: pk.Acc[pk.double]) -> None:
        dep_one: DepOne = DepOne(self.i_1, self.f_1, self.b_1)
        self.mutate(dep_one)
        acc += dep_one.sum()

    @pk.workunit
    def returned(self, i: int, acc: pk.Acc[pk.double]) -> None:
        dep_one: DepOne = self.ret()
        acc += dep_one.sum() + i


@PY
@pytest.mark.parametrize("fusion", [False, True])
def test_pykokkos_functor_with_classtypes(fusion):
    if fusion:
        pk.enable_fusion()
    f = DepFunctor(5, 1, 5.5, True)
    mutated = pk.parallel_reduce(50, f.mutated)
    returned = pk.parallel_reduce(50, f.returned)
    expected = DepOne(5, 5.5, True)
    expected.i = 1
    assert float(mutated) == 50 * expected.sum()
    assert float(returned) == 50 * DepOne(5, 5.5, True).sum() + sum(range(50))


# --- fusion and the memory pass see Views handed to methods ----------------------------------------
@pk.classtype
class Bumper:
    def __init__(self, by: float):
        self.by: float = by

    def bump(self, a: pk.View1D[pk.double], i: int) -> float:
        a[i] += self.by
        return 0.0


@pk.workunit
def read_then_bump(i: int, a: pk.View1D[pk.double], b: pk.View1D[pk.double]):
    b[i] = a[i] + 1.0
    b[i] = Bumper(10.0).bump(a, i) + a[i]  # Python reads a[i] after bump wrote it


@pk.workunit
def scale_b(i: int, b: pk.View1D[pk.double], c: pk.View1D[pk.double]):
    c[i] = 2.0 * b[i]


@PY
def test_a_method_writing_a_view_keeps_the_reads_after_it_in_place():
    pk.enable_fusion()
    a = data(9)
    av, b, c = pk.array(a.copy()), pk.View([N], pk.double), pk.View([N], pk.double)
    pk.parallel_for(N, read_then_bump, a=av, b=b)
    pk.parallel_for(N, scale_b, b=b, c=c)
    got = np.asarray(c).copy()
    assert last_fused_names() == ["read_then_bump__scale_b"], pk.explain()
    np.testing.assert_array_equal(got, 2.0 * (a + 10.0))
    np.testing.assert_array_equal(np.asarray(av), a + 10.0)


@PY
def test_a_view_handed_to_a_method_is_an_opaque_access_and_splits_fusion():
    kernel = lower(*_prepared(read_then_bump, a=pk.View([N]), b=pk.View([N])))
    kinds = {(a.view, a.kind) for a in analyse(kernel).accesses}
    assert ("a", "opaque") in kinds
    pk.enable_fusion()
    a = pk.View([N], pk.double)
    pk.parallel_for(N, scale_b, b=a, c=pk.View([N], pk.double))
    pk.parallel_for(N, read_then_bump, a=a, b=pk.View([N], pk.double))
    pk.fence()
    assert "'a' is passed to a helper function" in pk.explain(1)


# --- the IR ----------------------------------------------------------------------------------------
def _prepared(wu, **kwargs):
    prepared = prepare(wu, "for", N, (), kwargs).prepared
    return prepared.source, prepared.spec


@PY
def test_ir_has_structs_constructions_fields_and_methods():
    kernel = lower(*_prepared(vectors, a=pk.View([N, 3]), b=pk.View([N, 3]), out=pk.View([N, 3])))
    verify(kernel)
    vec = ir.StructType("Vec3", (("x", pk.double), ("y", pk.double), ("z", pk.double)))
    assert kernel.structs == (vec,) and dict(kernel.locals) == {"u": vec, "v": vec, "w": vec}
    text = dump(kernel)
    assert "struct Vec3 {x: float64, y: float64, z: float64}" in text
    assert "u = Vec3#0(a[i, 0], a[i, 1], a[i, 2])  : Vec3" in text
    assert "Vec3.add#" in text and "out[i, 2] = Vec3.dot#" in text
    methods = {fn.name: fn for fn in kernel.helpers}
    assert methods["Vec3.scaled"].struct == vec and methods["Vec3.scaled"].ret == vec
    assert "self.x += other.x  : float64" in text


@PY
def test_verify_rejects_a_classtype_local_assigned_a_shared_value():
    kernel = lower(*_prepared(vectors, a=pk.View([N, 3]), b=pk.View([N, 3]), out=pk.View([N, 3])))
    first = kernel.body[0]
    assert isinstance(first, ir.Assign) and isinstance(first.value, ir.New)
    shared = ir.Assign("w", first.type, ir.Name("u", first.type))
    with pytest.raises(VerifyError, match="not new"):
        verify(ir.Kernel(**{**kernel.__dict__, "body": (first, shared)}))


@PY
def test_a_classtype_value_changed_by_a_call_counts_as_assigned():
    kernel = lower(*_prepared(mutations, a=pk.View([N, 3]), out=pk.View([N, 4])))
    assert {"p", "c"} <= analyse(kernel).assigned


# --- errors --------------------------------------------------------------------------------------
@pk.classtype
class Recursive:
    def __init__(self):
        self.v: float = 1.0

    def down(self, k: int) -> float:
        return self.down(k - 1)  # <- recursion


@pk.classtype
class EarlyRead:
    def __init__(self, a: float):
        self.a: float = self.b + a  # <- read before declared
        self.b: float = 0.0


@pk.classtype
class EarlyReturn:
    def __init__(self, a: float):
        self.a: float = a
        if a > 0.0:
            return  # <- early return
        self.b: float = 0.0


@pk.classtype
class ViewField:
    def __init__(self, a: float):
        self.a: pk.View1D[pk.double] = a  # <- view field


class Base:
    pass


@pk.classtype
class Derived(Base):
    def __init__(self):
        self.a: float = 0.0


@pk.function
def give_back(p: Vec3) -> Vec3:
    return p  # <- return param


@pk.function
def rebind(p: Vec3) -> float:
    p = Vec3(0.0, 0.0, 0.0)  # <- rebind param
    return p.x


@pk.function
def wants_float(x: float) -> float:
    return x


@pk.workunit
def alias(i: int, out: pk.View1D[pk.double]):
    p = Vec3(1.0, 2.0, 3.0)
    q = p  # <- alias
    out[i] = q.x


@pk.workunit
def returns_param(i: int, out: pk.View1D[pk.double]):
    out[i] = give_back(Vec3(1.0, 2.0, 3.0)).x


@pk.workunit
def rebinds_param(i: int, out: pk.View1D[pk.double]):
    out[i] = rebind(Vec3(1.0, 2.0, 3.0))


@pk.workunit
def unknown_field(i: int, out: pk.View1D[pk.double]):
    p = Vec3(1.0, 2.0, 3.0)
    out[i] = p.w  # <- unknown field


@pk.workunit
def sets_unknown_field(i: int, out: pk.View1D[pk.double]):
    p = Vec3(1.0, 2.0, 3.0)
    p.w = 1.0  # <- set unknown field
    out[i] = p.x


@pk.workunit
def unknown_method(i: int, out: pk.View1D[pk.double]):
    p = Vec3(1.0, 2.0, 3.0)
    out[i] = p.length()  # <- unknown method


@pk.workunit
def wrong_type(i: int, out: pk.View1D[pk.double]):
    p: Vec3 = 2.0  # <- wrong type
    out[i] = p.x


@pk.workunit
def stores_value(i: int, out: pk.View1D[pk.double]):
    out[i] = Vec3(1.0, 2.0, 3.0)  # <- store value


@pk.workunit
def passes_value_for_float(i: int, out: pk.View1D[pk.double]):
    out[i] = wants_float(Vec3(1.0, 2.0, 3.0))  # <- value for float


@pk.workunit
def passes_float_for_value(i: int, out: pk.View1D[pk.double]):
    out[i] = Vec3(1.0, 2.0, 3.0).dot(1.0)  # <- float for value


@pk.workunit
def order_matters(i: int, out: pk.View1D[pk.double]):
    c = Counter(0)
    out[i] = c.total + c.tick(1.0)  # <- order


@pk.workunit
def compares(i: int, out: pk.View1D[pk.double]):
    p = Vec3(1.0, 2.0, 3.0)
    if p == Vec3(1.0, 2.0, 3.0):  # <- compare
        out[i] = 1.0


@pk.workunit
def recursion(i: int, out: pk.View1D[pk.double]):
    out[i] = Recursive().down(3)


@pk.workunit
def early_read(i: int, out: pk.View1D[pk.double]):
    out[i] = EarlyRead(1.0).a


@pk.workunit
def early_return(i: int, out: pk.View1D[pk.double]):
    out[i] = EarlyReturn(1.0).a


@pk.workunit
def view_field(i: int, out: pk.View1D[pk.double]):
    out[i] = ViewField(1.0).a


@pk.workunit
def derived(i: int, out: pk.View1D[pk.double]):
    out[i] = Derived().a  # <- derived


@pk.workunit
def takes_value(i: int, out: pk.View1D[pk.double], p):
    out[i] = 1.0


@pk.workunit
def annotated_value(i: int, out: pk.View1D[pk.double], p: Vec3):
    out[i] = 1.0


def _line(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if text.endswith(f"# <- {marker}"))


S, T = pk.UnsupportedSyntaxError, pk.KernelTypeError
ERRORS = [
    (alias, "alias", S, "alias", r"'q = p' makes 'q' a second name for the object 'p' names"),
    (returns_param, "give_back", S, "return param", r"returning parameter 'p' hands the caller back the object"),
    (rebinds_param, "rebind", S, "rebind param", r"assigning to classtype parameter 'p'"),
    (unknown_field, "unknown_field", T, "unknown field", r"classtype Vec3 has no field 'w'"),
    (sets_unknown_field, "sets_unknown_field", T, "set unknown field", r"classtype Vec3 has no field 'w'"),
    (unknown_method, "unknown_method", T, "unknown method", r"classtype Vec3 has no method 'length'"),
    (wrong_type, "wrong_type", T, "wrong type", r"assigning a float64 to 'p', a Vec3"),
    (stores_value, "stores_value", T, "store value", r"'Vec3\(1.0, 2.0, 3.0\)' is a Vec3, not a scalar"),
    (passes_value_for_float, "passes_value_for_float", T, "value for float",
     r"'wants_float' parameter 'x' is declared float64, but is given a Vec3"),
    (passes_float_for_value, "passes_float_for_value", T, "float for value",
     r"'Vec3.dot' parameter 'other' is declared Vec3, but is given a float64"),
    (order_matters, "order_matters", S, "order", r"'c' is used again in the statement where a call may change it"),
    (compares, "compares", T, "compare", r"comparing classtype value 'p'"),
    (recursion, "Recursive.down", S, "recursion", r"'Recursive.down' calls itself; recursion is not supported"),
    (early_read, "EarlyRead.__init__", T, "read before declared", r"field 'b' is used before __init__ declares it"),
    (early_return, "EarlyReturn.__init__", T, "early return", r"__init__ returns before it declares all its fields"),
    (view_field, "ViewField.__init__", T, "view field", r"field 'a' of classtype 'ViewField' is annotated .*; "
                                                          r"fields are scalars"),
    (derived, "derived", S, "derived", r"classtype 'Derived' has base classes"),
]


@PY
@pytest.mark.parametrize("wu, where, error, marker, message", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_errors_name_the_workunit_file_line_and_construct(wu, where, error, marker, message):
    with pytest.raises(error, match=message) as info:
        pk.parallel_for(N, wu, out=pk.View([N], pk.double))
    assert f"test_classtypes.py:{_line(marker)}:" in str(info.value)
    assert f"in workunit '{where}'" in str(info.value)


@PY
def test_classtype_values_are_never_kernel_arguments():
    with pytest.raises(pk.ArgumentError, match="parameter 'p' got a Vec3, a classtype; classtypes are never kernel "
                                               "arguments: their values live inside kernels only"):
        pk.parallel_for(N, takes_value, out=pk.View([N], pk.double), p=Vec3(1.0, 2.0, 3.0))
    with pytest.raises(pk.ArgumentError, match="parameter 'p' is annotated Vec3, a classtype; classtypes are never"):
        pk.parallel_for(N, annotated_value, out=pk.View([N], pk.double), p=2.0)


def test_classtype_decorates_classes_only():
    with pytest.raises(TypeError, match="decorates a class"):
        pk.classtype(vec_of)


# --- compiled with the real compiler ----------------------------------------------------------------
def test_compiled_classtypes_match_numpy_and_python():
    a, b = data(10, N, 3), data(11, N, 3)
    out = pk.View([N, 3], pk.double)
    pk.parallel_for(N, vectors, a=pk.array(a), b=pk.array(b), out=out)
    np.testing.assert_allclose(np.asarray(out), vectors_numpy(a, b), rtol=1e-13)
    out4 = pk.View([N, 4], pk.double)
    pk.parallel_for(N, mutations, a=pk.array(a), out=out4)
    np.testing.assert_array_equal(np.asarray(out4), python_reference(mutations, N, a=a, out=np.zeros((N, 4)))["out"])


def test_compiled_two_workunits_fuse():
    run_fused_pair(12)


def test_compiled_examinimd_get_particle_set_particle():
    run_halo(0)


@pk.classtype
class Functor:  # the name of kfuse's own C++ functor; fields and a method named like C++ keywords and Kokkos members
    def __init__(self, int: int):
        self.int: int = int
        self.auto: float = 0.5

    def init(self, double: float) -> float:
        return self.int * double + self.auto


@pk.workunit
def cxx_names(i: int, out: pk.View1D[pk.double]):
    f = Functor(i)
    out[i] = f.init(2.0)


def test_compiled_classtype_names_that_are_cpp_keywords():
    out = pk.View([N], pk.double)
    pk.parallel_for(N, cxx_names, out=out)
    np.testing.assert_array_equal(np.asarray(out), 2.0 * np.arange(N) + 0.5)
