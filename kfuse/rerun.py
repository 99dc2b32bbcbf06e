"""Rerun of a repeated flush: a time-step loop makes the same calls between two host reads, on the same Views or
on new Views of the same geometry (a program that makes its arrays anew for each run).

A partition that was replayed or planned from the cache (pipeline.schedule: its signature or its graph was
seen before) and ran with no failure, no group
being timed and no array left unstored is kept as a ``Template``: the calls that were pending from before
(``head``), each call the program made since, as it made it (workunit, policy, keyword arguments), which of
those stayed pending (``tail``: the partition did not need them), and the launches that ran the partition. Each
distinct View the calls take is a slot. While the trace holds the head and the next calls match a template one by
one -- the same workunit and policy objects, scalars of the same type and value (0.0 and -0.0 apart), in each slot
the View of the template's last run or a new View in its place, the same one wherever the slot recurs -- the
calls are only counted: no binding, no trace entry, no analysis (a matched reduction or scan returns a new
Future). At the next host access (or a Future's value) a complete match launches the kept kernels again with the
slots' Views, delivers the reductions' and scans' values and leaves the tail pending, and the access goes on
through the trace as usual.
Anything else -- another call, another scalar, an escaped View, recorded array operations, a failure, a match
cut short -- turns the matched calls into ordinary trace entries, as if nothing had been matched.

Why this is never wrong: equal calls over an equal trace make the same partition, plan, groups, kernels and
arguments, so the kept launches are what the trace would run. A slot's View of the last run is checked again
before the launches (pointer, shape, strides) whenever a View was resized since its pointers were taken
(``View.resize`` is the one way a View gets new memory or a shape: ``views.resize_count``). A new View may fill a slot
where its View has the slot's dtype, rank, layout, trait, shape and strides, and the slots' Views overlap as the
template's did (checked before the launches): where the template's Views share no byte, the slots' share none
(so no View fills two slots); where some share memory (two Views of one array, say: a result and an operation's
View of it), each slot's View lies at the same place (offset, shape, strides) in the same one of the slots' memory
owners, which own their memory (``_layout``: Views of different owners share no byte). The fusion analysis sees
only the calls and which Views overlap, so such a repetition makes the same plan and kernels; the new Views become
the template's. The head's calls (already in the trace) must equal its
calls the same way, their Views filling slots as the steps' do (a program that makes its arrays anew each run and
reads a result between two of its calls has a head of new Views each run). The partition is closed under
dependencies (tracer/trace.py), so running it is right at any host access, needed or not (a pending call may run
early), and whatever the access needs from the tail the trace then runs. A template holds the Views of its last
run until it is replaced; at most ``_PER_WORKUNIT`` templates are kept per first workunit (loops whose flushes
alternate, e.g. with and without a neighbour-list rebuild, or runs under other transforms) and ``_KEPT`` in all.

Under ``KFUSE_PROFIT=measure`` a template whose partition is the whole flush (no head, no tail) is also judged
against running its calls untraced (kfuse/untraced.py ``Trial``): a repetition run untraced launches each call's
own kernel as the call is made, once nothing is pending -- what the program does with fusion off, so it needs no
View check beyond the kernel's specialisation (dtype, rank, layout, trait, shape and strides, for the timings'
sake). A call that leaves the template ends the untraced repetition and is then the first call after it (it may
start a repetition of another template, else it goes the ordinary way). A template none of
whose launches runs calls fused runs untraced from the start (untraced.lone). After an untraced repetition of a
template decided so, the next repetition's first call is tried against that template first (``Rerun.resume``):
fusing, nothing pending, the same space, and the settings it was made under, those asked at every
``RESUME_CHECKS``-th repetition only (``Rerun._resumes``), so a setting changed between repetitions ends them within
that many (each computes what eager calls compute, under any setting). Untraced repetitions should cost what the
eager calls they are cost, and the settings' look-ups (four environment variables) and the look-ups among the
templates cost more than the calls' comparisons (``benchmarks/bench_untraced_repetition.py --calls 2
--no-kernels``, one thread here, best of 3,000 runs, the two calls over eager's: 3.2-4.2 us looked up, 2.3-2.5 us
resumed asking the settings each time, -0.1-+0.2 us resumed as now, under Python 3.11; under 3.12, where binding is
cheaper and the comparison dearer, 4.5-4.8, 3.5-3.8 and 1.4-1.8 us).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import compress, count
from math import copysign
from operator import is_not

from . import config, escape, guard, untraced, views
from .calls import KernelCall, runs_off_gpu
from .errors import KfuseError
from .future import Future, done
from .fuser import explain, profit
from .pipeline import after_fault, kernel_of, kernel_ready
from .runtime.launch import policy_slots
from .tracer.failures import is_fault
from .transforms import manager as transforms

_KEPT = 16  # templates kept per runtime
_PER_WORKUNIT = 4  # templates kept per first workunit
#: a repetition resumed untraced asks the settings again at every RESUME_CHECKS-th one (``Rerun._resumes``)
RESUME_CHECKS = 16
MISS = object()  # ``take``'s answer for a call that is not a template's next
_SCALARS = (float, int, bool)
_MISSING = object()
# a step's keyword argument that is no View has one of these slots: _PLAIN for a nonzero float, int or bool (a value
# of its type equal to it is the same scalar: no sign of zero to tell apart), _SCALAR for the rest (``_same_scalar``)
_PLAIN, _SCALAR = -1, -2
_View = views.View


@dataclass(frozen=True)
class Step:
    """A call the program made: what it passed, and how the call it made is rebuilt from the slots."""

    op: str
    workunit: object
    policy: object  # as the program gave it (an int, a RangePolicy...)
    kwargs: tuple  # ((name, value, slot, place), ...) as the program gave them: slot < 0 for a scalar, value None and
    #                the argument position ``place`` for a View
    prepared: object  # the call's specialisation
    bound_policy: object
    args: tuple  # the call's arguments, None where a View goes
    positions: tuple  # ((argument position, slot), ...) of its Views
    site: str
    host: bool  # runs off the GPU: its Views' contents are no longer known (views.constant)
    slots: tuple  # the bound policy's slots of the argument buffer (runtime/launch.py policy_slots)
    shared: bool  # a slot's View goes to more than one of its arguments


@dataclass(frozen=True)
class Head:
    """A call pending before a template's first step, as its slots count it: an equal pending call has the same
    specialisation, policy and scalars, and its Views fill the slots as a step's would."""

    prepared: object
    policy: object
    args: tuple  # the call's arguments, None where a View goes
    positions: tuple  # ((argument position, slot), ...) of its Views


@dataclass(frozen=True)
class Template:
    head: tuple  # a Head per call pending before the first step (each must have an equal one in the trace)
    steps: tuple
    tail: tuple  # step numbers left pending by the partition
    owners: tuple  # per partition position (the order it ran its calls): ("head", k) or ("step", i)
    in_order: bool  # the owners are the steps in order, no head (a rerun's calls are then the program's next ones)
    reducing: tuple  # the steps that deliver a reduction's or scan's value
    launches: tuple  # [kernel, policy slots, arguments, ((position, slot), ...), partition positions, those of them
    #                  that deliver a reduction's or scan's value, the argument buffer packed (on a device a
    #                  launch.KeptDeviceBuffer)], as they ran
    reach: tuple  # per slot, the (launch number, argument position) pairs its View fills
    unfused: int  # groups the profitability decisions run apart
    waiting: tuple  # their entries where the cost model runs them apart until their compile is repaid
    views: list  # per slot, the View of the last run
    pointers: list  # per slot, that View's pointer then
    taken_at: list  # [views.resize_count() when the pointers were taken]: while it is the same, no View moved
    kinds: tuple  # per slot, (sig, shape, strides): what its View must have
    writes: tuple  # per slot, whether a call writes its View
    disjoint: bool  # the slots' Views share no byte: new Views may fill slots
    layout: tuple | None  # else how they overlap (``_layout``): new Views that overlap so may fill them; None: none may
    settings: tuple  # what the plan and kernels were made under (see ``_settings``)
    space: object  # the runtime's default space
    record: object  # the recorded flush's explain record
    form: tuple  # the head's length and the steps' workunits: one of the same form and settings replaces it
    trial: untraced.Trial | None  # rerun or run untraced (module docstring), for a partition that is the whole flush


_WATCHED = config.Watch(config.MAX_GROUP, config.PROFIT, config.TRANSFORMS, config.ALIGN_VIEWS)
_known: list = [None, None, None]  # the watched raw values, a runtime's transform set, and the settings they give


def _settings(rt) -> tuple:
    """What ``rt``'s plans and kernels are made under: KFUSE_MAX_GROUP, KFUSE_PROFIT, the transform set and
    KFUSE_ALIGN_VIEWS (read again only when the environment or the runtime's choice changed: every repetition
    asks)."""
    raw, chosen = _WATCHED.now(), rt.transforms
    if chosen is not _known[1] or raw != _known[0]:
        _known[:] = raw, chosen, (config.MAX_GROUP.get(), config.PROFIT.get(),
                                  chosen if chosen is not None else transforms.from_environment(),
                                  config.ALIGN_VIEWS.get())
    return _known[2]


def _same_scalar(got, want) -> bool:
    kind = type(want)
    if type(got) is not kind or kind not in _SCALARS or got != want:
        return False
    return kind is not float or got != 0.0 or copysign(1.0, got) == copysign(1.0, want)


def _fresh(call: KernelCall) -> KernelCall:
    """A trace entry's call like ``call`` (a call object is never reused: a failure is recorded on it)."""
    return KernelCall(call.prepared, call.policy, call.args, site=call.site, request=call.request)


def _disjoint(passed) -> bool:
    """Whether no two of the Views ``passed`` share a byte."""
    spans = sorted(v.bounds for v in passed if v.bounds[0] != v.bounds[1])
    return all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def _layout(passed) -> tuple | None:
    """How the Views ``passed`` lie in memory relative to one another: per View, its memory owner's number (in order
    of first appearance) and its place there (byte offset, shape, strides, dtype: views.place). Views of different
    owners share no byte, so two lists of equal layouts overlap alike. None where an owner does not own its memory
    (NumPy over a foreign buffer, which other arrays may share)."""
    owners, layout = {}, []
    for view in passed:
        found = views.place(view)
        if not found:
            return None
        owner, where = found
        layout.append((owners.setdefault(owner, len(owners)), where))
    return tuple(layout)


class _Match:
    """A template being matched: the View in each slot so far."""

    __slots__ = ("template", "filled", "live", "laid_out", "changed")

    def __init__(self, template: Template, live: bool):
        self.template = template
        self.filled = [None] * len(template.views)
        self.live = live  # escaped memory exists now: a View is asked once, when it fills its slot
        self.laid_out = False  # the new Views overlap one another and the rest as the template's did (a replay's
        # memory made anew in the same layout, kfuse/capturing.py)
        self.changed = None  # the slots whose View is not the template's, once asked (``changed_slots``)

    @property
    def new(self) -> bool:
        """Whether a new View fills a slot (once every slot is filled)."""
        return bool(self.changed_slots())

    def takes(self, step: Step, kwargs: dict) -> bool:
        """Whether ``kwargs`` are the step's (module docstring); slots are filled only if they are."""
        get, filled = kwargs.get, self.filled
        first = None  # slots this step fills
        for name, want, slot, _ in step.kwargs:
            got = get(name, _MISSING)
            if slot < 0:
                if got is want or (type(got) is type(want) and got == want if slot == _PLAIN else
                                   _same_scalar(got, want)):
                    continue
                break
            now = filled[slot]
            if now is not None:
                if got is not now:
                    break
                continue
            if not self._fills(slot, got):
                break
            first = first or []
            first.append(slot)
        else:
            return True
        for slot in first or ():
            filled[slot] = None
        return False

    def _fills(self, slot: int, got) -> bool:
        """Fill an empty slot with ``got`` if it may take it: the slot's View of the last run, or a new View of the
        slot's kind where the template's Views share no byte or overlap in a known layout (module docstring); never
        an escaped one."""
        template = self.template
        if got is not template.views[slot]:
            if not template.disjoint and template.layout is None or type(got) is not _View \
                    or (got.sig, got.shape, got.strides) != template.kinds[slot]:
                return False
        if self.live and got.escaped(template.writes[slot]):
            return False
        self.filled[slot] = got
        return True

    def holds(self, entries: list) -> bool:
        """Whether the trace's pending calls are the template's head, their Views filling its slots."""
        head, filled = self.template.head, self.filled
        if len(entries) != len(head):
            return False
        for entry, want in zip(entries, head):
            got = entry.call
            if got.prepared is not want.prepared or got.futures or (got.policy is not want.policy
                                                                   and got.policy != want.policy):
                return False
            args = got.args
            if not all(b is None or a is b or _same_scalar(a, b) for a, b in zip(args, want.args)):
                return False
            for position, slot in want.positions:
                view = args[position]
                if not (view is filled[slot] if filled[slot] is not None else self._fills(slot, view)):
                    return False
        return True

    def call(self, step: Step) -> KernelCall:
        """A trace entry's call for ``step``, with the slots' Views."""
        filled = self.filled
        kwargs = {name: want if slot < 0 else filled[slot] for name, want, slot, _ in step.kwargs}
        return KernelCall(step.prepared, step.bound_policy, _args_with(step, filled), site=step.site,
                          request=(step.op, (step.policy, step.workunit), kwargs))

    def valid(self, rt) -> bool:
        """Whether the kept launches are what the trace would run with the slots' Views (module docstring). The
        settings were compared at the first call (``take``): a repetition runs under the settings it started in."""
        template, filled = self.template, self.filled
        if not (rt.enabled and rt.fuse and rt.default_space is template.space):
            return False
        if views.resize_count() != template.taken_at[0]:  # (only View.resize gives a View new memory, and a shape)
            for view, last, pointer, (_, shape, strides) in zip(filled, template.views, template.pointers,
                                                                template.kinds):
                if view is last and (view.ptr != pointer or view.shape != shape or view.strides != strides):
                    return False
        for slot in self.changed_slots():
            view, (_, shape, strides) = filled[slot], template.kinds[slot]
            if view.shape != shape or view.strides != strides:
                return False
        if not self.new or self.laid_out:
            return True
        return _disjoint(filled) if template.disjoint else _layout(filled) == template.layout

    def changed_slots(self) -> list:
        """The slots whose View is not the one of the template's last run (asked once every slot is filled: the
        answer is kept)."""
        if self.changed is None:
            self.changed = list(compress(count(), map(is_not, self.filled, self.template.views)))
        return self.changed

    def adopt(self) -> None:
        """Make the slots' Views the kept launches' (before they run) and the template's (``adopted``, after). Only
        the launches a new View reaches change (a replay's new result Views reach few of them)."""
        template, filled = self.template, self.filled
        moved: dict = {}
        for slot in self.changed_slots():
            for number, position in template.reach[slot]:
                moved.setdefault(number, []).append((position, filled[slot]))
        for number, placed in moved.items():
            launch = template.launches[number]
            passed = list(launch[2])
            for position, view in placed:
                passed[position] = view
            launch[2] = tuple(passed)
            if launch[6] is not None:
                launch[6] = launch[0].repacked(launch[6], launch[1], launch[2], [position for position, _ in placed])

    def adopted(self) -> None:
        """The slots' Views are the template's now that they ran: the next repetition on them is compared by
        identity, and the last run's Views are not held (after the launches: a replay's device waits for none of
        this)."""
        template, filled = self.template, self.filled
        template.views[:] = filled
        pointers = template.pointers  # (a same View's is unchanged: ``valid`` saw no resize, or its pointer again)
        for slot in self.changed_slots():
            pointers[slot] = filled[slot].ptr
        template.taken_at[0] = views.resize_count()


def _record_untraced(rt, kept, words: str, timed: bool) -> None:
    """explain()'s account of a kept flush (``kept``: its record) decided untraced (the repetitions leave no record
    of their own): by its timings, its groups of several calls say why; by rule (none fused), its notes do, and each
    group keeps what decided it."""
    choices = {g[0]: words for g in kept.groups if len(g) > 1} if timed else kept.choices
    record = replace(kept, how="untraced", analysis_seconds=0.0, kernels={}, notes=[] if timed else [words],
                     provisional=set(), choices=choices, positions=None)
    rt.records.append(record)
    if rt.record_sink is not None:
        rt.record_sink.append(record)


def _slots_of(head: tuple, made: list):
    """The slots of a template's Views: (views, slot of each View's id)."""
    order: dict = {}
    for call in [*head, *made]:
        for i, _ in call.prepared.view_params:
            view = call.args[i]
            order.setdefault(id(view), (len(order), view))
    return [view for _, view in order.values()], {key: slot for key, (slot, _) in order.items()}


class _Untraced:
    """A repetition of a template being run untraced: the next step, and the clock at its first call (one object
    per runtime, set again at each repetition's start: the untraced calls are the ones that must cost little)."""

    __slots__ = ("template", "next", "start", "equal")

    def start_with(self, template: Template, start: float) -> _Untraced:
        self.template, self.next, self.start = template, 0, start
        self.equal = (None, None)  # the last policy given that equals a step's, and that step's (a loop's calls
        # pass one policy object, compared once)
        return self


def _touched(step: Step, filled: list) -> None:
    """A step that runs off the GPU leaves its slots' Views of unknown contents (``views.constant``)."""
    if step.host:
        views.touched([filled[slot] for _, slot in step.positions])


def _untraced_args(step: Step, kwargs: dict, kinds: tuple):
    """The step's launch arguments from ``kwargs`` if they fit its kernel (scalars equal, each View of the slot's
    kind, one View per slot within the call), else None."""
    get, args = kwargs.get, list(step.args)
    for name, want, slot, place in step.kwargs:
        got = get(name, _MISSING)
        if slot < 0:
            if got is want or (type(got) is type(want) and got == want if slot == _PLAIN else _same_scalar(got, want)):
                continue
            return None
        if type(got) is not _View:
            return None
        sig, shape, strides = kinds[slot]
        if got.sig != sig or got.shape != shape or got.strides != strides:
            return None
        args[place] = got
    if step.shared:
        views_of: dict = {}
        if any(views_of.setdefault(slot, args[place]) is not args[place] for place, slot in step.positions):
            return None
    return tuple(args)


def _args_with(step: Step, views) -> tuple:
    """The step's arguments with the View of each of its slots (``views[slot]``)."""
    args = list(step.args)
    for position, slot in step.positions:
        args[position] = views[slot]
    return tuple(args)


class Rerun:
    """The templates of a runtime, and how far the calls made since the last flush match them."""

    def __init__(self):
        self.templates: dict = {}  # id(first step's workunit) -> [Template, ...], oldest first
        self.alive: list = []  # a _Match per template the calls so far match (the first's steps are the calls)
        self.matched = 0  # steps matched and not yet run
        self.futures: list = []  # per matched step, the Future a reduction or scan returned (else None)
        self.mark = 0  # the trace's arrival number at the end of the last flush: older entries are a head
        self.timing = False  # whether a template the match started with is still timed (untraced.Trial)
        self.span = (0.0, 0.0)  # then, the clock at the first matched call's start and at the last one's end
        self.first_call = None  # the program's place of the first matched call (Runtime.calls_made)
        self.untraced: _Untraced | None = None  # a repetition running untraced (then ``_untraced``)
        self._untraced = _Untraced()
        self.last: Template | None = None  # the template the last flush ran, kept or ran untraced (kfuse/capturing.py)
        self.resume: Template | None = None  # the template whose last repetition ran untraced, decided so (``take``)
        self.last_launches = 0  # and the kernels that flush launched

    # --- matching (the caller holds guard.lock) ---------------------------------------------------
    def wants(self, args: tuple) -> bool:
        """Whether ``take`` may take a call with these positional arguments (a check without the lock: a call it
        lets pass goes the ordinary way, which is always right)."""
        if self.matched or self.untraced is not None:
            return True
        return len(args) > 1 and id(args[2] if type(args[0]) is str and len(args) > 2 else args[1]) in self.templates

    def take(self, rt, op: str, args: tuple, kwargs: dict):
        """If ``parallel_<op>(*args, **kwargs)`` is a matched template's next call: count it (it runs at the next
        host access) and return what the call returns (None, or a reduction's Future); else ``MISS``, which leaves
        it to the ordinary path."""
        if len(args) != 2:
            if len(args) != 3 or type(args[0]) is not str:
                return MISS
            args = args[1:]  # PyKokkos's kernel label
        if self.untraced is not None:
            result = self._run_untraced(rt, op, args, kwargs)
            if result is not MISS or self.untraced is not None:
                return result
            # the call ended an untraced repetition (a step that leaves the template: a neighbour-list rebuild), so
            # it is the first call after it, which may start a repetition of another template
        matched = self.matched
        if matched:
            alive, timing, start = self.alive, self.timing, 0.0
        else:
            resume = self.resume
            if resume is not None and resume.steps[0].workunit is args[1] and self._resumes(rt, resume):
                self.untraced, self.futures = self._untraced.start_with(resume, 0.0), []
                result = self._run_untraced(rt, op, args, kwargs)
                if result is not MISS:
                    return result
            start = rt.profit.clock()  # a timed repetition's clock starts before its first call's look-ups, on both
            # sides (rerun and untraced: each pays its own)
            listed = self.templates.get(id(args[1]))
            if listed is None or rt.failures or not (rt.enabled and rt.fuse):
                return MISS
            settings, space = _settings(rt), rt.default_space
            listed = [t for t in listed if t.space is space and t.settings == settings]
            if not listed:
                return MISS
            entries = rt.logged.entries
            if rt.may_run_now():  # (nothing matched, no failure: checked above)
                result = self._start_untraced(rt, listed, op, args, kwargs, start)
                if result is not MISS:
                    return result
            timing = any(t.trial is not None and t.trial.untraced is None for t in listed)
            live = escape.live()
            alive = [match for match in (_Match(t, live) for t in listed) if match.holds(entries)]
        if rt.batch is not None:
            return MISS
        policy, workunit = args
        live = escape.live()  # escaped memory may appear between two calls (a new View over a held array)
        survivors = []
        for match in alive:
            steps = match.template.steps
            if len(steps) <= matched:
                continue
            step = steps[matched]
            if workunit is not step.workunit or op != step.op or len(kwargs) != len(step.kwargs) or (
                    policy is not step.policy and (type(policy) is not type(step.policy) or policy != step.policy)):
                continue
            match.live = live
            if match.takes(step, kwargs):
                survivors.append(match)
        if not survivors:
            return MISS
        first = survivors[0]
        if not matched:
            self.futures, self.first_call, self.timing, self.span = [], rt.calls_made, timing, (start, start)
        if not matched or len(survivors) != len(alive):  # else self.alive stands
            self.alive = survivors
        step = first.template.steps[matched]
        if views.constant:  # each template numbers its own slots
            for match in survivors:
                _touched(match.template.steps[matched], match.filled)
        self.matched = matched + 1
        rt.counts["ops_traced"] += 1
        if op == "for":
            self.futures.append(None)
            result = None
        else:
            result = Future(step.prepared.spec.accs[0], rt.resolve)
            self.futures.append(result)
        if timing:
            self.span = (self.span[0], rt.profit.clock())
        return result

    def _resumes(self, rt, template: Template) -> bool:
        """Whether the next repetition of ``template``, decided untraced, may start as the last one did (module
        docstring): fusing, nothing pending, the same space, and the settings it was made under, asked at every
        ``RESUME_CHECKS``-th repetition only (the look-ups of four environment variables cost as much as the rest of
        the start, and a repetition run untraced computes what eager calls compute under any setting)."""
        if not (rt.fuse and template.space is rt.default_space and rt.may_run_now()):
            return False
        if template.trial.left % RESUME_CHECKS == 0 and template.settings != _settings(rt):
            self.resume = None  # made under other settings than these: the look-ups below find what fits
            return False
        return True

    def _start_untraced(self, rt, listed: list, op: str, args: tuple, kwargs: dict, start: float):
        """Run the call as the first of an untraced repetition of a template of these settings (module docstring), if
        one is due."""
        for template in listed:
            trial = template.trial
            if trial is None or not trial.untraced and not untraced.runs_untraced(trial, config.PROFIT_TRIALS.get()):
                continue  # (decided untraced: no trial bookkeeping to ask)
            if trial.untraced is None:  # a timing: every kernel loaded, then the clock starts again if that took
                # any (decided, a call whose kernel was unloaded ends the repetition and goes the ordinary way)
                unloaded = {id(s.prepared): s.prepared for s in template.steps if s.prepared.kernel is None}
                if not all(kernel_ready(prepared) for prepared in unloaded.values()):
                    trial.untraced = False  # running it untraced would compile its calls' kernels: rerun it is
                    continue
                for prepared in unloaded.values():
                    kernel_of(prepared)  # from the compile cache, before the timing starts
                if unloaded:
                    start = rt.profit.clock()
            self.untraced, self.futures = self._untraced.start_with(template, start), []
            result = self._run_untraced(rt, op, args, kwargs)
            if result is not MISS:
                return result
        return MISS

    def _run_untraced(self, rt, op: str, args: tuple, kwargs: dict):
        """Launch the call now if it is the untraced repetition's next step; else end the repetition (``MISS``)."""
        run = self.untraced
        template = run.template
        step = template.steps[run.next]
        policy, workunit = args
        call_args = None
        if workunit is step.workunit and op == step.op and len(kwargs) == len(step.kwargs) and not rt.failures \
                and not rt.logged.entries and rt.batch is None and step.prepared.kernel is not None and (
                policy is step.policy or run.equal[0] is policy and run.equal[1] is step.policy
                or type(policy) is type(step.policy) and policy == step.policy):
            if policy is not step.policy:
                run.equal = (policy, step.policy)
            call_args = _untraced_args(step, kwargs, template.kinds)
        if call_args is None:
            self.untraced = None
            return MISS
        prepared = step.prepared
        if views.constant and step.host:
            views.touched([call_args[i] for i, _ in step.positions])
        prepared.backend.enter_thread()
        try:
            results = prepared.kernel.launch_queued(step.slots, call_args)  # waited for where read
        except BaseException:
            self.untraced = None
            raise
        rt.counts["calls_untraced"] += 1
        run.next += 1
        result = None if op == "for" else done(prepared.spec.accs[0], results[0])
        self.futures.append(result)
        if run.next == len(template.steps):
            self.untraced, self.last, self.last_launches = None, template, len(template.steps)
            if template.trial.untraced:
                untraced.ran_untraced(template.trial)
                self.resume = template if template.trial.untraced else None
            else:
                self._timed(rt, template, True, rt.profit.clock() - run.start)
        return result

    def _timed(self, rt, template: Template, untraced_run: bool, seconds: float) -> None:
        """A repetition of ``template`` ended, rerun or untraced, in ``seconds``: a timing while its trial lasts
        (the GPU's work awaited, so both sides count their kernels). Decided untraced, its repetitions run untraced
        as its timings did (kfuse/untraced.py); explain() keeps the decision's record."""
        trial = template.trial
        if trial.untraced is not None:
            return
        clock = rt.profit.clock
        start = clock()
        rt.backend.synchronize()
        rt.counts["profit_trials"] += 1
        words = untraced.timed(trial, untraced_run, seconds + clock() - start, config.PROFIT_TRIALS.get(),
                               len(template.steps))
        if trial.untraced is not None:
            rt.counts["profit_decided"] += 1
        if words:
            _record_untraced(rt, template.record, words, True)

    def _drop(self, template: Template) -> None:
        """No more reruns of ``template`` (its first workunit's calls then cost no look while none is left)."""
        if self.resume is template:
            self.resume = None
        key = id(template.steps[0].workunit)
        listed = [t for t in self.templates.get(key, ()) if t is not template]
        if listed:
            self.templates[key] = listed
        else:
            self.templates.pop(key, None)

    def materialize(self, trace) -> None:
        """Put the matched calls in ``trace`` as ordinary entries, after the head already there (a reduction's
        Future becomes its entry's)."""
        match, matched = self.alive[0], self.matched
        self.matched, self.alive = 0, []
        for k, (step, future) in enumerate(zip(match.template.steps[:matched], self.futures)):
            call = _with_result(match.call(step), future)
            call.position = self.first_call + k  # the matched calls were the program's next ones in a row
            trace.append(call)

    # --- running ---------------------------------------------------------------------------------
    def run(self, rt) -> None:
        """At a host access: launch a complete match's kernels, or make a partial one trace entries."""
        start = rt.profit.clock()  # (a timed repetition counts its checks below too)
        match = next((m for m in self.alive if len(m.template.steps) == self.matched), None)
        if match is None or not match.valid(rt) or \
                (match.template.waiting and any(profit.repaid(entry) for entry in match.template.waiting)):
            self.materialize(rt.logged)
            return
        template = match.template
        if match.new:
            match.adopt()
        self.matched, self.alive, self.last, self.last_launches = 0, [], template, len(template.launches)
        trace = rt.logged
        head = [e.call for e in trace.entries]
        trace.clear()  # the head: it runs now
        rt.counts["flushes"] += 1
        first = self.first_call
        record = explain.rerun(rt, template.record, range(first, first + len(template.owners)) if template.in_order
                               else [head[k].position if kind == "head" else first + k for kind, k in template.owners])
        rt.backend.enter_thread()
        rt._running = True
        try:
            rt.counts["groups_unfused"] += template.unfused
            for number, (kernel, slots, passed, _, _, delivering, packed) in enumerate(template.launches):
                try:
                    results = iter(kernel.launch_queued(slots, passed, packed))  # the caller waits if it must
                except KfuseError as exc:
                    self._after_failure(rt, match, number, exc, record, head)
                    return
                for p in delivering:
                    self._future(template, p, head).set_result(next(results))
        finally:
            rt._running = False
            if match.new:
                match.adopted()
            for i in template.tail:
                call = _with_result(match.call(template.steps[i]), self.futures[i])
                call.position = self.first_call + i
                trace.append(call)
            self.mark = trace.arrivals
        if self.timing and template.trial is not None:  # (a replay is not a repetition the trial compares)
            first, last = self.span
            self._timed(rt, template, False, last - first + rt.profit.clock() - start)

    def _future(self, template: Template, position: int, head: list):
        """The Future partition call ``position`` delivers: a head call's own, or the one its step returned."""
        kind, k = template.owners[position]
        return head[k].result if kind == "head" else self.futures[k]

    def _call_for(self, match: _Match, position: int, head: list) -> KernelCall:
        kind, k = match.template.owners[position]
        call = _fresh(head[k]) if kind == "head" else match.call(match.template.steps[k])
        return _with_result(call, self._future(match.template, position, head))

    def _after_failure(self, rt, match: _Match, number: int, exc: KfuseError, record, head: list) -> None:
        """Launch ``number`` failed: a fault loses what the pipeline says it loses; a launch that did not start
        goes back to the trace with every later one (the ordinary path then runs and reports them)."""
        template = match.template
        self._drop(template)
        record.notes.append(f"rerun launch {number + 1} failed: {str(exc).splitlines()[0] if str(exc) else exc}")
        members = list(template.launches[number][4])
        later = [i for launch in template.launches[number + 1:] for i in launch[4]]
        if is_fault(exc):
            after_fault([self._call_for(match, i, head) for i in members], exc, rt.failures)
        else:
            later += members
        for i in sorted(later):
            rt.logged.append(self._call_for(match, i, head))

    # --- keeping ---------------------------------------------------------------------------------
    def keep(self, rt, entries: list, launches: list | None, record, waiting: tuple = ()) -> bool:
        """After a flush ran ``entries``: keep it as a template if a repetition of it can be rerun (module
        docstring), and mark the trace's pending calls as the next flush's head. ``launches``: (kernel, policy
        slots, arguments, partition positions) as pipeline.run_partition ran them. ``waiting``: the
        profitability entries of groups the cost model runs apart until their compile is repaid (each rerun counts
        one more occurrence of them, and the first the model would fuse goes through the trace instead). Whether
        the template kept is timed against running untraced (``Template.trial``)."""
        mark, self.mark = self.mark, rt.logged.arrivals
        if rt.failures:  # no rerun while a failure stands; and templates would keep its poisoned memory alive
            self.forget()
            return False
        if launches is None or not record.fused or guard.forked_after_start:
            return False
        left = rt.logged.entries
        if any(e.number < mark for e in left):
            return False  # calls older than the last flush still pending: the trace does not repeat
        head = tuple(e.call for e in entries if e.number < mark)
        made = sorted([e for e in entries if e.number >= mark] + left, key=lambda e: e.number)
        if not made:
            return False
        live = escape.live()
        if not all(_rerunnable(e.call, live) for e in made) or not all(_rerunnable(call, live) for call in head):
            return False
        calls = [e.call for e in made]
        slot_views, slot_of = _slots_of(head, calls)
        steps = tuple(_step(call, slot_of) for call in calls)
        pending = {id(e) for e in left}
        tail = tuple(i for i, e in enumerate(made) if id(e) in pending)
        step_of = {id(e): i for i, e in enumerate(made)}
        owners = tuple(("head", k) if k < len(head) else ("step", step_of[id(e)]) for k, e in enumerate(entries))
        kept = [[kernel, slots, passed, tuple((i, slot_of[id(a)]) for i, a in enumerate(passed) if id(a) in slot_of),
                 members, tuple(p for p in members if _op_at(p, owners, head, steps) != "for"),
                 kernel.packed(slots, passed)]
                for kernel, slots, passed, members in launches]
        written = {slot_of[id(call.args[i])] for call in (*head, *calls) for i, w in call.prepared.view_params if w}
        disjoint = _disjoint(slot_views)
        template = Template(
            tuple(_head(call, slot_of) for call in head), steps, tail, owners,
            owners == tuple(("step", i) for i in range(len(steps))),
            tuple(i for i, step in enumerate(steps) if step.op != "for"),
            tuple(kept), _reach(kept, len(slot_views)),
            sum(record.apart(g) for g in record.groups), waiting,
            slot_views, [v.ptr for v in slot_views], [views.resize_count()],
            tuple((v.sig, v.shape, v.strides) for v in slot_views),
            tuple(s in written for s in range(len(slot_views))), disjoint, None if disjoint else _layout(slot_views),
            _settings(rt), rt.default_space, replace(record), (len(head), *(id(s.workunit) for s in steps)),
            untraced.Trial() if config.PROFIT.get() == "measure" and not (head or tail or waiting) else None)
        if template.trial is not None and all(len(members) == 1 for *_, members in launches):
            _record_untraced(rt, template.record, untraced.lone(template.trial), False)
        key = id(steps[0].workunit)
        listed = [t for t in self.templates.get(key, ())
                  if t.form != template.form or t.settings != template.settings][1 - _PER_WORKUNIT:]
        listed.append(template)
        if sum(len(others) for others in self.templates.values()) >= _KEPT:
            self.templates.clear()
        self.templates[key] = listed
        self.last, self.last_launches, self.resume = template, len(launches), None
        return template.trial is not None

    def forget(self) -> None:
        self.templates.clear()
        self.alive, self.matched, self.futures, self.untraced, self.last, self.resume = [], 0, [], None, None, None

    # --- replaying (kfuse/capturing.py) ------------------------------------------------------------
    @staticmethod
    def settled(rt, template: Template) -> bool:
        """Whether ``template`` is the whole of its flush, made under the settings in force, and its groups decided:
        a replay launches what its last run launched (a group run apart until its fused kernel's compile is repaid
        counts each repetition, as a rerun does, and the first that repays it is traced). Its trial against running
        untraced (``Template.trial``) may still be timing: it weighs comparing each call, which a replay does not
        do, so a function captured before any uncaptured repetition decided it is replayed all the same."""
        return not template.head and not template.tail and template.space is rt.default_space \
            and template.settings == _settings(rt) and not guard.forked_after_start

    def replay(self, rt, template: Template, filled: list, laid_out: bool = False) -> list:
        """Run ``template``'s calls now with ``filled`` in its slots (Views it ran with, whose memory is unchanged:
        the caller checked; ``laid_out``: or new Views over new memory, overlapping one another as the Views they
        replace did), as if the program had just made them and then touched the host (nothing may be pending: the
        caller flushed); the Futures its reductions and scans deliver, per step (None for a ``for``).
        A settled template only (``settled``). Its kept launches run even where its trial decided untraced: that
        decision weighed the rerun's comparison of every call, which a replay does not make."""
        steps = template.steps
        if views.constant:
            for step in steps:
                _touched(step, filled)
        rt.counts["calls_captured"] += len(steps)
        self.futures = futures = [None] * len(steps)
        for k in template.reducing:
            futures[k] = Future(steps[k].prepared.spec.accs[0], rt.resolve)
        match = _Match(template, False)
        match.filled[:] = filled
        match.laid_out = laid_out
        self.alive, self.matched, self.first_call, self.timing = [match], len(steps), rt.calls_made + 1, False
        rt.calls_made += len(steps)
        self.run(rt)  # (a View moved, or a compile now repaid: the calls become trace entries, which the caller runs)
        return futures


def _reach(launches: list, slots: int) -> tuple:
    """Per slot, the (launch number, argument position) pairs it fills in ``launches`` (``Template.reach``)."""
    reach: list = [[] for _ in range(slots)]
    for number, launch in enumerate(launches):
        for position, slot in launch[3]:
            reach[slot].append((number, position))
    return tuple(map(tuple, reach))


def _op_at(position: int, owners: tuple, head: tuple, steps: tuple) -> str:
    """The operation of the call at partition ``position`` (a head call's or a step's)."""
    kind, k = owners[position]
    return (head[k].prepared if kind == "head" else steps[k].prepared).spec.op


def _rerunnable(call: KernelCall, live: bool) -> bool:
    """Whether a rerun can repeat ``call``: made as ``pk.parallel_*(policy, workunit, **kwargs)``, taking no Future,
    not printing, its Views all ``View``s the host cannot reach past the barriers (escape.py)."""
    prepared = call.prepared
    if call.request is None or call.futures or prepared.prints:
        return False
    for i, write in prepared.view_params:
        view = call.args[i]
        if type(view) is not _View or live and view.escaped(write):
            return False
    return True


def _slotted(call: KernelCall, slot_of: dict) -> tuple:
    """The call's arguments with None where a View goes, and ((argument position, slot), ...) of its Views."""
    positions = tuple((i, slot_of[id(call.args[i])]) for i, _ in call.prepared.view_params)
    args = list(call.args)
    for i, _ in positions:
        args[i] = None
    return tuple(args), positions


def _step(call: KernelCall, slot_of: dict) -> Step:
    op, (policy, workunit), kwargs = call.request
    prepared = call.prepared
    args, positions = _slotted(call, slot_of)
    place = {name: i for i, (name, _) in enumerate(prepared.spec.params)}
    form = tuple((name, None, slot_of[id(value)], place[name]) if type(value) is _View else
                 (name, value, _PLAIN if type(value) in _SCALARS and value else _SCALAR, None)
                 for name, value in kwargs.items())
    slots = [slot for _, slot in positions]
    return Step(op, workunit, policy, form, prepared, call.policy, args, positions, call.site,
                runs_off_gpu(prepared.backend, prepared.spec.space), policy_slots(call.policy),
                len(set(slots)) != len(slots))


def _head(call: KernelCall, slot_of: dict) -> Head:
    return Head(call.prepared, call.policy, *_slotted(call, slot_of))


def _with_result(call: KernelCall, future) -> KernelCall:
    """``call`` delivering ``future`` (a reduction matched by a rerun returned it already)."""
    if future is not None:
        call.result, future.call = future, call
    return call
