"""Which Views a kernel reads and writes: the tracer's read and write sets, from the IR's access analysis."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.access import analyse
from ..ir.lower import lowered
from .normalize import KernelSource
from .spec import KernelSpec


@dataclass
class ParamAccess:
    read: bool = False
    write: bool = False
    accesses: list = field(default_factory=list)  # kfuse.ir.access.Access, in evaluation order


def summarize(src: KernelSource, spec: KernelSpec) -> dict:
    """Map each View parameter name to its ParamAccess."""
    result = {n: ParamAccess() for n, t in spec.params if t.is_view}
    for access in analyse(lowered(src, spec)).accesses:
        summary = result[access.view]
        summary.accesses.append(access)
        summary.read = summary.read or access.reads
        summary.write = summary.write or access.writes
    return result
