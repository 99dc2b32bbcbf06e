"""Replay of a repeated partition: a time-step loop flushes the same calls over the same memory every step.

``signature`` reads each call once, without building anything, and two partitions with equal signatures have
equal graphs (fuser/graph.py), hence equal plans and equal fused-kernel keys up to what is read at every flush
(the enabled transforms and the scratch Views, tracer/liveness.py). The runtime keeps, per signature, a
``Replay``: the graph, the plan, and each group's key without those parts, so a repeated partition costs one
pass over its calls and a lookup.

What a graph node takes from a call, and where the signature has it:
  kernel number, name, space, helpers, safety pattern, View dtypes -- the specialisation (``Prepared``, by
  identity; the entry keeps it alive, so no other specialisation can take its identity);
  policy kind and bounds -- ``graph.policy_key``;
  storage numbering and overlaps -- each View argument's pointer, shape and strides (with the dtype, its
  storage key; its byte bounds follow from them);
  offsets -- the values of the scalar arguments the safety analysis reads as offsets;
  Future producers -- none: a partition with a call that takes a Future is not replayed.
A fused key adds which scalar arguments are equal: the signature numbers the partition's scalars by
``transforms.ir.scalar_key`` (a group's pattern is that numbering restricted to its calls).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import copysign

from .graph import Graph, policy_key, static


@dataclass(frozen=True)
class Replay:
    """What a partition's flush reuses: ``keys[g]``: group g's fused key without transforms and scratch
    (``pipeline.group_key``), None for a single call or a group whose key waits for a Future's value."""

    graph: Graph
    plan: object  # planner.Plan
    keys: tuple
    sizes: dict = field(default_factory=dict, compare=False, repr=False)  # group -> its size class (profit.py)


def _layout(prepared) -> tuple:
    """(View positions, scalar positions, offset positions) of a specialisation's arguments, kept on it (the
    signature looks there first)."""
    offsets = static(prepared)[4].offset_params
    params = prepared.spec.params
    found = prepared.__dict__["_replay_layout"] = (
        tuple(i for i, (_, t) in enumerate(params) if t.is_view),
        tuple(i for i, (_, t) in enumerate(params) if not t.is_view),
        tuple(i for i, (name, t) in enumerate(params) if not t.is_view and name in offsets))
    return found


def signature(calls: list, bound: int, align: str = "none") -> tuple | None:
    """A flat tuple equal for two partitions only if their graphs are equal (made under ``align``, graph.of) and
    their scalars are equal in the same pattern (the specialisation at the head of each call's part fixes how many
    values follow it); None when a call takes a Future."""
    parts = [bound, align]
    append = parts.append
    classes: dict = {}
    number = classes.setdefault
    last_policy = last_key = None
    for call in calls:
        if call.futures:
            return None
        prepared, args, policy = call.prepared, call.args, call.policy
        if policy is not last_policy:
            last_policy, last_key = policy, policy_key(policy)
        append(prepared)
        append(last_key)
        views, scalars, offsets = prepared.__dict__.get("_replay_layout") or _layout(prepared)
        for i in views:
            view = args[i]
            append(view.ptr)
            append(view.shape)
            append(view.strides)
        for i in scalars:
            value = args[i]  # classes as transforms.ir.scalar_key draws them (0.0 and -0.0 apart)
            append(number((type(value), value, copysign(1.0, value) if isinstance(value, float) else 0),
                          len(classes)))
        for i in offsets:
            append(args[i])
    return tuple(parts)
