"""Which cache files kfuse may use: it dlopens cached binaries, so only files this user wrote count.

A file or folder is trusted when the user running kfuse owns it and neither its group nor others can
write it (the rule ssh applies to ``~/.ssh``). Symbolic links are followed: making one needs write access
to the folder holding it, which the same rule already guards. kfuse creates its folders 0700 and its files
0600 whatever the umask, so its own entries always pass.
"""
from __future__ import annotations

import os
import stat
import tempfile
import warnings
from pathlib import Path

from ..errors import KfuseError

MISSING = "is missing"


class CacheError(KfuseError):
    """The compile cache cannot be used, and no private cache may (KFUSE_CACHE_FALLBACK=0) or can replace it."""


class CacheWarning(UserWarning):
    """kfuse rebuilt a damaged cache entry or moved to a private cache; the program goes on."""


def warn(message: str) -> None:
    warnings.warn(message, CacheWarning, stacklevel=3)


def problem(path: Path) -> str | None:
    """Why ``path`` must not be trusted (``MISSING`` when absent), or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return MISSING
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    uid = os.geteuid()
    if st.st_uid != uid:
        return f"is owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def make_private_dir(path: Path) -> None:
    """Create ``path`` and any missing parents as 0700 folders (``os.makedirs`` would give parents the umask's
    mode). Raises OSError when that is impossible (read-only, a file in the way, ...)."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            if not folder.is_dir():
                raise NotADirectoryError(f"{folder} exists and is not a folder") from None
            continue  # another process made it a moment ago
        os.chmod(folder, 0o700)  # a umask such as 0o277 would otherwise leave it unwritable


def make_private_files(folder: Path) -> None:
    """Files of a finished build become 0600: only this user may read or replace them."""
    for path in folder.iterdir():
        os.chmod(path, 0o600)


def write_private(path: Path, text: str) -> None:
    """Write ``path`` (0600, its folders 0700) in one atomic rename: a reader, or another process writing the
    same file, sees the old content or the new, never a torn file."""
    make_private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")  # 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
