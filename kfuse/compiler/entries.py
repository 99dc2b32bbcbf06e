"""One cache entry on disk, and the checks that make using it safe.

An entry is a folder named by its key: the build's files and ``meta.json``, plain JSON that names the
entry's kind and key and records the sha256 of every file kfuse will load or hand to the compiler. Before
first use in a process an entry must be trusted (``trust``), describe itself (kind and key match its slot,
so an entry moved or copied into another slot is caught) and hash to what it recorded (so a truncated,
emptied or swapped binary is caught). A failed check means: rebuild it.

Builds happen in ``tmp/<kind>-<key>-<random>`` under the entry's lock and are published with one rename,
so an entry is complete or absent. Whatever else lies in ``tmp/`` is debris of a killed process.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path

from . import locks
from .trust import make_private_dir, make_private_files, problem as trust_problem

FORMAT = 2  # meta.json layout; entries of another format are never used

#: The files each kind of entry records a hash for.
KINDS = {"kernel": ("kernel.so",), "pch": ("kfuse_prelude.hpp", "kfuse_prelude.hpp.gch")}

_BUILD_NAME = re.compile(r"^(kernel|pch)-([0-9a-f]+)-[a-z0-9_]+$")


def lock_name(kind: str, key: str) -> str:
    return f"{kind}-{key}"


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def signature(folder: Path, kind: str) -> tuple | None:
    """Identity of the entry's checked files (inode, size, mtime), or None if one is missing: an unchanged
    signature means an entry checked before needs no new hash."""
    try:
        return tuple((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
                     for st in (os.stat(folder / f) for f in KINDS[kind]))
    except OSError:
        return None


def write_meta(folder: Path, kind: str, key: str, name: str, **extra) -> None:
    meta = {"format": FORMAT, "kind": kind, "key": key, "name": name,
            "files": {f: sha256(folder / f) for f in KINDS[kind]}, **extra}
    (folder / "meta.json").write_text(json.dumps(meta, indent=1))


def read_meta(folder: Path) -> dict | None:
    """The entry's metadata if it is a JSON object, else None (no check of the files)."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def problem(folder: Path, kind: str, key: str) -> str | None:
    """Why the entry in ``folder`` must not be used (``MISSING`` when there is none), or None."""
    reason = trust_problem(folder)
    if reason is not None:
        return reason
    if not folder.is_dir():
        return "is not a folder"
    reason = trust_problem(folder / "meta.json")
    if reason is not None:
        return f"has a meta.json that {reason}"
    meta = read_meta(folder)
    if meta is None:
        return "has a meta.json that is not valid JSON"
    if (meta.get("format"), meta.get("kind"), meta.get("key")) != (FORMAT, kind, key):
        return "has a meta.json that describes another entry (or an older kfuse's format)"
    files = meta.get("files")
    if not isinstance(files, dict) or sorted(files) != sorted(KINDS[kind]):
        return "has a meta.json without the hashes of its files"
    for name in KINDS[kind]:
        path = folder / name
        reason = trust_problem(path)
        if reason is not None:
            return f"has a {name} that {reason}"
        if sha256(path) != files[name]:
            return f"has a {name} that does not match its recorded sha256 (damaged or replaced)"
    return None


def publish(build: Path, final: Path, tmp: Path) -> None:
    """Move a finished build into place, first taking away whatever occupies the slot (a damaged entry, junk).
    The caller holds the entry's lock, so no other kfuse process publishes this entry meanwhile."""
    make_private_files(build)
    for path in (final.parent, final):
        if os.path.lexists(path) and (path == final or not path.is_dir()):
            discard(path, tmp)
    make_private_dir(final.parent)
    os.rename(build, final)


def discard(path: Path, tmp: Path) -> None:
    """Rename ``path`` into ``tmp/`` (atomic: no reader sees it half-deleted), then delete it."""
    make_private_dir(tmp)
    aside = tmp / f"discard-{uuid.uuid4().hex}"
    os.rename(path, aside)
    remove(aside)


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def new_build(root: Path, kind: str, key: str) -> Path:
    """A private folder for one build; the caller holds the entry's lock."""
    tmp = root / "tmp"
    make_private_dir(tmp)
    sweep(root, own=lock_name(kind, key))
    return Path(tempfile.mkdtemp(prefix=f"{lock_name(kind, key)}-", dir=tmp))


def sweep(root: Path, own: str | None = None) -> list[Path]:
    """Delete what killed processes left in ``tmp/``: build folders whose lock nobody holds (``own`` is held by
    the caller, so its folders are abandoned too) and anything that is not a build folder. Returns them."""
    swept = []
    try:
        children = list((root / "tmp").iterdir())
    except FileNotFoundError:
        return swept
    for child in children:
        match = _BUILD_NAME.match(child.name)
        name = match and lock_name(match.group(1), match.group(2))
        if name is None or name == own:
            remove(child)
            swept.append(child)
            continue
        with locks.free(root, name) as abandoned:
            if abandoned:
                remove(child)
                swept.append(child)
    return swept
