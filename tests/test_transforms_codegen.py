"""Golden structure of the C++ generated for transformed fused kernels: the PyFuser paper's Figure 2
(add: ``A = S + B``, mul: ``C = A * B``, both over ``for i in range(N)``) and its aliasing variants.

Structures are counted with regexes on the source (parameters of ``kf_body``, ``__restrict__``
pointers, ``for`` loops, element accesses), never compared byte for byte; every kernel is also run and
compared with eager execution.
"""
from __future__ import annotations

import re

import numpy as np

import kfuse as pk
from kfuse.codegen.kernel import generate
from kfuse.transforms import manager
from transform_check import (add, assert_launch_matches_eager, call, fused, mul, transformed)

T, N = 8, 6
S = 1.5


@pk.workunit
def spread(i: int, A_s0: float, d: int, A: pk.View1D[pk.double]):
    A[i] = A_s0 * A.extent(d)  # a scalar named like a stride, and an extent of a run-time dimension


def data(shape, seed: int) -> pk.View:
    v = pk.View(shape)
    v[:] = np.random.default_rng(seed).uniform(-1.0, 1.0, shape)
    return v


def cpp(kernel) -> str:
    return generate(kernel.source, kernel.spec, kernel.source.name, kernel.restrict).source


def _split_top(text: str) -> list:
    """Split a C++ parameter list at commas outside template brackets."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:k].strip())
            start = k + 1
    return parts + [text[start:].strip()]


def kf_body(source: str) -> tuple[dict, str]:
    """{parameter name: declaration} and the body of the fused kernel's ``kf_body`` function."""
    match = re.search(r"void kf_body\((.*?)\) \{\n(.*?)\n\}\n", source, re.S)
    assert match, source
    params = {}
    for decl in _split_top(match.group(1)):
        name = re.search(r"(\w+)$", decl).group(1)
        assert name not in params, f"parameter {name} twice"
        params[name] = decl
    return params, match.group(2)


def restricted(params: dict) -> list:
    return sorted(n for n, d in params.items() if "__restrict__" in d)


def view_refs(params: dict) -> list:
    return sorted(n for n, d in params.items() if re.match(r"const Kokkos::View<.*>& \w+$", d))


def loops(body: str) -> int:
    return len(re.findall(r"\bfor \(", body))


def element_uses(body: str, name: str) -> int:
    """Element accesses of ``name``: ``name[...]`` (restrict pointer) or ``name(...)`` (View)."""
    return len(re.findall(rf"\b{name}[\[(]", body))


# --- Figure 2, every transform on -----------------------------------------------------------------------
def test_figure2_one_loop_one_param_per_array_restrict_and_one_read_of_b():
    A, B, C = pk.View((T, N)), data((T, N), 1), pk.View((T, N))
    calls = [call(add, T, N=N, S=S, A=A, B=B), call(mul, T, N=N, A=A, B=B, C=C)]
    kernel = transformed(fused(*calls), *manager.NAMES)
    source = cpp(kernel)
    params, body = kf_body(source)

    # one parameter per distinct array and scalar (plus each pointer's strides and extents)
    user = [n for n in params if not n.startswith("kf_")]
    assert user == ["i0", "k0_N", "k0_S", "k0_A", "k0_B", "k1_C"]
    assert not re.search(r"\bk1_[NSAB]\b", source)
    assert restricted(params) == ["k0_A", "k0_B", "k1_C"] and source.count("__restrict__") == 3
    assert sorted(n for n in params if re.fullmatch(r"kf_\w+_s\d", n)) == \
        ["kf_k0_A_s0", "kf_k0_A_s1", "kf_k0_B_s0", "kf_k0_B_s1", "kf_k1_C_s0", "kf_k1_C_s1"]
    # the functor holds each array once, and the launch buffer has one pointer + extents per array
    assert len(re.findall(r"^  Kokkos::View<double\*\*", source, re.M)) == 3
    assert len(generate(kernel.source, kernel.spec, "x", kernel.restrict).slot_format) == 2 + 2 + 3 * 3

    assert loops(body) == 1
    assert element_uses(body, "k0_B") == 1  # read once, shared by both statements
    assert element_uses(body, "k0_A") == 1 and re.search(r"\bk0_A\[[^;]*\] = ", body)  # stored, never re-read
    assert element_uses(body, "k1_C") == 1
    got = assert_launch_matches_eager(calls, kernel, [A, C])
    b = np.asarray(B)
    np.testing.assert_array_equal(got[1], (S + b) * b)


def test_runner_compiles_the_transformed_kernel(tmp_path, monkeypatch):
    """Through the tracer: the C++ the pipeline compiles is the transformed kernel's (KFUSE_DUMP_DIR)."""
    monkeypatch.setenv("KFUSE_DUMP_DIR", str(tmp_path))
    A, B, C = pk.View((T, N)), data((T, N), 2), pk.View((T, N))
    with pk.fusion():
        pk.parallel_for(T, add, N=N, S=S, A=A, B=B)
        pk.parallel_for(T, mul, N=N, A=A, B=B, C=C)
    b = np.asarray(B)
    np.testing.assert_array_equal(np.asarray(C), (S + b) * b)
    calls = [call(add, T, N=N, S=S, A=A, B=B), call(mul, T, N=N, A=A, B=B, C=C)]
    expected = cpp(transformed(fused(*calls), *manager.NAMES))
    assert (tmp_path / "add__mul.cpp").read_text() == expected


# --- aliasing: overlapping parameters keep View access -----------------------------------------------------
ON_GPU = pk.get_default_space().value in ("Cuda", "HIP")


def test_overlapping_views_of_one_array_are_not_restrict():
    X, B = data((T, N + 1), 3), data((T, N), 4)
    A = X.subview(slice(None), slice(0, N))  # columns 0..N-1 of X
    C = X.subview(slice(None), slice(1, N + 1))  # columns 1..N: overlaps A, shifted by one
    calls = [call(add, T, N=N, S=S, A=A, B=B), call(mul, T, N=N, A=A, B=B, C=C)]
    kernel = transformed(fused(*calls), *manager.NAMES)
    if ON_GPU:  # GPUs: no __restrict__ at all once two View parameters overlap (transforms/restrict.py)
        assert "__restrict__" not in cpp(kernel)
        assert_launch_matches_eager(calls, kernel, [X])
        return
    params, body = kf_body(cpp(kernel))
    assert restricted(params) == ["k0_B"]
    assert view_refs(params) == ["k0_A", "k1_C"]
    assert loops(body) == 2  # C[t][i] is A[t][i + 1]: merging would reverse a dependence
    assert_launch_matches_eager(calls, kernel, [X])


def test_same_array_twice_without_argument_fusion_is_not_restrict(tmp_path, monkeypatch):
    """PyKokkos marks every View __restrict__; with one array behind two parameters that lets the
    compiler reorder a store and a load of one element. kfuse must not mark them, and stay correct."""
    monkeypatch.setenv("KFUSE_DUMP_DIR", str(tmp_path))
    pk.set_transforms(["loops", "restrict", "memory"])
    A, B, C = pk.View((T, N)), data((T, N), 5), pk.View((T, N))
    with pk.fusion():
        pk.parallel_for(T, add, N=N, S=S, A=A, B=B)
        pk.parallel_for(T, mul, N=N, A=A, B=B, C=C)
    b = np.asarray(B)
    np.testing.assert_array_equal(np.asarray(A), S + b)
    np.testing.assert_array_equal(np.asarray(C), (S + b) * b)

    if ON_GPU:  # GPUs: no __restrict__ at all once two View parameters overlap (transforms/restrict.py)
        assert "__restrict__" not in (tmp_path / "add__mul.cpp").read_text()
        return
    params, body = kf_body((tmp_path / "add__mul.cpp").read_text())
    assert restricted(params) == ["k1_C"]
    assert view_refs(params) == ["k0_A", "k0_B", "k1_A", "k1_B"]
    assert element_uses(body, "k1_A") == 1 and element_uses(body, "k0_A") == 1
    assert loops(body) == 2  # k0_N and k1_N are not known equal without argument fusion


def test_restrict_pointer_names_and_run_time_extents_compile():
    A, B = pk.View(T), pk.View(T)
    calls = [call(spread, T, A_s0=0.5, d=0, A=A), call(spread, T, A_s0=2.0, d=0, A=B)]
    kernel = transformed(fused(*calls), *manager.NAMES)
    params, body = kf_body(cpp(kernel))
    assert restricted(params) == ["k0_A", "k1_A"]
    assert {"k0_A_s0", "kf_k0_A_s0", "kf_k0_A_e0"} <= set(params)
    got = assert_launch_matches_eager(calls, kernel, [A, B])
    np.testing.assert_array_equal(got[0], np.full(T, 0.5 * T))
    np.testing.assert_array_equal(got[1], np.full(T, 2.0 * T))
