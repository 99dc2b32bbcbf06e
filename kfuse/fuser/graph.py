"""A trace partition as the planner sees it: calls without their Views.

Each call becomes a ``Node``: its kernel (a process-unique number and the safety analysis of its
specialisation), its policy, which storage each View argument is, the values of the scalars the analysis
depends on, and which earlier calls' Futures it takes. Storages are numbered in order of first use
(Views with the same pointer, extents, strides and element type are one storage), which storages'
bytes intersect (``Graph.overlap``), and where a storage that shares a run of memory with others lies in it
(``Graph.frames``: how its elements line up with theirs). Nothing in a graph refers to memory addresses, so an
equal graph means an equal plan: the graph itself is the plan cache's key, and tests can write graphs by
hand (tests/test_schedule.py) without Views, compilers or kernels.
"""
from __future__ import annotations

import ast
import hashlib
import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

from ..spaces import on_device
from ..views import apart, lattice, storage_key
from .safety import pattern_of

_uids = itertools.count(1)


class Node(NamedTuple):
    """One call (a tuple: hashing and comparing graphs, the plan cache's keys, runs at C speed)."""

    kernel: int  # process-unique number of the specialisation (never ``id()``, which Python reuses)
    name: str
    space: str
    policy: str  # "RangePolicy", "MDRangePolicy", "TeamPolicy"
    bounds: tuple  # ((begin, end), ...) per dimension; (league_size, team_size) for a TeamPolicy
    views: tuple  # ((parameter, storage number), ...) of the View parameters, in parameter order
    offsets: tuple = ()  # ((scalar parameter, value or None while it is a pending Future), ...)
    producers: tuple = ()  # partition indices of the calls whose Futures this call takes (-1: done elsewhere)
    helpers: tuple = ()  # ((helper name, digest of its resolved code), ...)
    op: str = "for"  # "for", "reduce" or "scan"
    size: int = 1  # syntax nodes of the kernel's body: what a fused kernel's code grows by (fuser/planner.py)


@dataclass(frozen=True)
class Graph:
    nodes: tuple
    # Which storages share bytes, in one of two forms. ``overlaps`` (graphs written by hand in tests): the pairs
    # {(a, b), a <= b} ((a, a): not empty). ``extents`` (graphs of calls): per storage, its cluster of chained
    # byte ranges and the ranks of its first and past-the-end byte there (``_ranks``), so any pair's overlap follows
    # and the graph stays linear in size when every storage overlaps every other (subviews of one array); then its
    # lattice (views.lattice): byte step, element size and phase in the cluster, so two interleaved Views whose
    # elements never share a byte (columns of one matrix) do not overlap.
    overlaps: frozenset = frozenset()
    # each node's safety analysis (fuser/safety.py); a function of its kernel number, so not part of the key
    patterns: tuple = field(default=(), compare=False, repr=False)
    extents: tuple = ()
    # per storage, None, or where one of a cluster of several lies in it (``Frame``): the planner lines up two
    # different Views of one memory by it (fuser/planner.py ``_aligned``)
    frames: tuple = ()

    def overlap(self, a: int, b: int) -> bool:
        if self.extents:
            (ca, lo, hi, step, size, phase), (cb, lo2, hi2, step2, size2, phase2) = self.extents[a], self.extents[b]
            return ca == cb and lo < hi2 and lo2 < hi and not apart(phase2 - phase, (step, size), (step2, size2))
        return (min(a, b), max(a, b)) in self.overlaps

    def overlap_pairs(self) -> frozenset:
        """The pairs form of the overlaps, whichever form the graph holds (for tests and inspection)."""
        if not self.extents:
            return self.overlaps
        n = len(self.extents)
        return frozenset((a, b) for a in range(n) for b in range(a, n) if self.overlap(a, b))

    def pattern_of(self, indices) -> tuple:
        """The aliasing of the calls ``indices`` alone, numbered afresh (a fused kernel depends on it):
        (storage of each View argument in order, overlapping pairs among them)."""
        numbers: dict = {}
        storages = tuple(numbers.setdefault(s, len(numbers)) for i in indices for _, s in self.nodes[i].views)
        present = list(numbers)
        pairs = tuple((numbers[a], numbers[b]) for i, a in enumerate(present) for b in present[i + 1:]
                      if self.overlap(a, b))
        return storages, tuple(sorted(pairs))


class Frame(NamedTuple):
    """A View's place in its cluster of memory: its first element's byte offset from the cluster's first byte, its
    extents, its strides in bytes and its element size. Offsets from the cluster's first byte keep the graph free of
    addresses."""

    start: int
    shape: tuple
    strides: tuple
    itemsize: int

    def row(self, dim: int) -> tuple | None:
        """(stride, row) where the View's elements lie in rows of ``stride`` bytes (its byte stride along ``dim``)
        counted from the cluster's first byte, index ``x`` along ``dim`` in row ``row + x`` whatever its other
        indices: each element's bytes lie in that row (its other dimensions' reach and its own size fit between
        its start and the row's end). None where they do not, or ``dim`` does not step forward."""
        stride = self.strides[dim]
        if stride <= 0:
            return None
        low = high = self.start % stride
        for d, (n, step) in enumerate(zip(self.shape, self.strides)):
            if d != dim:
                reach = (n - 1) * step
                low, high = low + min(reach, 0), high + max(reach, 0)
        if low < 0 or high + self.itemsize > stride:
            return None
        return stride, self.start // stride


def static(prepared) -> tuple:
    """What a call's node takes from its specialisation alone, worked out once per specialisation:
    (kernel number, name, space, helpers, safety pattern, code size)."""
    found = prepared.__dict__.get("_graph_static")
    if found is None:
        found = prepared.__dict__["_graph_static"] = (
            next(_uids), prepared.name, prepared.spec.space, _helpers(prepared.source), pattern_of(prepared),
            sum(1 for _ in ast.walk(prepared.source.tree)))
    return found


def _helper_digest(source) -> str:
    digest = source.__dict__.get("_kfuse_digest")
    if digest is None:
        text = ast.dump(source.tree) + repr(sorted((k, repr(v)) for k, v in source.annotations.items()))
        digest = source.__dict__["_kfuse_digest"] = hashlib.sha1(text.encode()).hexdigest()
    return digest


def _helpers(source) -> tuple:
    return tuple(sorted((name, _helper_digest(h)) for name, h in source.helpers.items()))


def policy_key(policy) -> tuple:
    """(kind, bounds) of a policy: what a node takes from it."""
    kind = type(policy).__name__
    if kind == "TeamPolicy":
        return kind, (policy.league_size, policy.team_size)
    return kind, policy.bounds


def of(calls, align: str = "none") -> Graph:
    """The graph of ``calls`` (a partition, in trace order); with the storages' frames where ``align``
    (config.ALIGN_VIEWS's value) lets the planner line up different Views of one memory in it."""
    storages: dict = {}
    memory = []  # per storage, in numbering order: its byte bounds
    lattices = []  # and its (byte step, element size)
    firsts = []  # and its first View
    position = {id(c): i for i, c in enumerate(calls)}
    nodes, patterns = [], []
    for call in calls:
        prepared = call.prepared
        kernel, kernel_name, space, helpers, pattern, size = static(prepared)
        views, offsets = [], []
        for (param, t), value in zip(prepared.spec.params, call.args):
            if t.is_view:
                key = storage_key(value)
                storage = storages.get(key)
                if storage is None:
                    storage = storages[key] = len(storages)
                    memory.append(value.bounds)
                    lattices.append(lattice(value))
                    firsts.append(value)
                views.append((param, storage))
            elif param in pattern.offset_params:
                offsets.append((param, None if value is None else int(value)))
        producers = tuple(position.get(id(f.call), -1) if f.call is not None else -1 for _, f in call.futures)
        kind, bounds = policy_key(call.policy)
        nodes.append(Node(kernel, kernel_name, space, kind, bounds, tuple(views), tuple(offsets), producers, helpers,
                          prepared.spec.op, size))
        patterns.append(pattern)
    clusters = _clusters(memory)
    aligned = align == "all" or align == "device" and all(on_device(n.space) for n in nodes)
    return Graph(tuple(nodes), patterns=tuple(patterns), extents=_ranks(memory, lattices, clusters),
                 frames=_frames(clusters, memory, firsts) if aligned else ())


def _clusters(memory: list) -> list:
    """Runs of storages whose byte bounds chain into each other (lists of storage numbers, each in order of its
    first byte); empty storages are in none."""
    clusters, reach = [], None
    for lo, hi, s in sorted((lo, hi, s) for s, (lo, hi) in enumerate(memory) if lo < hi):
        if reach is None or lo >= reach:
            clusters.append([])
            reach = hi
        reach = max(reach, hi)
        clusters[-1].append(s)
    return clusters


def _frames(clusters: list, memory: list, firsts: list) -> tuple:
    """Each storage's ``Frame`` where it shares a cluster with other storages, else None: a storage alone in its
    memory needs none, and leaving it out keeps graphs equal for equal calls on memory laid out anew."""
    frames = [None] * len(memory)
    for members in clusters:
        if len(members) > 1:
            start = memory[members[0]][0]
            for s in members:
                view = firsts[s]
                size = view.dtype.np.itemsize
                frames[s] = Frame(view.ptr - start, view.shape, tuple(t * size for t in view.strides), size)
    return tuple(frames)


def _ranks(memory: list, lattices: list, clusters: list | None = None) -> tuple:
    """Each storage's byte bounds as (cluster, rank of lo, rank of hi, step, element size, phase): a cluster is a
    run of storages whose bounds chain into each other (``_clusters``, numbered by its first storage), ranks count
    among the cluster's own bounds, and the phase is its first byte's distance from the cluster's first byte modulo
    its step. Storages of different clusters never overlap, and within one the order of bounds and the lattices
    decide every overlap, so the overlaps are kept while addresses, and the order of unrelated arrays in memory,
    are not."""
    local = {}
    for members in _clusters(memory) if clusters is None else clusters:
        first = min(members)
        rank = {b: r for r, b in enumerate(sorted({b for s in members for b in memory[s]}))}
        start = memory[members[0]][0]
        local.update({s: (first, rank[memory[s][0]], rank[memory[s][1]], *lattices[s],
                          (memory[s][0] - start) % lattices[s][0]) for s in members})
    return tuple(local.get(s, (s, 0, 0, 1, 1, 0)) for s in range(len(memory)))
