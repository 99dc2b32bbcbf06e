"""Persistent, content-keyed cache of compiled kernels.

Key: sha256 of the generated source, kfuse's codegen version, the prelude, and the toolchain
fingerprint (compiler path/version/flags, Kokkos version/backends/paths) — everything that changes the
binary. One directory per key holds ``kernel.cpp``, ``kernel.so``, ``build.log`` and ``meta.json``. A
build happens in a private temporary directory and is published with one atomic ``rename``, so two
processes compiling the same kernel, or a compile killed halfway, never leave a torn entry: an entry
either is complete or does not exist. Clear the cache with ``python -m kfuse.compiler clear`` (or delete
the folder).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import config
from ..codegen.kernel import CODEGEN_VERSION
from ..errors import CompileError
from ..runtime import stats
from . import toolchain as tc_mod

#: Functions called as hook(event, name, key) with event "compile" or "hit"; tests and tools observe caching.
hooks: list = []


def cache_root() -> Path:
    return Path(config.CACHE_DIR.get())


def kernel_key(source: str, tc: tc_mod.Toolchain) -> str:
    h = hashlib.sha256()
    for part in (CODEGEN_VERSION, tc_mod.PRELUDE.read_text(), tc.fingerprint, source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class Artifact:
    name: str
    key: str
    library: Path
    compiled: bool  # False when it came from the cache
    seconds: float


def _publish(tmp: Path, final: Path, marker: str = "meta.json") -> None:
    """Move a finished build into place; ``marker`` is the file whose presence makes an entry complete."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(tmp, final)
    except OSError:  # another process published the same key first: theirs is identical, keep it
        shutil.rmtree(tmp, ignore_errors=True)
        if not (final / marker).exists():
            raise


def _ensure_pch(tc: tc_mod.Toolchain) -> Path | None:
    """Build (once per toolchain) the precompiled prelude; None if the compiler cannot make one."""
    final = cache_root() / "pch" / tc_mod.pch_key(tc)
    header = final / "kfuse_prelude.hpp"
    if (final / "ok").exists():
        return header
    tmp = Path(tempfile.mkdtemp(prefix="pch-", dir=_tmp_dir()))
    try:
        shutil.copy(tc_mod.PRELUDE, tmp / "kfuse_prelude.hpp")
        cmd = [tc.cxx, *tc.compile_flags, "-x", "c++-header", str(tmp / "kfuse_prelude.hpp"),
               "-o", str(tmp / "kfuse_prelude.hpp.gch")]
        if subprocess.run(cmd, capture_output=True, text=True).returncode != 0:
            return None
        (tmp / "ok").write_text("")
        _publish(tmp, final, marker="ok")
    finally:  # as in build(): nothing half-made stays behind
        shutil.rmtree(tmp, ignore_errors=True)
    return header


def _tmp_dir() -> Path:
    d = cache_root() / "tmp"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _first_errors(log: str, limit: int = 12) -> str:
    lines = [ln for ln in log.splitlines() if "error" in ln]
    return "\n".join((lines or log.splitlines())[:limit])


def build(name: str, source: str) -> Artifact:
    """Return the shared library for ``source``, compiling it only if no cache entry exists."""
    tc = tc_mod.current()
    key = kernel_key(source, tc)
    final = cache_root() / "kernels" / key[:2] / key
    _dump(name, source)
    if (final / "meta.json").exists():
        stats.bump("cache_hits")
        for hook in hooks:
            hook("hit", name, key)
        return Artifact(name, key, final / "kernel.so", False, 0.0)
    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f"{key[:12]}-", dir=_tmp_dir()))
    try:
        (tmp / "kernel.cpp").write_text(source)
        pch = _ensure_pch(tc) if tc.uses_pch else None
        include = ["-include", str(pch) if pch else str(tc_mod.PRELUDE)]
        cmd = [tc.cxx, *tc.compile_flags, *include, "-shared", str(tmp / "kernel.cpp"), "-o",
               str(tmp / "kernel.so"), *tc.link_flags]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        log = " ".join(cmd) + "\n" + proc.stdout + proc.stderr
        (tmp / "build.log").write_text(log)
        if proc.returncode != 0:
            failed = cache_root() / "failed"
            failed.mkdir(parents=True, exist_ok=True)
            log_path = failed / f"{name}-{key[:12]}.log"
            log_path.write_text(log + "\n\n// source:\n" + source)
            raise CompileError(name, _first_errors(proc.stderr), str(log_path))
        seconds = time.perf_counter() - start
        (tmp / "meta.json").write_text(json.dumps({"name": name, "key": key, "seconds": seconds,
                                                   "toolchain": tc.fingerprint, "created": time.time()}))
        _publish(tmp, final)
    finally:  # a failed or interrupted build leaves nothing behind; a published one was moved away
        shutil.rmtree(tmp, ignore_errors=True)
    stats.bump("compiles")
    for hook in hooks:
        hook("compile", name, key)
    if config.VERBOSE.get():
        print(f"[kfuse] compiled {name} in {seconds:.2f}s ({key[:12]})", file=sys.stderr)
    return Artifact(name, key, final / "kernel.so", True, seconds)


def _dump(name: str, source: str) -> None:
    folder = config.DUMP_DIR.get()
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.cpp").write_text(source)


def clear() -> None:
    shutil.rmtree(cache_root(), ignore_errors=True)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["clear"]:
        clear()
        print(f"cleared {cache_root()}")
        return 0
    if args in ([], ["info"]):
        entries = list((cache_root() / "kernels").glob("*/*/meta.json"))
        print(f"cache: {cache_root()}  kernels: {len(entries)}")
        return 0
    print("usage: python -m kfuse.compiler [info|clear]")
    return 2
