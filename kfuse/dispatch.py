"""``parallel_for`` / ``parallel_reduce`` / ``parallel_scan``: specialise the call, then run it now or hand it
to the runtime's trace (kfuse/pipeline.py names the stages).

An eager call with nothing delayed costs a binding (calls.py), an argument pack and the backend's launch:
about 4 us on the Kokkos backend, of which 1-2 us are the C++ launch (``benchmarks/bench_dispatch.py``;
PyKokkos takes ~250 us).
"""
from __future__ import annotations

import sys

from . import context, guard
from .calls import bind
from .errors import ArgumentError, public_error
from .frontend import lambdas
from .frontend.lambdas import is_lambda
from .frontend.workunit import BoundWorkunit, Workunit
from .future import done
from .pipeline import execute, kernel_of
from .rerun import MISS
from .policies import TeamThreadMDRange, TeamThreadRange, normalize as normalize_policy
from .runtime.launch import policy_slots


def _call_site(depth: int = 3) -> str:
    frame = sys._getframe(depth)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _split(args: tuple):
    if args and isinstance(args[0], str):
        args = args[1:]  # PyKokkos's optional kernel label
    if len(args) < 2:
        raise ArgumentError("expected (policy, workunit, ...) — e.g. pk.parallel_for(n, my_workunit, A=a)")
    return args[0], args[1], args[2:]


def _dispatch(op: str, args: tuple, kwargs: dict):
    rt = context.current()
    if rt.batch is not None and rt.enabled:  # the array operations recorded before it are calls before it: a rerun
        with guard.lock:  # (kfuse/rerun.py) then meets the calls in the program's order
            if rt.batch is not None:
                rt.run_batch()
    rt.calls_made += 1
    if rt.rerun.templates and rt.enabled and rt.rerun.wants(args):  # a repeated flush's calls cost a comparison
        with guard.lock:
            result = rt.rerun.take(rt, op, args, kwargs)
            if result is not MISS:
                return result
    policy, wu, positional = _split(args)
    if type(wu) is not Workunit:
        if isinstance(wu, list):
            return _explicit_fusion(op, policy, wu, positional, kwargs)
        if is_lambda(wu):
            wu, positional, kwargs = lambdas.as_kernel(op, wu, positional, kwargs)
    if type(policy) is not int and isinstance(policy, (TeamThreadRange, TeamThreadMDRange)):  # nested, Debug space
        from .backends.debug import run_nested

        return run_nested(op, policy, wu)
    with guard.lock:
        binding, bound, values = bind(wu, op, policy, positional, kwargs, rt.backend)
        if rt.enabled:
            streak = rt.streaks.get(binding.prepared) if rt.streaks else None
            # fusing (not tracing alone) and idle (a failure standing counts: a call may read what one lost, and
            # traced it is poisoned and reports at the read)
            if streak is not None and streak.left and rt.fuse and rt.may_run_now():
                streak.left -= 1  # a kernel that keeps running alone runs at once (kfuse/untraced.py)
                rt.counts["calls_untraced"] += 1
                result = run_bound(rt, binding, bound, values, queued=True)
                return result if op == "for" else done(binding.prepared.spec.accs[0], result)
            call = binding.call(bound, values)
            call.site, call.position = _call_site(), rt.calls_made
            if not positional and type(wu) is Workunit:
                call.request = (op, (policy, wu), kwargs)  # as the program made it (kfuse/rerun.py)
            return rt.log(call)  # runs at once if it touches memory the host reaches past barriers
        return run_bound(rt, binding, bound, values)


def run_bound(rt, binding, policy, values, queued: bool = False):
    """Run a bound call now. ``queued``: a GPU kernel that cannot fault returns once the device has it (fused
    mode's calls run at once: whatever reads their results, and ``pk.fence()``, waits for the device). With
    fusion off every launch waits, so eager, the reference fused runs are compared with, reports a failure at
    its call and is timed kernel by kernel."""
    if binding.direct and not rt.failures.lost:
        args = binding.args(values)  # nothing lost to a failed call: no KernelCall needed
        prepared = binding.prepared
        prepared.backend.enter_thread()
        kernel = prepared.kernel or kernel_of(prepared)
        slots = policy_slots(policy)
        results = kernel.launch_queued(slots, args) if queued else kernel.launch(slots, args)
        return results[0] if results else None
    call = binding.call(policy, values)
    rt.check_eager(call)
    if call.futures:
        for _, fut in call.futures:
            fut.value()
    call.prepared.backend.enter_thread()
    return execute(call, queued)


def run_now(op: str, n: int, wu, kwargs: dict):
    """``parallel_<op>(n, wu, **kwargs)`` run at once (queued on a GPU): for a call the runtime has shown needs
    nothing pending (kfuse/ops/lazy.py, when the trace is empty); the caller holds ``guard.lock``."""
    rt = context.current()
    binding, policy, values = bind(wu, op, n, (), kwargs, rt.backend)
    return run_bound(rt, binding, policy, values, queued=True)


def _explicit_fusion(op: str, policy, wus: list, positional: tuple, kwargs: dict):
    """PyKokkos's explicit fusion, ``pk.parallel_for(n, [wu1, wu2], args_0={...}, args_1={...})``: each workunit
    is bound and specialised as its own call, and the calls run now as one group where the fuser proves it safe
    (as automatic fusion would fuse them), in order otherwise; results equal the calls run one after another.
    A reduction's result is, as in PyKokkos (one accumulator shared by the bodies), the sum of its members'
    reductions; a member whose accumulator is given in its args (or that has none) is a ``parallel_for``."""
    if op == "scan":
        raise ArgumentError("parallel_scan takes one workunit; explicit fusion (a list) is for parallel_for "
                            "and parallel_reduce")
    if not wus:
        raise ArgumentError("explicit fusion got an empty list of workunits")
    if positional:
        raise ArgumentError("explicit fusion takes each workunit's arguments as a dict in args_0, args_1, ..., "
                            "not positionally")
    keys = [f"args_{k}" for k in range(len(wus))]
    extra = [k for k in kwargs if k not in keys]
    if extra:
        raise ArgumentError(f"explicit fusion of {len(wus)} workunit(s) takes only {', '.join(keys)}; got '{extra[0]}'"
                            + ("" if extra[0].startswith("args_") else
                               " (give each workunit's arguments in its own args_k dict, not as plain keywords)"))
    for k, (wu, key) in enumerate(zip(wus, keys)):
        if not isinstance(wu, (Workunit, BoundWorkunit)):
            raise ArgumentError(f"explicit fusion: element {k} of the workunit list is not a workunit: {wu!r} "
                                "(decorate it with @pk.workunit)")
        if key not in kwargs:
            raise ArgumentError(f"explicit fusion: missing {key}, the arguments of workunit {k} ('{wu.__name__}')")
        if not isinstance(kwargs[key], dict):
            raise ArgumentError(f"explicit fusion: {key} must be a dict of workunit '{wu.__name__}''s arguments, "
                                f"got {type(kwargs[key]).__name__}")
    policy = normalize_policy(policy)
    ops = ["reduce" if op == "reduce" and _has_accumulator(wu, policy, kwargs[key]) else "for"
           for wu, key in zip(wus, keys)]
    if op == "reduce" and "reduce" not in ops:
        raise ArgumentError("explicit fusion with parallel_reduce: no workunit in the list has an accumulator")
    rt = context.current()
    with guard.lock:
        calls = []
        for wu, key, member_op in zip(wus, keys, ops):
            binding, bound_policy, values = bind(wu, member_op, policy, (), dict(kwargs[key]), rt.backend)
            call = binding.call(bound_policy, values)
            call.site = _call_site(4)
            calls.append(call)
        rt.run_together(calls)
    if op == "for":
        return None
    reductions = [c.result.value() for c in calls if c.result is not None]
    return sum(reductions[1:], reductions[0])


def _has_accumulator(wu: Workunit, policy, args: dict) -> bool:
    """PyKokkos's test: the parameter after the thread index(es) is the accumulator unless args name it."""
    names = wu.parsed.param_names
    return len(names) > policy.rank and names[policy.rank] not in args


# The public entry points catch what escapes them themselves (errors.public_error): a try costs nothing when
# nothing is raised, where a decorator would add a Python call to every launch.
def parallel_for(*args, **kwargs) -> None:
    """Run ``workunit(i, **kwargs)`` for every i of the policy (PyKokkos signature)."""
    try:
        _dispatch("for", args, kwargs)
    except Exception as exc:
        raise public_error(exc)


def parallel_reduce(*args, **kwargs):
    """Sum of ``acc`` contributions over the policy; a Future while fusion is on."""
    try:
        return _dispatch("reduce", args, kwargs)
    except Exception as exc:
        raise public_error(exc)


def parallel_scan(*args, **kwargs):
    """Inclusive/exclusive scan (the workunit decides via ``last_pass``); returns the total."""
    try:
        return _dispatch("scan", args, kwargs)
    except Exception as exc:
        raise public_error(exc)
