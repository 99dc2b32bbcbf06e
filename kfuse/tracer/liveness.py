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

from collections import Counter

import numpy as np

from .. import buffers, refcount




def _views_of(calls: list) -> tuple:
    """(distinct Views among the calls' arguments, in order of first use, and the references to each from the
    argument tuples by id; a tuple two calls share refers to its Views once). Only the one list holds them."""
    flat = [call.args[position] for call in calls for position, _ in call.prepared.view_params]
    firsts = {id(call.args): call for call in reversed(calls)}  # the first call with each argument tuple
    held = Counter(map(id, flat)) if len(firsts) == len(calls) else \
        Counter(id(call.args[position]) for call in firsts.values() for position, _ in call.prepared.view_params)
    views = [view for view in {id(view): view for view in flat}.values() if view._array is not None]
    del flat  # GPU memory the caller owns (no ``_array``) is not countable, never scratch
    return views, held


def _per_call(calls: list, views: list) -> list:
    """Per call, its ((argument position, index into ``views``), ...)."""
    index = {id(view): n for n, view in enumerate(views)}
    return [[(position, index[id(call.args[position])]) for position, _ in call.prepared.view_params
             if id(call.args[position]) in index] for call in calls]


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
    views, held = _views_of(calls)
    if not views:
        return {}
    arrays, expected, owner, live = _owners(views)
    roots = [owner[id(v)] for v in views]
    for i in range(len(views)):
        if refcount.others(views, i) != held[id(views[i])]:
            live.add(roots[i])
    for i in range(len(arrays)):
        if refcount.others(arrays, i) != expected[id(arrays[i])]:
            live.add(owner[id(arrays[i])])
    if live.issuperset(roots):
        return {}  # the program holds every View (a time-step loop's state): nothing is scratch
    per_call = _per_call(calls, views)
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
