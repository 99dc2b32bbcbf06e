"""Rerun of a repeated flush: a time-step loop makes the same calls on the same Views between two host reads.

A partition that was replayed (fuser/replay.py: its signature was seen before) and ran with no failure, no group
being timed and no array left unstored is kept as a ``Template``: the calls that were pending from before
(``head``), each call the program made since, as it made it (workunit, policy, keyword arguments), which of
those stayed pending (``tail``: the partition did not need them), and the launches that ran the partition.
While the trace holds the head and the next calls match the template one by one -- the same workunit and policy
objects, the same View objects, scalars of the same type and value (0.0 and -0.0 apart) -- the calls are only
counted: no binding, no trace entry, no analysis (a matched reduction returns a new Future). At the next host
access (or a Future's value) a complete match launches the kept kernels again, delivers the reductions' values and
leaves the tail pending, and the access goes on through the trace as usual. Anything else --
another call, another scalar, an escaped View, recorded array operations, a failure, a match cut short -- turns
the matched calls into ordinary trace entries, as if nothing had been matched.

Why this is never wrong: equal calls over an equal trace make the same partition, plan, groups, kernels and
arguments, so the kept launches are what the trace would run. Views are compared by identity, and their pointer,
shape and strides are checked again before the launches (``View.resize`` gives a View new memory). The partition
is closed under dependencies (tracer/trace.py), so running it is right at any host access, needed or not (a
pending call may run early), and whatever the access needs from the tail the trace then runs. A template holds
its Views alive until it is replaced; they are Views the program passed at every step, and at most ``_KEPT``
templates are kept.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from math import copysign

from . import config, escape, guard, views
from .calls import KernelCall, runs_off_gpu
from .errors import KfuseError
from .future import Future
from .fuser import explain, profit
from .pipeline import after_fault
from .tracer.failures import is_fault
from .transforms import manager as transforms

_KEPT = 8  # templates kept per runtime (one per first workunit of a loop's flush)
MISS = object()  # ``take``'s answer for a call that is not the template's next
_SCALARS = (float, int, bool)
_MISSING = object()


@dataclass(frozen=True)
class Step:
    """A call the program made: what it passed, and the call it made of it."""

    op: str
    workunit: object
    policy: object  # as the program gave it (an int, a RangePolicy...)
    kwargs: tuple  # ((name, value), ...) as the program gave them
    call: KernelCall  # the recorded call (its specialisation, bound policy and arguments, site)
    escapable: tuple  # ((View, written?), ...): what to ask while escaped memory exists
    host: bool  # runs off the GPU: its Views are no longer known zeros (views.zeroed)


@dataclass(frozen=True)
class Template:
    head: tuple  # the calls pending before the first step (each must have an equal one in the trace)
    steps: tuple
    tail: tuple  # step numbers left pending by the partition
    partition: tuple  # the partition's calls, in the order it ran them
    owners: tuple  # per partition position: ("head", k) or ("step", i), whose Future a reduction's value goes to
    launches: tuple  # (kernel, policy slots, arguments, partition positions, apart?), in the order they ran
    unfused: int  # groups the profitability decisions run apart
    waiting: tuple  # their entries where the cost model runs them apart until their compile is repaid
    geometry: tuple  # (View, ptr, shape, strides) of every View the calls take
    settings: tuple  # what the plan and kernels were made under (see ``_settings``)
    space: object  # the runtime's default space
    record: object  # the recorded flush's explain record


def _settings() -> tuple:
    return config.MAX_GROUP.get(), config.PROFIT.get(), transforms.enabled()


def _same_scalar(got, want) -> bool:
    kind = type(want)
    if type(got) is not kind or kind not in _SCALARS or got != want:
        return False
    return kind is not float or got != 0.0 or copysign(1.0, got) == copysign(1.0, want)


def _same_call(got: KernelCall, want: KernelCall) -> bool:
    """Equal calls as the template counts them: one specialisation and policy, the same Views, equal scalars."""
    if got.prepared is not want.prepared or got.futures or (got.policy is not want.policy
                                                           and got.policy != want.policy):
        return False
    return got.args is want.args or all(a is b or _same_scalar(a, b) for a, b in zip(got.args, want.args))


def _fresh(call: KernelCall) -> KernelCall:
    """A trace entry's call like ``call`` (a call object is never reused: a failure is recorded on it)."""
    return KernelCall(call.prepared, call.policy, call.args, site=call.site, request=call.request)


class Rerun:
    """The templates of a runtime, and how far the calls made since the last flush match one of them."""

    def __init__(self):
        self.templates: dict = {}  # id(first step's workunit) -> Template
        self.current: Template | None = None
        self.matched = 0  # steps of ``current`` matched and not yet run
        self.futures: list = []  # per matched step, the Future a reduction returned (None for a parallel_for)
        self.mark = 0  # the trace's arrival number at the end of the last flush: older entries are a head

    # --- matching (the caller holds guard.lock) ---------------------------------------------------
    def take(self, rt, op: str, args: tuple, kwargs: dict):
        """If ``parallel_<op>(*args, **kwargs)`` is the template's next call: count it (it runs at the next host
        access) and return what the call returns (None, or a reduction's Future); else ``MISS``, which leaves it
        to the ordinary path."""
        if len(args) != 2:
            if len(args) != 3 or type(args[0]) is not str:
                return MISS
            args = args[1:]  # PyKokkos's kernel label
        matched = self.matched
        if matched:
            template = self.current
            if matched == len(template.steps):
                return MISS
        else:
            template = self.templates.get(id(args[1]))
            if template is None or rt.failures or not (rt.enabled and rt.fuse) \
                    or rt.default_space is not template.space or not self._holds_head(rt.logged.entries, template):
                return MISS
        if rt.batch is not None:
            return MISS
        step = template.steps[matched]
        policy = args[0]
        if args[1] is not step.workunit or op != step.op or len(kwargs) != len(step.kwargs) or (
                policy is not step.policy and (type(policy) is not type(step.policy) or policy != step.policy)):
            return MISS
        get = kwargs.get
        for name, want in step.kwargs:
            got = get(name, _MISSING)
            if got is not want and not _same_scalar(got, want):
                return MISS
        if escape.live() and any(view.escaped(write) for view, write in step.escapable):
            return MISS
        if views.zeroed and step.host:
            views.touched([view for view, _ in step.escapable])
        if not matched:
            self.futures = []
        self.current = template
        self.matched = matched + 1
        rt.counts["ops_traced"] += 1
        result = Future(step.call.prepared.spec.accs[0], rt.resolve) if op == "reduce" else None
        self.futures.append(result)
        return result

    @staticmethod
    def _holds_head(entries: list, template: Template) -> bool:
        head = template.head
        return len(entries) == len(head) and all(_same_call(e.call, c) for e, c in zip(entries, head))

    def materialize(self, trace) -> None:
        """Put the matched calls in ``trace`` as ordinary entries, after the head already there (a reduction's
        Future becomes its entry's)."""
        steps, self.matched = self.current.steps[:self.matched], 0
        for step, future in zip(steps, self.futures):
            trace.append(_with_result(_fresh(step.call), future))

    # --- running ---------------------------------------------------------------------------------
    def run(self, rt) -> None:
        """At a host access: launch a complete match's kernels, or make a partial one trace entries."""
        template = self.current
        if not (self.matched == len(template.steps) and self._still_valid(rt, template)) \
                or any(profit.repaid(entry) for entry in template.waiting):
            self.materialize(rt.logged)
            return
        self.matched = 0
        trace = rt.logged
        head = [e.call for e in trace.entries]
        trace.clear()  # the head: it runs now
        rt.counts["flushes"] += 1
        record = explain.rerun(rt, template.record)
        rt.backend.enter_thread()
        rt._running = True
        try:
            rt.counts["groups_unfused"] += template.unfused
            for number, (kernel, slots, passed, members, _) in enumerate(template.launches):
                try:
                    results = iter(kernel.launch(slots, passed))
                except KfuseError as exc:
                    self._after_failure(rt, template, number, exc, record, head)
                    return
                for p in members:
                    if template.partition[p].prepared.spec.op == "reduce":
                        self._future(template, p, head).set_result(next(results))
        finally:
            rt._running = False
            for i in template.tail:
                trace.append(_with_result(_fresh(template.steps[i].call), self.futures[i]))
            self.mark = trace.arrivals

    def _future(self, template: Template, position: int, head: list):
        """The Future partition call ``position`` delivers: a head call's own, or the one its step returned."""
        kind, k = template.owners[position]
        return head[k].result if kind == "head" else self.futures[k]

    def _call_for(self, template: Template, position: int, head: list) -> KernelCall:
        return _with_result(_fresh(template.partition[position]), self._future(template, position, head))

    @staticmethod
    def _still_valid(rt, template: Template) -> bool:
        return rt.enabled and rt.fuse and rt.default_space is template.space and all(
            view.ptr == ptr and view.shape == shape and view.strides == strides
            for view, ptr, shape, strides in template.geometry) and _settings() == template.settings

    def _after_failure(self, rt, template: Template, number: int, exc: KfuseError, record, head: list) -> None:
        """Launch ``number`` failed: a fault loses what the pipeline says it loses; a launch that did not start
        goes back to the trace with every later one (the ordinary path then runs and reports them)."""
        self.templates.pop(id(template.steps[0].workunit), None)
        record.notes.append(f"rerun launch {number + 1} failed: {str(exc).splitlines()[0] if str(exc) else exc}")
        members = list(template.launches[number][3])
        later = [i for launch in template.launches[number + 1:] for i in launch[3]]
        if is_fault(exc):
            after_fault([self._call_for(template, i, head) for i in members], exc, rt.failures)
        else:
            later += members
        for i in sorted(later):
            rt.logged.append(self._call_for(template, i, head))

    # --- keeping ---------------------------------------------------------------------------------
    def keep(self, rt, entries: list, launches: list | None, record, waiting: tuple = ()) -> None:
        """After a flush ran ``entries``: keep it as a template if a repetition of it can be rerun (module
        docstring), and mark the trace's pending calls as the next flush's head. ``waiting``: the profitability
        entries of groups the cost model runs apart until their compile is repaid (each rerun counts one more
        occurrence of them, and the first the model would fuse goes through the trace instead)."""
        mark, self.mark = self.mark, rt.logged.arrivals
        if launches is None or rt.failures or guard.forked_after_start:
            return
        left = rt.logged.entries
        if any(e.number < mark for e in left):
            return  # calls older than the last flush still pending: the trace does not repeat
        head = tuple(e.call for e in entries if e.number < mark)
        made = sorted([e for e in entries if e.number >= mark] + left, key=lambda e: e.number)
        if not made:
            return
        geometry, live = {}, escape.live()
        escapables = [_escapable(e.call, live, geometry) for e in made]
        if None in escapables or any(_escapable(call, live, geometry) is None for call in head):
            return
        steps = []
        for entry, escapable in zip(made, escapables):
            call = entry.call
            op, (policy, workunit), kwargs = call.request
            steps.append(Step(op, workunit, policy, tuple(kwargs.items()), call, escapable,
                              runs_off_gpu(call.prepared.backend, call.prepared.spec.space)))
        pending = {id(e) for e in left}
        tail = tuple(i for i, e in enumerate(made) if id(e) in pending)
        step_of = {id(e): i for i, e in enumerate(made)}
        owners = tuple(("head", k) if k < len(head) else ("step", step_of[id(e)]) for k, e in enumerate(entries))
        if len(self.templates) >= _KEPT:
            self.templates.clear()
        self.templates[id(steps[0].workunit)] = Template(
            head, tuple(steps), tail, tuple(e.call for e in entries), owners, tuple(launches),
            sum(record.apart(g) for g in record.groups), waiting, tuple(geometry.values()),
            _settings(), rt.default_space, replace(record))

    def forget(self) -> None:
        self.templates.clear()
        self.current, self.matched, self.futures = None, 0, []


def _escapable(call: KernelCall, live: bool, geometry: dict) -> tuple | None:
    """A rerunnable call's ((View, written?), ...), each View's geometry noted in ``geometry``; None for a call a
    rerun cannot repeat: not made as ``pk.parallel_*(policy, workunit, **kwargs)``, a scan, one taking a Future or
    printing, or one on memory the host can reach past the barriers (escape.py)."""
    prepared = call.prepared
    if call.request is None or call.futures or prepared.spec.op == "scan" or prepared.prints:
        return None
    escapable = tuple((call.args[i], write) for i, write in prepared.view_params)
    for view, write in escapable:
        if type(view) is not views.View or live and view.escaped(write):
            return None
        geometry[id(view)] = (view, view.ptr, view.shape, view.strides)
    return escapable


def _with_result(call: KernelCall, future) -> KernelCall:
    """``call`` delivering ``future`` (a reduction matched by a rerun returned it already)."""
    if future is not None:
        call.result, future.call = future, call
    return call
