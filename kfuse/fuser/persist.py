"""Fused kernels remembered across processes: the transformed C++ for a group, keyed by its content.

Within a process the pipeline keys fused kernels by specialisation numbers; a new process would rebuild,
re-transform and regenerate every group before the compiled-library cache could even be asked (about
25 ms a group). This stores the outcome (generated C++, spec, parameter map, written Views) under a key made
of everything it depends on: kfuse's own source, each member kernel's resolved AST and specialisation, the
aliasing and scalar-equality patterns, the enabled transforms and the settings that change generated code
(``config.cache_key``). The entries themselves are stored and checked by ``compiler/fused.py``.
"""
from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path

from .. import config
from ..codegen import blocks
from ..codegen import kernel as codegen
from ..codegen import lanes


@lru_cache(maxsize=1)
def _kfuse_fingerprint() -> str:
    """A change to any kfuse source file (a transform, the code generator) invalidates every entry."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")) + sorted(root.rglob("*.hpp")):
        h.update(path.read_bytes())
    return h.hexdigest()


def _member_digest(prepared) -> str:
    digest = prepared.__dict__.get("_persist_digest")
    if digest is None:
        src = prepared.source
        parts = [ast.dump(src.tree), repr(prepared.spec)]
        parts += [f"{name}:{ast.dump(h.tree)}" for name, h in sorted(src.helpers.items())]
        digest = prepared.__dict__["_persist_digest"] = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return digest


def key(group, alias_pattern, scalar_pattern, transforms, scratch=(), ranges=()) -> str:
    """``ranges``: a horizontal group's parts (pipeline.group_key), whose bounds its code holds."""
    spaces = (blocks.BLOCK_SPACES, blocks.SINGLE_SUM_SPACES, codegen.QUEUED_SPACES, lanes.LANE_SPACES)
    parts = [_kfuse_fingerprint(), config.cache_key(), *(",".join(sorted(s)) for s in spaces), repr(alias_pattern),
             repr(scalar_pattern), ",".join(sorted(transforms)), repr(tuple(scratch)), repr(tuple(ranges))]
    parts += [f"{type(c.policy).__name__}:{_member_digest(c.prepared)}" for c in group]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()
