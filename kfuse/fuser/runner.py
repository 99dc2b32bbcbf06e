"""Run a trace partition: plan groups (cached per partition shape), launch them, deliver Futures.

A repeated partition (the same kernels with the same argument structure, e.g. every iteration of a
time-step loop) hits the plan cache and the fused-kernel cache, so it costs neither re-analysis nor
re-compilation.
"""
from __future__ import annotations

import itertools
import time

from ..codegen.kernel import generate
from ..errors import KfuseError
from ..frontend.access import summarize
from ..runtime.dispatch import execute, raise_deferred, writes_of
from ..runtime.launch import CompiledKernel, policy_slots
from ..transforms import manager as transforms
from ..transforms.ir import FusedKernel, scalar_key
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
        stored = persist.load(digest)
        if stored is None:
            source, spec, name = build.build(group)
            kernel = FusedKernel(source, spec, tuple(range(len(args))), args)
            kernel, _ = transforms.apply(kernel, names)
            stored = (generate(kernel.source, kernel.spec, name, kernel.restrict), kernel.spec, kernel.arg_index,
                      writes_of(summarize(kernel.source, kernel.spec), kernel.spec))
            persist.store(digest, stored)
        generated, spec, arg_index, writes = stored
        compiled = CompiledKernel(generated, spec, fused=True, writes=writes)
        if len(_fused) >= _MAX_CACHED:
            _fused.clear()  # compiled libraries stay cached on disk; this only drops in-process handles
        entry = _fused[key] = (compiled, arg_index)
    return entry


def run_partition(calls: list, fuse: bool = True) -> None:
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
        try:
            if len(group) == 1:
                value = execute(group[0])
                values = [value]
            else:
                args = tuple(a for c in group for a in c.bound_args())
                kernel, arg_index = _fused_kernel(group, args)
                results = iter(kernel.launch(policy_slots(group[0].policy), tuple(args[i] for i in arg_index)))
                values = [next(results) if c.op == "reduce" else None for c in group]
                record.fused_names.append(kernel.name)
        except KfuseError as exc:
            raise_deferred(group[0], exc)
        for call, value in zip(group, values):
            if call.result is not None:
                call.result.set_result(value)
