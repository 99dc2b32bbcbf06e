"""One process builds a cache entry while the others wait and then reuse it.

Each entry has a lock file ``locks/<name>.lock`` taken with ``fcntl.flock`` (so Linux and other Unix
systems only). The kernel drops a flock when its holder exits, kill -9 included, so a dead compile never
blocks anyone, and a build folder whose lock is free has been abandoned. A waiter gives up after
``WAIT_LIMIT`` seconds (a stopped process holding the lock) and builds too: publishing is atomic, so that
costs a duplicate compile, never a torn entry.
"""
from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path

from .trust import make_private_dir, warn

WAIT_LIMIT = 300.0


def _path(root: Path, name: str) -> Path:
    return root / "locks" / f"{name}.lock"


def _take(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


@contextmanager
def held(root: Path, name: str, on_wait=None):
    """Hold ``name``'s lock for the ``with`` body; ``on_wait()`` is called if another process holds it now."""
    make_private_dir(root / "locks")
    fd = os.open(_path(root, name), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        if not _take(fd):
            if on_wait is not None:
                on_wait()
            deadline, pause = time.monotonic() + WAIT_LIMIT, 0.002
            while not _take(fd):
                if time.monotonic() > deadline:
                    warn(f"waited {WAIT_LIMIT:.0f} s for another process to build {name}: building it here too")
                    break
                time.sleep(pause)
                pause = min(2 * pause, 0.1)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def free(root: Path, name: str):
    """Yields True, holding the lock, when no process holds ``name``'s lock now; else yields False at once."""
    try:
        fd = os.open(_path(root, name), os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        yield True  # never locked: no build can be running
        return
    try:
        yield _take(fd)
    finally:
        os.close(fd)
