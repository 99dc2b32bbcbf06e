"""Runs the enabled transforms over a fused kernel in a declared order, verifying after each pass.

Order: argument fusion first (so equal arrays and scalars share one name), then loop fusion (which
needs those names to see equal bounds), restrict (which needs the final parameter list), and
redundant-access elimination last (which sees merged names and merged loops). Enabled set:
``KFUSE_TRANSFORMS`` (comma list of args,loops,restrict,memory, or none) unless set by
``pk.set_transforms``.
"""
from __future__ import annotations

import ast
import functools

from .. import config, context
from ..errors import KfuseError
from ..ir import verify as ir_verify
from ..ir.lower import lowered
from . import args, loops, memory, restrict
from .ir import FusedKernel

PASSES = (("args", args.run), ("loops", loops.run), ("restrict", restrict.run), ("memory", memory.run))
NAMES = tuple(name for name, _ in PASSES)

@functools.lru_cache(maxsize=32)  # every flush asks for the enabled set
def parse(text: str) -> frozenset:
    text = text.strip().lower()
    if text in ("", "none"):
        return frozenset()
    if text == "all":
        return frozenset(NAMES)
    chosen = frozenset(t.strip() for t in text.split(",") if t.strip())
    unknown = chosen - set(NAMES)
    if unknown:
        raise KfuseError(f"unknown transform(s) {sorted(unknown)} in KFUSE_TRANSFORMS; choose from {', '.join(NAMES)} "
                         "or 'none'")
    return chosen


_from_environment = ("", frozenset())  # KFUSE_TRANSFORMS's text parsed last, and its set (asked at every rerun)


def enabled() -> frozenset:
    """The transforms fused kernels get in the runtime in charge."""
    chosen = context.current().transforms
    return chosen if chosen is not None else from_environment()


def from_environment() -> frozenset:
    """KFUSE_TRANSFORMS's set (a runtime follows it unless ``pk.set_transforms`` chose one)."""
    global _from_environment
    text = config.TRANSFORMS.get()
    if text is not _from_environment[0]:
        _from_environment = (text, parse(text))
    return _from_environment[1]


def set_transforms(names) -> None:
    """``pk.set_transforms(["args", "loops"])``, ``"none"``, or ``None`` to follow KFUSE_TRANSFORMS again."""
    context.current().transforms = None if names is None else parse(names if isinstance(names, str)
                                                                     else ",".join(names))


def verify(kernel: FusedKernel) -> None:
    """Checks between passes: parameters line up, every name read is defined, and the kernel's IR keeps
    its invariants (``kfuse.ir.verify``)."""
    spec = kernel.spec
    params = [a.arg for a in kernel.source.tree.args.args]
    user = params[len(params) - len(spec.params):]
    if user != [n for n, _ in spec.params] or len(kernel.arg_index) != len(spec.params):
        raise AssertionError(f"parameters {params} do not match spec {[n for n, _ in spec.params]}")
    defined = set(params) | {n.id for n in ast.walk(kernel.source.tree) if isinstance(n, ast.Name)
                             and isinstance(n.ctx, ast.Store)}
    defined |= {n.name for n in ast.walk(kernel.source.tree) if isinstance(n, ast.FunctionDef)}
    defined |= {a.arg for n in ast.walk(kernel.source.tree) if isinstance(n, ast.FunctionDef) for a in n.args.args}
    for node in ast.walk(kernel.source.tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in defined \
                and node.id not in kernel.source.helpers and node.id not in ("pk", "range", "int", "float", "bool",
                                                                             "abs", "min", "max", "len", "round"):
            raise AssertionError(f"name '{node.id}' is read but never defined")
    ir_verify.verify(lowered(kernel.source, kernel.spec))


def apply(kernel: FusedKernel, names: frozenset | None = None) -> tuple[FusedKernel, list]:
    """Run the passes in ``names`` (default: the enabled set); returns the kernel and [(pass, modified)]."""
    names = enabled() if names is None else names
    ran = []
    for name, fn in PASSES:
        if name not in names:
            continue
        try:
            result = fn(kernel)
            if config.DEBUG.get():
                verify(result.kernel)
        except Exception as exc:
            before = ", ".join(n for n, _ in ran) or "none"
            raise KfuseError(f"transform '{name}' failed on fused kernel '{kernel.source.name}' "
                             f"(passes run before it: {before}): {exc}") from exc
        kernel = result.kernel
        ran.append((name, result.modified))
    return kernel, ran
