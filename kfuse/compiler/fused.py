"""Fused groups' generated C++ kept across processes as checked JSON (the storage; fuser/persist.py keys it).

Entries are JSON (loading one runs no code, unlike a pickle) carrying the sha256 of their content,
written atomically and privately, and checked when read: a file another user owns or could write, or
one that does not hash or parse into exactly the expected fields, is ignored (with a warning) and rebuilt.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..codegen.kernel import GeneratedKernel
from ..frontend.spec import KernelSpec
from .root import cache_root, using_cache
from .trust import MISSING, problem as trust_problem, warn, write_private

FORMAT = 1


def _path(root: Path, digest: str) -> Path:
    return root / "fused" / digest[:2] / f"{digest}.json"


def _encode(digest: str, entry) -> str:
    generated, spec, arg_index, writes = entry
    body = {"generated": generated.to_json(), "spec": spec.to_json(), "arg_index": list(arg_index),
            "writes": list(writes)}
    return json.dumps({"format": FORMAT, "key": digest, "sha256": _sha256(body), "entry": body})


def _sha256(body: dict) -> str:
    """Hash of an entry's content, so damage that still parses (a changed digit) is caught too."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _decode(text: str, digest: str) -> tuple:
    """(GeneratedKernel, KernelSpec, arg_index, writes) from a file's text; ValueError if it is not one."""
    data = json.loads(text)
    if not (isinstance(data, dict) and sorted(data) == ["entry", "format", "key", "sha256"]
            and data["format"] == FORMAT and data["key"] == digest and isinstance(data["entry"], dict)):
        raise ValueError("not the entry for this key")
    body = data["entry"]
    if sorted(body) != ["arg_index", "generated", "spec", "writes"]:
        raise ValueError("unexpected fields")
    if data.get("sha256") != _sha256(body):
        raise ValueError("content does not match its recorded sha256")
    generated = GeneratedKernel.from_json(body.get("generated"))
    spec = KernelSpec.from_json(body.get("spec"))
    arg_index, writes = body.get("arg_index"), body.get("writes")
    n = len(spec.params)
    if not (isinstance(arg_index, list) and len(arg_index) == n and all(type(i) is int and i >= 0 for i in arg_index)
            and isinstance(writes, list) and len(writes) == n
            and all(isinstance(w, bool) if t.is_view else w is None for w, (_, t) in zip(writes, spec.params))):
        raise ValueError("argument map or written Views do not fit the kernel's parameters")
    return generated, spec, tuple(arg_index), tuple(writes)


def _read(path: Path, digest: str) -> tuple:
    """(entry, None), or (None, why the file must not be used: ``MISSING`` when absent)."""
    reason = trust_problem(path)
    if reason is not None:
        return None, reason
    try:
        return _decode(path.read_text(), digest), None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"is damaged ({exc})"


def problem(path: Path) -> str | None:
    """Why the entry file ``path`` must not be used, or None."""
    return _read(path, path.stem)[1]


def load(digest: str):
    """(GeneratedKernel, KernelSpec, arg_index, writes) or None."""
    path = _path(cache_root(), digest)
    entry, reason = _read(path, digest)
    if reason not in (None, MISSING):
        warn(f"kfuse cache entry {path} {reason}: rebuilding it")
    return entry


def store(digest: str, entry) -> None:
    text = _encode(digest, entry)
    using_cache(lambda root: write_private(_path(root, digest), text))
