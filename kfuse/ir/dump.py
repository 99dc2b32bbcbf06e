"""``dump(kernel)``: the IR as stable, readable text (for tests and KFUSE_DEBUG).

Declarations show types (parameters, locals, helper signatures); conversions show as ``float64(x)``;
each assignment ends with the type of the value assigned.
"""
from __future__ import annotations

from . import nodes as ir


def dump(kernel: ir.Kernel) -> str:
    lines = [f"kernel {kernel.name} ({kernel.op}, {kernel.policy})  # {kernel.loc}"]
    for title, pairs in (("threads", kernel.threads), ("accs", kernel.accs), ("flags", kernel.flags),
                         ("params", kernel.params), ("locals", kernel.locals)):
        if pairs:
            lines.append(f"  {title}: {_decls(pairs)}")
    _block(kernel.body, "  ", lines)
    for struct in kernel.structs:
        lines.append(f"struct {struct.name} {{{_decls(struct.fields)}}}")
    for index, fn in enumerate(kernel.helpers):
        ret = fn.ret.name if fn.ret is not None else "None"
        lines.append(f"function {fn.name}#{index}({_decls(fn.params)}) -> {ret}  # {fn.loc}")
        if fn.locals:
            lines.append(f"  locals: {_decls(fn.locals)}")
        _block(fn.body, "  ", lines)
    return "\n".join(lines) + "\n"


def _decls(pairs) -> str:
    return ", ".join(f"{n}: {_type(t)}" for n, t in pairs)


def _type(t) -> str:
    return t.name if hasattr(t, "name") else str(t)


def _block(stmts, ind: str, out: list) -> None:
    if not stmts:
        out.append(f"{ind}pass")
    for s in stmts:
        _stmt(s, ind, out)


def _stmt(s, ind: str, out: list) -> None:
    if isinstance(s, (ir.Assign, ir.Accumulate)):
        keyword = "acc " if isinstance(s, ir.Accumulate) else ""
        out.append(f"{ind}{keyword}{s.name} {s.op or ''}= {expr(s.value)}  : {_type(s.value.type)}")
    elif isinstance(s, ir.SetField):
        out.append(f"{ind}{s.target}.{s.name} {s.op or ''}= {expr(s.value)}  : {_type(s.value.type)}")
    elif isinstance(s, ir.Store):
        out.append(f"{ind}{s.view}[{_list(s.indices)}] {s.op or ''}= {expr(s.value)}  : {_type(s.value.type)}")
    elif isinstance(s, ir.Eval):
        out.append(f"{ind}{expr(s.value)}")
    elif isinstance(s, ir.Print):
        out.append(f"{ind}printf({', '.join([repr(s.format)] + [expr(a) for a in s.args])})")
    elif isinstance(s, ir.Barrier):
        out.append(f"{ind}{s.team}.team_barrier()")
    elif isinstance(s, ir.Single):
        out.append(f"{ind}single({s.per}({s.team}), {s.body})")
    elif isinstance(s, ir.ScratchView):
        space = "thread_scratch" if s.per_thread else "team_scratch"
        out.append(f"{ind}{s.name}: {s.type} = {s.team}.{space}({s.level})[{_list(s.extents)}]")
    elif isinstance(s, ir.If):
        out.append(f"{ind}if {expr(s.test)}:")
        _block(s.body, ind + "  ", out)
        if s.orelse:
            out.append(f"{ind}else:")
            _block(s.orelse, ind + "  ", out)
    elif isinstance(s, ir.While):
        out.append(f"{ind}while {expr(s.test)}:")
        _block(s.body, ind + "  ", out)
    elif isinstance(s, ir.For):
        local = "" if s.scoped else "  # into the local"
        out.append(f"{ind}for {s.var} in range({expr(s.start)}, {expr(s.stop)}, {expr(s.step)}):{local}")
        _block(s.body, ind + "  ", out)
    elif isinstance(s, ir.Lambda):
        out.append(f"{ind}def {s.name}({_decls(s.params)}):")
        if s.locals:
            out.append(f"{ind}  locals: {_decls(s.locals)}")
        _block(s.body, ind + "  ", out)
    elif isinstance(s, ir.Return):
        out.append(f"{ind}return" + ("" if s.value is None else f" {expr(s.value)}"))
    else:
        out.append(f"{ind}{type(s).__name__.lower()}")  # break, continue


def _list(values) -> str:
    return ", ".join(expr(v) for v in values)


def expr(e) -> str:
    """One expression as text."""
    if isinstance(e, ir.Const):
        return repr(e.value)
    if isinstance(e, ir.Name):
        return e.id
    if isinstance(e, ir.Load):
        return f"{e.view}[{_list(e.indices)}]"
    if isinstance(e, ir.Extent):
        return f"{e.view}.extent({expr(e.dim)})"
    if isinstance(e, (ir.BinOp, ir.Compare)):
        return f"({expr(e.left)} {e.op} {expr(e.right)})"
    if isinstance(e, ir.UnaryOp):
        return f"({e.op}{' ' if e.op == 'not' else ''}{expr(e.operand)})"
    if isinstance(e, ir.BoolOp):
        return "(" + f" {e.op} ".join(expr(v) for v in e.values) + ")"
    if isinstance(e, ir.Cast):
        return f"{e.type.name}({expr(e.value)})"
    if isinstance(e, ir.Call):
        return f"{e.func}({_list(e.args)})"
    if isinstance(e, ir.Ternary):
        return f"({expr(e.body)} if {expr(e.test)} else {expr(e.orelse)})"
    if isinstance(e, ir.HelperCall):
        return f"{e.name}#{e.instance}({_list(e.args)})"
    if isinstance(e, ir.New):
        return f"{e.type.name}#{e.init}({_list(e.args)})"
    if isinstance(e, ir.Field):
        return f"{expr(e.value)}.{e.name}"
    if isinstance(e, ir.Atomic):
        return f"{e.func}({', '.join([f'{e.view}[{_list(e.indices)}]'] + [expr(a) for a in e.args])})"
    if isinstance(e, ir.TeamQuery):
        return f"{e.team}.{e.what}()"
    if isinstance(e, ir.Nested):
        return f"{e.kind}({e.range}({', '.join([e.team] + [expr(b) for b in e.bounds])}), {e.body})"
    raise TypeError(f"not an IR expression: {e!r}")
