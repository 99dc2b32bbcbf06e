"""The value the transforms pass along: a fused kernel plus what the runtime knows about its arguments.

Passes never mutate their input; each returns a new ``FusedKernel`` and a ``modified`` flag.
``arg_index[p]`` tells which argument of the group (in the concatenated order of the calls) parameter
``p`` of the kernel receives, so parameters can be merged away by argument fusion.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field, replace
from functools import cached_property

from ..frontend.normalize import KernelSource
from ..frontend.spec import KernelSpec
from ..views import overlaps, storage_key


@dataclass(frozen=True)
class FusedKernel:
    source: KernelSource
    spec: KernelSpec
    arg_index: tuple  # per parameter of spec.params: index into the group's concatenated arguments
    args: tuple = field(repr=False)  # the group's concatenated argument values (Views and scalars)
    restrict: frozenset = frozenset()  # View parameters passed as __restrict__ pointers
    scratch: frozenset = frozenset()  # positions in ``args`` of Views nothing reads after the group

    def value(self, param: str):
        return self.args[self.arg_index[self._positions[param]]]

    @cached_property
    def _positions(self) -> dict:
        """Parameter name -> its position (a long group's passes ask for every parameter: no list search)."""
        return {n: i for i, (n, _) in enumerate(self.spec.params)}

    def without_params(self, tree: ast.FunctionDef, gone) -> "FusedKernel":
        """This kernel with body ``tree`` and the parameters named in ``gone`` removed: from the tree's signature,
        the spec, the argument map and the restrict set (passes that merge or drop parameters)."""
        keep = [p for p, (n, _) in enumerate(self.spec.params) if n not in gone]
        tree.args.args = [a for a in tree.args.args if a.arg not in gone]
        return self.with_tree(tree, spec=replace(self.spec, params=tuple(self.spec.params[p] for p in keep)),
                              arg_index=tuple(self.arg_index[p] for p in keep), restrict=self.restrict - set(gone))

    def with_tree(self, tree: ast.FunctionDef, **changes) -> "FusedKernel":
        source = KernelSource(name=self.source.name, tree=tree, filename=self.source.filename,
                              helpers=self.source.helpers, annotations=self.source.annotations)
        return replace(self, source=source, **changes)


@dataclass(frozen=True)
class PassResult:
    kernel: FusedKernel
    modified: bool


def scalar_key(value) -> tuple:
    """Scalars with equal keys are the same argument. 0.0 and -0.0 compare equal but differ (1/x, copysign),
    so the sign is part of the key (fix, tests: argument fusion merged S=0.0 with S=-0.0)."""
    return (type(value), value, math.copysign(1.0, value) if isinstance(value, float) else 0)


def storage_classes(kernel: "FusedKernel") -> dict:
    """View parameter -> the first View parameter with the same storage (the same elements)."""
    first: dict = {}
    return {n: first.setdefault(storage_key(kernel.value(n)), n) for n, t in kernel.spec.params if t.is_view}


def alias_classes(kernel: FusedKernel) -> dict:
    """View parameter -> a representative parameter of every View whose memory it may overlap."""
    views = [(n, kernel.value(n)) for n, t in kernel.spec.params if t.is_view]
    parent = {n: n for n, _ in views}

    def find(n):
        while parent[n] != n:
            n = parent[n]
        return n

    for i, (a, va) in enumerate(views):
        for b, vb in views[i + 1:]:
            if overlaps(va, vb):
                parent[find(b)] = find(a)
    return {n: find(n) for n, _ in views}
