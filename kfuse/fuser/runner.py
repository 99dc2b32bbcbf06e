"""Run a trace partition: plan groups (cached per partition shape), launch them, deliver Futures.

A repeated partition (the same kernels with the same argument structure, e.g. every iteration of a
time-step loop) hits the plan cache and the fused-kernel cache, so it costs neither re-analysis nor
re-compilation.
"""
from __future__ import annotations

import itertools
import time

from ..codegen.kernel import generate
from ..compiler import fused as fused_store
from ..errors import KfuseError
from ..frontend.access import summarize
from ..runtime.dispatch import execute, writes_of
from ..runtime.launch import CompiledKernel, policy_slots
from ..transforms import manager as transforms
from ..transforms.ir import FusedKernel, scalar_key
from ..tracer.failures import is_fault
from ..tracer.trace import _Ranges, footprint
from . import build, explain, persist, planner
from .safety import pattern_of

_uids = itertools.count(1)
_plans: dict = {}
_fused: dict = {}
_MAX_CACHED = 4096  # plans/fused kernels kept; a program whose ranges change every step must not grow forever


def _uid(prepared) -> int:
    """A process-unique number for a specialisation (never ``id()``, which Python reuses)."""
    uid = prepared.__dict__.get("_fuse_uid")
    if uid is None:
        uid = prepared.__dict__["_fuse_uid"] = next(_uids)
    return uid


def _alias_pattern(calls) -> tuple:
    """Which View arguments are the same storage, and which distinct storages overlap in memory."""
    ids: dict = {}
    pattern = []
    ranges = []
    for call in calls:
        for (_, t), v in zip(call.prepared.spec.params, call.args):
            if t.is_view:
                key = (v.ptr, v.shape, v.strides, v.dtype)
                if key not in ids:
                    ids[key] = len(ids)
                    ranges.append((v.bounds, ids[key]))
                pattern.append(ids[key])
    ranges.sort()
    overlaps = []
    for i, ((lo, hi), a) in enumerate(ranges):  # sweep: pairs of distinct storages whose bytes overlap
        for (lo2, hi2), b in ranges[i + 1:]:
            if lo2 >= hi:
                break
            if lo2 < hi and lo < hi2:
                overlaps.append((min(a, b), max(a, b)))
    return tuple(pattern), tuple(sorted(overlaps))


def _shape_key(calls) -> tuple:
    position = {id(c): i for i, c in enumerate(calls)}
    parts = []
    for call in calls:
        pat = pattern_of(call.prepared)
        offsets = tuple(call.args[[n for n, _ in call.prepared.spec.params].index(p)]
                        for p in sorted(pat.offset_params))
        producers = tuple(position.get(id(f.call), -1) if f.call is not None else -1 for _, f in call.futures)
        parts.append((_uid(call.prepared), type(call.policy), call.policy.bounds, offsets, producers))
    return tuple(parts), _alias_pattern(calls)


def _scalar_pattern(args: tuple) -> tuple:
    """Which scalar arguments are equal (argument fusion merges them), as class numbers. Keyed like argument
    fusion (fix, tests: keyed by value, S=0.0 and S=-0.0 shared a kernel that merged them)."""
    classes: dict = {}
    return tuple(classes.setdefault(scalar_key(a), len(classes)) for a in args if not hasattr(a, "ptr"))


def _fused_kernel(group, args: tuple):
    """The compiled fused kernel for ``group`` and, per parameter, which argument it takes."""
    names = transforms.enabled()
    key = (tuple(_uid(c.prepared) for c in group), _alias_pattern(group), _scalar_pattern(args), names)
    entry = _fused.get(key)
    if entry is None:
        digest = persist.key(group, key[1], key[2], names)
        stored = fused_store.load(digest)
        if stored is None:
            source, spec, name = build.build(group)
            kernel = FusedKernel(source, spec, tuple(range(len(args))), args)
            kernel, _ = transforms.apply(kernel, names)
            stored = (generate(kernel.source, kernel.spec, name, kernel.restrict), kernel.spec, kernel.arg_index,
                      writes_of(summarize(kernel.source, kernel.spec), kernel.spec))
            fused_store.store(digest, stored)
        generated, spec, arg_index, writes = stored
        compiled = CompiledKernel(generated, spec, fused=True, writes=writes)
        if len(_fused) >= _MAX_CACHED:
            _fused.clear()  # compiled libraries stay cached on disk; this only drops in-process handles
        entry = _fused[key] = (compiled, arg_index)
    return entry


def run_partition(calls: list, failures, fuse: bool = True) -> None:
    """Run ``calls`` (a trace partition, in trace order) as planned groups, recording failures in ``failures``.

    A failing call loses only what depends on it: a fused group that fails before running is retried
    member by member, so the error names the culprit; a call that touches bytes a failed call would have
    written (or takes its Future) is not run and passes the same failure on (tracer/failures.py).
    """
    start = time.perf_counter()
    if fuse and len(calls) > 1:
        key = _shape_key(calls)
        result = _plans.get(key)
        cached = result is not None
        if result is None:
            if len(_plans) >= _MAX_CACHED:
                _plans.clear()
            result = _plans[key] = planner.plan(calls)
    else:
        result, cached = planner.Plan(groups=[[i] for i in range(len(calls))]), False
    record = explain.record(calls, result, time.perf_counter() - start, cached, fuse)
    for group_indices in result.groups:
        group = [calls[i] for i in group_indices]
        if len(group) > 1 and not any(failures.blocking(c) for c in group):
            try:
                _run_fused(group, record)
                continue
            except KfuseError as exc:
                if is_fault(exc):
                    record.notes.append(f"group {group_indices[0]}..{group_indices[-1]} faulted: {_first_line(exc)}")
                    _after_fault(group_indices, group, exc, failures, record)
                    continue
                record.notes.append(f"group {group_indices[0]}..{group_indices[-1]} failed fused, ran its calls "
                                    f"one by one: {_first_line(exc)}")
        for index, call in zip(group_indices, group):
            _run_single(index, call, failures, record)


def _after_fault(indices: list, group: list, exc, failures, record) -> None:
    """A fused kernel reported a fault. Kernels finish their launch after a fault (the faulting operation
    yields 0) and still return their reductions, so every member ran: what the culprit wrote, and what
    members touching those bytes computed, is lost; the other members' results are right."""
    member = getattr(exc, "member", None)
    if member is not None and 0 <= member < len(group):
        culprits = [group[member]]
    else:  # a fault in a helper names the workunit only; one that names no member loses the whole group
        culprits = [c for c in group if c.prepared.workunit.__name__ == getattr(exc, "workunit", None)] or group
    failure = failures.fail(culprits[0], exc)
    values = iter(getattr(exc, "results", ()))
    lost = _Ranges()
    for call in group:
        value = next(values, None) if call.op == "reduce" else None
        reads, writes = footprint(call)
        if call in culprits or lost.hits(reads) or lost.hits(writes):
            failures.poison(call, failure)
            lost.add_all(writes)
        elif call.result is not None:
            call.result.set_result(value)


def _run_fused(group: list, record) -> None:
    args = tuple(a for c in group for a in c.bound_args())
    kernel, arg_index = _fused_kernel(group, args)
    results = iter(kernel.launch(policy_slots(group[0].policy), tuple(args[i] for i in arg_index)))
    values = [next(results) if c.op == "reduce" else None for c in group]
    record.fused_names.append(kernel.name)
    for call, value in zip(group, values):
        if call.result is not None:
            call.result.set_result(value)


def _run_single(index: int, call, failures, record) -> None:
    blocked = failures.blocking(call)
    if blocked is not None:
        record.notes.append(f"call {index} ({call.prepared.name}) not run: it needs what {blocked.where()} "
                            "would have produced")
        failures.poison(call, blocked)
        return
    try:
        value = execute(call)
    except KfuseError as exc:
        record.notes.append(f"call {index} ({call.prepared.name}) failed: {_first_line(exc)}")
        failures.fail(call, exc)
        return
    if call.result is not None:
        call.result.set_result(value)


def _culprit(group: list, exc: KfuseError):
    """The member a fault names (by workunit), else the group's first call."""
    name = getattr(exc, "workunit", None)
    return next((c for c in group if c.prepared.workunit.__name__ == name), group[0])


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
