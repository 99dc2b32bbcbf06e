"""Is it safe to run two kernel calls as one kernel? Proved from their ASTs, or refused with a reason.

Fusing calls a then b into one kernel runs, for each thread index, a's body then b's body, with
threads in any order. That gives the unfused result if no thread reads or writes an element that
another thread of the other kernel writes. We prove it per shared array (memory touched by both
calls, written by at least one): every access of both kernels must index some dimension by the same
one-to-one expression of each thread index (``tid`` or ``tid + c``, with ``c`` a constant or an
unchanged scalar argument, compared by value at run time), so each thread stays inside its own slice.
Other dimensions may use anything (loop variables, constants, even indirect reads). Anything else
(neighbour reads ``A[i-1]`` against ``A[i]``, indirect ``A[idx[i]]``, atomics, Views handed to
helpers, different views of overlapping memory) is refused.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.access import analyse
from ..ir.lower import lowered, scratch_declarations


@dataclass(frozen=True)
class ParamPattern:
    """How one View parameter is accessed, reduced to what safety needs."""

    read: bool
    write: bool
    opaque: str | None  # why the accesses cannot be analysed (atomic, helper), or None
    # one entry per access: for each thread-index position k, the set of (dim, offset) where the
    # index is ``thread_k + offset``; offset is ("c", int) or ("p", scalar parameter name)
    accesses: tuple


@dataclass(frozen=True)
class KernelPattern:
    params: dict  # View parameter name -> ParamPattern
    refuse: str | None  # a reason the kernel cannot be fused with anything, or None
    offset_params: frozenset  # scalar parameters whose values matter to the analysis


def _match(index, thread: str):
    """(offset) if ``index`` (an Affine, or None) is ``thread + offset`` (one-to-one in the thread index),
    offset a constant or one scalar parameter, else None."""
    if index is None or index.terms != ((thread, 1),):
        return None
    if not index.symbols:
        return ("c", index.const)
    if index.const == 0 and len(index.symbols) == 1 and index.symbols[0][1] == 1:
        return ("p", index.symbols[0][0])
    return None


def pattern_of(prepared) -> KernelPattern:
    """Analyse a specialised kernel once (cached on the Prepared object)."""
    cached = prepared.__dict__.get("_fusion_pattern")
    if cached is None:
        cached = _analyse(prepared)
        prepared.__dict__["_fusion_pattern"] = cached
    return cached


def _analyse(prepared) -> KernelPattern:
    spec, src = prepared.spec, prepared.source
    names = [a.arg for a in src.tree.args.args]
    if spec.op == "scan":
        return KernelPattern({}, "a scan (parallel_scan) has a cross-thread dependence", frozenset())
    if spec.policy == "team" and scratch_declarations(src):
        return KernelPattern({}, "a TeamPolicy kernel with team scratch memory (per-team state: fused, two kernels' "
                                 "ScratchViews would share one team allocation and their barriers would span both "
                                 "bodies)", frozenset())
    if spec.policy == "team":
        return KernelPattern({}, "a TeamPolicy kernel (team threads share data)", frozenset())
    if spec.space == "Debug":
        return KernelPattern({}, "runs in the Debug space", frozenset())
    found = analyse(lowered(src, spec))
    threads = names[:spec.rank]
    if set(threads) & found.assigned:
        return KernelPattern({}, "the kernel reassigns its thread index", frozenset())
    if found.returns:
        return KernelPattern({}, "the kernel body returns early (a return would skip the fused kernels after it)",
                             frozenset())
    offsets = set()
    params = {}
    for name in (n for n, t in spec.params if t.is_view):
        opaque = None
        rows = []
        accesses = [a for a in found.accesses if a.view == name]
        for acc in accesses:
            if acc.kind == "atomic":
                opaque = f"atomic update of '{name}'"
                continue
            if acc.kind == "opaque":
                opaque = f"'{name}' is passed to a helper function"
                continue
            row = []
            for thread in threads:
                matched = set()
                for dim, index in enumerate(acc.indices):
                    off = _match(index, thread)
                    if off is not None:
                        matched.add((dim, off))
                        if off[0] == "p":
                            offsets.add(off[1])
                row.append(frozenset(matched))
            rows.append((tuple(row), acc.text))
        params[name] = ParamPattern(any(a.reads for a in accesses), any(a.writes for a in accesses), opaque,
                                    tuple(rows))
    return KernelPattern(params, None, frozenset(offsets))
