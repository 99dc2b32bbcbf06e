"""Greedy grouping of a trace partition, in trace order (as PyFuser), with a reason at every boundary.

A pure function of the partition's graph (fuser/graph.py) and the group bound: no Views, no kernels, no compiler.

Linear in the number of calls: a group holds at most ``max_group`` calls and ``max_group * CODE_PER_CALL`` syntax
nodes of kernel bodies (so a kernel's compile time stays bounded: 50 one-line NSTREAM updates are one kernel, six
long force kernels fill one), and a call joining it is checked only against members that could conflict with it
(that share memory one of them writes, or a helper's name), one per distinct signature (kernel, storages,
offsets), with each pair of distinct signatures proved once per plan (``_Checker``); every decision and reason is
the one a check against every member in order would give. A time-step loop's group therefore costs one lookup per
call, and a group that reaches the bound ends on a whole number of its repeating steps, so the loop becomes the
same group over and over (one fused kernel, built and compiled once).
"""
from __future__ import annotations

import enum
from collections import Counter
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
    GROUP_SIZE = "group size limit"
    REUSE = "a repeated group's kernel reused"

MAX_GROUP = 64  # default bound on calls per group (config.MAX_GROUP, KFUSE_MAX_GROUP)
CODE_PER_CALL = 64  # syntax nodes of kernel body a group may hold per call of its bound (a typical kernel's)


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
    parts: dict = field(default_factory=dict)  # group number -> calls per part, for a horizontal group


def _policy_text(node: Node) -> str:
    if node.policy == "TeamPolicy":
        return f"TeamPolicy({node.bounds[0]}, {node.bounds[1]})"
    return " x ".join(f"[{b}, {e})" for b, e in node.bounds)


def _signature(node: Node) -> tuple:
    """What a member's checks against a newcomer depend on: equal signatures give equal answers."""
    return node.kernel, node.views, node.offsets


class _Checker:
    """What one plan's checks share: pairwise safety proved once per pair of distinct signatures, and what each
    call touches and writes."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.memo: dict = {}
        self.found: dict = {}  # call -> ``storages``'s answer (asked again by each group that looks ahead past it)

    def pair(self, first: int, second: int) -> Reason | None:
        nodes = self.graph.nodes
        key = (_signature(nodes[first]), _signature(nodes[second]))
        try:
            return self.memo[key]
        except KeyError:
            reason = self.memo[key] = pair_conflict(self.graph, first, second)
            return reason

    def storages(self, index: int) -> tuple:
        """(storages call ``index`` touches, those it writes); None if its kernel cannot fuse at all."""
        try:
            return self.found[index]
        except KeyError:
            pass
        pattern = self.graph.patterns[index]
        if pattern.refuse:
            found = None
        else:
            views = self.graph.nodes[index].views
            found = [s for _, s in views], [s for p, s in views if pattern.params[p].write]
        self.found[index] = found
        return found


class _Group:
    """The group being formed: its members; one representative per distinct signature (the first member with
    it); and, per storage, the representatives touching and writing it, so a newcomer is checked only against
    members that share written memory with it or a helper's name (the others cannot conflict with it)."""

    def __init__(self, checker: _Checker, index: int):
        self.checker = checker
        self.members: list = []
        self.member_set: set = set()
        self.distinct: dict = {}
        self.touching: dict = {}  # storage -> representatives touching it
        self.writing: dict = {}  # storage -> representatives writing it
        self.helpers: dict = {}  # helper name -> {digest: first representative with it}
        self.whole = False  # a member's kernel cannot fuse: check everything (the group is that call alone)
        self.code = 0  # syntax nodes of its members' bodies
        self.add(index)

    def add(self, index: int) -> None:
        self.members.append(index)
        self.member_set.add(index)
        node = self.checker.graph.nodes[index]
        self.code += node.size
        sig = _signature(node)
        if sig in self.distinct:
            return
        self.distinct[sig] = index
        found = self.checker.storages(index)
        if found is None:
            self.whole = True
            return
        touched, written = found
        for s in set(touched):
            self.touching.setdefault(s, []).append(index)
        for s in set(written):
            self.writing.setdefault(s, []).append(index)
        for name, digest in node.helpers:
            self.helpers.setdefault(name, {}).setdefault(digest, index)

    def candidates(self, index: int):
        """The representatives call ``index`` might conflict with, in order of first appearance."""
        found = self.checker.storages(index)
        if found is None or self.whole:
            return self.distinct.values()
        touched, written = found
        overlap, picked = self.checker.graph.overlap, set()
        for s in touched:
            table = self.touching if s in written else self.writing
            for t, representatives in table.items():  # the group's storages: a few, however many the partition has
                if overlap(s, t):
                    picked.update(representatives)
        for name, digest in self.checker.graph.nodes[index].helpers:
            for other, rep in self.helpers.get(name, {}).items():
                if other != digest:
                    picked.add(rep)
        return sorted(picked)


def start_reason(graph: Graph, group, index: int, checker: _Checker | None = None) -> Reason | None:
    """Why call ``index`` cannot join ``group`` (a list of indices, or a ``_Group``; None: it can)."""
    if not isinstance(group, _Group):
        checker = checker or _Checker(graph)
        members, group = group, _Group(checker, group[0])
        for i in members[1:]:
            group.add(i)
    checker = group.checker
    nodes = graph.nodes
    node, first = nodes[index], nodes[group.members[0]]
    if node.policy != first.policy or node.bounds != first.bounds:
        return Reason(Split.RANGE, f"different range: {_policy_text(first)} vs {_policy_text(node)}")
    if node.space != first.space:
        return Reason(Split.SPACE, f"different execution space: {first.space} vs {node.space}")
    for producer in node.producers:
        if producer in group.member_set:
            return Reason(Split.CONSUMER, f"reduction consumer: uses the result of {nodes[producer].name} "
                                          "from this group")
    helpers = dict(node.helpers)
    for i in group.candidates(index):
        for name, digest in nodes[i].helpers:
            if helpers.get(name, digest) != digest:
                return Reason(Split.HELPER_CLASH, f"two different helper functions are both named '{name}'")
        reason = checker.pair(i, index)
        if reason:
            return reason
    return None


def _period(keys: list) -> int:
    """The shortest p with keys[i] == keys[i - p] for every i >= p (prefix function, linear)."""
    fail = [0] * len(keys)
    k = 0
    for i in range(1, len(keys)):
        while k and keys[i] != keys[k]:
            k = fail[k - 1]
        if keys[i] == keys[k]:
            k += 1
        fail[i] = k
    return len(keys) - fail[-1] if keys else 0


def _whole_steps(graph: Graph, members: list) -> int:
    """How many of a full group's ``members`` to keep: a whole number of its repeating pattern of calls (a
    time-step loop's step), so the next groups repeat it too; all of them if nothing repeats."""
    nodes = graph.nodes
    period = _period([_signature(nodes[i]) for i in members])
    return len(members) - len(members) % period if period < len(members) else len(members)


def plan(graph: Graph, max_group: int = MAX_GROUP) -> Plan:
    """Groups of at most ``max_group`` calls (0 or less: unbounded), split at every reason to, a rarer group that
    extends a repeated one split where the repeated one ends, then independent neighbours over other ranges
    joined horizontally."""
    checker = _Checker(graph)
    return _horizontal(graph, reuse(graph, vertical(graph, max_group, checker)), checker, max_group)


def vertical(graph: Graph, max_group: int = MAX_GROUP, checker: _Checker | None = None) -> Plan:
    """Groups of calls over one range whose threads touch only their own elements, in trace order, except that a
    group about to end at a call over another range takes later calls that could join it and touch no memory the
    calls they would pass touch (``_pull``)."""
    result = Plan()
    nodes = graph.nodes
    checker = checker or _Checker(graph)
    group: _Group | None = None
    index, count = 0, len(nodes)
    pulled: set = set()  # calls an earlier group took
    while index < count:
        if index in pulled:
            index += 1
            continue
        if group is not None:
            reason = start_reason(graph, group, index, checker)
            if reason is None and 0 < max_group and (max_group <= len(group.members)
                                                     or group.code + nodes[index].size > max_group * CODE_PER_CALL):
                members = group.members[:_whole_steps(graph, group.members)]
                index = members[-1] + 1
                reason = Reason(Split.GROUP_SIZE, f"group size limit: a group holds at most {max_group} calls "
                                                  f"(KFUSE_MAX_GROUP) and {max_group * CODE_PER_CALL} syntax nodes of "
                                                  "kernel code, and ends on a whole repeating step")
                result.groups.append(members)
                result.boundaries.append((index, reason))
                group = None
                continue
            if reason is None:
                group.add(index)
                index += 1
                continue
            if reason.kind is Split.RANGE:
                _pull(graph, checker, group, index, pulled, max_group)
            result.groups.append(group.members)
            result.boundaries.append((index, reason))
        group = _Group(checker, index)
        index += 1
    if group is not None:
        result.groups.append(group.members)
    return result


LOOKAHEAD = 32  # later calls a group about to end looks at (``_pull``)
MOST_PASSED = 8  # calls a pulled call may pass: each passed call costs every later candidate a check
MOST_REFUSED = 2  # calls over the group's range that could not be pulled before the look ahead gives up


def _pull(graph: Graph, checker: _Checker, group: _Group, stop: int, pulled: set, max_group: int) -> None:
    """Before ``group`` ends at call ``stop``, over another range: add to it the calls of the next ``LOOKAHEAD`` that
    could join it (``start_reason``) and that neither take a Future of, nor touch memory written by or write memory
    touched by, a call they would now run before (one left behind, from ``stop`` on; at most ``MOST_PASSED``, and
    it gives up at the ``MOST_REFUSED``-th call over the group's range it cannot take).
    Running such a call earlier changes nothing it or they compute (nor what a failure of either loses), and it lets
    interleaved independent work fuse: GaussianNB's per-class statements (a 1-element log and row sum, then a pass
    over the samples, per class) become one kernel of the small steps and one of the passes. Only where the group
    ends at another range: a group ended by a dependence (a time step's stencil) stays the step it is, so a
    time-step loop repeats one group (its kernel built once) rather than groups each holding a different part of the
    next step."""
    if group.whole:
        return
    nodes = graph.nodes
    first = nodes[group.members[0]]
    passed, touched, written = set(), [], []  # the calls left behind, and the storages they touch and write
    refused = 0
    for j in range(stop, min(len(nodes), stop + LOOKAHEAD)):
        if j in pulled:
            continue
        node, found = nodes[j], checker.storages(j)
        if found is None:
            return  # memory it may touch is unknown: nothing passes it
        if j != stop and node.policy == first.policy and node.bounds == first.bounds and node.space == first.space:
            if _room(graph, group, j, max_group) and passed.isdisjoint(node.producers) \
                    and not _conflict(graph, touched, written, *found) \
                    and start_reason(graph, group, j, checker) is None:
                group.add(j)
                pulled.add(j)
                continue
            refused += 1
            if refused == MOST_REFUSED:
                return  # (a chain of steps that each need the last: looking further costs, and finds nothing)
        if len(passed) == MOST_PASSED:
            return
        passed.add(j)
        touched += found[0]
        written += found[1]


def _room(graph: Graph, group: _Group, index: int, max_group: int) -> bool:
    """Whether call ``index`` fits ``group`` under the group bound (calls and code)."""
    return max_group <= 0 or len(group.members) < max_group and \
        group.code + graph.nodes[index].size <= max_group * CODE_PER_CALL


def reuse(graph: Graph, plan: Plan) -> Plan:
    """Split a group that begins or ends with the whole of a group the partition repeats more often (two calls or
    more), so those calls run as the repeated group's kernel. A time-step loop whose last step also computes an
    observable (ExaMiniMD: force, integrate, and at a thermo step the kinetic energy) would otherwise run that step
    as a second, longer copy of the step's code: compiled once more for one launch per flush, and slower for it
    (measured: ExaMiniMD's force + integrate + kinetic energy ran a median 14% longer than the force + integrate kernel
    of the step just before it in the same flush, with identical loop code, and not in isolation: a copy that runs
    rarely finds the branch predictors and caches cold). Splitting costs the extension one launch of its own. Splitting
    a group in order is always safe: its parts run in the calls' order."""
    nodes = graph.nodes
    signatures = [tuple(_signature(nodes[i]) for i in members) for members in plan.groups]
    counts = Counter(signatures)
    repeated = {sig: n for sig, n in counts.items() if len(sig) >= 2 and n >= 2}
    lengths = sorted({len(sig) for sig in repeated}, reverse=True)
    if not lengths:
        return plan
    result = Plan(boundaries=list(plan.boundaries))
    for members, sig in zip(plan.groups, signatures):
        cut = _reused_part(sig, counts[sig], repeated, lengths)
        if cut is None:
            result.groups.append(members)
            continue
        start, end = cut
        pieces = [p for p in (members[:start], members[start:end], members[end:]) if p]
        names = "+".join(nodes[i].name for i in members[start:end])
        for piece in pieces[1:]:
            result.boundaries.append((piece[0], Reason(Split.REUSE, (
                f"kernel reuse: {names} runs as a group {repeated[sig[start:end]]} times in this partition; its "
                "kernel serves these calls too, rather than a longer copy of the same code that runs less often"))))
        result.groups.extend(pieces)
    result.boundaries.sort(key=lambda b: b[0])
    return result


def _reused_part(sig: tuple, count: int, repeated: dict, lengths: list) -> tuple | None:
    """(start, end) of the longest repeated group, more frequent than ``sig``'s, that ``sig`` begins or ends with."""
    for length in lengths:
        if length >= len(sig):
            continue
        for start in (0, len(sig) - length):
            if repeated.get(sig[start:start + length], 0) > count:
                return start, start + length
    return None


MAX_PARTS = 8  # ranges in one horizontal group


def _horizontal(graph: Graph, plan: Plan, checker: _Checker, max_group: int) -> Plan:
    """Join consecutive groups split only by their ranges into one launch when no call of one touches memory a
    call of another writes (HFuse's horizontal fusion: the launch's threads are split between the parts, each part
    running its own calls over its own range). Only one-dimensional ``parallel_for`` groups join: a reduction's
    accumulator or a multi-dimensional range would need its own split of the threads."""
    starts = dict(plan.boundaries)
    merged = Plan()
    current, sizes, touched, written, code = None, [], [], [], 0
    for members in plan.groups:
        found = _part_memory(graph, checker, members)
        reason = starts.get(members[0])
        more = sum(graph.nodes[i].size for i in members)
        if current is not None and found is not None and reason is not None and reason.kind is Split.RANGE \
                and len(sizes) < MAX_PARTS and (max_group <= 0 or len(current) + len(members) <= max_group
                                                and code + more <= max_group * CODE_PER_CALL) \
                and graph.nodes[members[0]].space == graph.nodes[current[0]].space \
                and not _conflict(graph, touched, written, *found) and not _helper_clash(graph, current, members):
            current += members
            sizes.append(len(members))
            touched, written, code = touched + found[0], written + found[1], code + more
            continue
        if current is not None:
            _close(merged, current, sizes)
            current = None
        if reason is not None:
            merged.boundaries.append((members[0], reason))
        if found is None:
            merged.groups.append(members)  # never a part
            continue
        current, sizes, (touched, written), code = list(members), [len(members)], found, more
    if current is not None:
        _close(merged, current, sizes)
    return merged


def _close(plan: Plan, members: list, sizes: list) -> None:
    if len(sizes) > 1:
        plan.parts[len(plan.groups)] = tuple(sizes)
    plan.groups.append(members)


def _part_memory(graph: Graph, checker: _Checker, members: list) -> tuple | None:
    """(storages the group's calls touch, those they write), or None if the group cannot be a horizontal part."""
    touched, written = [], []
    for i in members:
        node = graph.nodes[i]
        found = checker.storages(i)
        if found is None or node.op != "for" or node.policy != "RangePolicy" or len(node.bounds) != 1:
            return None
        touched += found[0]
        written += found[1]
    return touched, written


def _conflict(graph: Graph, touched: list, written: list, other_touched: list, other_written: list) -> bool:
    overlap = graph.overlap
    return any(overlap(w, t) for w in written for t in other_touched) or \
        any(overlap(t, w) for t in touched for w in other_written)


def _helper_clash(graph: Graph, first: list, second: list) -> bool:
    """Two different helpers with one name (one fused kernel has one of each name)."""
    digests = {name: digest for i in first for name, digest in graph.nodes[i].helpers}
    return any(digests.get(name, digest) != digest for i in second for name, digest in graph.nodes[i].helpers)


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
                if not graph.frames:
                    return Reason(Split.ALIASED_VIEWS, f"'{label}' share memory through different views (e.g. a "
                                                       "subview), lined up element by element only where "
                                                       "KFUSE_ALIGN_VIEWS allows (off by default)")
                if ma.opaque or mb.opaque or not _aligned((a, ma, graph.frames[sa]), (b, mb, graph.frames[sb])):
                    return Reason(Split.ALIASED_VIEWS, f"'{label}' share memory through different views (e.g. a "
                                                       "subview), cannot align elements")
                continue
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


def _aligned(first: tuple, second: tuple) -> bool:
    """Whether two different Views of one memory, each (node, its ParamPattern, its Frame) in a rank-1 call, line
    up thread by thread: each View's every access indexes one same dimension by the thread index plus one same
    offset, along which the View's elements lie in rows of one byte stride (``Frame.row``: a matrix's rows, its
    columns' elements, a 1-D subview's), and thread ``t`` of both reaches the same row. An element's bytes then lie
    in its thread's row, so two threads never share a byte: a column's writes ``jll[:, c][i]`` and the row's reads
    ``jll[i, j]`` fuse, a subview read one element off its writer's does not."""
    if len(first[0].bounds) != 1:
        return False
    rows = []
    for node, pattern, frame in (first, second):
        if frame is None:
            return False
        if not pattern.accesses:
            return not (pattern.read or pattern.write)  # no element reached through this View: nothing to line up
        values = dict(node.offsets)
        found = set()
        for dim, off in frozenset.intersection(*(row[0] for row, _ in pattern.accesses)):
            place, offset = frame.row(dim), _resolve(off, values)
            if place is not None and isinstance(offset, int):
                found.add((place[0], place[1] + offset))
        rows.append(found)
    return bool(rows[0] & rows[1])


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
