"""The Debug space's backend: run the user's own workunit in the Python interpreter, one thread index at a time
(calls in this space are never fused).

Useful to debug kernel logic with print() and pdb, and as a second, independent semantics for tests.
Teams run with one thread each (team_size() == 1), which is a legal Kokkos team size, so barriers are
trivially satisfied.

Faults behave as in compiled kernels: every View index is checked (a negative index is an error, not
NumPy's wrap-around), integer ``//`` and ``%`` by zero raise where NumPy integers would give 0, and a
float divided by zero is inf or nan (IEEE) also for Python scalars. For that the workunit runs as a
rewritten copy whose ``/``, ``//`` and ``%`` go through the checks below (same file and lines, so pdb
and tracebacks still point at the user's source).
"""
from __future__ import annotations

import ast
import copy
import itertools
import operator
import time
import types
from types import SimpleNamespace
from pathlib import Path

import numpy as np

from .interp import DebugTeamMember, IndexFault, ScratchFault, debug_view, python_scalar
from ..errors import KernelIndexError, KernelScratchError, KernelZeroDivisionError
from ..frontend.normalize import math_function, shadowed_math
from ..frontend.workunit import Function, compiled
from ..policies import MDRangePolicy, PerTeam, PerThread, RangePolicy, TeamPolicy, TeamThreadMDRange
from ..runtime import device
from ..types import _ScratchAnnotation
from .base import Backend, Kernel, Lowered


class _DivisionFault(ZeroDivisionError):
    def __init__(self, dividend: int, divisor: int, operator_: str):
        super().__init__(dividend, divisor, operator_)
        self.fields = dict(dividend=dividend, divisor=divisor, operator=operator_)


class _Acc:
    """Accumulator: ``acc += x`` mutates it in place (Python rebinds ``acc`` to the same object)."""

    def __init__(self, value=0):
        self.v = value

    def __iadd__(self, x):
        self.v += x.v if isinstance(x, _Acc) else x
        return self

    def __isub__(self, x):
        self.v -= x.v if isinstance(x, _Acc) else x
        return self

    def __float__(self):
        return float(self.v)

    def __int__(self):
        return int(self.v)

    def __index__(self):
        return int(self.v)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.v, dtype=dtype)

    def __bool__(self):
        return bool(self.v)


def _operator(op, reflected=False):
    def method(self, other):
        other = other.v if isinstance(other, _Acc) else other
        return op(other, self.v) if reflected else op(self.v, other)
    return method


# Reading the accumulator in an expression (``out[i] = acc / n``, ``if acc > 0``) uses its current value.
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lt", "le", "gt", "ge", "eq", "ne"):
    setattr(_Acc, f"__{_name}__", _operator(getattr(operator, _name)))
    if _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
        setattr(_Acc, f"__r{_name}__", _operator(getattr(operator, _name), reflected=True))
for _name in ("neg", "pos", "abs"):
    setattr(_Acc, f"__{_name}__", lambda self, _op=getattr(operator, _name): _op(self.v))


def run_nested(op: str, rng, fn):
    """Nested TeamThreadRange/ThreadVectorRange (or an MD range of them) with one thread per team: a plain loop."""
    md = isinstance(rng, TeamThreadMDRange)
    if md and op == "scan":
        raise TypeError(f"pk.parallel_scan over a {type(rng).__name__}: Kokkos scans one-dimensional ranges")
    points = rng.range() if md else ((j,) for j in rng.range())
    if op == "for":
        for p in points:
            fn(*p)
        return None
    acc = _Acc(0)
    for p in points:
        if op == "reduce":
            acc = fn(*p, acc) or acc
        else:
            fn(*p, acc, True)
    return acc.v


def _is_integer(x) -> bool:
    return isinstance(x, (int, np.integer, np.bool_))


_INT64_MIN = np.iinfo(np.int64).min


def _divide(a, b, op: str):
    """``a op b`` as a compiled kernel computes it: an integer zero divisor is a fault, and so is
    INT64_MIN // -1 (compiled kernels compute integers in 64 bits, and C++ traps on it); a float zero divisor
    gives inf or nan."""
    a = a.v if isinstance(a, _Acc) else a
    b = b.v if isinstance(b, _Acc) else b
    integers = _is_integer(a) and _is_integer(b) and op != "/"
    if b == 0:
        if integers:
            raise _DivisionFault(int(a), 0, op)
        with np.errstate(all="ignore"):
            return {"/": np.true_divide, "//": np.floor_divide, "%": np.remainder}[op](a, b)
    if integers and op == "//" and b == -1 and a == _INT64_MIN:
        raise _DivisionFault(int(a), -1, op)
    return {"/": operator.truediv, "//": operator.floordiv, "%": operator.mod}[op](a, b)


_CHECKED_OPS = {ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}


class _CheckDivisions(ast.NodeTransformer):
    """``a / b``, ``a // b``, ``a % b`` (and their augmented forms) become ``_kf_divide(a, b, op)``."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if type(node.op) not in _CHECKED_OPS:
            return node
        call = ast.Call(func=ast.Name(id="_kf_divide", ctx=ast.Load()),
                        args=[node.left, node.right, ast.Constant(_CHECKED_OPS[type(node.op)])], keywords=[])
        return ast.copy_location(call, node)

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if type(node.op) not in _CHECKED_OPS:
            return node
        load = copy.deepcopy(node.target)
        for n in ast.walk(load):
            if hasattr(n, "ctx"):
                n.ctx = ast.Load()
        value = self.visit_BinOp(ast.copy_location(ast.BinOp(left=load, op=node.op, right=node.value), node))
        return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)


class _TypeScratchViews(ast.NodeTransformer):
    """``s: pk.ScratchView1D[T] = pk.ScratchView1D(space, n)`` becomes ``_kf_scratch_view(pk.ScratchView1D(...)'s
    callee, pk.ScratchView1D[T], "s", space, n)``: Python does not evaluate a local's annotation, which holds the
    element type."""

    def visit_AnnAssign(self, node):
        value = node.value
        if isinstance(node.target, ast.Name) and isinstance(node.annotation, ast.Subscript) \
                and isinstance(value, ast.Call) and ast.dump(value.func) == ast.dump(node.annotation.value):
            node.value = ast.copy_location(ast.Call(
                func=ast.Name(id="_kf_scratch_view", ctx=ast.Load()),
                args=[value.func, node.annotation, ast.Constant(node.target.id), *value.args],
                keywords=value.keywords), value)
        return node


def _scratch_view(func, annotation, name: str, *args, **kwargs):
    """A ScratchView declared in a Debug-space workunit (see _TypeScratchViews), or ``func(*args)``."""
    if isinstance(annotation, _ScratchAnnotation) and args and not kwargs and hasattr(args[0], "view"):
        return args[0].view(annotation, args[1:], name)
    return func(*args, **kwargs)


def _checked(parsed, made: dict):
    """The function of ``parsed`` with checked divisions, seeing the original's live globals and closure.
    @pk.function helpers it calls are replaced by their checked versions (``made`` memoises them)."""
    if parsed.uid in made:
        return made[parsed.uid]
    tree = _TypeScratchViews().visit(_CheckDivisions().visit(copy.deepcopy(parsed.tree)))
    for arg in ast.walk(tree):  # annotations do nothing here, and a method kernel's are resolved objects
        if isinstance(arg, ast.arg):
            arg.annotation = None
    fn = parsed.fn
    helpers = {n.id: parsed.namespace[n.id] for n in ast.walk(tree) if isinstance(n, ast.Name)
               and isinstance(parsed.namespace.get(n.id), Function)}
    supplied = {"_kf_divide": _divide, "_kf_scratch_view": _scratch_view}
    supplied.update({n.func.id: math_function(n.func.id) for n in ast.walk(tree)
                     if isinstance(n, ast.Call) and shadowed_math(n.func, parsed.namespace)})
    made[parsed.uid] = None  # a helper calling itself keeps the unchecked original below
    supplied.update({name: _checked(h.parsed, made) or h.fn for name, h in helpers.items()})
    made[parsed.uid] = compiled(tree, parsed.filename, fn, supplied, fn.__defaults__)
    return made[parsed.uid]


def _checked_workunit(wu):
    fn = wu.__dict__.get("_debug_checked")
    if fn is None:
        fn = wu.__dict__["_debug_checked"] = _checked(wu.parsed, {})
    return fn


_KFUSE_DIR = Path(__file__).resolve().parent.parent


def _codes(code: types.CodeType) -> set:
    """A function's code and that of the functions nested in it."""
    nested = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return {code}.union(*(_codes(c) for c in nested))


def _as_kernel_fault(fault, wu):
    """The exception a compiled kernel raises for the same fault, at the innermost frame of kernel code
    (the workunit, its nested defs or a @pk.function; not kfuse's own Python versions of pk.atomic_*)."""
    own = _codes(_checked_workunit(wu).__code__)
    tb, frame = fault.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code in own or not Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(_KFUSE_DIR):
            frame = tb.tb_frame
        tb = tb.tb_next
    code = frame.f_code if frame is not None else wu.fn.__code__
    where = dict(workunit=wu.__name__, filename=code.co_filename,
                 lineno=frame.f_lineno if frame is not None else code.co_firstlineno,
                 function=None if code in own else code.co_name)
    cls = {IndexFault: KernelIndexError, ScratchFault: KernelScratchError}.get(type(fault), KernelZeroDivisionError)
    return cls(**fault.fields, **where)


def run_debug(call, args):
    try:
        return _run_debug(call, args)
    except (IndexFault, _DivisionFault, ScratchFault) as fault:
        raise _as_kernel_fault(fault, call.prepared.workunit) from None


def _run_debug(call, args):
    spec = call.prepared.spec
    fn = _checked_workunit(call.prepared.workunit)
    args = [debug_view(a, name) if t.is_view else a for a, (name, t) in zip(args, spec.params)]
    policy = call.policy
    if isinstance(policy, RangePolicy):
        points = ((i,) for i in range(policy.begin, policy.end))
    elif isinstance(policy, MDRangePolicy):
        points = itertools.product(*(range(b, e) for b, e in policy.bounds))
    else:
        points = ((DebugTeamMember(r, policy.league_size, policy.scratch),) for r in range(policy.league_size))
    kwargs = {name: a for (name, _), a in zip(spec.params, args)}
    if spec.op == "for":
        for p in points:
            fn(*p, **kwargs)
        return ()
    acc = _Acc(spec.accs[0].np.type(0))
    if spec.op == "reduce":
        for p in points:
            fn(*p, acc, **kwargs)
        return (python_scalar(acc.v),)
    points = list(points)
    for p in points:  # scan: a first pass accumulates, a second pass with last_pass=True writes
        fn(*p, acc, False, **kwargs)
    total = acc.v
    acc = _Acc(spec.accs[0].np.type(0))
    for p in points:
        fn(*p, acc, True, **kwargs)
    return (python_scalar(total),)


class DebugKernel(Kernel):
    fused = False

    def __init__(self, lowered: Lowered):
        self.name = lowered.name
        self._prepared = SimpleNamespace(workunit=lowered.workunit, spec=lowered.spec)
        self._seconds = 0.0

    def launch(self, bounds: tuple, args: tuple) -> tuple:
        call = SimpleNamespace(prepared=self._prepared, policy=_policy(self._prepared.spec, bounds))
        device.host_launch(args, [True] * len(args))  # a View a GPU kernel wrote comes back first
        start = time.perf_counter()
        results = run_debug(call, args)
        self._seconds = time.perf_counter() - start
        return results

    @property
    def last_seconds(self) -> float:
        return self._seconds


def _policy(spec, bounds: tuple):
    """The policy whose ``policy_slots`` are ``bounds``."""
    if spec.policy == "range":
        return RangePolicy(*bounds)
    if spec.policy == "mdrange":
        return MDRangePolicy(list(bounds[:spec.rank]), list(bounds[spec.rank:]))
    return TeamPolicy(bounds[0], bounds[1], bounds[2]).set_scratch_size(0, PerTeam(bounds[3]), PerThread(bounds[4])) \
        .set_scratch_size(1, PerTeam(bounds[5]), PerThread(bounds[6]))


class DebugBackend(Backend):
    name = "debug"

    def render(self, lowered: Lowered, translated=None) -> Lowered:
        return lowered

    def load(self, rendered: Lowered) -> DebugKernel:
        return DebugKernel(rendered)


DEBUG = DebugBackend()
