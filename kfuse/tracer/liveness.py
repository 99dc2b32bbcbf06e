"""Memory that only a running partition can reach: what a fused group stores there is never read again.

A chain of array operations (``pk.sum(pk.exp(pk.subtract(x, m)))``) writes a new array at every step. When the
group runs, the program may have dropped those arrays already: nothing but the partition's own calls refers to
them. Their contents can then never be read after the partition, so the group need not store them: the
memory transform keeps the values in registers and removes the stores (kfuse/transforms/memory.py), and the
pages of the allocation are never touched.

"Nothing else refers to it" is counted exactly, with reference counts, per memory owner (the NumPy array at
the end of a View's ``base`` chain): every View over the memory must be referenced only by the argument
tuples of this partition's calls, every array on the way to the owner only by those Views (and the arrays
derived from it), and no call of a later group (which could read it) may take it. Anything else refers to the
memory — a name, a container, an array from ``np.asarray(view)``, a later pending call, a kfuse cache, a base
that is not a NumPy array — and the count differs, so the memory counts as live. Being wrong only ever
costs a store, never a value. As for escaped memory (kfuse/escape.py), weak references resurrected later and
raw pointers are not seen.
"""
from __future__ import annotations

import sys
from collections import Counter

import numpy as np

from .. import buffers


def _count(objects: list, i: int) -> int:
    return sys.getrefcount(objects[i])


_HELD_BY_LIST = _count([object()], 0)  # what _count gives for an object only one list slot refers to


def _views_of(calls: list) -> tuple:
    """(distinct Views among the calls' arguments, references to each from the argument tuples by id, and per
    call its ((argument position, index into the Views), ...)). Only numbers are kept besides the one list."""
    views, held, index, per_call, tuples = [], {}, {}, [], set()
    for call in calls:
        args, found = call.args, []
        shared = id(args) in tuples  # a tuple two calls share refers to its Views once
        tuples.add(id(args))
        for position, _ in call.prepared.view_params:
            key = id(args[position])
            if args[position]._array is None:  # GPU memory the caller owns: not countable, never scratch
                continue
            if key not in index:
                index[key] = len(views)
                views.append(args[position])
            if not shared:
                held[key] = held.get(key, 0) + 1
            found.append((position, index[key]))
        per_call.append(found)
    return views, held, per_call


def _owners(views: list) -> tuple:
    """(arrays on the base chains of the Views, the references each should have by id, the owner of each View
    and array by id, the owners whose chain ends in something that is not a NumPy array)."""
    arrays, expected, owner, uncountable = [], Counter(), {}, set()
    index, roots = {}, set()
    for view in views:
        chain = [view._array]
        while isinstance(chain[-1].base, np.ndarray):
            chain.append(chain[-1].base)
        root = id(chain[-1])
        if chain[-1].base is not None:
            uncountable.add(root)
        elif root not in roots and buffers.holds(chain[-1]):
            expected[root] += 1  # the pool's own reference to a result's memory (kfuse/buffers.py)
        roots.add(root)
        owner[id(view)] = root
        expected[id(chain[0])] += 1  # the View's own slot
        for i, array in enumerate(chain):
            owner[id(array)] = root
            if id(array) not in index:
                index[id(array)] = len(arrays)
                arrays.append(array)
                if i + 1 < len(chain):
                    expected[id(chain[i + 1])] += 1  # held once as this array's base
    return arrays, expected, owner, uncountable


def unreachable(calls: list, groups: list) -> dict:
    """For each group of two or more calls (``groups``: lists of indices into ``calls``, the running partition,
    in the order they run), the positions in the group's concatenated arguments of the Views whose memory
    nothing outside ``calls`` refers to and no later group takes: {group number: frozenset of positions}.
    Counted once, before any group runs (running a group adds no lasting reference); the caller must hold no
    View or array of the partition in a variable of its own."""
    views, held, per_call = _views_of(calls)
    if not views:
        return {}
    arrays, expected, owner, live = _owners(views)
    roots = [owner[id(v)] for v in views]
    for i in range(len(views)):
        if _count(views, i) - _HELD_BY_LIST != held.get(id(views[i]), 0):
            live.add(roots[i])
    for i in range(len(arrays)):
        if _count(arrays, i) - _HELD_BY_LIST != expected[id(arrays[i])]:
            live.add(owner[id(arrays[i])])
    last_use = {}
    for number, members in enumerate(groups):
        for i in members:
            for _, v in per_call[i]:
                last_use[roots[v]] = number
    found = {}
    for number, members in enumerate(groups):
        if len(members) < 2:
            continue
        positions, offset = [], 0
        for i in members:
            for position, v in per_call[i]:
                root = roots[v]
                if root not in live and last_use[root] == number:
                    positions.append(offset + position)
            offset += len(calls[i].args)
        if positions:
            found[number] = frozenset(positions)
    return found
