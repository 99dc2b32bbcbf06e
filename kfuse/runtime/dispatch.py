"""``parallel_for`` / ``parallel_reduce`` / ``parallel_scan``: specialise, then run now or hand to the tracer.

The pipeline for one kernel reads top to bottom here: parse + normalise the workunit once (front
end), specialise on the call's argument types (``KernelSpec``), generate C++ (codegen), build or load
it (compiler/cache), launch (runtime). A specialisation is cached on the workunit, so a repeated call
costs a comparison of argument signatures, an argument pack and a ctypes call: about 4 us in all, of
which 1-2 us are the C++ launch (``benchmarks/bench_dispatch.py``; PyKokkos takes ~250 us).
"""
from __future__ import annotations

import ast
import dataclasses
import sys
from dataclasses import dataclass, field

import numpy as np

from .. import spaces
from ..codegen.kernel import generate
from ..compiler import toolchain
from ..errors import ArgumentError, public_error
from ..frontend.normalize import KernelSource, annotation_dtype, normalize
from ..frontend.spec import ArgType, KernelSpec
from ..frontend.workunit import Workunit
from ..policies import MDRangePolicy, RangePolicy, TeamPolicy, TeamThreadRange, normalize as normalize_policy
from ..future import Future
from ..types import DType, TeamMember, _AccAnnotation, _ViewAnnotation, dtype_of
from ..views import DeviceView, View, view_argument
from .. import guard
from . import kokkos_runtime
from .launch import CompiledKernel, policy_slots

#: The tracer installs itself here when fusion is on: an object with ``log(call)``.
tracer = None


@dataclass(eq=False)
class Prepared:
    """One specialisation of a workunit: its kernel source, spec, and (lazily) the compiled library."""

    workunit: Workunit
    source: KernelSource
    spec: KernelSpec
    name: str
    generated: object = None  # the C++ (GeneratedKernel), made when specialising so errors show at the call
    _compiled: CompiledKernel | None = None
    _access: object = None

    def compiled(self) -> CompiledKernel:
        if self._compiled is None:
            generated = self.generated or generate(self.source, self.spec, self.name)
            self.generated = None  # a failed build is not remembered: the next call generates and tries again
            self._compiled = CompiledKernel(generated, self.spec, writes=writes_of(self.access, self.spec))
        return self._compiled

    @property
    def view_params(self) -> tuple:
        """(position, written?) of each View parameter: what the tracer checks for escaped memory."""
        found = self.__dict__.get("_view_params")
        if found is None:
            access = self.access
            found = self.__dict__["_view_params"] = tuple(
                (i, access[name].write) for i, (name, t) in enumerate(self.spec.params) if t.is_view)
        return found

    @property
    def access(self):
        """Per-parameter read/write summary from the AST (computed once per specialisation)."""
        if self._access is None:
            from ..frontend.access import summarize

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


def _call_site() -> str:
    frame = sys._getframe(3)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


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
        return ArgType("view", value.dtype, value.ndim, value.layout)
    if isinstance(annotation, _ViewAnnotation):
        raise ArgumentError(f"workunit '{wu.__name__}': parameter '{name}' expects a View, got "
                            f"{type(value).__name__ if value is not None else 'a Future'}")
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
    if want is None:
        return ArgType("scalar", DType.int64 if got.is_int else got)
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


def prepare(wu, op: str, policy, positional: tuple, kwargs: dict) -> KernelCall:
    """Bind arguments and find (or create) the specialisation for this call."""
    binding, policy, values = _bind(wu, op, policy, positional, kwargs)
    return binding.call(policy, values)


# --- the per-call fast path -------------------------------------------------------------------
# A repeated call must cost little more than its ctypes call (issue 2: PyKokkos spends ~250 us per
# launch). So each (workunit, op, policy kind, space) keeps a _Plan: its parameter names and one
# _Binding per argument signature seen, found by comparing signature lists (no hashing of enums),
# each knowing how to turn the call's values into kernel arguments without re-deriving types.
_PASS = frozenset((float, int, bool))  # scalar types whose signature is their type
_ranges: dict = {}  # int thread count -> its RangePolicy, reused: policies are frozen values


def _policy(policy):
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
    call can be launched at once (compiled space and no Future arguments).
    """

    __slots__ = ("sigs", "prepared", "convert", "identity", "deferred", "direct")

    def __init__(self, sigs: list, prepared: Prepared, values: list):
        self.sigs = sigs
        self.prepared = prepared
        self.convert = tuple(_converter(t, v) for (_, t), v in zip(prepared.spec.params, values))
        self.identity = all(c is None for c in self.convert)
        self.deferred = any(isinstance(v, Future) for v in values)  # same positions for every call of these sigs
        self.direct = prepared.spec.space != "Debug" and not self.deferred

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


def _bind(wu, op: str, policy, positional: tuple, kwargs: dict):
    """(binding, policy, values) of one call; every check and error of ``prepare`` happens here."""
    if type(wu) is not Workunit and not isinstance(wu, Workunit):
        if callable(wu):
            raise ArgumentError(f"{getattr(wu, '__name__', wu)!r} is not a workunit; decorate it with @pk.workunit")
        raise ArgumentError(f"expected a workunit, got {wu!r}")
    policy = _policy(policy)
    space = spaces.resolve(policy.space)
    plans = wu.__dict__.get("_kfuse_plans")
    if plans is None:
        plans = wu.__dict__["_kfuse_plans"] = {}
    plan_key = (op, type(policy), policy.rank, id(space))  # id: enum members are singletons, hashing them is slow
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
    sigs = [v.sig if type(v) is View else type(v) if type(v) in _PASS else _sig(v) for v in values]
    for binding in plan.bindings:
        if binding.sigs == sigs:
            return binding, policy, values
    key = (op, type(policy), policy.rank, space, *sigs)
    prepared = wu.specializations.get(key)
    if prepared is None:
        prepared = _specialize(wu, op, policy, space, params, values)
        wu.specializations[key] = prepared
    binding = _Binding(sigs, prepared, values)
    plan.bindings.append(binding)
    return binding, policy, values


def _specialize(wu: Workunit, op: str, policy, space, params, values) -> Prepared:
    src = _source(wu)
    if src.annotations.get(wu.parsed.param_names[0]) is TeamMember and not isinstance(policy, TeamPolicy):
        raise ArgumentError(f"workunit '{wu.__name__}' takes a pk.TeamMember and must be launched with a TeamPolicy")
    arg_types = tuple((p, _arg_type(wu, p, v, src.annotations.get(p))) for p, v in zip(params, values))
    for p, v in zip(params, values):
        if hasattr(v, "__cuda_array_interface__") and space.value not in ("Cuda", "HIP"):
            raise ArgumentError(f"workunit '{wu.__name__}': parameter '{p}' is a GPU array but the kernel runs in "
                                f"{space.value}; launch it in pk.Cuda or pass host data")
    for p, ann in src.annotations.items():
        if isinstance(ann, _AccAnnotation) and p in params:
            raise ArgumentError(f"workunit '{wu.__name__}': parameter '{p}' is an accumulator; launch it with "
                                "parallel_reduce or parallel_scan")
    kind, rank = _kind(policy)
    spec = KernelSpec(op=op, policy=kind, rank=rank, params=arg_types, accs=_acc_dtype(wu, op, policy),
                      space=space.value)
    prepared = Prepared(wu, src, spec, wu.__name__)
    if space is not spaces.ExecutionSpace.Debug:
        _check_space_available(wu, space)
        # Translate now (milliseconds, no compiler): an unsupported construct or a type error is reported at
        # this call even when fusion delays the kernel, and its read/write sets are then known to be right.
        prepared.generated = generate(src, spec, wu.__name__)
    return prepared


def serial_twin(prepared: Prepared) -> Prepared:
    """The same specialisation for the Serial space (a call logged before fork() runs on it in the child)."""
    spec = dataclasses.replace(prepared.spec, space=spaces.ExecutionSpace.Serial.value)
    twin = Prepared(prepared.workunit, prepared.source, spec, prepared.name)
    twin.generated = generate(prepared.source, spec, prepared.name)
    return twin


def _check_space_available(wu: Workunit, space) -> None:
    backends = toolchain.current().backends
    if space.value.upper() not in backends:
        raise ArgumentError(f"workunit '{wu.__name__}': execution space {space.value} is not enabled in the Kokkos "
                            f"kfuse compiles against ({toolchain.current().include_dir}; backends: "
                            f"{', '.join(backends)}); choose another space or set KFUSE_KOKKOS_ROOT")


def writes_of(access: dict, spec: KernelSpec) -> tuple:
    """Per parameter: does the kernel write this View (None for scalars)? Device launches need it."""
    return tuple(access[n].write if t.is_view else None for n, t in spec.params)


# --- execution --------------------------------------------------------------------------------
def execute(call: KernelCall):
    """Run one call now; returns the reduction/scan value (or None)."""
    space = call.prepared.spec.space
    args = call.bound_args()
    if space == "Debug":
        from .debug import run_debug

        results = run_debug(call, args)
    else:
        results = call.prepared.compiled().launch(policy_slots(call.policy), args)
    return results[0] if results else None


def _split(args: tuple):
    if args and isinstance(args[0], str):
        args = args[1:]  # PyKokkos's optional kernel label
    if len(args) < 2:
        raise ArgumentError("expected (policy, workunit, ...) — e.g. pk.parallel_for(n, my_workunit, A=a)")
    return args[0], args[1], args[2:]


def _dispatch(op: str, args: tuple, kwargs: dict):
    policy, wu, positional = _split(args)
    if isinstance(policy, TeamThreadRange):  # nested parallelism of a team workunit in the Debug space
        from .debug import run_nested

        return run_nested(op, policy, wu)
    with guard.lock:
        binding, policy, values = _bind(wu, op, policy, positional, kwargs)
        tracing = tracer is not None and tracer.enabled
        if binding.direct and not tracing and not (tracer is not None and tracer.failures.lost):
            args = binding.args(values)  # eager, nothing lost to a failed call: no KernelCall needed
            kokkos_runtime.enter_thread()
            results = binding.prepared.compiled().launch(policy_slots(policy), args)
            return results[0] if results else None
        call = binding.call(policy, values)
        if tracing:
            call.site = _call_site()
            return tracer.log(call)  # runs at once if it touches memory the host reaches past barriers
        if tracer is not None:
            tracer.check_eager(call)
        if call.futures:
            for _, fut in call.futures:
                fut.value()
        kokkos_runtime.enter_thread()
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
