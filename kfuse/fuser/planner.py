"""Greedy grouping of a trace partition, in trace order (as PyFuser), with a reason at every boundary.

A pure function of the partition's graph (fuser/graph.py): no Views, no kernels, no compiler.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .graph import Graph, Node


class Split(enum.Enum):
    """Why a call starts a new group."""

    RANGE = "different range"
    SPACE = "different execution space"
    CONSUMER = "reduction consumer"
    HELPER_CLASH = "two helpers with one name"
    KERNEL = "kernel cannot be fused"
    ALIASED_VIEWS = "shared memory through different views"
    OPAQUE = "access that cannot be analysed"
    NOT_THREAD_LOCAL = "access not local to its thread"


@dataclass(frozen=True)
class Reason:
    kind: Split
    detail: str  # the sentence ``explain()`` shows

    def __str__(self) -> str:
        return self.detail


@dataclass
class Plan:
    groups: list = field(default_factory=list)  # lists of indices into the partition
    boundaries: list = field(default_factory=list)  # (index of the call that starts a new group, Reason)


def _policy_text(node: Node) -> str:
    if node.policy == "TeamPolicy":
        return f"TeamPolicy({node.bounds[0]}, {node.bounds[1]})"
    return " x ".join(f"[{b}, {e})" for b, e in node.bounds)


def start_reason(graph: Graph, group: list, index: int) -> Reason | None:
    """Why call ``index`` cannot join ``group`` (None: it can)."""
    nodes = graph.nodes
    node, first = nodes[index], nodes[group[0]]
    if node.policy != first.policy or node.bounds != first.bounds:
        return Reason(Split.RANGE, f"different range: {_policy_text(first)} vs {_policy_text(node)}")
    if node.space != first.space:
        return Reason(Split.SPACE, f"different execution space: {first.space} vs {node.space}")
    for producer in node.producers:
        if producer in group:
            return Reason(Split.CONSUMER, f"reduction consumer: uses the result of {nodes[producer].name} "
                                          "from this group")
    helpers = dict(node.helpers)
    for i in group:
        for name, digest in nodes[i].helpers:
            if helpers.get(name, digest) != digest:
                return Reason(Split.HELPER_CLASH, f"two different helper functions are both named '{name}'")
        reason = pair_conflict(graph, i, index)
        if reason:
            return reason
    return None


def plan(graph: Graph) -> Plan:
    result = Plan()
    group: list = []
    for index in range(len(graph.nodes)):
        if group:
            reason = start_reason(graph, group, index)
            if reason is None:
                group.append(index)
                continue
            result.groups.append(group)
            result.boundaries.append((index, reason))
        group = [index]
    if group:
        result.groups.append(group)
    return result


def unfused(count: int) -> Plan:
    """Every one of ``count`` calls its own group (fusion off, or a partition of one call)."""
    return Plan(groups=[[i] for i in range(count)])


def pair_conflict(graph: Graph, first: int, second: int) -> Reason | None:
    """None if calls ``first`` then ``second`` may run as one kernel (the proof is in fuser/safety.py's docstring)."""
    a, b = graph.nodes[first], graph.nodes[second]
    pa, pb = graph.patterns[first], graph.patterns[second]
    for node, pat in ((a, pa), (b, pb)):
        if pat.refuse:
            return Reason(Split.KERNEL, f"{node.name}: {pat.refuse}")
    rank = len(a.bounds)
    for na, sa in a.views:
        ma = pa.params[na]
        for nb, sb in b.views:
            mb = pb.params[nb]
            if not (ma.write or mb.write) or not graph.overlap(sa, sb):
                continue
            label = na if na == nb else f"{na}/{nb}"
            if sa != sb:
                return Reason(Split.ALIASED_VIEWS, f"'{label}' share memory through different views (e.g. a "
                                                   "subview), cannot align elements")
            for m in (ma, mb):
                if m.opaque:
                    return Reason(Split.OPAQUE, f"unsafe access to '{label}': {m.opaque}")
            for k in range(rank):
                common, seen = None, []
                for node, m in ((a, ma), (b, mb)):
                    values = dict(node.offsets)
                    for row, text in m.accesses:
                        here = {(d, _resolve(off, values)) for d, off in row[k]}
                        common = here if common is None else common & here
                        if not common:
                            return Reason(Split.NOT_THREAD_LOCAL, _unsafe_text(label, node, text, seen, k))
                        seen.append((node.name, text))
    return None


def _resolve(off, values: dict):
    """An offset's value; one still pending as a Future is a fresh object, equal to nothing."""
    kind, value = off
    if kind == "c":
        return value
    found = values[value]
    return object() if found is None else found


def _unsafe_text(label, node, text, seen, k) -> str:
    """Name the access that breaks thread-locality, against the accesses it was compared with."""
    earlier = ", ".join(f"{t} ({n})" for n, t in list(dict.fromkeys(seen))[:3])
    what = f"{node.name} uses {text}"
    if seen:
        return (f"unsafe access to '{label}': {what}, not the same one-to-one function of thread index {k} as "
                f"{earlier}")
    return f"unsafe access to '{label}': {what}, which is not a one-to-one function of thread index {k}"
