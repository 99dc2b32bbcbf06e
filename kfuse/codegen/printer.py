"""Print a kernel's typed IR (``kfuse.ir``) as C++ statements.

The IR already holds every type and conversion the C++ computes (``kfuse.ir.lower`` typed it and raised
the user's errors), so this module only chooses spellings. Python semantics that differ from C++ (``/``,
``//``, ``%``, ``**``, integer ``round``) are spelled with helpers from ``kfuse_prelude.hpp``.

A classtype is a struct defined before the functor: its fields, its methods as ``KOKKOS_INLINE_FUNCTION``
members (each instance ``kf_m<i>_<name>``, defined after every struct, ``self`` a reference to ``*this``),
and per ``__init__`` instance a static ``kf_new<i>`` that zero-fills a value and runs it. Helpers and methods
take classtype values by reference, so a temporary argument is passed through ``kf_ref``.

Operations that can fault (integer ``//`` and ``%`` always, View accesses under KFUSE_BOUNDS_CHECK) go
through checked helpers given a fault site: an entry of the kernel's table saying which workunit, file,
line and View, so the launch can raise a Python exception that names them. Sites are numbered in the
order the printer meets them, helpers' sites where a helper is first called.
"""
from __future__ import annotations

from typing import NamedTuple

from ..ir import nodes as ir
from ..ir import printf
from ..ir.access import assigned_names, nested_params
from ..ir.typing import ATOMICS, BOOL, atomic_op
from ..types import promote
from .cxx_names import cpp_type, ident, method_name
from .sites import FaultSite, c_string


class HostScratch(NamedTuple):
    """A team-level ScratchView whose extents the host knows before the launch (``Unit.host_checked_scratch``)."""

    name: str  # (two Views of one shape are two Views to fit)
    level: int
    element: str  # the element's C++ type
    extents: tuple  # integer constants and the names of fixed scalar arguments


class Unit:
    """One translation unit: the kernel's IR, the helper functions it calls and its fault-site table."""

    def __init__(self, kernel: ir.Kernel, restrict: frozenset = frozenset(), bounds_check: bool = False,
                 lanes: dict | None = None, leading=None):
        self.kernel = kernel
        self.restrict = restrict  # C++ names of Views passed as __restrict__ pointers
        self.lanes = lanes or {}  # kernel runs in lanes: id(loop) -> its sums, for the loops split (codegen/lanes.py)
        self.leading = leading  # in blocks: the leading loads its first statements read loaded (codegen/blocks.py)
        self.bounds_check = bounds_check  # KFUSE_BOUNDS_CHECK: every View access checks its indices
        self.fault_sites: list[FaultSite] = []  # the kernel's kf_sites table, in order
        # per division's fault site, the kernel's scalar arguments it divides by, or None where one of its checks
        # divides by anything else; per ScratchView's, the View as the host sees it, or None (thread scratch, an
        # extent the host does not know): a kernel whose every site is one of these can be told unable to fault on
        # the host
        self.divisors: dict[int, set | None] = {}
        self.scratch: dict[int, HostScratch | None] = {}
        self._fixed = set(kernel.scalars) - assigned_names(kernel.body) - nested_params(kernel.body)
        self.uses_printf = False  # the launcher then flushes C stdout so output keeps its order with Python's
        self.uses_ref = False  # some call passes a temporary classtype value by reference
        self.constructors: set = set()  # the __init__ instances a construction runs
        self._definitions: dict = {}  # helper instance -> its C++ function

    def fault_site(self, site: FaultSite) -> int:
        if site not in self.fault_sites:
            self.fault_sites.append(site)
        return self.fault_sites.index(site)

    def divides_by(self, site: int, divisor) -> None:
        """Note what the checked division of ``site`` divides by (a fixed scalar argument's name, or anything)."""
        if isinstance(divisor, ir.Name) and divisor.id in self._fixed and self.divisors.get(site, set()) is not None:
            self.divisors.setdefault(site, set()).add(divisor.id)
        else:
            self.divisors[site] = None

    def takes_scratch(self, view: ir.ScratchView, sites: list) -> None:
        """Note the fault ``sites`` of ScratchView ``view``: the host can check them where the View is team-level
        and each extent is an integer constant or a fixed scalar argument."""
        extents = tuple(_host_extent(e, self._fixed) for e in view.extents)
        known = not view.per_thread and all(x is not None for x in extents)
        checked = HostScratch(view.name, view.level, view.type.dtype.cpp, extents) if known else None
        for site in sites:
            self.scratch[site] = checked

    def _host_checkable(self) -> bool:
        """Whether every fault site is a division by fixed scalar arguments or a ScratchView the host can check."""
        checks = [*self.divisors.values(), *self.scratch.values()]
        return len(checks) == len(self.fault_sites) and all(c is not None for c in checks)

    def host_checked_divisors(self) -> list | None:
        """The scalar arguments that, neither 0 nor -1, leave no division's fault site able to fault; None where some
        site checks anything else (an index, a division by data or by a helper's argument) than these divisions and
        the ScratchViews ``host_checked_scratch`` lists."""
        if not self._host_checkable():
            return None
        return sorted(set().union(*self.divisors.values()))

    def host_checked_scratch(self) -> list | None:
        """The ScratchViews (``HostScratch``, in statement order) that, sure to fit, leave no scratch fault site able
        to fault; None where some site cannot be checked on the host (as ``host_checked_divisors``)."""
        if not self._host_checkable():
            return None
        return list(dict.fromkeys(self.scratch.values()))

    def helper(self, index: int) -> str:
        """The C++ name of helper instance ``index`` (a member function's, for a classtype method); its
        function is printed at the first call."""
        fn = self.kernel.helpers[index]
        cname = method_name(fn, index) if fn.struct is not None else f"{ident(fn.name)}_h{index}"
        if index not in self._definitions:
            self._definitions[index] = None  # taken: the IR has no recursion, but calls may nest
            views = {n: t for n, t in fn.params if isinstance(t, ir.ViewType)}
            lines = BodyPrinter(self, fn, {}, views).body(fn, "  ")
            params, qualified = fn.params, cname
            if fn.struct is not None:  # self is the object the member function runs on
                (me, struct), *params = fn.params
                lines.insert(0, f"  {cpp_type(struct)}& {ident(me)} = *this;")
                qualified = f"{cpp_type(struct)}::{cname}"
            ret = cpp_type(fn.ret) if fn.ret is not None else "void"
            self._definitions[index] = (f"KOKKOS_INLINE_FUNCTION {ret} {qualified}({signature(params)}) {{\n"
                                        + "\n".join(lines) + "\n}\n")
        return cname

    def definitions(self) -> list[str]:
        """The classtypes' structs, then the helpers' C++ functions, callees before callers (the IR's order)."""
        structs = self.kernel.structs
        out = [f"struct {cpp_type(t)};" for t in structs]
        for t in structs:
            name = cpp_type(t)
            members = [f"  {cpp_type(f)} {ident(n)}{{}};" for n, f in t.fields]
            for i in sorted(self._definitions):
                fn = self.kernel.helpers[i]
                if fn.struct != t:
                    continue
                params = fn.params[1:]
                ret = cpp_type(fn.ret) if fn.ret is not None else "void"
                members.append(f"  KOKKOS_INLINE_FUNCTION {ret} {method_name(fn, i)}({signature(params)});")
                if i in self.constructors:
                    args = ", ".join(ident(n) for n, _ in params)
                    members.append(f"  KOKKOS_INLINE_FUNCTION static {name} kf_new{i}({signature(params)}) {{ "
                                   f"{name} kf_self; kf_self.{method_name(fn, i)}({args}); return kf_self; }}")
            out.append(f"struct {name} {{\n" + "\n".join(members) + "\n};")
        if self.uses_ref:
            out.append("template <class T> KOKKOS_INLINE_FUNCTION T& kf_ref(T&& value) { return value; }")
        return out + [self._definitions[i] for i in sorted(self._definitions)]


def signature(params) -> str:
    """A C++ parameter list: classtype values by reference, everything else by value."""
    return ", ".join(f"{cpp_type(t)}{'&' if isinstance(t, ir.StructType) else ''} {ident(n)}" for n, t in params)


def _unconverted(e):
    """``e`` without the promotion its parent applied (spellings that cast anyway, or never, use this)."""
    return e.value if isinstance(e, ir.Cast) and not e.explicit else e


def _host_extent(e, fixed: set):
    """A ScratchView extent as the host knows it: an integer constant, a fixed scalar argument's name, or None."""
    e = _unconverted(e)
    value = int_constant(e)
    if value is not None:
        return value
    return e.id if isinstance(e, ir.Name) and e.id in fixed else None


def int_constant(e):
    """The value of an integer literal (``3``, ``-3``), or None."""
    if isinstance(e, ir.UnaryOp) and e.op == "-":
        value = int_constant(e.operand)
        return None if value is None else -value
    if isinstance(e, ir.Const) and type(e.value) is int:
        return e.value
    return None


def checked_division(e) -> bool:
    """Whether ``e`` is an integer ``//`` or ``%`` whose divisor could be 0 or -1 (a fault site when printed)."""
    if not (isinstance(e, ir.BinOp) and e.op in ("//", "%")):
        return False
    left, right = _unconverted(e.left), _unconverted(e.right)
    return not left.type.is_float and not right.type.is_float and int_constant(right) in (None, 0, -1)


class BodyPrinter:
    """Prints one body: a workunit's, a helper's (``function``) or a nested def's.

    ``members``: the kernel's scalar parameters that are functor data members here (const inside
    operator(), so a body assigning one works on a copy); ``views``: the View parameters in scope.
    """

    def __init__(self, unit: Unit, function: ir.Function | None, members: dict, views: dict):
        self.unit = unit
        self.function = function
        self.members = members
        self.views = views
        self.restrict = unit.restrict if function is None else frozenset()
        self.loading = False  # printing one of the kernel's statements that read its leading loads loaded

    def body(self, node, ind: str) -> list[str]:
        """Copies of assigned members, the hoisted locals, then the statements of ``node`` (a Kernel,
        Function or Lambda). The helpers its typing met first are printed first, as their sites number."""
        assigned = assigned_names(node.body)
        lines = [f"{ind}{t.cpp} {ident(n)} = this->{ident(n)};" for n, t in sorted(self.members.items())
                 if n in assigned]
        lines += [f"{ind}{cpp_type(t)} {ident(n)} = {cpp_type(t)}();" for n, t in node.locals]
        for index in node.first_helpers:
            self.unit.helper(index)
        leading = self.unit.leading if node is self.unit.kernel else None
        for k, s in enumerate(node.body):
            self.loading = leading is not None and k < leading.statements
            self.stmt(s, lines, ind)
        self.loading = False
        return lines

    def site(self, kind: str, loc: ir.Loc, view: str = "") -> int:
        """The number of a checked operation's fault site."""
        function = self.function.name if self.function is not None else ""
        return self.unit.fault_site(FaultSite(kind, loc.unit or self.unit.kernel.name, function, loc.file,
                                              loc.line, view, loc.member))

    # --- statements ---------------------------------------------------------------------------
    def stmt(self, s, out: list, ind: str) -> None:
        getattr(self, "stmt_" + type(s).__name__)(s, out, ind)

    def block(self, stmts, out: list, ind: str) -> None:
        for s in stmts:
            self.stmt(s, out, ind + "  ")

    def stmt_Break(self, s, out, ind):
        out.append(f"{ind}break;")

    def stmt_Continue(self, s, out, ind):
        out.append(f"{ind}continue;")

    def stmt_Return(self, s, out, ind):
        out.append(f"{ind}return;" if s.value is None else f"{ind}return {self.expr(s.value)};")

    def stmt_Eval(self, s, out, ind):
        out.append(f"{ind}{self.expr(s.value)};")

    def stmt_Print(self, s, out, ind):
        out.append(f"{ind}{self.printf(s)};")

    def stmt_Barrier(self, s, out, ind):
        out.append(f"{ind}{ident(s.team)}.team_barrier();")

    def stmt_Single(self, s, out, ind):
        out.append(f"{ind}Kokkos::single(Kokkos::{s.per}({ident(s.team)}), {ident(s.body)});")

    def stmt_ScratchView(self, s, out, ind):
        """The View from the team's scratch memory, once ``kf_scratch_take`` (the prelude) has counted its bytes
        against what set_scratch_size gave; one that does not fit is a fault, and every thread of the team (all
        see the same extents) leaves the body there, before touching it."""
        name = ident(s.name)
        extents = [f"kf_{name}_n{d}" for d in range(len(s.extents))]
        out += [f"{ind}const int64_t {e} = {self.expr(x)};" for e, x in zip(extents, s.extents)]
        slices = f"static_cast<int64_t>({ident(s.team)}.team_size())" if s.per_thread else "1"
        sites = [self.site(kind, s.loc, s.name) for kind in ("scratch", "scratch_extent", "scratch_refused")]
        self.unit.takes_scratch(s, sites)
        fits = (f"kf_scratch_take(kf_scratch, {s.level}, {slices}, sizeof({s.type.dtype.cpp}), {sites[0]}, "
                f"{sites[1]}, {', '.join(extents)})")
        space = f"{ident(s.team)}.{'thread' if s.per_thread else 'team'}_scratch({s.level})"
        out.append(f"{ind}if (!{fits}) return;")
        out.append(f"{ind}const {cpp_type(s.type)} {name}({space}, {', '.join(extents)});")
        out.append(f"{ind}if (!kf_scratch_given({name}.data(), {name}.span(), {s.level}, {sites[2]})) return;")
        self.views[s.name] = s.type

    def stmt_Assign(self, s, out, ind):
        out.append(f"{ind}{ident(s.name)} {s.op or ''}= {self.expr(s.value)};")

    stmt_Accumulate = stmt_Assign

    def stmt_SetField(self, s, out, ind):
        out.append(f"{ind}{ident(s.target)}.{ident(s.name)} {s.op or ''}= {self.expr(s.value)};")

    def stmt_Store(self, s, out, ind):
        if s.op is None:  # Python evaluates the value first, an augmented assignment's target first
            value = self.expr(s.value)
            target = self.element(s)
        else:
            target = self.element(s)
            value = self.expr(s.value)
        if self.unit.lanes and self.function is None:  # in lanes: the first one stores, the group in step
            out += [f"{ind}kf_lane_sync();", f"{ind}if (kf_lane() == 0) {target} {s.op or ''}= {value};",
                    f"{ind}kf_lane_sync();"]
        else:
            out.append(f"{ind}{target} {s.op or ''}= {value};")

    def stmt_If(self, s, out, ind):
        out.append(f"{ind}if ({self.expr(s.test)}) {{")
        self.block(s.body, out, ind)
        if s.orelse:
            out.append(f"{ind}}} else {{")
            self.block(s.orelse, out, ind)
        out.append(f"{ind}}}")

    def stmt_While(self, s, out, ind):
        out.append(f"{ind}while ({self.expr(s.test)}) {{")
        self.block(s.body, out, ind)
        out.append(f"{ind}}}")

    def stmt_For(self, s, out, ind):
        """A counted loop over its own counter (the body may reassign the variable, as Python allows);
        the bound is read once, and a step's sign decides the test."""
        if self.function is None and id(s) in self.unit.lanes:
            return self.split_loop(s, out, ind, self.unit.lanes[id(s)])
        start, stop, step = self.expr(s.start), self.expr(s.stop), self.expr(s.step)
        n = s.tmp
        out.append(f"{ind}{{")
        out.append(f"{ind}  const int64_t kf_end{n} = {stop};")
        if s.strided:
            out.append(f"{ind}  const int64_t kf_step{n} = {step};")
            stride, cond = f"kf_step{n}", f"(kf_step{n} > 0 ? kf_it{n} < kf_end{n} : kf_it{n} > kf_end{n})"
        else:
            stride, cond = "1", f"kf_it{n} < kf_end{n}"
        out.append(f"{ind}  for (int64_t kf_it{n} = {start}; {cond}; kf_it{n} += {stride}) {{")
        declare = "const int64_t " if s.scoped else ""  # else a hoisted local or a parameter
        out.append(f"{ind}    {declare}{ident(s.var)} = kf_it{n};")
        self.block(s.body, out, ind + "  ")
        out.append(f"{ind}  }}")
        out.append(f"{ind}}}")

    def split_loop(self, s, out, ind, sums):
        """A loop split over the lanes (codegen/lanes.py): each round, lane k runs iteration base + k, adding to
        its own copy of each sum (from -0.0 or 0, which adding leaves every value as it is); then every lane adds
        the rounds' terms to the sums in iteration order, lane by lane, as the sequential loop adds them."""
        n = s.tmp
        terms = [f"kf_term{n}_{k}" for k in range(len(sums))]
        out.append(f"{ind}{{")
        out.append(f"{ind}  const int64_t kf_end{n} = {self.expr(s.stop)};")
        out.append(f"{ind}  for (int64_t kf_base{n} = {self.expr(s.start)}; kf_base{n} < kf_end{n}; "
                   f"kf_base{n} += kf_lanes()) {{")
        out.append(f"{ind}    const int64_t kf_it{n} = kf_base{n} + kf_lane();")
        out += [f"{ind}    {t.cpp} {term} = {t.cpp}({'-0.0' if t.is_float else '0'});"
                for term, (_, t) in zip(terms, sums)]
        out.append(f"{ind}    if (kf_it{n} < kf_end{n}) {{")
        out += [f"{ind}      {t.cpp}& {ident(name)} = {term};" for term, (name, t) in zip(terms, sums)]
        out.append(f"{ind}      const int64_t {ident(s.var)} = kf_it{n};")
        self.block(s.body, out, ind + "    ")
        out.append(f"{ind}    }}")
        out.append(f"{ind}    const int kf_live{n} = static_cast<int>(kf_end{n} - kf_base{n} < kf_lanes() ? "
                   f"kf_end{n} - kf_base{n} : kf_lanes());")
        out.append(f"{ind}    for (int kf_from{n} = 0; kf_from{n} < kf_live{n}; ++kf_from{n}) {{")
        out += [f"{ind}      {ident(name)} += kf_lane_value({term}, kf_from{n});" for term, (name, _) in zip(terms, sums)]
        out += [f"{ind}    }}", f"{ind}  }}", f"{ind}}}"]

    def stmt_Lambda(self, s, out, ind):
        """A nested def: a C++ lambda, the body of TeamThreadRange / ThreadVectorRange parallelism or pk.single."""
        sig = [f"const int64_t {ident(n)}" for n, _ in s.params[:s.indices]]
        rest = s.params[s.indices:]
        if rest:
            sig.append(f"{rest[0][1].cpp}& {ident(rest[0][0])}")
        if len(rest) > 1:
            sig.append(f"const bool {ident(rest[1][0])}")
        params = {n for n, _ in s.params}
        members = {n: t for n, t in self.members.items() if n not in params}
        lines = BodyPrinter(self.unit, self.function, members, self.views).body(s, ind + "  ")
        out.append(f"{ind}auto {ident(s.name)} = [&]({', '.join(sig)}) {{")
        out.extend(lines)
        out.append(f"{ind}}};")

    # --- expressions --------------------------------------------------------------------------
    def expr(self, e) -> str:
        return getattr(self, "expr_" + type(e).__name__)(e)

    def expr_Const(self, e):
        v = e.value
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return f"int64_t({v})" if abs(v) >= 2 ** 31 else str(v)
        if v != v:
            return "std::numeric_limits<double>::quiet_NaN()"
        if v in (float("inf"), float("-inf")):
            return ("" if v > 0 else "-") + "std::numeric_limits<double>::infinity()"
        text = repr(v)
        return text if any(c in text for c in ".en") else text + ".0"

    def expr_Name(self, e):
        return ident(e.id)

    def expr_Cast(self, e):
        return f"static_cast<{e.type.cpp}>({self.expr(e.value)})"

    def cast(self, e, t) -> str:
        """``e`` spelled as a ``t`` whatever its type (the parent's promotion, if any, is this cast)."""
        return f"static_cast<{t.cpp}>({self.expr(_unconverted(e))})"

    def expr_BinOp(self, e):
        op, t = e.op, e.type
        left, right = _unconverted(e.left), _unconverted(e.right)
        both_int = not left.type.is_float and not right.type.is_float
        if op == "**" and not both_int:
            return f"std::pow({self.cast(e.left, t)}, {self.cast(e.right, t)})"
        a, b = self.expr(e.left), self.expr(e.right)
        if op == "**":
            return f"kf_ipow({a}, {b})"
        if op in ("//", "%") and not both_int:
            return f"std::floor({a} / {b})" if op == "//" else f"kf_fmod_py({a}, {b})"
        if op in ("//", "%"):
            kind = "floordiv" if op == "//" else "mod"
            if not checked_division(e):
                return f"kf_{kind}({a}, {b})"
            site = self.site(kind, e.loc)
            self.unit.divides_by(site, right if self.function is None else None)
            return f"kf_{kind}_checked({a}, {b}, {site})"
        return f"({a} {op} {b})"

    def expr_UnaryOp(self, e):
        code, t = self.expr(e.operand), e.operand.type
        if e.op == "not" or (e.op == "~" and t is BOOL):
            return f"(!{code})"
        if e.op == "-" and e.type is not t:  # Python negates a bool or unsigned value in 64 bits
            return f"(-static_cast<int64_t>({code}))"
        return f"({e.op}{code})"

    def expr_Compare(self, e):
        return f"({self.expr(e.left)} {e.op} {self.expr(e.right)})"

    def expr_BoolOp(self, e):
        is_and = e.op == "and"
        if e.type is BOOL:
            return "(" + (" && " if is_and else " || ").join(self.expr(v) for v in e.values) + ")"
        # Python's and/or yield the deciding operand (`i or 7` is 7 when i == 0), still short-circuiting.
        codes = [self.expr(_unconverted(v)) for v in e.values]
        t = e.type.cpp
        stop = "!kf_v" if is_and else "kf_v"
        steps = "".join(f"kf_v = {c}; if ({stop}) return kf_v; " for c in codes[:-1])
        return f"[&]() -> {t} {{ {t} kf_v; {steps}return {codes[-1]}; }}()"

    def expr_Ternary(self, e):
        test = self.expr(e.test)
        return f"({test} ? {self.cast(e.body, e.type)} : {self.cast(e.orelse, e.type)})"

    def expr_Call(self, e):
        name = e.func
        args = [_unconverted(a) for a in e.args]
        codes = [self.expr(a) for a in args]
        if name in ("abs", "fabs"):
            return f"std::fabs({codes[0]})" if args[0].type.is_float else f"kf_abs({codes[0]})"
        if name in ("min", "max"):
            code, t = codes[0], args[0].type
            for c, a in zip(codes[1:], args[1:]):
                t = promote(t, a.type)
                code = f"kf_{name}(static_cast<{t.cpp}>({code}), static_cast<{t.cpp}>({c}))"
            return code
        if name == "round":
            return f"static_cast<int64_t>(std::nearbyint({codes[0]}))"
        operand = "double" if name in ("fma", "isnan", "isinf", "isfinite") else e.type.cpp
        return f"std::{name}(" + ", ".join(f"static_cast<{operand}>({c})" for c in codes) + ")"

    def expr_HelperCall(self, e):
        name = self.unit.helper(e.instance)
        if self.unit.kernel.helpers[e.instance].struct is None:
            return f"{name}({self.arguments(e.args)})"
        return f"{self.expr(e.args[0])}.{name}({self.arguments(e.args[1:])})"  # a method, on a value or temporary

    def expr_New(self, e):
        self.unit.helper(e.init)
        self.unit.constructors.add(e.init)
        return f"{cpp_type(e.type)}::kf_new{e.init}({self.arguments(e.args)})"

    def expr_Field(self, e):
        return f"{self.expr(e.value)}.{ident(e.name)}"

    def arguments(self, args) -> str:
        """Call arguments; a classtype temporary goes to its reference parameter through ``kf_ref``."""
        codes = []
        for a in args:
            if isinstance(a.type, ir.StructType) and not isinstance(a, ir.Name):
                self.unit.uses_ref = True
                codes.append(f"kf_ref({self.expr(a)})")
            else:
                codes.append(self.expr(a))
        return ", ".join(codes)

    def expr_TeamQuery(self, e):
        return f"static_cast<int64_t>({ident(e.team)}.{e.what}())"

    def expr_Nested(self, e):
        if e.range.endswith("MDRange"):
            return self.md_nested(e)
        bounds = [self.expr(b) for b in e.bounds]
        policy = f"Kokkos::{e.range}({', '.join([ident(e.team)] + bounds)})"
        if e.kind != "parallel_reduce":  # Kokkos's nested scan delivers no total
            return f"Kokkos::{e.kind}({policy}, {ident(e.body)})"
        t, tmp = e.type.cpp, f"kf_nested{e.tmp}"
        return f"[&]() {{ {t} {tmp} = {t}(); Kokkos::{e.kind}({policy}, {ident(e.body)}, {tmp}); return {tmp}; }}()"

    def md_nested(self, e) -> str:
        """``TeamThreadMDRange(team, n0, n1, ...)`` (Kokkos 3.4 has no MD nested ranges): the 1-D range of the same
        kind over the product of the extents (none if one is not positive), each index recovered from the flat
        one, row-major as Kokkos orders them."""
        extents = [self.expr(b) for b in e.bounds]
        names = [f"kf_md{d}" for d in range(len(extents))]
        decls = " ".join(f"const int64_t {n} = {x};" for n, x in zip(names, extents))
        indices = []
        for d in range(len(names)):
            inner = " * ".join(names[d + 1:])
            flat = f"kf_k / ({inner})" if inner else "kf_k"
            indices.append(flat if d == 0 else f"({flat}) % {names[d]}")
        policy = f"Kokkos::{e.range.replace('MDRange', 'Range')}({ident(e.team)}, kf_md_count({', '.join(names)}))"
        call = f"{ident(e.body)}({', '.join(indices)}{', kf_a' if e.kind == 'parallel_reduce' else ''})"
        if e.kind != "parallel_reduce":
            return (f"[&]() {{ {decls} Kokkos::parallel_for({policy}, [&](const int64_t kf_k) {{ {call}; }}); }}()")
        t = e.type.cpp
        return (f"[&]() {{ {decls} {t} kf_r = {t}(); Kokkos::parallel_reduce({policy}, [&](const int64_t kf_k, "
                f"{t}& kf_a) {{ {call}; }}, kf_r); return kf_r; }}()")

    def expr_Atomic(self, e):
        """``pk.atomic_fetch_add(view, [i, j], value)`` (PyKokkos spelling) on the element's address."""
        ref = "&" + self.element(e)
        dtype = self.views[e.view].dtype
        values = [self.cast(a, dtype) for a in e.args]
        if e.func in ("atomic_increment", "atomic_decrement", "atomic_compare_exchange"):
            return f"Kokkos::{e.func}({', '.join([ref] + values)})"
        op = atomic_op(e.func)
        if op in ("div", "mod") and dtype.is_int:
            kind = "floordiv" if op == "div" else "mod"
            site = self.site(kind, e.loc)
            self.unit.divides_by(site, None)  # (an element's update: checked where it runs)
            return f"kf_atomic_fetch_divmod({ref}, {values[0]}, {str(op == 'mod').lower()}, {site})"
        return f"Kokkos::{ATOMICS[e.func][0]}({ref}, {values[0]})"

    # --- View elements and extents ------------------------------------------------------------
    def expr_Load(self, e):
        loaded = self.unit.leading.value(e) if self.loading else None
        return loaded or self.element(e)

    def element(self, e) -> str:
        """One element of a View: a Load, a Store or an Atomic."""
        idx = [self.expr(i) for i in e.indices]
        site = self.site("index", e.loc, e.user_view) if self.unit.bounds_check else None
        return element_code(ident(e.view), self.views[e.view].layout, idx, site, self.restrict)

    def expr_Extent(self, e):
        return extent_code(ident(e.view), self.expr(e.dim), self.views[e.view].ndim, self.restrict)

    def printf(self, s) -> str:
        self.unit.uses_printf = True
        return printf_call(s.format, [self.expr(a) for a in s.args])


def printf_call(fmt: str, codes: list) -> str:
    """C printf of a checked format, every argument cast to what its conversion reads (integers as long long)."""
    pieces, last, casts = [], 0, []
    for m, code in zip(printf.conversions(fmt), codes):
        flags, conv = m.group(1), m.group(3)
        pieces.append(fmt[last:m.start()])
        if conv == "c":
            pieces.append(f"%{flags}c")
            casts.append(f"static_cast<int>({code})")
        elif conv in printf.INTEGER:
            pieces.append(f"%{flags}ll{conv}")
            casts.append(f"static_cast<long long>({code})")
        else:
            pieces.append(f"%{flags}{conv}")
            casts.append(f"static_cast<double>({code})")
        last = m.end()
    pieces.append(fmt[last:])
    return "printf(" + ", ".join([c_string("".join(pieces))] + casts) + ")"


def element_code(code: str, layout: str, idx: list, site: int | None, restrict: frozenset) -> str:
    """One element of View ``code``; a __restrict__ pointer (restrict transform) is indexed with its strides.
    With a fault ``site`` (KFUSE_BOUNDS_CHECK) every index is checked against its extent."""
    if code not in restrict:
        if site is not None:
            return f"kf_at({code}, {site}, {', '.join(idx)})"
        return f"{code}({', '.join(idx)})"
    strides = [f"kf_{code}_s{d}" for d in range(len(idx))]
    if layout == "right":
        strides[-1] = "1"  # unit stride, known to the compiler
    if site is not None:
        checked = ", ".join(f"KfIx{{{c}, kf_{code}_e{d}, {s}}}" for d, (c, s) in enumerate(zip(idx, strides)))
        return f"kf_at_ptr({code}, {site}, {checked})"
    terms = [f"({c})" if s == "1" else f"({c}) * {s}" for c, s in zip(idx, strides)]
    return f"{code}[{' + '.join(terms)}]"


def extent_code(code: str, dim: str, ndim: int, restrict: frozenset) -> str:
    """Extent ``dim`` of View ``code``; a __restrict__ pointer's extents are arguments of their own."""
    if code not in restrict:
        return f"static_cast<int64_t>({code}.extent({dim}))"
    if dim.isdigit():
        return f"kf_{code}_e{dim}"
    choice = f"kf_{code}_e{ndim - 1}"  # a run-time dimension picks among this View's own extents
    for d in range(ndim - 2, -1, -1):
        choice = f"({dim} == {d} ? kf_{code}_e{d} : {choice})"
    return choice
