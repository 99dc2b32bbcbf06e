"""A trace partition as the planner sees it: calls without their Views.

Each call becomes a ``Node``: its kernel (a process-unique number and the safety analysis of its
specialisation), its policy, which storage each View argument is, the values of the scalars the analysis
depends on, and which earlier calls' Futures it takes. Storages are numbered in order of first use
(Views with the same pointer, extents, strides and element type are one storage), and ``overlaps`` lists
the pairs of distinct storages whose bytes intersect. Nothing in a graph refers to memory addresses, so an
equal graph means an equal plan: the graph itself is the plan cache's key, and tests can write graphs by
hand (tests/test_schedule.py) without Views, compilers or kernels.
"""
from __future__ import annotations

import ast
import hashlib
import itertools
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from ..views import storage_key
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


@dataclass(frozen=True)
class Graph:
    nodes: tuple
    overlaps: frozenset = frozenset()  # {(storage a, storage b), a <= b}: storages sharing bytes ((a, a): not empty)
    # each node's safety analysis (fuser/safety.py); a function of its kernel number, so not part of the key
    patterns: tuple = field(default=(), compare=False, repr=False)

    def overlap(self, a: int, b: int) -> bool:
        return (min(a, b), max(a, b)) in self.overlaps

    def pattern_of(self, indices) -> tuple:
        """The aliasing of the calls ``indices`` alone, numbered afresh (a fused kernel depends on it):
        (storage of each View argument in order, overlapping pairs among them)."""
        numbers: dict = {}
        storages = tuple(numbers.setdefault(s, len(numbers)) for i in indices for _, s in self.nodes[i].views)
        neighbours = self._neighbours
        pairs = {(min(numbers[a], numbers[b]), max(numbers[a], numbers[b]))
                 for a in numbers for b in neighbours.get(a, ()) if b in numbers}
        return storages, tuple(sorted(pairs))

    @cached_property
    def _neighbours(self) -> dict:
        """Storage -> the other storages it overlaps: a group's pairs without a pass over the whole partition's
        (subviews of one array all overlap: thousands of pairs in a loop of slice statements)."""
        found: dict = {}
        for a, b in self.overlaps:
            if a != b:
                found.setdefault(a, []).append(b)
                found.setdefault(b, []).append(a)
        return found


def static(prepared) -> tuple:
    """What a call's node takes from its specialisation alone, worked out once per specialisation:
    (kernel number, name, space, helpers, safety pattern)."""
    found = prepared.__dict__.get("_graph_static")
    if found is None:
        found = prepared.__dict__["_graph_static"] = (next(_uids), prepared.name, prepared.spec.space,
                                                      _helpers(prepared.source), pattern_of(prepared))
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


def of(calls) -> Graph:
    """The graph of ``calls`` (a partition, in trace order)."""
    storages: dict = {}
    extents = []
    position = {id(c): i for i, c in enumerate(calls)}
    nodes, patterns = [], []
    for call in calls:
        prepared = call.prepared
        kernel, kernel_name, space, helpers, pattern = static(prepared)
        views, offsets = [], []
        for (param, t), value in zip(prepared.spec.params, call.args):
            if t.is_view:
                key = storage_key(value)
                storage = storages.get(key)
                if storage is None:
                    storage = storages[key] = len(storages)
                    extents.append((value.bounds, storage))
                views.append((param, storage))
            elif param in pattern.offset_params:
                offsets.append((param, None if value is None else int(value)))
        producers = tuple(position.get(id(f.call), -1) if f.call is not None else -1 for _, f in call.futures)
        kind, bounds = policy_key(call.policy)
        nodes.append(Node(kernel, kernel_name, space, kind, bounds, tuple(views), tuple(offsets), producers, helpers))
        patterns.append(pattern)
    return Graph(tuple(nodes), _overlapping(extents), tuple(patterns))


def _overlapping(extents: list) -> frozenset:
    """Pairs of storages whose byte ranges intersect (a sweep over ranges sorted by start)."""
    extents.sort()
    pairs = {(a, a) for (lo, hi), a in extents if lo < hi}
    for i, ((lo, hi), a) in enumerate(extents):
        for (lo2, hi2), b in extents[i + 1:]:
            if lo2 >= hi:
                break
            if lo < hi2 and lo2 < hi:
                pairs.add((min(a, b), max(a, b)))
    return frozenset(pairs)
