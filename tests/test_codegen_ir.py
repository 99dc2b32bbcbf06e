"""Codegen prints the typed IR: one lowering per specialisation shared by every stage, the C++ spellings
of the IR's conversions, fault sites numbered in the order the kernel meets them (helpers typed first,
fused members under their own names), and IR verification between transform passes.

No C++ compiler is needed: calls are specialised and their C++ generated, never compiled.
"""
from __future__ import annotations

import re

import pytest

import kfuse as pk
from kfuse import config
from kfuse.calls import prepare
from kfuse.check import kernels as ck
from kfuse.codegen.kernel import generate
from kfuse.frontend.access import summarize
from kfuse.fuser import safety
from kfuse.fuser.build import build
from kfuse.ir import lower as ir_lower
from kfuse.ir import verify as ir_verify
from kfuse.transforms import manager
from kfuse.transforms.ir import FusedKernel

N = 8


@pk.function
def half(x: float) -> float:
    return x / 2


@pk.function
def idiv(a: int, b: int) -> int:
    return a // b


@pk.workunit
def spelled(i, A: pk.View1D[pk.double], B: pk.View1D[pk.int64], n: int):
    x = B[i] // n
    y = half(i)
    z = idiv(i, n)
    for j in range(n, 0, -2):
        B[i] += j
    w = min(B[i], 2, A[i]) + A[i] ** 2 + (i or n) + (A[i] if i > 2 else n) + float(i) ** float(n)
    A[i] = x + y + z + w


def _cpp(wu, op="for", policy=N, restrict=frozenset(), **kwargs) -> str:
    prepared = prepare(wu, op, policy, (), kwargs).prepared
    return generate(prepared.source, prepared.spec, prepared.name, restrict).source


def _sites(cpp: str) -> list[str]:
    return re.findall(r"^  (\{.*\}),$", cpp.split("kf_sites[] = {")[1].split("};")[0], re.M)


def test_one_lowering_per_specialisation_serves_access_safety_and_codegen(monkeypatch):
    @pk.workunit
    def axpy(i, alpha: float, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
        y[i] += alpha * x[i]

    lowerings = []
    real = ir_lower.lower
    monkeypatch.setattr(ir_lower, "lower", lambda source, spec: lowerings.append(source.name) or real(source, spec))
    prepared = prepare(axpy, "for", N, (), dict(alpha=2.0, x=pk.View([N]), y=pk.View([N]))).prepared
    summarize(prepared.source, prepared.spec)
    safety._analyse(prepared)
    generate(prepared.source, prepared.spec, prepared.name)
    assert lowerings == ["axpy"]


def test_the_ir_conversions_spelled_as_cpp():
    cpp = _cpp(spelled, A=pk.View([N]), B=pk.View([N], pk.int64), n=3)
    assert "KOKKOS_INLINE_FUNCTION double half_h0(double x) {" in cpp  # the annotated type, not the caller's
    assert "kf_step1 > 0 ? kf_it1 < kf_end1 : kf_it1 > kf_end1" in cpp
    assert ("kf_min(static_cast<double>(kf_min(static_cast<int64_t>(B(i)), static_cast<int64_t>(2))), "
            "static_cast<double>(A(i)))") in cpp  # promoted one argument at a time, as C++ nests the calls
    assert "std::pow(static_cast<double>(A(i)), static_cast<double>(2))" in cpp
    assert "[&]() -> int64_t { int64_t kf_v; kf_v = i; if (kf_v) return kf_v; return n; }()" in cpp
    assert "((i > 2) ? static_cast<double>(A(i)) : static_cast<double>(n))" in cpp
    assert ("std::pow(static_cast<double>(static_cast<double>(i)), static_cast<double>(static_cast<double>(n)))"
            in cpp)  # float(i) is the user's own conversion, kept


def test_fault_sites_number_helpers_typed_first():
    """Typing ``y = half(i)`` and ``z = idiv(i, n)`` writes the helpers before the kernel's statements."""
    cpp = _cpp(spelled, A=pk.View([N]), B=pk.View([N], pk.int64), n=3)
    sites = _sites(cpp)
    assert [s.split(", ")[:3] for s in sites] == [['{"floordiv"', '"spelled"', '"idiv"'],
                                                 ['{"floordiv"', '"spelled"', '""']]
    assert "kf_floordiv_checked(a, b, 0)" in cpp and "x = kf_floordiv_checked(B(i), n, 1);" in cpp


@pytest.mark.parametrize("restrict", [frozenset(), frozenset({"k1_x"})])
def test_fused_members_fault_sites_name_their_workunit_and_views(restrict):
    x, y = pk.View([N]), pk.View([N])
    calls = [prepare(ck.k_scale, "for", N, (), dict(x=x, y=y)),
             prepare(ck.k_axpy, "for", N, (), dict(alpha=2.0, x=y, y=x))]
    source, spec, name = build(calls)
    with config.overridden(config.BOUNDS_CHECK, True):
        cpp = generate(source, spec, name, restrict).source
    sites = _sites(cpp)
    assert any('"index", "k_axpy", ""' in s and s.endswith('"x", 1}') for s in sites), sites
    assert any('"index", "k_scale", ""' in s and s.endswith('"y", 0}') for s in sites), sites
    assert ("kf_at_ptr(k1_x, " in cpp) == bool(restrict)


def test_transform_verify_checks_the_ir(monkeypatch):
    calls = [prepare(ck.k_scale, "for", N, (), dict(x=pk.View([N]), y=pk.View([N]))),
             prepare(ck.k_sin, "for", N, (), dict(x=pk.View([N])))]
    source, spec, _ = build(calls)
    args = tuple(a for c in calls for a in c.args)
    verified = []
    monkeypatch.setattr(ir_verify, "verify", lambda kernel: verified.append(kernel.name))
    manager.verify(FusedKernel(source, spec, tuple(range(len(args))), args))
    assert verified == [source.name]
