"""Shared checks for the fused-kernel transforms (in the style of torch.fx's pass tests).

``check_pass`` runs one pass and checks the contract every pass keeps: the ``modified`` flag is
right, the expected structural change happened, a second run changes nothing (idempotence), the
input kernel was not touched, and ``manager.verify`` accepts the output. The other helpers build
fused kernels from ``prepare``d calls without running them, and launch a (transformed) fused kernel
directly, bypassing the planner, so a transform's output can be compared with eager execution.
"""
from __future__ import annotations

import ast

import numpy as np

import kfuse as pk
from kfuse import context
from kfuse.backends.base import Lowered
from kfuse.calls import prepare, writes_of
from kfuse.frontend.access import summarize
from kfuse.fuser import build
from kfuse.pipeline import execute
from kfuse.runtime.launch import policy_slots
from kfuse.transforms import manager
from kfuse.transforms.ir import FusedKernel, PassResult


# --- the PyFuser paper's Figure 2 (shared by the pass, numeric and codegen tests) --------------------------
@pk.workunit
def add(tid: int, N: int, S: float, A: pk.View2D[pk.double], B: pk.View2D[pk.double]):
    for i in range(N):
        A[tid][i] = S + B[tid][i]


@pk.workunit
def mul(tid: int, N: int, A: pk.View2D[pk.double], B: pk.View2D[pk.double], C: pk.View2D[pk.double]):
    for i in range(N):
        C[tid][i] = A[tid][i] * B[tid][i]


# --- building and running fused kernels ------------------------------------------------------------------
def call(wu, policy, /, **kwargs):
    """One ``parallel_for`` call, prepared (specialised) but not run."""
    return prepare(wu, "for", policy, (), kwargs)


def fused(*calls) -> FusedKernel:
    """The untransformed fused kernel of ``calls``, as the pipeline builds it."""
    source, spec, _ = build.build(list(calls))
    args = tuple(a for c in calls for a in c.args)
    return FusedKernel(source, spec, tuple(range(len(args))), args)


def transformed(kernel: FusedKernel, *names) -> FusedKernel:
    """``kernel`` after the named passes (in the manager's order)."""
    out, _ = manager.apply(kernel, frozenset(names))
    return out


def launch(kernel: FusedKernel, policy) -> tuple:
    """Render, load and run ``kernel`` once over ``policy`` on the runtime's backend, as the pipeline does."""
    backend = context.current().backend
    writes = writes_of(summarize(kernel.source, kernel.spec), kernel.spec)
    lowered = Lowered(kernel.source, kernel.spec, kernel.source.name, writes, fused=True, restrict=kernel.restrict)
    compiled = backend.load(backend.render(lowered))
    return compiled.launch(policy_slots(policy), tuple(kernel.args[i] for i in kernel.arg_index))


def eager_vs_launched(calls, kernel: FusedKernel, views) -> tuple[list, list]:
    """Contents of ``views`` after running ``calls`` one by one, and after launching ``kernel`` instead,
    both from the same starting contents."""
    start = [np.asarray(v).copy() for v in views]
    for c in calls:
        execute(c)
    expected = [np.asarray(v).copy() for v in views]
    for v, s in zip(views, start):
        np.asarray(v)[...] = s
    launch(kernel, calls[0].policy)
    return expected, [np.asarray(v).copy() for v in views]


# --- the pass contract -------------------------------------------------------------------------------------
def assert_launch_matches_eager(calls, kernel: FusedKernel, views) -> list:
    """Launching ``kernel`` gives exactly what running ``calls`` one by one gives, for every View in ``views``."""
    expected, got = eager_vs_launched(calls, kernel, views)
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(g, e)
    return got


def snapshot(kernel: FusedKernel) -> tuple:
    """Everything a pass may change, in comparable form."""
    return (ast.dump(kernel.source.tree), kernel.spec, kernel.arg_index, kernel.restrict,
            tuple(id(a) for a in kernel.args))


def check_pass(pass_fn, kernel: FusedKernel, expect_modified: bool, structural_assert=None) -> FusedKernel:
    """Run ``pass_fn`` on ``kernel``; check the flag, ``structural_assert(output)``, idempotence, that the
    input is untouched, and ``manager.verify``. Returns the output kernel."""
    before = snapshot(kernel)
    result = pass_fn(kernel)
    assert isinstance(result, PassResult)
    assert result.modified is expect_modified, \
        f"modified={result.modified}, expected {expect_modified}:\n{ast.unparse(result.kernel.source.tree)}"
    assert snapshot(kernel) == before, "the pass mutated its input kernel"
    out = result.kernel
    if not expect_modified:
        assert snapshot(out) == before, "modified=False but the kernel changed"
    manager.verify(out)
    if structural_assert is not None:
        verdict = structural_assert(out)  # asserts itself, or returns a truth value
        assert verdict is None or verdict, f"structural check failed on:\n{ast.unparse(out.source.tree)}"
    after = snapshot(out)
    again = pass_fn(out)
    assert again.modified is False, f"not idempotent: a second run changed\n{ast.unparse(out.source.tree)}"
    assert snapshot(again.kernel) == after, "a second run returned modified=False but a different kernel"
    assert snapshot(out) == after and snapshot(kernel) == before, "the second run mutated a kernel"
    return out
