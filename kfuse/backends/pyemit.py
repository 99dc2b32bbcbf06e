"""A kernel's typed IR (``kfuse.ir``) written as Python source whose values are the C++ program's.

The IR holds every type and every conversion the C++ makes (``Cast`` nodes), so this module only picks the
Python spelling of each operation: integers computed in their 64-bit type and wrapped, float32 rounded
after every operation, conversions wherever C++ converts (casts, stores, helper arguments and results),
checked operations through ``pyops.Runtime`` with a fault site each. The site says what a fault there
reports (kind, workunit, helper, file, line, View, fused member), by the C++ printer's rules, so both
backends raise the same record.

The source defines ``_kf_h<i>`` for helper instance ``i`` and ``_kf_kernel(threads, accumulators,
last_pass, parameters)``, which returns the accumulators; nested defs stay nested functions. A classtype is a
class ``_kf_s<n>`` whose new values are zero-filled; methods are helper instances taking ``self`` first.
Python objects are references where the C++ copies structs, which gives the same results because the
lowering accepts no program where two names share a value (``kfuse.ir.lower``).
"""
from __future__ import annotations

import ast
import itertools
import math
from dataclasses import dataclass

from ..codegen.sites import FaultSite
from ..ir import nodes as ir
from ..ir import printf
from ..ir.access import assigned_names
from ..ir.typing import atomic_op, binop_type
from ..types import DType, promote
from .pyops import ZERO

F64, I64, BOOL = DType.float64, DType.int64, DType.bool
_INDENT = "    "
_MAX_NESTING = 100  # of parentheses in one piece of source: Python's tokenizer refuses more than 200


def _wrap(code: str, dtype: DType) -> str:
    return f"_kf_to_{dtype.name}({code})"


def _conv(code: str, src, dst) -> str:
    """``code`` (a ``src``) as C++ converts it to ``dst``. Narrow integers are converted even from their own
    type: C++ computes their unary operations in int, so the value may lie outside until stored."""
    if not isinstance(dst, DType) or src == dst and not (dst.is_int and dst.bits < 64):
        return code
    return _wrap(code, dst)


@dataclass(frozen=True)
class Emitted:
    python: str  # the source, for reading
    code: object  # compiled, to run in ``pyops.Runtime.namespace()``
    sites: list  # the fault sites, ``pyops.Runtime``'s table


def emit(kernel: ir.Kernel, filename: str) -> Emitted:
    """``kernel`` as Python, compiled under ``filename``."""
    module = _Module(kernel)
    out: list = []
    for struct, name in module.structs.items():
        out.append(f"class {name}:")
        out.append(f"{_INDENT}__slots__ = {tuple(f for f, _ in struct.fields)!r}")
        out.append(f"{_INDENT}def __init__(self):")
        out += [f"{_INDENT * 2}self.{f} = {ZERO[t]!r}" for f, t in struct.fields] or [f"{_INDENT * 2}pass"]
    for index, fn in enumerate(kernel.helpers):
        _Body(module, fn.name, {}, ret=fn.ret).function(f"_kf_h{index}", fn, dict(fn.params), out)
    params = dict(kernel.threads + kernel.accs + kernel.flags + kernel.params)
    _Body(module, "", {}, accs=tuple(n for n, _ in kernel.accs)).function("_kf_kernel", kernel, params, out)
    python = "\n".join(out) + "\n"
    if not module.pieces:
        return Emitted(python, compile(python, filename, "exec"), module.sites)
    tree = _splice(ast.parse(python), {name: piece for name, (piece, _) in module.pieces.items()})
    python += "".join(f"# {name} = {code}\n" for name, (_, code) in module.pieces.items())
    return Emitted(python, compile(tree, filename, "exec"), module.sites)


def _nesting(code: str) -> int:
    depth = deepest = 0
    for c in code:
        if c in "([":
            depth += 1
            deepest = max(deepest, depth)
        elif c in ")]":
            depth -= 1
    return deepest


def _splice(tree, pieces: dict):
    """``tree`` with each expression parsed apart back where its placeholder name stands (each placeholder
    stands in one tree: the module's or a piece's; ``ast.walk`` does not recurse, so depth costs nothing)."""
    for root in [tree, *pieces.values()]:
        for node in ast.walk(root):
            for field, value in ast.iter_fields(node):
                if isinstance(value, ast.Name) and value.id in pieces:
                    setattr(node, field, pieces[value.id])
                elif isinstance(value, list):
                    value[:] = [pieces.get(v.id, v) if isinstance(v, ast.Name) else v for v in value]
    return tree


class _Module:
    """What the bodies of one kernel share: the kernel, its fault sites, temporaries' numbers, nested defs
    and the expressions parsed apart."""

    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel
        self.sites: list[FaultSite] = []
        self.lambdas: dict = {}  # nested def -> its accumulator's type
        self.pieces: dict = {}  # placeholder name -> (expression tree, its source)
        self.structs = {t: f"_kf_s{n}" for n, t in enumerate(kernel.structs)}  # classtype -> its Python class
        self._temps = itertools.count()

    def site(self, kind: str, loc: ir.Loc, helper: str, view: str = "") -> int:
        site = FaultSite(kind, loc.unit or self.kernel.name, helper, loc.file, loc.line, view, loc.member)
        if site not in self.sites:
            self.sites.append(site)
        return self.sites.index(site)

    def temp(self, prefix: str) -> str:
        return f"_kf_{prefix}{next(self._temps)}"

    def parsed_apart(self, code: str) -> str:
        """A placeholder name for expression ``code``, parsed on its own: a long chain of operators would
        nest more parentheses than Python's tokenizer takes. ``emit`` splices the tree back."""
        name = self.temp("e")
        self.pieces[name] = (ast.parse(code, mode="eval").body, code)
        return name


class _Body:
    """Writes one function: a helper instance (``ret``: its return type, None for void), or the kernel or a
    nested def (``ret`` False; ``accs``: the accumulators it returns). ``helper``: the helper its fault
    sites name ("" outside helpers)."""

    def __init__(self, module: _Module, helper: str, names: dict, ret=False, accs: tuple = (),
                 nested: bool = False):
        self.module = module
        self.helper = helper
        self.names = dict(names)  # name -> type of what the body sees (parameters, locals, enclosing names)
        self.ret = ret
        self.accs = accs
        self.nested = nested

    def function(self, name: str, node, params: dict, out: list, ind: str = "") -> None:
        """``def name(params)``: captured names, hoisted locals, statements, then the accumulators returned."""
        out.append(f"{ind}def {name}({', '.join(params)}):")
        inner = ind + _INDENT
        local = dict(node.locals)
        captured = assigned_names(node.body) & set(self.names) - set(local) - set(params)
        if captured:  # C++ lambdas capture by reference: assignments reach the enclosing function's names
            out.append(f"{inner}nonlocal {', '.join(sorted(captured))}")
        self.names.update(params)
        self.names.update(local)
        out += [f"{inner}{n} = {self.zero(t)}" for n, t in node.locals]
        self.block(node.body, out, inner)
        if self.accs:
            out.append(inner + self.result())

    def zero(self, t) -> str:
        """A new zero value of type ``t``: C++ value-initialises a hoisted local."""
        return f"{self.module.structs[t]}()" if isinstance(t, ir.StructType) else repr(ZERO[t])

    def result(self) -> str:
        if not self.accs:
            return "return"
        return f"return {self.accs[0]}" if self.nested else f"return ({', '.join(self.accs)},)"

    def site(self, kind: str, loc: ir.Loc, view: str = "") -> int:
        return self.module.site(kind, loc, self.helper, view)

    # --- statements ---------------------------------------------------------------------------
    def block(self, stmts, out: list, ind: str) -> None:
        start = len(out)
        for s in stmts:
            getattr(self, "stmt_" + type(s).__name__)(s, out, ind)
        if len(out) == start:
            out.append(f"{ind}pass")

    def stmt_Break(self, s, out, ind):
        out.append(ind + type(s).__name__.lower())

    stmt_Continue = stmt_Break

    def stmt_Return(self, s, out, ind):
        if self.ret is False:
            out.append(ind + self.result())
        elif s.value is None:
            out.append(f"{ind}return")
        else:
            out.append(f"{ind}return {_conv(self.expr(s.value), s.value.type, self.ret)}")

    def stmt_Eval(self, s, out, ind):
        out.append(ind + self.expr(s.value))

    def stmt_Print(self, s, out, ind):
        convs = tuple(m.group(3) for m in printf.conversions(s.format))
        out.append(f"{ind}_kf_printf({s.format!r}, {convs!r}{''.join(', ' + self.expr(a) for a in s.args)})")

    def stmt_Barrier(self, s, out, ind):
        """A team of one thread is always at its barrier."""

    def stmt_Single(self, s, out, ind):
        """The one thread of a team is its thread 0 and its only thread: the body runs once (PerTeam or PerThread)."""
        out.append(f"{ind}{s.body}()")

    def stmt_ScratchView(self, s, out, ind):
        """The View from the team's scratch memory (``pyops.Runtime.scratch``), or, as in C++, a fault recorded
        and the body left before anything touches it."""
        extents = "".join(f"{self.expr(e)}, " for e in s.extents)
        sites = f"{self.site('scratch', s.loc, s.name)}, {self.site('scratch_extent', s.loc, s.name)}"
        out.append(f"{ind}{s.name} = _kf_scratch({s.team}, {s.level}, {s.per_thread}, {s.type.dtype.name!r}, "
                   f"({extents}), {s.name!r}, {sites})")
        out.append(f"{ind}if {s.name} is None:")
        out.append(f"{ind}{_INDENT}{self.result()}")
        self.names[s.name] = s.type

    def stmt_Assign(self, s, out, ind):
        if s.op is None:
            value = _conv(self.expr(s.value), s.value.type, s.type)
        else:
            value = self.update(s.op, s.name, s.type, self.expr(s.value), s.value.type, s.loc)
        out.append(f"{ind}{s.name} = {value}")

    stmt_Accumulate = stmt_Assign

    def stmt_SetField(self, s, out, ind):
        field = f"{s.target}.{s.name}"
        if s.op is None:
            value = _conv(self.expr(s.value), s.value.type, s.type)
        else:
            value = self.update(s.op, field, s.type, self.expr(s.value), s.value.type, s.loc)
        out.append(f"{ind}{field} = {value}")

    def update(self, op: str, current: str, t: DType, value: str, vt: DType, loc: ir.Loc) -> str:
        """``current op= value``: C++ computes it in the operands' common type, then converts it back to ``t``."""
        common = binop_type(op, t, vt)
        return _conv(self.binop(op, current, t, value, vt, common, loc), common, t)

    def stmt_Store(self, s, out, ind):
        site = self.site("index", s.loc, s.user_view)
        if s.op is None:
            value = _conv(self.expr(s.value), s.value.type, s.type)
            out.append(f"{ind}_kf_st({s.view}, {value}, {self.indices(s.indices)}, {site})")
            return
        value, index = self.module.temp("v"), self.module.temp("i")  # the value first, then the element once
        out.append(f"{ind}{value} = {self.expr(s.value)}")
        out.append(f"{ind}{index} = {self.indices(s.indices)}")
        new = self.update(s.op, f"_kf_ld({s.view}, {index}, {site})", s.type, value, s.value.type, s.loc)
        out.append(f"{ind}_kf_st({s.view}, {new}, {index}, {site})")

    def stmt_If(self, s, out, ind):
        out.append(f"{ind}if {self.expr(s.test)}:")
        self.block(s.body, out, ind + _INDENT)
        if s.orelse:
            out.append(f"{ind}else:")
            self.block(s.orelse, out, ind + _INDENT)

    def stmt_While(self, s, out, ind):
        out.append(f"{ind}while {self.expr(s.test)}:")
        self.block(s.body, out, ind + _INDENT)

    def stmt_For(self, s, out, ind):
        """A counted loop: the bounds are read once, as int64, and the body may reassign the variable."""
        bounds = ", ".join(_conv(self.expr(e), e.type, I64) for e in (s.start, s.stop, s.step))
        t = I64 if s.scoped else self.names[s.var]
        if t == I64:
            out.append(f"{ind}for {s.var} in _kf_range({bounds}):")
        else:  # a local of another type as the loop variable: C++ assigns it the int64 counter
            counter = self.module.temp("it")
            out.append(f"{ind}for {counter} in _kf_range({bounds}):")
            out.append(f"{ind}{_INDENT}{s.var} = {_conv(counter, I64, t)}")
        self.block(s.body, out, ind + _INDENT)

    def stmt_Lambda(self, s, out, ind):
        """A nested def (the body of nested parallelism): a closure over the enclosing names."""
        params = dict(s.params)
        self.module.lambdas[s.name] = s.params[s.indices][1] if len(s.params) > s.indices else F64
        body = _Body(self.module, self.helper, self.names, accs=tuple(list(params)[s.indices:s.indices + 1]),
                     nested=True)
        body.function(s.name, s, params, out, ind)

    # --- expressions --------------------------------------------------------------------------
    def expr(self, e) -> str:
        """Python evaluating to the value the C++ expression has, in the Python type of ``e.type``."""
        code = getattr(self, "expr_" + type(e).__name__)(e)
        return self.module.parsed_apart(code) if _nesting(code) > _MAX_NESTING else code

    def expr_Const(self, e):
        v = e.value
        return f"_kf_to_float64('{v}')" if isinstance(v, float) and not math.isfinite(v) else f"({v!r})"

    def expr_Name(self, e):
        return e.id

    def indices(self, indices) -> str:
        codes = [_conv(self.expr(i), i.type, I64) if i.type is BOOL else self.expr(i) for i in indices]
        return f"({', '.join(codes)},)"

    def expr_Load(self, e):
        return f"_kf_ld({e.view}, {self.indices(e.indices)}, {self.site('index', e.loc, e.user_view)})"

    def expr_Extent(self, e):
        return f"{e.view}.shape[{self.expr(e.dim)}]"

    def expr_BinOp(self, e):
        return self.binop(e.op, self.expr(e.left), e.left.type, self.expr(e.right), e.right.type, e.type, e.loc)

    def binop(self, op: str, a: str, ta: DType, b: str, tb: DType, t: DType, loc: ir.Loc) -> str:
        """``a op b`` computed as C++ computes it, in ``t`` (the operation's type) after converting the operands."""
        if t is BOOL:  # & | ^ of two bools
            return f"({a} {op} {b})"
        a, b = _conv(a, ta, t), _conv(b, tb, t)
        if t.is_float:
            quotient = f"_kf_fdiv({a}, {b})"
            value = {"/": quotient, "//": f"_kf_pk.floor({_conv(quotient, F64, t)})", "%": f"_kf_fmod_py({a}, {b})",
                     "**": f"_kf_pk.pow({a}, {b})"}.get(op, f"({a} {op} {b})")
            return _conv(value, F64, t)
        if op in ("//", "%"):  # every integer division is checked: one by a literal other than 0 or -1 never faults
            kind = "floordiv" if op == "//" else "mod"
            return f"_kf_divide({a}, {b}, {kind!r}, {t.is_signed}, {self.site(kind, loc)})"
        if op == "**":
            return f"_kf_ipow({a}, {b})"
        if op in ("<<", ">>"):
            return _wrap(f"_kf_shift({a}, {b}, {op == '<<'})", t)
        return _wrap(f"({a} {op} {b})", t)

    def expr_UnaryOp(self, e):
        a, t = self.expr(e.operand), e.operand.type
        if e.op == "not" or e.op == "~" and t is BOOL:
            return f"(not {a})"
        if e.op == "+":
            return _conv(a, t, I64) if t is BOOL else a
        if e.op == "-":
            if e.type is not t:  # Python negates a bool or unsigned value, as int64
                a, t = _conv(a, t, I64), I64
            return _wrap(f"(-{a})", t) if t.is_int and t.bits >= 32 else f"(-{a})"  # narrower: C++ negates in int
        return _wrap(f"(~{a})", t) if t in (DType.uint32, DType.uint64) else f"(~{a})"

    def expr_Compare(self, e):
        a, b, ta, tb = self.expr(e.left), self.expr(e.right), e.left.type, e.right.type
        if ta != tb and (ta.is_float or tb.is_float):  # an integer compared with a float becomes that float
            common = promote(ta, tb)
            a, b = _conv(a, ta, common), _conv(b, tb, common)
        return f"({a} {e.op} {b})"

    def expr_BoolOp(self, e):
        """Python's and/or: the deciding operand, in the common type."""
        return "(" + f" {e.op} ".join(_conv(self.expr(v), v.type, e.type) for v in e.values) + ")"

    def expr_Cast(self, e):
        return _conv(self.expr(e.value), e.value.type, e.type)

    def expr_Ternary(self, e):
        body, orelse = _conv(self.expr(e.body), e.body.type, e.type), _conv(self.expr(e.orelse), e.orelse.type, e.type)
        return f"({body} if {self.expr(e.test)} else {orelse})"

    def expr_Call(self, e):
        name, args = e.func, e.args
        if name in ("abs", "fabs"):  # kf_abs keeps an integer's type
            t = args[0].type
            value = f"_kf_abs({self.expr(args[0])})"
            return value if t.is_float else _wrap(value, I64 if t is BOOL else t)
        if name in ("min", "max"):  # pairwise, each pair in its promoted type, as the C++ spells them
            operands = [a.value if isinstance(a, ir.Cast) and not a.explicit else a for a in args]
            code, t = self.expr(operands[0]), operands[0].type
            for a in operands[1:]:
                common = promote(t, a.type)
                code = f"_kf_{name}({_conv(code, t, common)}, {_conv(self.expr(a), a.type, common)})"
                t = common
            return code
        codes = ", ".join(self.expr(a) for a in args)
        if name == "round":
            return f"_kf_round({codes})"
        if name in ("isnan", "isinf", "isfinite"):
            return f"_kf_pk.{name}({codes})"
        return _conv(f"_kf_pk.{name}({codes})", F64, e.type)  # computed in double, rounded to the call's type

    def expr_HelperCall(self, e):
        params = self.module.kernel.helpers[e.instance].params
        args = ", ".join(_conv(self.expr(a), a.type, t) for a, (_, t) in zip(e.args, params))
        return f"_kf_h{e.instance}({args})"

    def expr_New(self, e):
        params = self.module.kernel.helpers[e.init].params[1:]
        args = "".join(f", {_conv(self.expr(a), a.type, t)}" for a, (_, t) in zip(e.args, params))
        return f"_kf_new({self.module.structs[e.type]}, _kf_h{e.init}{args})"

    def expr_Field(self, e):
        return f"{self.expr(e.value)}.{e.name}"

    def expr_Atomic(self, e):
        dtype = self.names[e.view].dtype
        values = "".join(f", {_conv(self.expr(a), a.type, dtype)}" for a in e.args)
        site = self.site("index", e.loc, e.user_view)
        op = atomic_op(e.func)
        if op in ("div", "mod") and dtype.is_int:
            values += f", divide_site={self.site('floordiv' if op == 'div' else 'mod', e.loc)}"
        return f"_kf_atomic({e.func!r}, {e.view}, {self.indices(e.indices)}, {site}{values})"

    def expr_TeamQuery(self, e):
        return f"{e.team}.{e.what}()"

    def expr_Nested(self, e):
        bounds = [_conv(self.expr(b), b.type, I64) for b in e.bounds]
        if e.range.endswith("MDRange"):
            zero = f", {ZERO[e.type]!r}" if e.kind == "parallel_reduce" else ""
            return f"_kf_nested_md_{e.kind[len('parallel_'):]}(({', '.join(bounds)},), {e.body}{zero})"
        if len(bounds) == 1:
            bounds.insert(0, "0")
        op = e.kind[len("parallel_"):]
        if op == "for":
            return f"_kf_nested_for({', '.join(bounds)}, {e.body})"
        acc = e.type if op == "reduce" else self.module.lambdas[e.body]
        return f"_kf_nested_{op}({', '.join(bounds)}, {e.body}, {ZERO[acc]!r})"
