"""The typed kernel IR: lowering, dump and verify on many kernels, its types against the C++ translator's,
the access analysis, and verify after every transform pass on fused kernels.

No C++ compiler is needed: calls are specialised (which translates them to C++) but never compiled.
"""
from __future__ import annotations

import importlib
import re

import pytest

import kfuse as pk
from kfuse.check import kernels as check_kernels
from kfuse.codegen.cxx_names import cpp_type, ident, method_name
from kfuse.codegen.kernel import generate
from kfuse.errors import KfuseError
from kfuse.frontend.normalize import normalize
from kfuse.frontend.spec import ArgType, KernelSpec
from kfuse.frontend.workunit import Workunit
from kfuse.fuser.build import build
from kfuse.ir import nodes as ir
from kfuse.ir.access import Affine, analyse
from kfuse.ir.dump import dump
from kfuse.ir.lower import lower
from kfuse.ir.verify import VerifyError, verify
from kfuse.calls import prepare
from kfuse.transforms import manager
from kfuse.transforms.ir import FusedKernel
from kfuse.types import DType, _AccAnnotation, _ViewAnnotation

import test_constructs

N = 8
ANNOTATED_MODULES = ("kfuse.check.kernels", "examples.examinimd.kernels", "examples.npbench.adi",
                     "examples.npbench.covariance", "examples.npbench.fdtd_2d", "examples.npbench.jacobi_1d",
                     "examples.npbench.mvt", "examples.npbench.syr2k", "examples.npbench.syrk")


def _value(annotation):
    """An argument of the annotated type (a small View, or a scalar)."""
    if isinstance(annotation, _ViewAnnotation):
        return pk.View([N] * annotation.rank, annotation.dtype or pk.double)
    if annotation is bool:
        return True
    if annotation in (int,) or (isinstance(annotation, DType) and annotation.is_int):
        return 3
    return 1.5


def _auto_call(wu: Workunit):
    """Call ``wu`` from its annotations: thread index first, then an accumulator (+ last_pass) if any."""
    resolved = normalize(wu.parsed).annotations
    names = wu.parsed.param_names
    team = pk.TeamPolicy(4, 2).set_scratch_size(0, pk.PerTeam(1 << 12))  # (level 0 for any ScratchView)
    policy = team if resolved[names[0]] is pk.TeamMember else N
    op, first = "for", 1
    if len(names) > 1 and isinstance(resolved[names[1]], _AccAnnotation):
        op, first = ("scan", 3) if len(names) > 2 and names[2] == "last_pass" else ("reduce", 2)
    return prepare(wu, op, policy, (), {n: _value(resolved[n]) for n in names[first:]})


def _annotated_calls():
    calls = []
    for module in ANNOTATED_MODULES:
        for name, wu in sorted(vars(importlib.import_module(module)).items()):
            if isinstance(wu, Workunit) and name != "k_broken":
                calls.append(pytest.param(lambda wu=wu: _auto_call(wu), id=f"{module.split('.')[-1]}.{name}"))
    return calls


def _construct_calls():
    """The kernels of tests/test_constructs.py, called as those tests call them."""
    t = test_constructs
    f64, i64 = pk.View([N], pk.double), pk.View([N], pk.int64)
    i32, u32 = pk.View([N], pk.int32), pk.View([N], pk.uint32)
    cases = {
        "int_arith": lambda: (t.int_arith, dict(a=i64, b=i64, out=pk.View([N, 12], pk.int64))),
        "float_arith": lambda: (t.float_arith, dict(a=f64, b=f64, ia=i64, ib=i64, out=pk.View([N, 12], pk.double))),
        "mixed_int_widths": lambda: (t.mixed_int_widths, dict(u=u32, a=i32, out=pk.View([N, 6], pk.int64))),
        "control_flow": lambda: (t.control_flow, dict(n=5, out=pk.View([N, 4], pk.int64))),
        "transpose_add": lambda: (t.transpose_add, dict(A=pk.View([N, N]), B=pk.View([N, N]), C=pk.View([N, N]))),
        "math_fns": lambda: (t.math_fns, dict(x=f64, out=pk.View([N, 10], pk.double))),
        "use_helpers": lambda: (t.use_helpers, dict(M=pk.View([N, N]), v=f64, out=pk.View([N, 4]))),
        "scalars": lambda: (t.scalars, dict(n=2, alpha=0.5, flip=True, x=f64, out=f64)),
        "scale_add": lambda: (t.scale_add, dict(src=i32, dst=i32, k=3)),
        "say_percent": lambda: (t.say_percent, dict(x=f64)),
    }
    return [pytest.param(lambda make=make: prepare(*_with_policy(make())), id=f"constructs.{name}")
            for name, make in cases.items()]


def _with_policy(made):
    wu, kwargs = made
    return wu, "for", N, (), kwargs


CALLS = _annotated_calls() + _construct_calls()


def _ir_of(call):
    return lower(call.prepared.source, call.prepared.spec)


@pytest.mark.parametrize("make", CALLS)
def test_every_kernel_lowers_verifies_and_dumps_stably(make):
    call = make()
    kernel = _ir_of(call)
    verify(kernel)
    again = _ir_of(call)
    assert again == kernel and hash(again) == hash(kernel)
    text = dump(kernel)
    assert text == dump(again) and text.startswith(f"kernel {call.prepared.source.name} ")


_DECLARED = re.compile(r"^\s*(\S+) (\w+) = \1\(\);$", re.M)
_HELPER = re.compile(r"^KOKKOS_INLINE_FUNCTION (\S+) ([\w:]+)\(", re.M)


@pytest.mark.parametrize("make", CALLS)
def test_types_are_the_ones_the_cpp_declares(make):
    """The IR's hoisted locals and helper return types are the ones the C++ declares (a classtype method is a
    member function of its struct)."""
    call = make()
    kernel = _ir_of(call)
    cpp = generate(call.prepared.source, call.prepared.spec, call.prepared.name).source
    declared = _DECLARED.findall(cpp)
    lowered = [(cpp_type(t), ident(n)) for n, t in kernel.locals]
    lowered += [(cpp_type(t), ident(n)) for fn in kernel.helpers for n, t in fn.locals]
    assert sorted(lowered) == sorted(d for d in declared if not d[1].startswith("kf_"))
    helpers = _HELPER.findall(cpp)
    assert helpers == [(cpp_type(fn.ret) if fn.ret else "void",
                        f"{cpp_type(fn.struct)}::{method_name(fn, i)}" if fn.struct else f"{ident(fn.name)}_h{i}")
                       for i, fn in enumerate(kernel.helpers)]


# --- typing rules, one construct at a time ----------------------------------------------------------
@pk.workunit
def typed(i, a, b, u, x, out, fout):
    k = a[i] * b[i]
    out[i] = k + u[i]
    fout[i] = a[i] / b[i] + x[i] ** 2
    flag = a[i] < u[i]
    fout[i] = 1 if flag else 2.5
    out[i] = abs(a[i]) + max(a[i], b[i])


def test_promotion_rules_show_as_casts_in_the_ir():
    i32, u32 = pk.View([N], pk.int32), pk.View([N], pk.uint32)
    call = prepare(typed, "for", N, (), dict(a=i32, b=i32, u=u32, x=pk.View([N], pk.float32),
                                             out=pk.View([N], pk.int64), fout=pk.View([N], pk.double)))
    kernel = _ir_of(call)
    verify(kernel)
    assert dict(kernel.locals) == {"k": DType.int64, "flag": DType.bool}
    text = dump(kernel)
    assert "k = (int64(a[i]) * int64(b[i]))  : int64" in text  # C++ would multiply in 32 bits
    assert "out[i] = (k + int64(u[i]))  : int64" in text
    assert "fout[i] = ((float64(a[i]) / float64(b[i])) + (x[i] ** float32(2)))  : float64" in text
    assert "flag = (int64(a[i]) < int64(u[i]))  : bool" in text  # not C++'s unsigned comparison
    assert "fout[i] = (float64(1) if flag else 2.5)  : float64" in text
    assert "out[i] = (abs(a[i]) + max(int64(a[i]), int64(b[i])))  : int64" in text


def test_lowering_raises_the_errors_a_call_raises():
    @pk.workunit
    def bad(i, x):
        x[i] = x[i][0]

    with pytest.raises(KfuseError) as at_call:
        prepare(bad, "for", N, (), dict(x=pk.View([N])))
    spec = KernelSpec("for", "range", 1, (("x", ArgType("view", DType.float64, 1, "right")),), (), "OpenMP")
    with pytest.raises(type(at_call.value)) as lowered:
        lower(normalize(bad.parsed), spec)
    assert str(lowered.value) == str(at_call.value)


# --- access analysis ---------------------------------------------------------------------------------
@pk.workunit
def accesses(i, n: int, A: pk.View2D[pk.double], idx: pk.View1D[pk.int32], h: pk.View1D[pk.int64],
             y: pk.View1D[pk.double]):
    for j in range(n):
        A[i + 1][j] = A[2 * i - n][j + 3] + A[i * i][idx[i]]
    k = 0
    for m in range(n):
        k = m
        m = m + 1
        y[m] += 1.0
    pk.atomic_add(h, [i], 1)
    y[i] = check_kernels.peek(y, i)


def _accesses():
    call = prepare(accesses, "for", N, (), dict(n=3, A=pk.View([N, N]), idx=pk.View([N], pk.int32),
                                                h=pk.View([N], pk.int64), y=pk.View([N])))
    return analyse(_ir_of(call))


def test_affine_indices_over_threads_loops_and_scalar_parameters():
    found = _accesses().accesses
    reads = [a for a in found if a.view == "A" and a.kind == "read"]
    write = next(a for a in found if a.view == "A" and a.kind == "write")
    assert [a.text for a in reads] == ["A[2 * i - n][j + 3]", "A[i * i][idx[i]]"]
    assert reads[0].indices == (Affine((("i", 2),), 0, (("n", -1),)), Affine((("j", 1),), 3))
    assert reads[1].indices == (None, None)  # a product of variables; an indirect index
    assert write.indices == (Affine((("i", 1),), 1), Affine((("j", 1),)))
    assert next(a for a in found if a.view == "idx").indices == (Affine((("i", 1),)),)


def test_reassigned_loop_variables_atomics_and_helpers():
    found = _accesses()
    update = next(a for a in found.accesses if a.view == "y" and a.kind == "update")
    assert update.indices == (None,)  # m is reassigned in its loop
    atomic = next(a for a in found.accesses if a.view == "h")
    assert atomic.kind == "atomic" and atomic.indices == (Affine((("i", 1),)),)
    assert [a.kind for a in found.accesses if a.view == "y"] == ["update", "opaque", "write"]
    assert {"k", "m"} <= found.assigned and not found.returns


# --- verify ------------------------------------------------------------------------------------------
def test_verify_rejects_broken_ir():
    kernel = _ir_of(_auto_call(check_kernels.k_axpy))
    store = kernel.body[0]
    assert isinstance(store, ir.Store)
    wrong_index = ir.Store(store.view, (ir.Const(1.5, DType.float64),), store.value, store.type)
    with pytest.raises(VerifyError, match="index of type"):
        verify(ir.Kernel(**{**kernel.__dict__, "body": (wrong_index,)}))
    undeclared = ir.Store(store.view, (ir.Name("nope", DType.int64),), store.value, store.type)
    with pytest.raises(VerifyError, match="'nope' is used but not declared"):
        verify(ir.Kernel(**{**kernel.__dict__, "body": (undeclared,)}))
    two_d = ir.Store(store.view, store.indices * 2, store.value, store.type)
    with pytest.raises(VerifyError, match="2 indices for a 1-D View"):
        verify(ir.Kernel(**{**kernel.__dict__, "body": (two_d,)}))


# --- fused kernels: verify after every pass ----------------------------------------------------------
def _groups():
    ck = check_kernels
    x, y, m = pk.View([N]), pk.View([N]), pk.View([N, N])
    f32 = pk.View([N], pk.float32)
    return {
        "elementwise": [(ck.k_scale, dict(x=x, y=y)), (ck.k_axpy, dict(alpha=2.0, x=y, y=x)),
                        (ck.k_sin, dict(x=x)), (ck.k_scale, dict(x=x, y=y))],
        "rows": [(ck.k_rowsum, dict(m=m, out=x)), (ck.k_rank1, dict(x=x, y=y, m=m)), (ck.k_rowsum, dict(m=m, out=y))],
        "widths": [(ck.k_to_f32, dict(x=x, f=f32)), (ck.k_from_f32, dict(f=f32, y=y)), (ck.k_helper, dict(x=y, y=x))],
        "reductions": [(ck.k_scale, dict(x=x, y=y)), (ck.k_dot, dict(x=x, y=y)), (ck.k_dot, dict(x=y, y=y))],
    }


@pytest.mark.parametrize("group", sorted(_groups()))
def test_fused_kernels_verify_after_every_transform_pass(group):
    calls = [prepare(wu, "reduce" if wu is check_kernels.k_dot else "for", N, (), kwargs)
             for wu, kwargs in _groups()[group]]
    source, spec, _ = build(calls)
    args = tuple(a for c in calls for a in c.args)
    kernel = FusedKernel(source, spec, tuple(range(len(args))), args)
    verify(lower(kernel.source, kernel.spec))
    ran = []
    for name in manager.NAMES:
        kernel, passes = manager.apply(kernel, frozenset({name}))
        ran += passes
        fused = lower(kernel.source, kernel.spec)
        verify(fused)
        assert all(loc.member >= 0 for loc in _store_locs(fused.body)), name
    assert any(modified for _, modified in ran), ran


def _store_locs(stmts):
    for s in stmts:
        if isinstance(s, ir.Store):
            yield s.loc
        for inner in (getattr(s, "body", ()), getattr(s, "orelse", ())):
            yield from _store_locs(inner)
