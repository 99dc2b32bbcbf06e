"""Typed translation of a kernel body (Python AST) into C++ statements: the python backend's type checker.

Codegen prints the typed IR instead (``printer.py``, from ``kfuse.ir.lower``, which also raises the user's
errors); this translator stays while ``kfuse/backends/python.py`` records its decisions by subclassing it.

Types are inferred as the translation goes: parameters from the call's specialisation, locals from
their annotations or from every value assigned to them (a local assigned an int and later a float is
a double, as in Python). Python semantics that differ from C++ (``/``, ``//``, ``%``, ``**``, integer
``round``) are spelled with helpers from ``kfuse_prelude.hpp``.

Operations that can fault (integer ``//`` and ``%`` always, View accesses under KFUSE_BOUNDS_CHECK) go
through checked helpers given a fault site: an entry of the kernel's table saying which workunit, file,
line and View, so the launch can raise a Python exception that names them.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from ..errors import KernelTypeError, UnsupportedSyntaxError
from ..frontend.normalize import KernelSource
from ..frontend.spec import ArgType
from ..ir import typing as rules
from ..ir.pyast import assigned_names, flatten_subscript
from ..ir.printf import SPEC as PRINTF_SPEC  # noqa: F401 - the python backend reads the format rule here
from ..ir.typing import ATOMIC_CALLS, ATOMICS, BINOPS, Unknown, infer_locals, lambda_acc_type
from ..types import DType, promote
from .cxx_names import cpp_type, ident
from .printer import element_code, extent_code, printf_call
from .sites import FaultSite

F64, I64, BOOL = DType.float64, DType.int64, DType.bool
TEAM = "team"

_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_EXPR_NAMES = {ast.List: "list literal", ast.Tuple: "tuple", ast.Slice: "slice"}


def _int_constant(node):
    """The value of an integer literal (``3``, ``-3``), or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int_constant(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def mark_origin(tree: ast.AST, workunit: str, filename: str, member: int) -> None:
    """Tag every node of a member's AST before fusion renames it: faults in the fused kernel then name the
    member (its position, workunit, file and, for Views, its own parameter name)."""
    for node in ast.walk(tree):
        node.kf_origin = (workunit, filename, getattr(node, "id", None), member)


@dataclass
class Sym:
    """What a name stands for inside a kernel: a scalar, a View, the team handle or a nested lambda."""

    kind: str  # "scalar" | "view" | "team" | "lambda"
    type: object  # DType, ArgType, or the lambda's FunctionDef
    cname: str
    member: bool = False  # a functor data member (a kernel parameter), const inside operator()


class Unit:
    """Collects what one translation unit needs besides the functor: helper instances."""

    def __init__(self, helpers: dict, restrict: frozenset = frozenset(), bounds_check: bool = False,
                 body_class=None):
        self.helpers = helpers  # name -> KernelSource
        self.body_class = body_class or BodyTranslator  # a subclass may record what it types (python backend)
        self.restrict = restrict
        self.bounds_check = bounds_check  # KFUSE_BOUNDS_CHECK: every View access checks its indices
        self.fault_sites: list[FaultSite] = []  # the kernel's kf_sites table, in order
        self.kernel_source: KernelSource | None = None  # the workunit (or fused kernel) being translated
        self.instances: dict = {}  # (name, arg types) -> (cname, return type)
        self.bodies: dict = {}  # cname -> the translator of that helper instance
        self.definitions: list[str] = []
        self.uses_printf = False  # the launcher then flushes C stdout so output keeps its order with Python's
        self._active: set = set()

    def fault_site(self, site: FaultSite) -> int:
        if site not in self.fault_sites:
            self.fault_sites.append(site)
        return self.fault_sites.index(site)

    def helper(self, name: str, arg_types: tuple, node, caller: KernelSource):
        key = (name, arg_types)
        if key in self.instances:
            return self.instances[key]
        if name in self._active:
            raise caller.error(f"helper '{name}' calls itself; recursion is not supported in kernels", node)
        src = self.helpers[name]
        params = src.tree.args.args
        typed = rules.helper_params(name, src, arg_types, node, caller)
        self._active.add(name)
        scope = {n: Sym("view" if isinstance(t, ArgType) else "scalar", t, ident(n)) for n, t in typed}
        body = self.body_class(src, self, scope, in_helper=True)
        body.restrict = frozenset()  # helper parameters are always Views
        lines = body.function_body(src.tree.body)
        ret = rules.helper_return(src, body.return_types)
        cname = f"{ident(name)}_h{len(self.instances)}"
        ret_cpp = ret.cpp if ret is not None else "void"
        sig = ", ".join(f"{cpp_type(t)} {ident(a.arg)}" for a, t in zip(params, arg_types))
        self.definitions.append(f"KOKKOS_INLINE_FUNCTION {ret_cpp} {cname}({sig}) {{\n" + "\n".join(lines) + "\n}\n")
        self._active.discard(name)
        self.instances[key] = (cname, ret)
        self.bodies[cname] = body
        return cname, ret


class BodyTranslator:
    """Translates one function body (workunit, helper or nested lambda) given the names it starts with."""

    def __init__(self, src: KernelSource, unit: Unit, scope: dict, in_helper: bool = False):
        self.src = src
        self.unit = unit
        self.scope = dict(scope)
        self.in_helper = in_helper
        self.return_types: list = []
        self._tmp = 0
        self.inferring = False
        self.loop_vars: set = set()
        self.restrict: frozenset = unit.restrict  # C++ names of Views passed as __restrict__ pointers
        self._statements: list = []  # enclosing statements, innermost last: where a new node's site is
        if not in_helper:
            unit.kernel_source = src

    # --- fault sites ----------------------------------------------------------------------
    def _site(self, kind: str, node, view_node=None) -> int:
        """The fault-site number of a checked operation at ``node`` (0 while only inferring types)."""
        if self.inferring:
            return 0
        origin = next((n.kf_origin for n in ast.walk(node) if hasattr(n, "kf_origin")), None)
        for stmt in reversed(self._statements):
            origin = origin or getattr(stmt, "kf_origin", None)
        line = getattr(node, "lineno", None) or next(
            (s.lineno for s in reversed(self._statements) if getattr(s, "lineno", None)), 0)
        kernel = self.unit.kernel_source
        member = -1
        if self.src is not kernel:  # a @pk.function: its own file and line, called from the kernel
            workunit, function, filename = kernel.name, self.src.name, self.src.filename
        elif origin is not None:  # a member of a fused kernel
            workunit, function, filename, member = origin[0], "", origin[1], origin[3]
        else:
            workunit, function, filename = self.src.name, "", self.src.filename
        view = ""
        if view_node is not None:
            own = getattr(view_node, "kf_origin", None)
            view = (own[2] if own else None) or ast.unparse(view_node)
        return self.unit.fault_site(FaultSite(kind, workunit, function, filename, line, view, member))

    # --- errors -------------------------------------------------------------------------
    def unsupported(self, what: str, node, hint: str | None = None):
        return self.src.error(f"unsupported construct: {what}", node, hint, cls=UnsupportedSyntaxError)

    def type_error(self, what: str, node, hint: str | None = None):
        return self.src.error(what, node, hint, cls=KernelTypeError)

    # --- body ----------------------------------------------------------------------------
    def function_body(self, stmts: list, indent: str = "  ") -> list[str]:
        """Declare locals (hoisted, as Python scopes them function-wide) then translate statements."""
        lines = []
        assigned = assigned_names(stmts)
        for name in sorted(n for n, s in self.scope.items() if s.member and s.kind == "scalar" and n in assigned):
            sym = self.scope[name]  # Python lets a body rebind a parameter; the functor member is const
            lines.append(f"{indent}{sym.type.cpp} {sym.cname} = this->{sym.cname};")
        for name, dtype in self._infer_locals(stmts).items():
            cname = ident(name)
            self.scope[name] = Sym("scalar", dtype, cname)
            lines.append(f"{indent}{dtype.cpp} {cname} = {dtype.cpp}();")
        for stmt in stmts:
            self.stmt(stmt, lines, indent)
        return lines

    def _infer_locals(self, stmts) -> dict:
        """Types of the names this body assigns (the shared rules), typing values with this translator."""
        def type_of(value, types, lambdas):
            saved = dict(self.scope)
            self.scope.update({n: Sym("lambda", (d, lambda_acc_type(d)), ident(n)) for n, d in lambdas.items()})
            self.scope.update({n: Sym("scalar", t, ident(n)) for n, t in types.items()})
            try:
                return self.expr(value)[1]
            finally:
                self.scope = saved

        self.inferring = True
        try:
            result, self.loop_vars = infer_locals(stmts, self.scope, type_of, self)
        finally:
            self.inferring = False
        return result

    # --- statements ---------------------------------------------------------------------
    def stmt(self, node, out: list, ind: str) -> None:
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(f"'{type(node).__name__}' statement", node)
        self._statements.append(node)
        try:
            method(node, out, ind)
        finally:
            self._statements.pop()

    def block(self, stmts, out, ind):
        for s in stmts:
            self.stmt(s, out, ind + "  ")

    def stmt_Pass(self, node, out, ind):
        pass

    def stmt_Break(self, node, out, ind):
        out.append(f"{ind}break;")

    def stmt_Continue(self, node, out, ind):
        out.append(f"{ind}continue;")

    def stmt_Return(self, node, out, ind):
        if node.value is None:
            out.append(f"{ind}return;")
            return
        if not self.in_helper:
            raise self.unsupported("returning a value from a workunit", node,
                                   "write results into a View or use parallel_reduce with an accumulator")
        code, t = self.expr(node.value)
        if not isinstance(t, DType):
            raise self.unsupported("returning a View from a helper", node)
        self.return_types.append(t)
        out.append(f"{ind}return {code};")

    def stmt_Expr(self, node, out, ind):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        if not isinstance(node.value, ast.Call):
            raise self.unsupported("an expression statement with no effect", node)
        code, _ = self.expr(node.value, statement=True)
        out.append(f"{ind}{code};")

    def _store_target(self, target) -> tuple[str, object]:
        if isinstance(target, ast.Name):
            sym = self.scope.get(target.id)
            if sym is None:
                raise self.type_error(f"assignment to unknown name '{target.id}'", target)
            if sym.kind != "scalar":
                raise self.unsupported(f"assigning to {sym.kind} '{target.id}'", target)
            return sym.cname, sym.type
        if isinstance(target, ast.Subscript):
            return self.subscript(target)
        raise self.unsupported(f"assignment target '{ast.unparse(target)}'", target)

    def stmt_Assign(self, node, out, ind):
        value, vt = self.expr(node.value)
        for target in node.targets:
            code, tt = self._store_target(target)
            out.append(f"{ind}{code} = {self._convert(value, vt, tt)};")

    def stmt_AnnAssign(self, node, out, ind):
        if node.value is not None:
            self.stmt_Assign(ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno,
                                        col_offset=node.col_offset), out, ind)

    def stmt_AugAssign(self, node, out, ind):
        code, tt = self._store_target(node.target)
        op = BINOPS.get(type(node.op))
        if op in ("+", "-", "*", "&", "|", "^"):
            value, vt = self.expr(node.value)
            out.append(f"{ind}{code} {op}= {value};")
            return
        combined, ct = self.binop(node.op, (code, tt), self.expr(node.value), node)
        out.append(f"{ind}{code} = {self._convert(combined, ct, tt)};")

    @staticmethod
    def _convert(code, from_t, to_t):
        if isinstance(to_t, DType) and isinstance(from_t, DType) and from_t != to_t:
            return f"static_cast<{to_t.cpp}>({code})"
        return code

    def stmt_If(self, node, out, ind):
        cond, _ = self.expr(node.test)
        out.append(f"{ind}if ({cond}) {{")
        self.block(node.body, out, ind)
        if node.orelse:
            out.append(f"{ind}}} else {{")
            self.block(node.orelse, out, ind)
        out.append(f"{ind}}}")

    def stmt_While(self, node, out, ind):
        if node.orelse:
            raise self.unsupported("while ... else", node)
        cond, _ = self.expr(node.test)
        out.append(f"{ind}while ({cond}) {{")
        self.block(node.body, out, ind)
        out.append(f"{ind}}}")

    def stmt_For(self, node, out, ind):
        if node.orelse:
            raise self.unsupported("for ... else", node)
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and not it.keywords and 1 <= len(it.args) <= 3):
            raise self.unsupported(f"for loop over '{ast.unparse(it)}'", node, "loop over range(...)")
        if not isinstance(node.target, ast.Name):
            raise self.unsupported("for loop with a tuple target", node)
        args = [self.expr(a) for a in it.args]
        for (code, t), a in zip(args, it.args):
            if not (isinstance(t, DType) and not t.is_float):
                raise self.type_error(f"range() needs integers, got {t} in '{ast.unparse(a)}'", a)
        start, stop, step = ("0", args[0][0], "1") if len(args) == 1 else \
            (args[0][0], args[1][0], args[2][0] if len(args) == 3 else "1")
        var = node.target.id
        declared = var in self.scope and var not in self.loop_vars
        self._tmp += 1
        end = f"kf_end{self._tmp}"
        out.append(f"{ind}{{")
        out.append(f"{ind}  const int64_t {end} = {stop};")
        if len(args) == 3:
            stride = f"kf_step{self._tmp}"
            out.append(f"{ind}  const int64_t {stride} = {step};")
            cond = f"({stride} > 0 ? kf_it{self._tmp} < {end} : kf_it{self._tmp} > {end})"
        else:
            stride, cond = "1", f"kf_it{self._tmp} < {end}"
        counter = f"kf_it{self._tmp}"
        out.append(f"{ind}  for (int64_t {counter} = {start}; {cond}; {counter} += {stride}) {{")
        saved = self.scope.get(var)
        if declared:
            out.append(f"{ind}    {self.scope[var].cname} = {counter};")
        else:
            self.scope[var] = Sym("scalar", I64, ident(var))
            out.append(f"{ind}    const int64_t {ident(var)} = {counter};")
        self.block(node.body, out, ind + "  ")
        if not declared:
            if saved is None:
                del self.scope[var]
            else:
                self.scope[var] = saved
        out.append(f"{ind}  }}")
        out.append(f"{ind}}}")

    def nested_translator(self, scope: dict) -> BodyTranslator:
        """The translator of a nested def's body (a subclass may share what it records with it)."""
        return self.unit.body_class(self.src, self.unit, scope, in_helper=True)

    def stmt_FunctionDef(self, node, out, ind):
        """A nested def inside a team workunit: a C++ lambda for TeamThreadRange/ThreadVectorRange."""
        params = node.args.args
        if not params:
            raise self.unsupported("a nested function without an index parameter", node)
        scope = dict(self.scope)
        sig = [f"const int64_t {ident(params[0].arg)}"]
        scope[params[0].arg] = Sym("scalar", I64, ident(params[0].arg))
        acc_type = lambda_acc_type(node)
        if len(params) >= 2:
            scope[params[1].arg] = Sym("scalar", acc_type, ident(params[1].arg))
            sig.append(f"{acc_type.cpp}& {ident(params[1].arg)}")
        if len(params) >= 3:
            scope[params[2].arg] = Sym("scalar", BOOL, ident(params[2].arg))
            sig.append(f"const bool {ident(params[2].arg)}")
        inner = self.nested_translator(scope)
        lines = inner.function_body(node.body, ind + "  ")
        if inner.return_types:
            raise self.unsupported("returning a value from a nested parallel body", node)
        out.append(f"{ind}auto {ident(node.name)} = [&]({', '.join(sig)}) {{")
        out.extend(lines)
        out.append(f"{ind}}};")
        self.scope[node.name] = Sym("lambda", (node, acc_type), ident(node.name))

    # --- expressions ----------------------------------------------------------------------
    def expr(self, node, statement: bool = False) -> tuple[str, object]:
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            kind = _EXPR_NAMES.get(type(node), type(node).__name__)
            raise self.unsupported(f"{kind} '{ast.unparse(node)}'", node)
        if method == self.expr_Call:
            return method(node, statement)
        return method(node)

    def expr_Constant(self, node):
        v = node.value
        if isinstance(v, bool):
            return ("true" if v else "false"), BOOL
        if isinstance(v, int):
            if not -(2 ** 63) <= v < 2 ** 63:
                raise self.type_error(f"integer constant {v} does not fit in 64 bits", node)
            return (f"int64_t({v})" if abs(v) >= 2 ** 31 else str(v)), I64
        if isinstance(v, float):
            if v != v:
                return "std::numeric_limits<double>::quiet_NaN()", F64
            if v in (float("inf"), float("-inf")):
                return ("" if v > 0 else "-") + "std::numeric_limits<double>::infinity()", F64
            text = repr(v)
            return (text if any(c in text for c in ".en") else text + ".0"), F64
        raise self.unsupported(f"constant {v!r} of type {type(v).__name__}", node)

    def expr_Name(self, node):
        sym = self.scope.get(node.id)
        if sym is None:
            raise Unknown(node.id) if self.inferring else \
                self.type_error(f"name '{node.id}' is used before any assignment", node)
        if sym.kind == "lambda":
            return sym.cname, sym.type
        return sym.cname, (TEAM if sym.kind == "team" else sym.type)

    def expr_BinOp(self, node):
        return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)

    def binop(self, op, left, right, node):
        (a, ta), (b, tb) = left, right
        for t, n in ((ta, node), (tb, node)):
            if not isinstance(t, DType):
                raise self.type_error(f"arithmetic on a {'View' if isinstance(t, ArgType) else t} in "
                                      f"'{ast.unparse(node)}'", n, "index the View to get an element")
        name = BINOPS.get(type(op))
        if name is None:
            raise self.unsupported(f"operator {type(op).__name__}", node)
        both_int = not ta.is_float and not tb.is_float
        if name in rules.BITWISE and not both_int:
            raise self.type_error(f"bitwise operator on floats in '{ast.unparse(node)}'", node)
        operands = rules.integer_operands(name, ta, tb)
        if operands is not None:
            a, b = self._convert(a, ta, operands), self._convert(b, tb, operands)
        t = rules.binop_type(name, ta, tb)
        if name == "/":
            return (f"(static_cast<double>({a}) / static_cast<double>({b}))" if both_int else f"({a} / {b})"), t
        if name == "//":
            return (self._integer_division("floordiv", a, b, node) if both_int else f"std::floor({a} / {b})"), t
        if name == "%":
            return (self._integer_division("mod", a, b, node) if both_int else f"kf_fmod_py({a}, {b})"), t
        if name == "**":
            if both_int:
                return f"kf_ipow({a}, {b})", t
            return f"std::pow(static_cast<{t.cpp}>({a}), static_cast<{t.cpp}>({b}))", t
        return f"({a} {name} {b})", t

    def _integer_division(self, kind: str, a: str, b: str, node) -> str:
        """Integer // or %: checked for a zero divisor (and MIN // -1), unless the divisor is a constant
        that can do neither."""
        divisor = node.right if isinstance(node, ast.BinOp) else node.value  # BinOp or AugAssign
        if _int_constant(divisor) not in (None, 0, -1):
            return f"kf_{kind}({a}, {b})"
        return f"kf_{kind}_checked({a}, {b}, {self._site(kind, node)})"

    def expr_UnaryOp(self, node):
        code, t = self.expr(node.operand)
        if not isinstance(t, DType):
            raise self.type_error(f"operator on a non-scalar in '{ast.unparse(node)}'", node)
        name = rules.UNARY[type(node.op)]
        if name == "~" and t.is_float:
            raise self.type_error("~ on a float", node)
        result = rules.unary_type(name, t)
        if name == "not" or (name == "~" and t is BOOL):
            return f"(!{code})", result
        if name == "-" and result is not t:
            return f"(-static_cast<int64_t>({code}))", result
        return f"({name}{code})", result

    def expr_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        values = [self.expr(v) for v in node.values]
        for (_, t), v in zip(values, node.values):
            if not isinstance(t, DType):
                raise self.type_error(f"'{ast.unparse(v)}' is not a scalar in '{ast.unparse(node)}'", v)
        if all(t is BOOL for _, t in values):
            return "(" + (" && " if is_and else " || ").join(c for c, _ in values) + ")", BOOL
        # Python's and/or yield the deciding operand (`i or 7` is 7 when i == 0), still short-circuiting.
        t = rules.boolop_type([t for _, t in values])
        stop = "!kf_v" if is_and else "kf_v"
        steps = "".join(f"kf_v = {c}; if ({stop}) return kf_v; " for c, _ in values[:-1])
        return f"[&]() -> {t.cpp} {{ {t.cpp} kf_v; {steps}return {values[-1][0]}; }}()", t

    def expr_Compare(self, node):
        parts = []
        left = self.expr(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            if type(op) not in _CMPOPS:
                raise self.unsupported(f"comparison '{type(op).__name__}'", node)
            right = self.expr(comparator)
            (a, ta), (b, tb) = left, right
            t = rules.compare_operands(ta, tb)
            if t is not None:
                a, b = self._convert(a, ta, t), self._convert(b, tb, t)
            parts.append(f"({a} {_CMPOPS[type(op)]} {b})")
            left = right
        return ("(" + " && ".join(parts) + ")" if len(parts) > 1 else parts[0]), BOOL

    def expr_IfExp(self, node):
        cond, _ = self.expr(node.test)
        a, ta = self.expr(node.body)
        b, tb = self.expr(node.orelse)
        t = rules.join(ta, tb)
        return f"({cond} ? static_cast<{t.cpp}>({a}) : static_cast<{t.cpp}>({b}))", t

    def subscript(self, node):
        base, indices = flatten_subscript(node)
        if isinstance(base, ast.Attribute) and base.attr == "shape":
            code, t = self.expr(base.value)
            if isinstance(t, ArgType) and len(indices) == 1:
                dim, _ = self.expr(indices[0])
                return self.extent(code, dim, t.ndim), I64
        code, t = self.expr(base)
        if not isinstance(t, ArgType):
            raise self.type_error(f"'{ast.unparse(base)}' is not a View and cannot be indexed", node)
        if len(indices) != t.ndim:
            raise self.unsupported(f"indexing a {t.ndim}-D View with {len(indices)} indices", node,
                                   "kernels access single elements: give one index per dimension")
        idx = []
        for i in indices:
            if isinstance(i, ast.Slice):
                raise self.unsupported("slicing inside a kernel", i)
            c, it = self.expr(i)
            if not (isinstance(it, DType) and not it.is_float):
                raise self.type_error(f"View index '{ast.unparse(i)}' is not an integer", i)
            idx.append(c)
        return self.element(code, t, idx, node, base), t.dtype

    def element(self, code: str, t: ArgType, idx: list, node, view_node) -> str:
        site = self._site("index", node, view_node) if self.unit.bounds_check else None
        return element_code(code, t.layout, idx, site, self.restrict)

    def extent(self, code: str, dim: str, ndim: int) -> str:
        return extent_code(code, dim, ndim, self.restrict)

    def expr_Subscript(self, node):
        return self.subscript(node)

    def expr_Attribute(self, node):
        raise self.unsupported(f"attribute '{ast.unparse(node)}'", node)

    def expr_Call(self, node, statement=False):
        func = node.func
        if node.keywords:
            raise self.unsupported("keyword arguments in a kernel call", node)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "pk" \
                and "pk" not in self.scope:
            return self.call_pk(func.attr, node, statement)
        if isinstance(func, ast.Attribute):
            return self.call_method(func, node)
        if isinstance(func, ast.Name):
            if func.id in self.src.helpers and func.id not in self.scope:
                args = [self.expr(a) for a in node.args]
                cname, ret = self.unit.helper(func.id, tuple(t for _, t in args), node, self.src)
                return f"{cname}({', '.join(c for c, _ in args)})", ret
            return self.call_builtin(func.id, node)
        raise self.unsupported(f"call to '{ast.unparse(func)}'", node)

    def _scalar_args(self, node, count=None):
        args = [self.expr(a) for a in node.args]
        if count is not None and len(args) not in (count if isinstance(count, tuple) else (count,)):
            raise self.type_error(f"'{ast.unparse(node.func)}' takes {count} arguments, {len(args)} given", node)
        for (c, t), a in zip(args, node.args):
            if not isinstance(t, DType):
                raise self.type_error(f"argument '{ast.unparse(a)}' is not a scalar", a)
        return args

    def call_builtin(self, name, node):
        if name in ("int", "float", "bool"):
            (c, t), = self._scalar_args(node, 1)
            target = {"int": I64, "float": F64, "bool": BOOL}[name]
            return f"static_cast<{target.cpp}>({c})", target
        if name == "abs":
            (c, t), = self._scalar_args(node, 1)
            return (f"std::fabs({c})" if t.is_float else f"kf_abs({c})"), rules.abs_type(t)
        if name in ("min", "max"):
            args = self._scalar_args(node)
            if len(args) < 2:
                raise self.type_error(f"{name}() in a kernel needs at least two scalars", node)
            code, t = args[0]
            for c2, t2 in args[1:]:
                t = promote(t, t2)
                code = f"kf_{name}(static_cast<{t.cpp}>({code}), static_cast<{t.cpp}>({c2}))"
            return code, t
        if name == "round":
            (c, t), = self._scalar_args(node, 1)
            return f"static_cast<int64_t>(std::nearbyint({c}))", I64
        if name == "len":
            code, t = self.expr(node.args[0])
            if not isinstance(t, ArgType):
                raise self.type_error("len() of a non-View", node)
            return self.extent(code, "0", t.ndim), I64
        if name == "range":
            raise self.unsupported("range() outside a for loop", node)
        raise self.unsupported(f"call to '{name}'", node)

    def call_method(self, func, node):
        code, t = self.expr(func.value)
        if t == TEAM:
            team_methods = {"league_rank": "league_rank()", "team_rank": "team_rank()", "team_size": "team_size()",
                            "league_size": "league_size()"}
            if func.attr in team_methods:
                return f"static_cast<int64_t>({code}.{team_methods[func.attr]})", I64
            if func.attr == "team_barrier":
                return f"{code}.team_barrier()", None
        if isinstance(t, ArgType):
            if func.attr == "extent":
                (dim, _), = self._scalar_args(node, 1)
                return self.extent(code, dim, t.ndim), I64
            if func.attr == "rank":
                return str(t.ndim), I64
        raise self.unsupported(f"method call '{ast.unparse(func)}'", node)

    def call_pk(self, name, node, statement):
        if name in rules.UNARY_FLOAT_MATH or name in ("fabs", "abs", "isnan", "isinf", "isfinite", "round"):
            (c, t), = self._scalar_args(node, 1)
            out_t = rules.math_type(name, [t])
            if name in ("fabs", "abs"):
                return (f"std::fabs({c})" if t.is_float else f"kf_abs({c})"), out_t
            if name in ("isnan", "isinf", "isfinite"):
                return f"std::{name}(static_cast<double>({c}))", out_t
            if name == "round":
                return f"static_cast<int64_t>(std::nearbyint({c}))", out_t
            return f"std::{name}(static_cast<{out_t.cpp}>({c}))", out_t
        if name in rules.BINARY_FLOAT_MATH:
            (a, ta), (b, tb) = self._scalar_args(node, 2)
            t = rules.math_type(name, [ta, tb])
            return f"std::{name}(static_cast<{t.cpp}>({a}), static_cast<{t.cpp}>({b}))", t
        if name == "fma":
            args = self._scalar_args(node, 3)
            return f"std::fma({', '.join(f'static_cast<double>({c})' for c, _ in args)})", \
                rules.math_type(name, [t for _, t in args])
        if name in ATOMIC_CALLS:
            return self.call_atomic(name, node)
        if name == "printf":
            return self.call_printf(node), None
        if name == "team_barrier":
            code, t = self.expr(node.args[0])
            if t != TEAM:
                raise self.type_error("pk.team_barrier expects the team member", node)
            return f"{code}.team_barrier()", None
        if name in ("parallel_for", "parallel_reduce", "parallel_scan"):
            return self.call_nested(name, node, statement)
        raise self.unsupported(f"pk.{name} inside a kernel", node)

    def _element_ref(self, view_node, index_node, node):
        code, t = self.expr(view_node)
        if not isinstance(t, ArgType):
            raise self.type_error(f"atomic target '{ast.unparse(view_node)}' is not a View", node)
        parts = index_node.elts if isinstance(index_node, (ast.List, ast.Tuple)) else [index_node]
        if len(parts) != t.ndim:
            raise self.type_error(f"atomic on a {t.ndim}-D View needs {t.ndim} indices", node)
        idx = [self.expr(p)[0] for p in parts]
        return f"&{self.element(code, t, idx, node, view_node)}", t.dtype

    def call_atomic(self, name, node):
        """``pk.atomic_fetch_add(view, [i, j], value)`` (PyKokkos spelling)."""
        args = node.args
        if name in ("atomic_increment", "atomic_decrement"):
            if len(args) != 2:
                raise self.type_error(f"pk.{name}(view, [indices]) takes 2 arguments", node)
            ref, _ = self._element_ref(args[0], args[1], node)
            return f"Kokkos::{name}({ref})", None
        if name == "atomic_compare_exchange":
            if len(args) != 4:
                raise self.type_error("pk.atomic_compare_exchange(view, [indices], expected, desired)", node)
            ref, t = self._element_ref(args[0], args[1], node)
            exp, _ = self.expr(args[2])
            des, _ = self.expr(args[3])
            return f"Kokkos::atomic_compare_exchange({ref}, static_cast<{t.cpp}>({exp}), " \
                   f"static_cast<{t.cpp}>({des}))", rules.atomic_type(name, t)
        if len(args) != 3:
            raise self.type_error(f"pk.{name}(view, [indices], value) takes 3 arguments", node)
        ref, t = self._element_ref(args[0], args[1], node)
        if name in ("atomic_fetch_and", "atomic_fetch_or") and not t.is_int:
            raise self.type_error(f"pk.{name} needs a View of integers, '{ast.unparse(args[0])}' holds {t.name}", node)
        val, _ = self.expr(args[2])
        return f"Kokkos::{ATOMICS[name][0]}({ref}, static_cast<{t.cpp}>({val}))", rules.atomic_type(name, t)

    def call_printf(self, node):
        """C printf of a format the IR lowering has checked with its arguments (``kfuse.ir.printf``)."""
        self.unit.uses_printf = True
        args = [self.expr(a) for a in node.args[1:]]
        return printf_call(node.args[0].value, [code for code, _ in args])

    def call_nested(self, name, node, statement):
        """Nested parallelism inside a team workunit: TeamThreadRange / ThreadVectorRange + a nested def."""
        if len(node.args) != 2:
            raise self.type_error(f"nested pk.{name} takes (range, function)", node)
        rng, fn = node.args
        if not (isinstance(rng, ast.Call) and isinstance(rng.func, ast.Attribute)
                and rng.func.attr in ("TeamThreadRange", "ThreadVectorRange", "TeamVectorRange")):
            raise self.unsupported(f"pk.{name} inside a kernel outside TeamThreadRange/ThreadVectorRange", node,
                                   "nested parallelism needs a TeamPolicy workunit")
        member, mt = self.expr(rng.args[0])
        if mt != TEAM:
            raise self.type_error(f"{rng.func.attr} needs the team member first", rng)
        bounds = [self.expr(a)[0] for a in rng.args[1:]]
        if not 1 <= len(bounds) <= 2:
            raise self.type_error(f"{rng.func.attr}(member, end) or (member, begin, end)", rng)
        policy = f"Kokkos::{rng.func.attr}({member}, {', '.join(bounds)})"
        if not isinstance(fn, ast.Name) or self.scope.get(fn.id) is None or self.scope[fn.id].kind != "lambda":
            raise self.unsupported("nested parallel body that is not a nested def", fn,
                                   "define the body with 'def inner(j, ...):' inside the workunit")
        lam = self.scope[fn.id]
        _, acc_type = lam.type
        if name == "parallel_for":
            return f"Kokkos::parallel_for({policy}, {lam.cname})", None
        if name == "parallel_scan":  # Kokkos's nested scan delivers no total
            if not statement:
                raise self.unsupported("using the result of a nested parallel_scan", node,
                                       "call it as a statement; the body's last_pass writes the prefix sums")
            return f"Kokkos::parallel_scan({policy}, {lam.cname})", None
        acc_type = acc_type or F64
        self._tmp += 1
        tmp = f"kf_nested{self._tmp}"
        return (f"[&]() {{ {acc_type.cpp} {tmp} = {acc_type.cpp}(); Kokkos::{name}({policy}, {lam.cname}, {tmp}); "
                f"return {tmp}; }}()"), acc_type
