"""Rows in lanes: which GPU kernels run each thread index on a group of lanes, and which of their loops split.

A thread that adds up a loop's terms computes them one after another. On a CUDA device, where a kernel has few
thread indices (GaussianNB's per-class log terms: one), such a kernel instead runs each index on a group of 32 lanes
of a warp (the prelude's ``kf_for_in_lanes``): in a split loop the lanes compute 32 consecutive iterations' terms at
once, and then every lane adds the terms to the sums in the loop's own order, each taken from its lane in turn (a
warp shuffle). The sums are the sequential ones bit for bit, so whether a kernel runs in lanes never changes a
result: eager and fused kernels, GPU and host, may differ in form and still agree. Outside split loops every lane
runs the body alike (so every lane holds the same values), except stores, which the group's first lane makes
between two syncs of the group, so that no lane reads memory ahead of or behind what a sequential thread would.

Adding in order costs a shuffle and an add after the previous add, about 45 cycles a term on an H200, so only
terms dearer than that are worth computing side by side: a loop splits only where its body calls a math function
(``log``, ``exp``, ``sqrt``...). Measured (stop 40, H200, GaussianNB's captured prediction, kernel with its launch
and fence): the one-row log terms 0.040 -> 0.016 ms in lanes; the 100000-row pass of (X - theta)^2 / var in groups
of 8 lanes 0.103 ms against 0.027 a class (four) as threads, in 32 lanes 0.267; 32 rows of 200000 variance terms
4.7 ms in 32 lanes. So the launch gives lanes only to kernels of at most ``KF_FEW_INDICES`` (256) indices, and
an index a thread otherwise (the same code, one lane).

A loop splits when its body only assigns locals: one ``+=`` per sum (a float or integer of 4 or 8 bytes, added a
value of its own type) that the body does not otherwise read or write, and temporaries each iteration assigns
before reading and nothing after the loop reads; a math function called; no checked division; a step of one. A
kernel runs in lanes when it is a rank-1 ``parallel_for`` over a range on a CUDA device, some loop of it splits,
and nothing in it acts beyond its thread's memory and values in ways the lanes would repeat (atomics, helper calls,
prints, nested parallelism, team operations). ``KFUSE_BOUNDS_CHECK=1`` keeps kernels as written.
"""
from __future__ import annotations

from collections import Counter

from ..frontend.spec import KernelSpec
from ..ir import nodes as ir
from ..ir.access import expressions, names_read, referenced, statements, subexpressions
from ..ir.typing import BINARY_FLOAT_MATH, UNARY_FLOAT_MATH
from ..types import DType
from .printer import checked_division

#: Spaces whose kernels may run in lanes (the prelude's lanes use CUDA's warp shuffles and syncs).
LANE_SPACES = frozenset({"Cuda"})
#: Sums a shuffle moves whole, added in one C++ operation of their own type.
_SHUFFLED = frozenset({DType.float32, DType.float64, DType.int32, DType.int64, DType.uint32, DType.uint64})
#: Math functions dearer than the shuffle and add that bring a term to its sum in order.
_COSTLY = (UNARY_FLOAT_MATH | BINARY_FLOAT_MATH) - {"floor", "ceil", "trunc", "fmin", "fmax", "copysign"}
#: Statements and expressions whose effect every lane would repeat.
_REPEATED_STATEMENTS = (ir.Eval, ir.Print, ir.Barrier, ir.Single, ir.ScratchView, ir.Lambda, ir.SetField)
_REPEATED_EXPRESSIONS = (ir.Atomic, ir.HelperCall, ir.New, ir.Nested, ir.TeamQuery)


def lane_loops(kernel: ir.Kernel, spec: KernelSpec, bounds_check: bool) -> dict:
    """``id(loop)`` -> its sums ((name, DType), ...) for every loop that splits, when the kernel runs in lanes;
    empty when it runs a thread per index as written."""
    if spec.op != "for" or spec.policy != "range" or spec.rank != 1 or spec.space not in LANE_SPACES \
            or bounds_check or kernel.helpers:
        return {}
    stmts = list(statements(kernel.body))
    if any(_repeated(s) for s in stmts):
        return {}
    found = {}
    for s in stmts:
        sums = _sums(s, stmts) if isinstance(s, ir.For) else ()
        if sums:
            found[id(s)] = sums
    return found


def _repeated(s) -> bool:
    return isinstance(s, _REPEATED_STATEMENTS) or any(
        isinstance(e, _REPEATED_EXPRESSIONS) for top in expressions(s) for e in subexpressions(top))


def _sums(loop: ir.For, stmts: list) -> tuple:
    """The sums of ``loop`` if it splits (see the module's docstring), else ()."""
    body = loop.body
    if loop.strided or not loop.scoped or not all(isinstance(s, ir.Assign) for s in body):
        return ()
    found = [e for s in body for e in subexpressions(s.value)]
    if any(checked_division(e) for e in found) or not any(isinstance(e, ir.Call) and e.func in _COSTLY for e in found):
        return ()
    assigned = {s.name for s in body}
    if loop.var in assigned:
        return ()
    counts, read = Counter(s.name for s in body), names_read(body)
    sums = {s.name: s.type for s in body if s.op == "+" and counts[s.name] == 1 and s.name not in read
            and s.type in _SHUFFLED and getattr(s.value, "type", None) == s.type}
    defined: set = set()
    for s in body:
        needs = referenced(s.value, views=False) | ({s.name} if s.op and s.name not in sums else set())
        if needs & (assigned - defined):  # a value carried over from an earlier iteration
            return ()
        if s.name not in sums:
            defined.add(s.name)
    inside = {id(s) for s in statements(body)}
    outside = set().union(*(referenced(e, views=False) for s in stmts if id(s) not in inside for e in expressions(s)))
    if not sums or (assigned - set(sums)) & outside:
        return ()
    return tuple(sums.items())
