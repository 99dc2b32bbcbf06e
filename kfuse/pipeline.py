"""One kernel call from the program to the hardware, stage by stage.

    specialise  calls.bind          workunit + arguments -> KernelCall (KernelSource + KernelSpec), type-checked
    (trace)     engine.Runtime.log  delayed calls wait in the trace; a host access cuts out a partition
    schedule    schedule()          partition -> graph (fuser/graph.py) -> groups, a Reason at every split
    profit      choose()            per group: fused, or its members apart (fuser/profit.py: cost model, timings)
    lower       lower_call/group    a call, or a group fused (fuser/build.py) and transformed -> Lowered
    render      backend.render      Lowered -> the backend's code (C++ for Kokkos)
    compile     backend.load        -> a loaded Kernel (through the backend's cache; a partition's new kernels
                                    are compiled together first, compile_ahead)
    launch      Kernel.launch       bounds + arguments -> reduction results

Eager execution is a one-call schedule through the same stages (``execute``); its kernel is kept on the
specialisation, so a repeated eager call costs a binding and a launch. A repeated partition (every step of
a time-step loop) is replayed: its signature (fuser/replay.py) finds the graph, plan and fused-kernel keys of
the first such flush, so it costs neither re-analysis nor re-compilation; one over other memory with the same
structure hits the plan cache (keyed by its graph) and the fused-kernel cache.
"""
from __future__ import annotations

import time

from . import config, counters, views
from .backends.base import Lowered
from .calls import writes_of
from .compiler import decisions
from .errors import KernelFault, KfuseError
from .frontend.access import summarize
from .policies import RangePolicy
from .fuser import build, cost, explain, graph as graphs, persist, planner, profit, replay
from .fuser.replay import Replay
from .runtime.launch import policy_slots
from .transforms import manager as transforms
from .transforms.ir import FusedKernel, scalar_key
from .tracer.failures import is_fault
from .tracer import liveness
from .tracer.trace import footprint

_MAX_CACHED = 4096  # plans/fused kernels kept; a program whose ranges change every step must not grow forever


# --- schedule ---------------------------------------------------------------------------------
def schedule(rt, calls: list, fuse: bool) -> tuple:
    """(Replay, how) of a partition: ``how`` is "replayed" (its signature was seen: nothing is rebuilt,
    fuser/replay.py), "cached" (its graph was seen: the plan is reused) or "" (planned now). Unfused (fusion
    off, or one call) there is nothing to decide and no graph is built (None)."""
    if not fuse or len(calls) < 2:
        return Replay(None, planner.unfused(len(calls)), ()), ""
    bound, align = config.MAX_GROUP.get(), config.ALIGN_VIEWS.get()
    signature = replay.signature(calls, bound, align)
    found = rt.replays.get(signature) if signature is not None else None
    if found is not None:
        return found, "replayed"
    graph = graphs.of(calls, align)
    plan = rt.plans.get((bound, graph))
    how = "cached" if plan is not None else ""
    if plan is None:
        if len(rt.plans) >= _MAX_CACHED:
            rt.plans.clear()
        plan = rt.plans[bound, graph] = planner.plan(graph, bound)
    found = Replay(graph, plan, tuple(_known_key(graph, indices, calls, plan.parts.get(number))
                                      for number, indices in enumerate(plan.groups)))
    if signature is not None:
        if len(rt.replays) >= _MAX_CACHED:
            rt.replays.clear()
        rt.replays[signature] = found
    return found, how


def _known_key(graph, indices: list, calls: list, sizes: tuple | None) -> tuple | None:
    """A fused group's ``group_key`` when its arguments are all known (no member waits for a Future)."""
    group = [calls[i] for i in indices]
    if len(group) < 2 or any(c.futures for c in group):
        return None
    return group_key(graph, indices, group, tuple(a for c in group for a in c.args), sizes)


# --- lower, render, compile -------------------------------------------------------------------
def lower_call(prepared) -> Lowered:
    return Lowered(prepared.source, prepared.spec, prepared.name, writes_of(prepared.access, prepared.spec),
                   workunit=prepared.workunit)


def rendered_call(prepared):
    """The rendered kernel of one specialisation, made once (kept until it is loaded)."""
    rendered = prepared.rendered
    if rendered is None:
        backend = prepared.backend
        translated, prepared.translated = prepared.translated, None  # a failed build is retried from scratch
        rendered = prepared.rendered = backend.render(lower_call(prepared), translated)
    return rendered


def kernel_of(prepared):
    """The loaded kernel of one specialisation (made at its first launch, then kept on it)."""
    kernel = prepared.kernel
    if kernel is None:
        rendered = rendered_call(prepared)
        prepared.rendered = None  # loaded, or failed to build: either way rendered again only if asked again
        kernel = prepared.kernel = prepared.backend.load(rendered)
    return kernel


def lower_group(group: list, args: tuple, names: frozenset, scratch: frozenset = frozenset(),
                parts: tuple = ()) -> tuple:
    """(Lowered, arg_index) of a fused group: its bodies built into one kernel, then the passes in ``names``;
    ``scratch``: positions in ``args`` of Views nothing reads after the group (tracer/liveness.py); ``parts``:
    a horizontal group's (calls, begin, end) per part (``group_key``)."""
    source, spec, name = build.build(group, parts)
    kernel, _ = transforms.apply(FusedKernel(source, spec, tuple(range(len(args))), args, scratch=scratch), names)
    writes = writes_of(summarize(kernel.source, kernel.spec), kernel.spec)
    return Lowered(kernel.source, kernel.spec, name, writes, fused=True, restrict=kernel.restrict), kernel.arg_index


def _scalar_pattern(args: tuple) -> tuple:
    """Which scalar arguments are equal (argument fusion merges them), as class numbers, keyed as argument
    fusion keys them (0.0 and -0.0 apart)."""
    classes: dict = {}
    return tuple(classes.setdefault(scalar_key(a), len(classes)) for a in args if not hasattr(a, "ptr"))


def group_key(graph, indices: list, group: list, args: tuple, sizes: tuple | None = None) -> tuple:
    """What a fused group's kernel depends on besides the transforms and its scratch Views (``fused_key``):
    backend, member kernels, aliasing, equal scalars, and for a horizontal group (``sizes``: its calls per part,
    planner.Plan.parts) each part's (calls, begin, end), which its code splits the threads by."""
    parts = ()
    if sizes:
        starts = [sum(sizes[:p]) for p in range(len(sizes))]
        parts = tuple((n, *graph.nodes[indices[first]].bounds[0]) for n, first in zip(sizes, starts))
    return group[0].prepared.backend.name, tuple(graph.nodes[i].kernel for i in indices), graph.pattern_of(indices), \
        _scalar_pattern(args), parts


#: what a horizontal group's kernel may get: the memory transform follows values within one thread's calls, which
#: the parts' branches split (scratch Views then stay stored)
HORIZONTAL_TRANSFORMS = frozenset(("args", "loops", "restrict"))


def fused_key(base: tuple, backend, names: frozenset, scratch: frozenset) -> tuple:
    """A fused group's whole key: its ``group_key``, the transforms it gets (``names``: those enabled), and which
    arguments are scratch (their stores are removed only by the memory transform)."""
    names = names & backend.transforms
    if base[4]:
        names &= HORIZONTAL_TRANSFORMS
    return base + (names, tuple(sorted(scratch)) if "memory" in names else ())


def launch_policy(key: tuple, group: list):
    """The policy a fused group launches with: its members', or for a horizontal group one thread per element of
    every part's range."""
    parts = key[4]
    return RangePolicy(0, sum(end - begin for _, begin, end in parts)) if parts else group[0].policy


def rendered_group(rt, key: tuple, group: list, args: tuple) -> tuple:
    """(rendered kernel, arg_index) of a fused group (``key``: its ``fused_key``) not loaded yet: from the
    backend's store, or lowered and rendered anew (then stored). Kept in ``rt`` until it is loaded."""
    found = rt.rendered.get(key)
    if found is None:
        backend = group[0].prepared.backend
        _, _, aliasing, scalars, parts, names, scratch = key
        digest = persist.key(group, aliasing, scalars, names, scratch, parts) if backend.persistent else None
        found = backend.stored(digest) if digest else None
        if found is None:
            lowered, arg_index = lower_group(group, args, names, frozenset(scratch), parts)
            found = (backend.render(lowered), arg_index)
            if digest:
                backend.store(digest, *found)
        rt.rendered[key] = found
    return found


def fused_kernel(rt, key: tuple, group: list, args: tuple) -> tuple:
    """(Kernel, arg_index) of a fused group (``key``: its ``fused_key``): from ``rt``'s cache, or rendered
    (``rendered_group``) and loaded."""
    entry = rt.fused.get(key)
    if entry is None:
        rendered, arg_index = rendered_group(rt, key, group, args)
        del rt.rendered[key]  # loaded, or failed to build: either way rendered again only if asked again
        if len(rt.fused) >= _MAX_CACHED:
            rt.fused.clear()  # compiled libraries stay cached on disk; this only drops in-process handles
        entry = rt.fused[key] = (group[0].prepared.backend.load(rendered), arg_index)
    return entry


def compile_ahead(rt, scheduled, calls: list, names: frozenset, scratch: dict, choices: dict) -> None:
    """Render every kernel this partition will load and has not loaded yet, and let the backend compile them
    together (Kokkos: one compiler per CPU), so a first flush waits for its slowest compile, not for the sum.
    ``choices``: group number -> its profit.Choice (a group run apart needs its members' kernels instead).

    Only a head start: a group whose arguments are still pending Futures is left out, and anything failing
    here is ignored, so the group's own run raises it where it belongs (and names the culprit). Each backend gets
    its own kernels (a partition may mix them: calls in the Debug space run on the interpreter)."""
    wanted: dict = {}  # backend -> the renderings it will load
    for number, indices in enumerate(scheduled.plan.groups):
        group = [calls[i] for i in indices]
        if any(c.futures for c in group) or any(rt.failures.blocking(c) for c in group):
            continue
        try:
            backend = group[0].prepared.backend
            if len(group) > 1 and choices.get(number, profit.FUSED).fused:
                key = fused_key(scheduled.keys[number], backend, names, scratch.get(number, frozenset()))
                if key not in rt.fused:
                    rendered = rendered_group(rt, key, group, tuple(a for c in group for a in c.args))[0]
                    wanted.setdefault(backend, []).append(rendered)
                continue
            for p in _specialisations(group):
                if p.kernel is None:
                    wanted.setdefault(p.backend, []).append(rendered_call(p))
        except KfuseError:
            continue
    for backend, rendered in wanted.items():
        if len(rendered) > 1:
            backend.compile_ahead(rendered)


# --- profitability (fuser/profit.py) ----------------------------------------------------------
UP_FRONT = "fused: compiled up front, as for a captured function (pk.capture)"


def choose(rt, scheduled, number: int, key: tuple, group: list, args: tuple, scratch: frozenset) -> profit.Choice:
    """How this occurrence of group ``number`` (``key``: its ``fused_key``) runs: fused, or its members apart."""
    mode = config.PROFIT.get()
    if mode == "off":
        return profit.FUSED
    sizes = scheduled.sizes.get(number)
    if sizes is None:  # kept on the Replay: a replayed partition has the same policies and Views
        spans = {r for c in group for side in footprint(c) for r in side}
        sizes = scheduled.sizes[number] = (cost.iterations(group[0].policy).bit_length(),
                                           sum(hi - lo for lo, hi in spans).bit_length())
    entry = rt.profit.entry((key, sizes))
    if mode == "measure" and not entry.looked_up:
        entry.looked_up = True
        _recall(entry, key, group, sizes)
    if rt.compiling_up_front:  # a captured function's flush (kfuse/capturing.py): its compile is not weighed
        judge = lambda runs: (True, UP_FRONT)  # noqa: E731
    else:
        judge = lambda runs: cost.judge(_estimate(rt, entry, key, group, args, scratch), runs)  # noqa: E731
    return profit.choose(entry, mode, config.PROFIT_TRIALS.get(), judge)


def _recall(entry, key: tuple, group: list, sizes: tuple) -> None:
    """Where ``entry``'s decision is kept across processes, and the decision itself if one was kept (none when
    the cache folder cannot be used: the partition's calls must run whatever the cache does)."""
    backend, _, aliasing, scalars, parts, names, scratch = key
    stored_as = decisions.digest(persist.key(group, aliasing, scalars, names, scratch, parts), backend, sizes)
    try:
        found = decisions.load(stored_as)
    except KfuseError:  # CacheError with KFUSE_CACHE_FALLBACK=0: measured here, kept in memory only
        return
    entry.stored_as = stored_as
    if found is not None:
        profit.recall(entry, found["fused_s"], found["apart_s"], found["fused_k"], found["apart_k"])
        counters.bump("profit_remembered")


def _estimate(rt, entry, key: tuple, group: list, args: tuple, scratch: frozenset):
    """The cost model's inputs for ``group`` (kept on ``entry`` once its fused kernel costs no compile)."""
    if entry.estimate is not None and entry.estimate.compile_seconds <= 0:
        return entry.estimate
    backend = group[0].prepared.backend
    per_kernel = backend.compile_seconds
    apart = fused = 0.0
    if per_kernel:
        apart = per_kernel * sum(not kernel_ready(p) for p in _specialisations(group))
        if not apart and key not in rt.fused:  # with a member to compile, fusing never costs more compiling
            if entry.fused_ready is None:
                entry.fused_ready = _fused_built(rt, key, group, args)
            fused = 0.0 if entry.fused_ready else per_kernel
    entry.estimate = cost.estimate(len(group), [footprint(c) for c in group], tuple(args[p].bounds for p in scratch),
                                   fused, apart)
    return entry.estimate


def _fused_built(rt, key: tuple, group: list, args: tuple) -> bool:
    """Whether the group's fused kernel is in the backend's cache (asked once per signature); its rendering is
    not kept unless it is, since the group may never be fused."""
    try:
        ready = group[0].prepared.backend.built(rendered_group(rt, key, group, args)[0])
    except KfuseError:
        ready = False
    if not ready:
        rt.rendered.pop(key, None)
    return ready


def _specialisations(group: list) -> list:
    """The distinct specialisations of a group's calls (one kernel each, however often it is called)."""
    return list({id(c.prepared): c.prepared for c in group}.values())


def kernel_ready(prepared) -> bool:
    """Whether a specialisation's own kernel is loaded or loads without compiling."""
    if prepared.kernel is not None:
        return True
    try:
        return prepared.backend.built(rendered_call(prepared))
    except KfuseError:
        return False


def _timed(rt, choice, fused: bool, seconds: float, kernel_seconds: float | None, record) -> None:
    """Report a timed occurrence (its wall ``seconds`` and its kernels' own, if known); when it completes a
    measurement, keep the decision for later processes."""
    counters.bump("profit_trials")
    trials = config.PROFIT_TRIALS.get()
    entry = choice.entry
    decision = profit.timed(entry, fused, seconds, trials, kernel_seconds)
    if decision is None:
        return
    counters.bump("profit_decided")
    if entry.stored_as:
        try:
            decisions.save(entry.stored_as, decision.fused, min(entry.fused_s), min(entry.apart_s),
                           min(len(entry.fused_s), len(entry.apart_s)), *profit.best_kernel_times(entry))
        except KfuseError as exc:  # the cache folder failed and may not be replaced: the decision stays in memory
            record.notes.append(f"profitability decision not kept across processes: {_first_line(exc)}")


# --- launch -----------------------------------------------------------------------------------
def execute(call, queued: bool = False):
    """Run one call now; returns its reduction/scan value (or None). ``queued``: a GPU kernel that cannot fault may
    return once the device has it (a replay's launch, kfuse/capturing.py: whatever reads its results waits)."""
    kernel, bounds, args = kernel_of(call.prepared), policy_slots(call.policy), call.bound_args()
    results = kernel.launch_queued(bounds, args) if queued else kernel.launch(bounds, args)
    return results[0] if results else None


def run_partition(rt, calls: list, fuse: bool = True) -> None:
    """Run ``calls`` (a trace partition, in trace order) as scheduled groups, recording failures in ``rt``.

    A failing call loses only what depends on it: a fused group that fails before running is retried
    member by member, so the error names the culprit; a call that touches bytes a failed call would have
    written (or takes its Future) is not run and passes the same failure on (tracer/failures.py). A group
    the profitability rules keep apart (fuser/profit.py) runs member by member too, by the same path.

    Returns (the flush's explain record, its launches, the profitability entries of groups the cost model keeps apart
    until their compile is repaid): the launches as (kernel, policy slots, arguments, call numbers) when a repetition
    of this partition, replayed or planned from the cache, could launch them again (kfuse/rerun.py: every call ran,
    none failed or was timed, no array went unstored), else None.
    """
    start = time.perf_counter()
    scheduled, how = schedule(rt, calls, fuse)
    plan = scheduled.plan
    record = explain.record(rt, calls, plan, time.perf_counter() - start, how, fuse)
    failures = rt.failures
    fusing = len(plan.groups) < len(calls)
    scratch = liveness.unreachable(calls, plan.groups) if fusing else {}
    names = transforms.enabled() if fusing else frozenset()
    launches = [] if how in ("replayed", "cached") and not any(scratch.values()) else None
    waiting = []  # profitability entries of groups the cost model keeps apart until their compile is repaid
    keys, choices = {}, {}  # group number -> its fused_key, its profit.Choice (for groups without Futures)
    if fusing and config.PROFIT.get() != "off":  # before compile_ahead, which builds what the choices need
        for number, indices in enumerate(plan.groups):
            group = [calls[i] for i in indices]
            if scheduled.keys[number] is not None and not any(failures.blocking(c) for c in group):
                args = tuple(a for c in group for a in c.args)
                key = keys[number] = _key(scheduled, number, group, args, names, scratch)
                choices[number] = choose(rt, scheduled, number, key, group, args, scratch.get(number, frozenset()))
    if len(plan.groups) > 1 or any(not c.fused for c in choices.values()):
        compile_ahead(rt, scheduled, calls, names, scratch, choices)
    for number, indices in enumerate(plan.groups):
        group = [calls[i] for i in indices]
        if len(group) > 1 and not any(failures.blocking(c) for c in group):
            args = tuple([a for c in group for a in c.bound_args()])
            key = keys.get(number) or _key(scheduled, number, group, args, names, scratch)
            choice = choices.get(number) or choose(rt, scheduled, number, key, group, args,
                                                   scratch.get(number, frozenset()))
            if choice.text:
                record.choices[indices[0]] = choice.text
            if choice.timed:
                record.provisional.add(indices[0])
            if profit.waits_for_repayment(choice):
                waiting.append(choice.entry)  # apart until the model says otherwise: a rerun asks it (profit.repaid)
                record.provisional.add(indices[0])
            elif not profit.settled(choice):
                launches = None  # the next occurrence may run otherwise
            if not choice.fused:
                counters.bump("groups_unfused")
                if not _run_apart(rt, indices, group, failures, record, choice):
                    launches = None
                elif launches is not None:
                    launches += [_launch_of(index, call) for index, call in zip(indices, group)]
                continue
            try:
                seconds, launch = _run_fused(rt, key, indices, group, args, record, scratch.get(number, frozenset()),
                                             choice.timed)
            except KfuseError as exc:
                launches = None
                if is_fault(exc):
                    record.notes.append(f"group {explain.calls_text(indices)} faulted: {_first_line(exc)}")
                    after_fault(group, exc, failures)
                    continue
                record.notes.append(f"group {explain.calls_text(indices)} failed fused, ran its calls "
                                    f"one by one: {_first_line(exc)}")
            else:  # the group ran: nothing below may send it to the one-by-one path (A += B must not run twice)
                if choice.timed:
                    _timed(rt, choice, True, seconds, rt.profit.kernel_time([launch[0]]), record)
                elif launches is not None:
                    launches.append((*launch, tuple(indices)))
                continue
        for index, call in zip(indices, group):
            if not _run_single(index, call, failures, record):
                launches = None
            elif launches is not None:
                launches.append(_launch_of(index, call))
    return record, launches, tuple(waiting)


def _launch_of(index: int, call) -> tuple:
    """What launching ``call`` (number ``index`` of its partition) again takes (its kernel is loaded: it ran)."""
    return call.prepared.kernel, policy_slots(call.policy), call.bound_args(), (index,)


def _key(scheduled, number: int, group: list, args: tuple, names: frozenset, scratch: dict) -> tuple:
    """Group ``number``'s ``fused_key`` (``args``: its calls' arguments, Futures' values included)."""
    plan = scheduled.plan
    base = scheduled.keys[number] or group_key(scheduled.graph, plan.groups[number], group, args,
                                               plan.parts.get(number))
    return fused_key(base, group[0].prepared.backend, names, scratch.get(number, frozenset()))


def _run_fused(rt, key: tuple, indices: list, group: list, args: tuple, record, scratch: frozenset,
               timed: bool) -> tuple:
    """Launch the group's fused kernel; returns the launch's seconds on ``rt.profit.clock`` when ``timed`` (else
    0), and (kernel, policy slots, arguments) of the launch."""
    kernel, arg_index = fused_kernel(rt, key, group, args)
    slots, passed = policy_slots(launch_policy(key, group)), tuple(args[i] for i in arg_index)
    clock = rt.profit.clock
    start = clock() if timed else 0.0
    results = iter(kernel.launch(slots, passed))
    seconds = clock() - start if timed else 0.0
    values = [next(results) if c.op == "reduce" else None for c in group]
    record.kernels[indices[0]] = kernel.name
    if scratch:
        passed = {id(args[i]) for i in arg_index}
        unstored = len({id(args[p]) for p in scratch} - passed)
        if unstored:
            record.unstored[indices[0]] = unstored
            counters.bump("unstored_arrays", unstored)
    for call, value in zip(group, values):
        if call.result is not None:
            call.result.set_result(value)
    return seconds, (kernel, slots, passed)


def _run_apart(rt, indices: list, group: list, failures, record, choice) -> bool:
    """Run a group the profitability rules keep apart, member by member (whether all of them ran); when the run
    is a timed one, its members' kernels are loaded (perhaps compiled) before the clock starts, and a run with a
    failure is not counted."""
    timed = choice.timed
    if timed:
        try:
            for prepared in _specialisations(group):
                kernel_of(prepared)
        except KfuseError:
            timed = False  # the member's own run below records the failure
    clock, kernel_time = rt.profit.clock, rt.profit.kernel_time
    start = clock() if timed else 0.0
    ran, kernel_seconds = [], 0.0
    for index, call in zip(indices, group):
        ran.append(_run_single(index, call, failures, record))
        if timed and kernel_seconds is not None and ran[-1]:  # asked at once: members may share a kernel
            seconds = kernel_time([call.prepared.kernel])
            kernel_seconds = None if seconds is None else kernel_seconds + seconds
    if timed and all(ran):
        _timed(rt, choice, False, clock() - start, kernel_seconds, record)
    return all(ran)


def _run_single(index: int, call, failures, record) -> bool:
    """Run one call of a partition; False when it failed or could not run."""
    blocked = failures.blocking(call)
    if blocked is not None:
        record.notes.append(f"call {index} ({call.prepared.name}) not run: it needs what {blocked.where()} "
                            "would have produced")
        failures.poison(call, blocked)
        return False
    try:
        value = execute(call)
    except KfuseError as exc:
        record.notes.append(f"call {index} ({call.prepared.name}) failed: {_first_line(exc)}")
        failures.fail(call, exc)
        return False
    if call.result is not None:
        call.result.set_result(value)
    return True


def after_fault(group: list, exc, failures) -> None:
    """A fused kernel reported a fault. Kernels finish their launch after a fault (the faulting operation
    yields 0) and still return their reductions, so every member ran: what each member that faulted wrote, and
    what members touching those bytes computed, is lost; the other members' results are right. The record holds
    the first fault's values and names the other members that faulted (``KernelFault.others``): each gets a fault
    of its own, as its call alone would have raised; one only maybe faulted (a site past the 63rd) is lost to the
    first fault, and so is every member where the record could not list them all."""
    member = getattr(exc, "member", None)
    if member is not None and 0 <= member < len(group):
        culprits = [group[member]]
    else:  # a fault in a helper names the workunit only; one that names no member loses the whole group
        culprits = [c for c in group if c.prepared.workunit.__name__ == getattr(exc, "workunit", None)] or group
    failure = failures.fail(culprits[0], exc)
    own = dict.fromkeys(culprits, failure)  # culprit -> the failure its results are lost to
    if not getattr(exc, "others_known", True):
        own.update(dict.fromkeys(group, failure))
    for other in getattr(exc, "others", ()):  # (in site order: a member's sure sites before any unsure one)
        if 0 <= other.member < len(group) and group[other.member] not in own:
            call = group[other.member]
            own[call] = failures.fail(call, _other_fault(other, exc)) if other.sure else failure
    values = iter(getattr(exc, "results", ()))
    lost: list = []  # (span, lattice, failure) of each View the lost members wrote: a column beside one is not lost
    for call in group:
        value = next(values, None) if call.op == "reduce" else None
        reads, writes = call.prepared.view_positions
        touched = [(call.args[i].bounds, views.lattice(call.args[i])) for i in (*reads, *writes)]
        cause = own.get(call) or next((f for *gone, f in lost for mine in touched if views.meet(*gone, *mine)), None)
        if cause is not None:
            failures.poison(call, cause)
            lost += [(*t, cause) for t in touched[len(reads):]]
        elif call.result is not None:
            call.result.set_result(value)


def _other_fault(other, first) -> KernelFault:
    """The fault a member of a fused kernel that faulted after ``first`` (the record's) is reported with."""
    return KernelFault(f"a kernel fault ({other.kind}) in the launch of a fused kernel whose first fault alone has "
                       f"its values recorded ({_first_line(first)})", workunit=other.workunit,
                       filename=other.filename, lineno=other.lineno, kernel=getattr(first, "kernel", None),
                       member=other.member)


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
