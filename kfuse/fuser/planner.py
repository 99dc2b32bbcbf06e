"""Greedy grouping of a trace partition, in trace order (as PyFuser), with a reason at every boundary."""
from __future__ import annotations

from dataclasses import dataclass, field

from .build import same_helper
from .safety import pair_conflict


@dataclass
class Plan:
    groups: list = field(default_factory=list)  # lists of indices into the partition
    boundaries: list = field(default_factory=list)  # (index of the call that starts a new group, reason)


def _policy_text(policy) -> str:
    bounds = policy.bounds
    return " x ".join(f"[{b}, {e})" for b, e in bounds) if type(policy).__name__ != "TeamPolicy" else \
        f"TeamPolicy({policy.league_size}, {policy.team_size})"


def _start_reason(calls, group, call) -> str | None:
    """Why ``call`` cannot join ``group`` (None: it can)."""
    first = calls[group[0]]
    if type(call.policy) is not type(first.policy) or call.policy.bounds != first.policy.bounds:
        return f"different range: {_policy_text(first.policy)} vs {_policy_text(call.policy)}"
    if call.prepared.spec.space != first.prepared.spec.space:
        return f"different execution space: {first.prepared.spec.space} vs {call.prepared.spec.space}"
    members = {id(calls[i]) for i in group}
    for _, fut in call.futures:
        if fut.call is not None and id(fut.call) in members:
            return f"reduction consumer: uses the result of {fut.call.prepared.name} from this group"
    for i in group:
        for name, helper in call.prepared.source.helpers.items():
            other = calls[i].prepared.source.helpers.get(name)
            if other is not None and not same_helper(other, helper):
                return f"two different helper functions are both named '{name}'"
        reason = pair_conflict(calls[i], call)
        if reason:
            return reason
    return None


def plan(calls: list) -> Plan:
    result = Plan()
    group: list = []
    for index, call in enumerate(calls):
        if group:
            reason = _start_reason(calls, group, call)
            if reason is None:
                group.append(index)
                continue
            result.groups.append(group)
            result.boundaries.append((index, reason))
        group = [index]
    if group:
        result.groups.append(group)
    return result
