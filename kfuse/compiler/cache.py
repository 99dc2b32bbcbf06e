"""Persistent, content-keyed cache of compiled kernels, safe to share between processes.

Key: sha256 of the generated source, kfuse's codegen version, the prelude, the cache format and the
toolchain fingerprint (compiler path/version/flags, Kokkos version/backends/paths): everything that changes
the binary. One folder per key holds ``kernel.cpp``, ``kernel.so``, ``build.log`` and ``meta.json`` (see
``entries``). A process compiles an entry under its lock (``locks``) while others wait and reuse it; an
entry is checked (owner, mode, recorded sha256) once per process before its library is returned for
dlopen, and a damaged one is rebuilt with a warning. The cache folder itself is chosen by ``root``.
``python -m kfuse.compiler verify`` checks and repairs a whole cache.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .. import config, progress
from ..codegen.kernel import CODEGEN_VERSION
from ..errors import CompileError
from .. import counters
from . import entries, locks, toolchain as tc_mod
from .root import cache_root, configured, using_cache
from .trust import MISSING, make_private_dir, warn

__all__ = ["Artifact", "build", "cache_root", "clear", "hooks", "kernel_key"]

#: Functions called as hook(event, name, key); events: "compile", "hit", "wait" (another process holds the
#: entry's lock), "repair" (a damaged entry is being rebuilt). Tests and tools observe caching with them.
hooks: list = []

#: Entry folder -> stat signature of its files when this process checked it: an entry is hashed once, and
#: again only if its files change (one stat per file on later loads).
_verified: dict = {}


def kernel_key(source: str, tc: tc_mod.Toolchain) -> str:
    h = hashlib.sha256()
    for part in (CODEGEN_VERSION, f"cache format {entries.FORMAT}", tc_mod.PRELUDE.read_text(), tc.fingerprint,
                 source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def pch_key(tc: tc_mod.Toolchain) -> str:
    return hashlib.sha256(f"cache format {entries.FORMAT}\0{tc_mod.pch_key(tc)}".encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Artifact:
    name: str
    key: str
    library: Path
    compiled: bool  # False when it came from the cache
    seconds: float


def _notify(event: str, name: str, key: str) -> None:
    for hook in hooks:
        hook(event, name, key)


def _checked(final: Path, kind: str, key: str) -> str | None:
    """None when the entry in ``final`` may be used, else why not."""
    signature = entries.signature(final, kind)
    if signature is not None and _verified.get(final) == signature:
        return None
    reason = entries.problem(final, kind, key)
    if reason is None:
        _verified[final] = signature
    return reason


def build(name: str, source: str, batch: progress.Batch | None = None) -> Artifact:
    """The shared library for ``source``: a checked cache entry, or compiled now (once across processes).
    ``batch``: the compile_ahead batch it belongs to, for the progress line."""
    tc = tc_mod.current()
    key = kernel_key(source, tc)
    _dump(name, source)
    label = f"compiling kernel {name}" + (f" ({batch.number()})" if batch else "")
    return using_cache(lambda root: _kernel(root, tc, name, source, key, label))


def built(source: str) -> bool:
    """Whether the kernel of ``source`` is in the cache already (loading it costs milliseconds, not a compile)."""
    key = kernel_key(source, tc_mod.current())
    return _checked(cache_root() / "kernels" / key[:2] / key, "kernel", key) is None


def _kernel(root: Path, tc: tc_mod.Toolchain, name: str, source: str, key: str, label: str) -> Artifact:
    final = root / "kernels" / key[:2] / key

    def make():
        with progress.BOARD.task(label):
            return _compile(root, tc, name, source, key, final)

    seconds = _obtain(root, final, "kernel", key, name, make)
    if seconds is None:
        counters.bump("cache_hits")
        _notify("hit", name, key)
        return Artifact(name, key, final / "kernel.so", False, 0.0)
    counters.bump("compiles")
    _notify("compile", name, key)
    if config.VERBOSE.get():
        print(f"[kfuse] compiled {name} in {seconds:.2f}s ({key[:12]})", file=sys.stderr)
    return Artifact(name, key, final / "kernel.so", True, seconds)


def _obtain(root: Path, final: Path, kind: str, key: str, name: str, make):
    """None when the entry in ``final`` passes its checks (perhaps built by another process while this one
    waited for its lock); else what ``make()`` returns after building it here, replacing a damaged one."""
    if _checked(final, kind, key) is None:
        return None
    with locks.held(root, entries.lock_name(kind, key), on_wait=lambda: _notify("wait", name, key)):
        reason = _checked(final, kind, key)
        if reason is None:
            return None
        if reason != MISSING:
            warn(f"kfuse cache entry {final} {reason}: rebuilding it")
            _notify("repair", name, key)
        made = make()
        _verified[final] = entries.signature(final, kind)  # just built: no need to hash it again
        return made


def _compile(root: Path, tc: tc_mod.Toolchain, name: str, source: str, key: str, final: Path) -> float:
    """Compile ``source`` and publish it as the entry ``final``; the caller holds the entry's lock."""
    start = time.perf_counter()
    build_dir = entries.new_build(root, "kernel", key)
    try:
        (build_dir / "kernel.cpp").write_text(source)
        pch = _ensure_pch(tc, root) if tc.uses_pch else None
        include = ["-include", str(pch) if pch else str(tc_mod.PRELUDE)]
        cmd = [tc.cxx, *tc.compile_flags, *include, "-shared", str(build_dir / "kernel.cpp"), "-o",
               str(build_dir / "kernel.so"), *tc.link_flags]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        log = " ".join(cmd) + "\n" + proc.stdout + proc.stderr
        (build_dir / "build.log").write_text(log)  # FileNotFoundError if the cache was deleted meanwhile
        if proc.returncode != 0:
            raise CompileError(name, _first_errors(proc.stderr), str(_failure_log(root, name, key, log, source)))
        seconds = time.perf_counter() - start
        entries.write_meta(build_dir, "kernel", key, name, seconds=seconds, toolchain=tc.fingerprint,
                           created=time.time())
        entries.publish(build_dir, final, root / "tmp")
    finally:  # a failed or interrupted build leaves nothing behind; a published one was moved away
        shutil.rmtree(build_dir, ignore_errors=True)
    return seconds


def _ensure_pch(tc: tc_mod.Toolchain, root: Path | None = None) -> Path | None:
    """The precompiled prelude (built once per toolchain, checked like a kernel entry); None if the compiler
    cannot make one."""
    root = root or cache_root()
    key = pch_key(tc)
    final = root / "pch" / key
    def make():
        with progress.BOARD.task("precompiling the Kokkos header (once per toolchain)"):
            return _make_pch(root, tc, key, final)

    made = _obtain(root, final, "pch", key, "kfuse_prelude", make)
    return None if made is False else final / "kfuse_prelude.hpp"


def _make_pch(root: Path, tc: tc_mod.Toolchain, key: str, final: Path) -> bool:
    """Build and publish the precompiled prelude; False if the compiler cannot make one."""
    build_dir = entries.new_build(root, "pch", key)
    try:
        shutil.copy(tc_mod.PRELUDE, build_dir / "kfuse_prelude.hpp")
        cmd = [tc.cxx, *tc.compile_flags, "-x", "c++-header", str(build_dir / "kfuse_prelude.hpp"),
               "-o", str(build_dir / "kfuse_prelude.hpp.gch")]
        if subprocess.run(cmd, capture_output=True, text=True).returncode != 0:
            return False
        entries.write_meta(build_dir, "pch", key, "kfuse_prelude", toolchain=tc.fingerprint, created=time.time())
        entries.publish(build_dir, final, root / "tmp")
        return True
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)


def _failure_log(root: Path, name: str, key: str, log: str, source: str) -> Path:
    failed = root / "failed"
    make_private_dir(failed)
    path = failed / f"{name}-{key[:12]}.log"
    path.write_text(log + "\n\n// source:\n" + source)
    return path


def _first_errors(log: str, limit: int = 12) -> str:
    lines = [ln for ln in log.splitlines() if "error" in ln]
    return "\n".join((lines or log.splitlines())[:limit])


def _dump(name: str, source: str) -> None:
    folder = config.DUMP_DIR.get()
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.cpp").write_text(source)


def clear() -> Path:
    """Delete the configured cache folder (not a private fallback); returns it."""
    folder = configured()
    shutil.rmtree(folder, ignore_errors=True)
    _verified.clear()
    return folder
