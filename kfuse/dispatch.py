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
from .pipeline import execute, kernel_of
from .policies import TeamThreadRange
from .runtime.launch import policy_slots


def _call_site() -> str:
    frame = sys._getframe(3)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _split(args: tuple):
    if args and isinstance(args[0], str):
        args = args[1:]  # PyKokkos's optional kernel label
    if len(args) < 2:
        raise ArgumentError("expected (policy, workunit, ...) — e.g. pk.parallel_for(n, my_workunit, A=a)")
    return args[0], args[1], args[2:]


def _dispatch(op: str, args: tuple, kwargs: dict):
    policy, wu, positional = _split(args)
    if isinstance(policy, TeamThreadRange):  # nested parallelism of a team workunit in the Debug space
        from .backends.debug import run_nested

        return run_nested(op, policy, wu)
    rt = context.current()
    with guard.lock:
        binding, policy, values = bind(wu, op, policy, positional, kwargs, rt.backend)
        if binding.direct and not rt.enabled and not rt.failures.lost:
            args = binding.args(values)  # eager, nothing lost to a failed call: no KernelCall needed
            prepared = binding.prepared
            prepared.backend.enter_thread()
            results = (prepared.kernel or kernel_of(prepared)).launch(policy_slots(policy), args)
            return results[0] if results else None
        call = binding.call(policy, values)
        if rt.enabled:
            call.site = _call_site()
            return rt.log(call)  # runs at once if it touches memory the host reaches past barriers
        rt.check_eager(call)
        if call.futures:
            for _, fut in call.futures:
                fut.value()
        call.prepared.backend.enter_thread()
        return execute(call)


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
