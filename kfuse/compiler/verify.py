"""``python -m kfuse.compiler verify``: check every entry of the configured cache and repair what is wrong.

A damaged kernel entry whose ``kernel.cpp`` still hashes to its key (same toolchain) is rebuilt at once, as
is a damaged precompiled header of the current toolchain; any other bad entry is deleted and rebuilt when a
program next needs it. Abandoned build folders, idle lock files and files of other owners go; folders and
files others could write become private. A cache owned by another user is reported, not touched.
"""
from __future__ import annotations

import os
import re
import stat
import warnings
from pathlib import Path

from ..errors import KfuseError
from . import cache, decisions, entries, fused, locks, toolchain
from .root import configured, unusable
from .trust import CacheWarning, problem

_KEY = re.compile(r"^[0-9a-f]{64}$")


class Report:
    def __init__(self, root: Path):
        self.root = root
        self.checked = 0
        self.repaired = 0
        self.failed = 0

    def say(self, path: Path, what: str) -> None:
        print(f"{what}: {path.relative_to(self.root) if path != self.root else path}")


def main() -> int:
    root = configured()
    if not root.exists():
        print(f"no cache at {root}")
        return 0
    owner = os.stat(root).st_uid
    if owner != os.geteuid() or not root.is_dir():
        print(f"{root} {problem(root) or 'is not a folder'}: not touched; point KFUSE_CACHE_DIR at a folder of "
              "your own", flush=True)
        return 1
    report = Report(root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)  # the report below says the same
        try:
            _make_private(root, report)
            reason = unusable(root)
            if reason is not None:
                print(f"cannot repair {root}: it {reason}")
                return 1
            for path in entries.sweep(root):  # first: a rebuild below would sweep them unreported
                report.say(path, "removed abandoned build folder")
                report.repaired += 1
            _kernels(root, report)
            _pchs(root, report)
            _json_entries(root / "fused", fused.problem, report)
            _json_entries(root / "decisions", decisions.problem, report)
            _locks(root)
            _make_private(root, report)  # what rebuilding added is private already; this is for the rest
        except OSError as exc:
            print(f"cannot repair {root}: {exc}")
            return 1
    print(f"{root}: {report.checked} entries checked, {report.repaired} repairs, {report.failed} failed")
    return 1 if report.failed else 0


def _make_private(root: Path, report: Report) -> None:
    """Files of other owners go; folders and files that others could write become 0700 / 0600."""
    uid = os.geteuid()
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            st = os.lstat(path)
            if st.st_uid != uid:
                report.say(path, f"removed (owned by uid {st.st_uid})")
                entries.remove(path)
                report.repaired += 1
            elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not stat.S_ISLNK(st.st_mode):
                os.chmod(path, 0o700 if stat.S_ISDIR(st.st_mode) else 0o600)
                report.say(path, "made private")
                report.repaired += 1
    if problem(root) is not None:
        os.chmod(root, 0o700)
        report.say(root, "made private")
        report.repaired += 1


def _slots(folder: Path, report: Report, pattern):
    """Children of ``folder`` whose name fits ``pattern``; anything else there is removed."""
    if not folder.is_dir():
        return []
    good = []
    for child in sorted(folder.iterdir()):
        if pattern(child):
            good.append(child)
        else:
            report.say(child, "removed (not a cache entry)")
            entries.remove(child)
            report.repaired += 1
    return good


def _kernels(root: Path, report: Report) -> None:
    for shard in _slots(root / "kernels", report, lambda p: p.is_dir() and re.fullmatch(r"[0-9a-f]{2}", p.name)):
        for entry in _slots(shard, report, lambda p: _KEY.match(p.name) and p.name.startswith(p.parent.name)):
            report.checked += 1
            reason = entries.problem(entry, "kernel", entry.name)
            if reason is not None:
                _repair_kernel(root, entry, reason, report)


def _repair_kernel(root: Path, entry: Path, reason: str, report: Report) -> None:
    """Rebuild the entry from its own source when that source provably belongs to it, else delete it."""
    source = None
    if problem(entry / "kernel.cpp") is None:
        source = (entry / "kernel.cpp").read_text(errors="replace")
    meta = entries.read_meta(entry) or {}
    name = meta.get("name") if isinstance(meta.get("name"), str) else "kernel"
    try:
        if source is not None and cache.kernel_key(source, toolchain.current()) == entry.name:
            cache.build(name, source)
            report.say(entry, f"rebuilt ({reason})")
            report.repaired += 1
            return
    except KfuseError as exc:
        reason += f"; rebuilding failed: {str(exc).splitlines()[0]}"
    entries.discard(entry, root / "tmp")
    report.say(entry, f"removed ({reason})")
    report.repaired += 1


def _pchs(root: Path, report: Report) -> None:
    for entry in _slots(root / "pch", report, lambda p: re.fullmatch(r"[0-9a-f]{20}", p.name)):
        report.checked += 1
        reason = entries.problem(entry, "pch", entry.name)
        if reason is None:
            continue
        entries.discard(entry, root / "tmp")
        tc = toolchain.current()
        rebuilt = entry.name == cache.pch_key(tc) and cache._ensure_pch(tc, root) is not None
        report.say(entry, f"{'rebuilt' if rebuilt else 'removed'} ({reason})")
        report.repaired += 1


def _json_entries(folder: Path, check, report: Report) -> None:
    """Fused groups' code and profitability decisions: one JSON file per key; ``check(path)`` says what is wrong."""
    for shard in _slots(folder, report, lambda p: p.is_dir() and re.fullmatch(r"[0-9a-f]{2}", p.name)):
        for path in _slots(shard, report, lambda p: p.suffix == ".json" and _KEY.match(p.stem)):
            report.checked += 1
            reason = check(path)
            if reason is not None:
                entries.remove(path)
                report.say(path, f"removed ({reason})")
                report.repaired += 1


def _locks(root: Path) -> None:
    """Lock files nobody holds now are deleted; at worst a process that opened one a moment ago and one that
    makes it anew both compile the entry, and the atomic publish keeps one."""
    for path in (root / "locks").glob("*.lock"):
        with locks.free(root, path.stem) as idle:
            if idle:
                path.unlink(missing_ok=True)
