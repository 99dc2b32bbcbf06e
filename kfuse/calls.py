"""The specialise stage: bind a ``parallel_*`` call's arguments and find its specialisation.

A workunit is parsed and normalised once (front end); each call's argument types pick a specialisation
(``KernelSpec``), type-checked by the backend when it is made (so errors show at the user's call even when
fusion delays the kernel) and kept on the workunit. A repeated call costs a comparison of argument
signatures and an argument conversion (``_Binding``), then the pipeline launches it.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np

from . import context, spaces, views
from .backends.debug import DEBUG
from .errors import ArgumentError
from .frontend.access import summarize
from .frontend.normalize import KernelSource, normalize
from .frontend.spec import ArgType, KernelSpec
from .frontend.workunit import BoundWorkunit, Workunit, is_classtype
from .policies import MDRangePolicy, RangePolicy, TeamPolicy, normalize as normalize_policy
from .future import Future
from .ir.nodes import StructType
from .ir.lower import scratch_declarations
from .ir.typing import annotation_dtype
from .types import DType, TeamMember, _AccAnnotation, _ViewAnnotation, dtype_of
from .views import DeviceView, Trait, View, ViewTypeInfo, view_argument


@dataclass(eq=False)
class Prepared:
    """One specialisation of a workunit for one backend: its kernel source, spec, and (once launched) kernel."""

    workunit: Workunit
    source: KernelSource
    spec: KernelSpec
    name: str
    backend: object  # backends.base.Backend
    translated: object = None  # what the backend made when type-checking it (e.g. the C++), for its first load
    rendered: object = None  # the backend's rendering, between pipeline.rendered_call and its load
    kernel: object = None  # the loaded backends.base.Kernel (pipeline.kernel_of)
    _access: object = None

    # cached_property: after the first use, a plain attribute of the instance (no call on the tracing path)
    @functools.cached_property
    def view_params(self) -> tuple:
        """(position, written?) of each View parameter: what the tracer checks for escaped memory."""
        access = self.access
        return tuple((i, access[name].write) for i, (name, t) in enumerate(self.spec.params) if t.is_view)

    @functools.cached_property
    def view_positions(self) -> tuple:
        """(positions of the View parameters the kernel reads, of those it writes): a call's footprint."""
        access = self.access
        return (tuple(i for i, w in self.view_params if access[self.spec.params[i][0]].read),
                tuple(i for i, w in self.view_params if w))

    @functools.cached_property
    def prints(self) -> bool:
        """Whether the kernel (or a helper it calls) calls pk.printf."""
        trees = [self.source.tree, *(h.tree for h in self.source.helpers.values())]
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "printf"
                   and isinstance(n.func.value, ast.Name) and n.func.value.id == "pk" for t in trees for n in ast.walk(t))

    @property
    def access(self):
        """Per-parameter read/write summary from the AST (computed once per specialisation)."""
        if self._access is None:
            self._access = summarize(self.source, self.spec)
        return self._access


@dataclass(eq=False)
class KernelCall:
    """One kernel call: what to run, over which space, with which arguments (Views by reference)."""

    prepared: Prepared
    policy: object
    args: tuple
    site: str = ""
    futures: tuple = field(default=())  # (position, Future) of scalar args not yet known
    result: object = None  # the Future a reduction/scan call delivers
    failure: object = None  # the tracer's Failure that kept this call from running, if one did
    request: tuple | None = None  # (op, (policy, workunit), kwargs) as the program made it (kfuse/rerun.py)
    position: int | None = None  # its place among the program's kernel calls (``Runtime.calls_made``), if traced

    @property
    def op(self) -> str:
        return self.prepared.spec.op

    def bound_args(self) -> tuple:
        """Arguments with any Future replaced by its value (only valid once those are computed)."""
        if not self.futures:
            return self.args
        args = list(self.args)
        for pos, fut in self.futures:
            args[pos] = _scalar_for(self.prepared.spec.params[pos][1], fut.value(), self.prepared.spec.params[pos][0],
                                    self.prepared.workunit)
        return tuple(args)


# --- specialisation ---------------------------------------------------------------------------
def _source(wu: Workunit) -> KernelSource:
    src = wu.__dict__.get("_kernel_source")
    if src is None:
        src = normalize(wu.parsed)
        wu.__dict__["_kernel_source"] = src
    return src


def _user_params(wu: Workunit, op: str, policy) -> list[str]:
    names = wu.parsed.param_names
    indices = 1 if isinstance(policy, TeamPolicy) else policy.rank
    fixed = indices + (1 if op in ("reduce", "scan") else 0) + (1 if op == "scan" else 0)
    if len(names) < fixed:
        raise ArgumentError(f"workunit '{wu.__name__}' has {len(names)} parameters but a {op} over this policy "
                            f"needs at least {fixed} (thread index(es){', accumulator' if op != 'for' else ''}"
                            f"{', last_pass' if op == 'scan' else ''})")
    if indices > 1:
        _check_fixed_params(wu, names[:fixed], indices)
    return names[fixed:]


def _check_fixed_params(wu: Workunit, fixed: list[str], rank: int) -> None:
    """A workunit written for fewer dimensions than its MDRangePolicy would get a thread index (or the
    accumulator) in a View parameter; say so, instead of complaining later that the View's argument
    matches no parameter."""
    annotations = _source(wu).annotations
    arrays = {n.value.id for n in ast.walk(wu.parsed.tree)
              if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.value, ast.Name)}
    for position, name in enumerate(fixed):
        if name in arrays or isinstance(annotations.get(name), _ViewAnnotation):
            own = position - (len(fixed) - rank)  # thread indices the workunit has before its accumulator
            passes = "thread indices" + {0: "", 1: " and the accumulator", 2: ", the accumulator and last_pass"}[
                len(fixed) - rank]
            fix = ("launch it with a 1-D policy (an int n or pk.RangePolicy(b, e))" if own == 1 else
                   f"launch it with a {own}-D MDRangePolicy" if own > 1 else "put the thread indices first")
            raise ArgumentError(f"workunit '{wu.__name__}': parameter '{name}' is a View, but a {rank}-D MDRangePolicy "
                                f"passes {passes} to its first {len(fixed)} parameters ({', '.join(fixed)}); "
                                f"{fix}, or give it {rank} index parameters")


def _arg_type(wu: Workunit, name: str, value, annotation) -> ArgType:
    if isinstance(value, Future):
        value_dtype = value.dtype
        value = None
    if isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__"):
        value = view_argument(value)
    if isinstance(value, View):
        if annotation is not None and not isinstance(annotation, _ViewAnnotation):
            raise ArgumentError(f"workunit '{wu.__name__}': parameter '{name}' is annotated "
                                f"{annotation!r} but got a View")
        if isinstance(annotation, _ViewAnnotation):
            if annotation.rank and annotation.rank != value.ndim:
                raise ArgumentError(f"workunit '{wu.__name__}': parameter '{name}' expects a {annotation.rank}-D View, "
                                    f"got {value.ndim}-D")
            if annotation.dtype and annotation.dtype != value.dtype:
                raise ArgumentError(f"workunit '{wu.__name__}': parameter '{name}' expects {annotation.dtype!r} "
                                    f"elements, got {value.dtype!r}")
        declared = wu.options.get(name)
        atomic = value.trait is Trait.Atomic or isinstance(declared, ViewTypeInfo) and declared.trait is Trait.Atomic
        return ArgType("view", value.dtype, value.ndim, value.storage, atomic)
    if isinstance(annotation, _ViewAnnotation):
        raise ArgumentError(f"workunit '{wu.__name__}': parameter '{name}' expects a View, got "
                            f"{type(value).__name__ if value is not None else 'a Future'}")
    if is_classtype(type(value)) or isinstance(annotation, StructType):
        what = f"is annotated {annotation}" if isinstance(annotation, StructType) else \
            f"got a {type(value).__name__}"
        raise ArgumentError(f"workunit '{wu.__name__}': parameter '{name}' {what}, a classtype; classtypes are never "
                            "kernel arguments: their values live inside kernels only (locals, helper arguments and "
                            "results), so pass the fields as scalars or Views and build the value in the workunit")
    want = annotation_dtype(annotation)
    if value is None:  # a Future: its value's dtype
        got = value_dtype
    elif isinstance(value, (bool, np.bool_)):
        got = DType.bool
    elif isinstance(value, (int, np.integer)):
        got = DType.int64 if isinstance(value, int) else dtype_of(value.dtype)
    elif isinstance(value, (float, np.floating)):
        got = DType.float64 if isinstance(value, float) else dtype_of(value.dtype)
    else:
        raise ArgumentError(f"workunit '{wu.__name__}': parameter '{name}' got {type(value).__name__}; kernels "
                            "take Views, NumPy arrays, and int/float/bool scalars")
    if want is None:  # integers widen to int64 (one specialisation for all), except uint64 values, which would not fit
        return ArgType("scalar", DType.int64 if got.is_int and got is not DType.uint64 else got)
    if want.is_int and got.is_float:
        raise ArgumentError(f"workunit '{wu.__name__}': parameter '{name}' is annotated {want.name} but got a float")
    return ArgType("scalar", want)


def _scalar_for(t: ArgType, value, name: str, wu: Workunit):
    if t.dtype.is_float:
        return float(value)
    if t.dtype is DType.bool:
        return int(bool(value))
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise ArgumentError(f"workunit '{wu.__name__}': parameter '{name}' needs an integer, got {value!r}")
    return int(value)


def _kind(policy) -> tuple[str, int]:
    if isinstance(policy, RangePolicy):
        return "range", 1
    if isinstance(policy, MDRangePolicy):
        return "mdrange", policy.rank
    return "team", 1


def _acc_dtype(wu: Workunit, op: str, policy) -> tuple:
    if op == "for":
        return ()
    names = wu.parsed.param_names
    acc = names[1 if isinstance(policy, TeamPolicy) else policy.rank]
    dtype = annotation_dtype(_source(wu).annotations.get(acc))
    return (dtype or DType.float64,)


def prepare(wu, op: str, policy, positional: tuple, kwargs: dict, backend=None) -> KernelCall:
    """Bind arguments and find (or create) the specialisation for this call (on the runtime's backend)."""
    binding, policy, values = bind(wu, op, policy, positional, kwargs, backend or context.current().backend)
    return binding.call(policy, values)


# --- the per-call fast path -------------------------------------------------------------------
# A repeated call must cost little more than its ctypes call (issue 2: PyKokkos spends ~250 us per
# launch). So each (workunit, op, policy kind, space) keeps a _Plan: its parameter names and one
# _Binding per argument signature seen, found by comparing signature lists (no hashing of enums),
# each knowing how to turn the call's values into kernel arguments without re-deriving types.
_PASS = frozenset((float, int, bool))  # scalar types whose signature is their type
_DEBUG_SPACE = spaces.ExecutionSpace.Debug  # a global: an Enum's attribute costs a lookup through its metaclass
_ranges: dict = {}  # int thread count -> its RangePolicy, reused: policies are frozen values


def policy_of(policy):
    """``policies.normalize`` without building a new RangePolicy for every ``parallel_for(n, ...)``."""
    if type(policy) is int:
        found = _ranges.get(policy)
        if found is None:
            if len(_ranges) >= 1024:
                _ranges.clear()
            found = _ranges[policy] = RangePolicy(0, policy)
        return found
    return normalize_policy(policy)


def _sig(v):
    """What a specialisation depends on in a value (Views' ``sig`` is computed once, in the View)."""
    if isinstance(v, View):
        return v.sig
    if hasattr(v, "__cuda_array_interface__"):
        return (DeviceView, *DeviceView.from_cuda_array(v).sig)
    if isinstance(v, np.ndarray):
        return (np.ndarray, v.dtype, v.ndim, "right" if v.flags.c_contiguous else "stride")
    if isinstance(v, Future):
        return (Future, v.dtype)
    return type(v)  # a scalar's type fixes its dtype (and anything else is rejected when specialising)


class _Plan:
    """User parameters of a workunit for one (op, policy kind, space), and the bindings seen so far."""

    __slots__ = ("params", "bindings")

    def __init__(self, params: list):
        self.params = tuple(params)
        self.bindings: list[_Binding] = []


class _Binding:
    """One specialisation as reached from one argument signature, with its precomputed converters.

    ``convert`` holds, per value, None when the value is passed as it is (a View, a float for a
    double, an int for an int64) or the function making the kernel argument; ``direct`` is True when a
    call can be launched at once (no Future arguments).
    """

    __slots__ = ("sigs", "prepared", "convert", "identity", "deferred", "direct", "scratch")

    def __init__(self, sigs: list, prepared: Prepared, values: list):
        self.sigs = sigs
        self.prepared = prepared
        self.scratch = scratch_declarations(prepared.source)  # the ScratchViews: each call's policy must size them
        self.convert = tuple(_converter(t, v) for (_, t), v in zip(prepared.spec.params, values))
        self.identity = all(c is None for c in self.convert)
        self.deferred = any(isinstance(v, Future) for v in values)  # same positions for every call of these sigs
        self.direct = not self.deferred

    def args(self, values: list) -> tuple:
        """Kernel arguments of a call without Futures."""
        if self.identity:
            return tuple(values)
        return tuple([v if c is None else c(v) for c, v in zip(self.convert, values)])

    def call(self, policy, values: list) -> KernelCall:
        if not self.deferred:
            return KernelCall(self.prepared, policy, self.args(values))
        wu = self.prepared.workunit
        args, futures = [], []
        for i, ((name, t), v) in enumerate(zip(self.prepared.spec.params, values)):
            if t.is_view:
                args.append(view_argument(v))
            elif isinstance(v, Future):
                futures.append((i, v))
                args.append(None)
            else:
                args.append(_scalar_for(t, v, name, wu))
        return KernelCall(self.prepared, policy, tuple(args), futures=tuple(futures))


def _converter(t: ArgType, value):
    """How values of ``value``'s signature become argument ``t`` (None: unchanged), as ``_scalar_for`` does.

    An integer parameter never gets a float here: ``_arg_type`` rejects that when specialising.
    """
    if t.is_view:
        return None if isinstance(value, View) else view_argument
    if isinstance(value, Future):
        return None  # bound once its value is known (KernelCall.bound_args)
    if t.dtype.is_float:
        return None if type(value) is float else _int_as_float if type(value) is int else float
    if t.dtype is DType.bool:
        return _flag
    return None if type(value) is int else int  # whether it fits its C++ type is checked when packing


def _int_as_float(value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        raise ArgumentError(f"an integer of {len(str(abs(value)))} digits is too large for a float parameter "
                            "(at most about 1.8e308)") from None


def _flag(value) -> int:
    return int(bool(value))


def bind(wu, op: str, policy, positional: tuple, kwargs: dict, backend):
    """(binding, policy, values) of one call; every check and error of ``prepare`` happens here.
    ``backend``: the runtime's backend (the Debug space has its own, ``backends.debug``)."""
    if type(wu) is not Workunit and not isinstance(wu, Workunit):
        if isinstance(wu, BoundWorkunit):
            kernel = wu.kernel
            return bind(kernel, op, policy, positional, _with_fields(kernel, wu.obj, kwargs), backend)
        if callable(wu):
            raise ArgumentError(f"{getattr(wu, '__name__', wu)!r} is not a workunit; decorate it with @pk.workunit")
        raise ArgumentError(f"expected a workunit, got {wu!r}")
    policy = policy_of(policy)
    space = spaces.resolve(policy.space)
    plans = wu.__dict__.get("_kfuse_plans")
    if plans is None:
        plans = wu.__dict__["_kfuse_plans"] = {}
    if space is _DEBUG_SPACE:
        backend = DEBUG
    plan_key = (op, type(policy), policy.rank, id(space), id(backend))  # ids: singletons, hashing enums is slow
    plan = plans.get(plan_key)
    if plan is None:
        plan = plans[plan_key] = _Plan(_user_params(wu, op, policy))
    params = plan.params
    if positional:
        if len(positional) > len(params):
            raise ArgumentError(f"workunit '{wu.__name__}' takes {len(params)} arguments, {len(positional)} given")
        for name, value in zip(params, positional):
            if name in kwargs:
                raise ArgumentError(f"workunit '{wu.__name__}': parameter '{name}' given twice")
            kwargs[name] = value
    try:
        if len(kwargs) != len(params):
            raise KeyError
        values = [kwargs[p] for p in params]
    except KeyError:
        missing = [p for p in params if p not in kwargs]
        if missing:
            raise ArgumentError(f"workunit '{wu.__name__}': missing argument for parameter '{missing[0]}'") from None
        extra = [k for k in kwargs if k not in params]
        raise ArgumentError(f"workunit '{wu.__name__}' has no parameter '{extra[0]}'") from None
    if views.constant and runs_off_gpu(backend, space.value):
        views.touched(values)  # contents no longer known (views.constant)
    sigs = [v.sig if type(v) is View else type(v) if type(v) in _PASS else _sig(v) for v in values]
    for binding in plan.bindings:
        if binding.sigs == sigs:
            if binding.scratch:
                _check_scratch(wu, binding, policy)
            return binding, policy, values
    key = (op, type(policy), policy.rank, space, backend, *sigs)  # the backend instance: its kernels are its own
    prepared = wu.specializations.get(key)
    if prepared is None:
        prepared = _specialize(wu, op, policy, space, params, values, backend)
        wu.specializations[key] = prepared
    binding = _Binding(sigs, prepared, values)
    plan.bindings.append(binding)
    if binding.scratch:
        _check_scratch(wu, binding, policy)
    return binding, policy, values


def runs_off_gpu(backend, space: str) -> bool:
    """Whether ``backend`` runs kernels of ``space`` (its value) elsewhere than a GPU, where the host may change
    the memory: a View filled on the device then no longer has known contents (views.constant)."""
    return not (backend.name == "kokkos" and spaces.on_device(space))


def _with_fields(kernel, obj, kwargs: dict) -> dict:
    """A method kernel's arguments: the call's, and the object's fields as they are now."""
    fields = kernel.field_arguments(obj)
    for name in kwargs:
        if name in fields:
            raise ArgumentError(f"workunit '{kernel.__name__}' has no parameter '{name}' (it is the self.{name} "
                                "field, passed from the object)")
    fields.update(kwargs)
    return fields


def _check_scratch(wu: Workunit, binding: _Binding, policy) -> None:
    """Every level a workunit's ScratchViews take memory from must be given some by its TeamPolicy (a View that
    does not fit what is given is a fault of the launch: its size may depend on the arguments)."""
    if not isinstance(policy, TeamPolicy):
        return
    for decl in binding.scratch:
        if not any(policy.scratch[decl.level]):
            where = f"{binding.prepared.source.filename}:{decl.node.lineno}"
            per = "PerThread" if decl.per_thread else "PerTeam"
            kind = f"pk.ScratchView{decl.type.ndim}D[pk.{decl.type.dtype.name}]"
            raise ArgumentError(f"workunit '{wu.__name__}' ({where}): ScratchView '{decl.name}' takes "
                                f"level-{decl.level} scratch memory, which its TeamPolicy does not set; launch it with "
                                f"policy.set_scratch_size({decl.level}, pk.{per}(bytes)), bytes from "
                                f"{kind}.shmem_size(...) of each such View")


def _specialize(wu: Workunit, op: str, policy, space, params, values, backend) -> Prepared:
    src = _source(wu)
    if src.annotations.get(wu.parsed.param_names[0]) is TeamMember and not isinstance(policy, TeamPolicy):
        raise ArgumentError(f"workunit '{wu.__name__}' takes a pk.TeamMember and must be launched with a TeamPolicy")
    arg_types = tuple((p, _arg_type(wu, p, v, src.annotations.get(p))) for p, v in zip(params, values))
    for p, v in zip(params, values):
        if hasattr(v, "__cuda_array_interface__") and not spaces.on_device(space.value):
            raise ArgumentError(f"workunit '{wu.__name__}': parameter '{p}' is a GPU array but the kernel runs in "
                                f"{space.value}; launch it in pk.Cuda or pass host data")
    for p, ann in src.annotations.items():
        if isinstance(ann, _AccAnnotation) and p in params:
            raise ArgumentError(f"workunit '{wu.__name__}': parameter '{p}' is an accumulator; launch it with "
                                "parallel_reduce or parallel_scan")
    kind, rank = _kind(policy)
    spec = KernelSpec(op=op, policy=kind, rank=rank, params=arg_types, accs=_acc_dtype(wu, op, policy),
                      space=space.value)
    backend.check_space(space.value, wu.__name__)
    # Type-check now (milliseconds, no compiler): an unsupported construct or a type error is reported at
    # this call even when fusion delays the kernel, and its read/write sets are then known to be right.
    return Prepared(wu, src, spec, wu.__name__, backend, backend.translate(src, spec, wu.__name__))


def serial_twin(prepared: Prepared) -> Prepared:
    """The same specialisation for the Serial space (a call logged before fork() runs on it in the child)."""
    spec = dataclasses.replace(prepared.spec, space=spaces.ExecutionSpace.Serial.value)
    return Prepared(prepared.workunit, prepared.source, spec, prepared.name, prepared.backend,
                    prepared.backend.translate(prepared.source, spec, prepared.name))


def writes_of(access: dict, spec: KernelSpec) -> tuple:
    """Per parameter: does the kernel write this View (None for scalars)? Device launches need it."""
    return tuple(access[n].write if t.is_view else None for n, t in spec.params)
