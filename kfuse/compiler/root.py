"""Which folder is the compile cache for this process.

The configured folder (KFUSE_CACHE_DIR) is used when this user owns it, nobody else can write it, and it
can be written. Otherwise, or when it fails while in use (deleted during a compile, turned read-only), the
process moves to a private temporary cache with a one-line warning: a bad cache costs compile time, never
a wrong kernel or a crash. KFUSE_CACHE_FALLBACK=0 turns the move into a CacheError instead.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from .. import config
from .trust import CacheError, make_private_dir, problem, warn

_chosen: dict[str, Path] = {}  # configured folder -> the folder this process uses for it
_private: Path | None = None


def configured() -> Path:
    return Path(config.CACHE_DIR.get())


def cache_root() -> Path:
    name = config.CACHE_DIR.get()
    root = _chosen.get(name)
    if root is None:
        reason = unusable(Path(name))
        root = _chosen[name] = Path(name) if reason is None else _fall_back(name, reason)
    return root


def unusable(root: Path) -> str | None:
    """Why ``root`` cannot be the cache (it is created, 0700, when missing), or None."""
    try:
        make_private_dir(root)
    except OSError as exc:
        return f"cannot be created ({exc.strerror or exc})"
    reason = problem(root)
    if reason is None and not os.access(root, os.W_OK | os.X_OK):
        reason = "is read-only"
    return reason


def using_cache(action):
    """``action(root)``; if the cache fails under it (an OSError: read-only, deleted, a file in the way), warn
    and run it once more in the private cache."""
    root = cache_root()
    try:
        return action(root)
    except OSError as exc:
        if root == _private:
            raise CacheError(f"the private kfuse cache {root} failed: {exc}") from exc
        return action(_fall_back(config.CACHE_DIR.get(), f"failed while in use ({exc})"))


def _fall_back(name: str, reason: str) -> Path:
    global _private
    message = f"kfuse cache {name} {reason}"
    if not config.CACHE_FALLBACK.get():
        raise CacheError(f"{message}; repair it with 'python -m kfuse.compiler verify', or set KFUSE_CACHE_DIR "
                         "to a folder of your own")
    if _private is None:
        try:
            _private = Path(tempfile.mkdtemp(prefix="kfuse-cache-"))
        except OSError as exc:
            raise CacheError(f"{message}, and no private cache could be made: {exc}") from exc
        atexit.register(shutil.rmtree, _private, True)
    warn(f"{message}: this process uses the private cache {_private} instead (kernels compile again)")
    _chosen[name] = _private
    return _private
