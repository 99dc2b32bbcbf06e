"""Measured profitability decisions kept across processes (fuser/profit.py decides, and a later process starts from
the kept times, ``profit.recall``; this stores).

One small JSON file per group signature, ``decisions/<digest[:2]>/<digest>.json`` in the cache folder,
holding the best fused and apart times (wall time, and kernel time where the backend times its kernels) and the
number of trials. The digest covers the fused group's
persistent key (kfuse's source, the member kernels, aliasing, scalars, transforms, settings that change
code), the backend, the size class and this machine (host name, CPUs, KFUSE_NUM_THREADS): a time measured
elsewhere says nothing here. Files are written with one atomic rename, so processes deciding the same group
at once each leave a whole file (the last one stays; each is a valid decision) and need no lock; a file that
is not this user's, not private or not well formed is ignored (and measured again).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path

from .. import config
from .root import cache_root, using_cache
from .trust import MISSING, problem as trust_problem, warn, write_private

FORMAT = 4  # 2 kept kernel times; 3: trials in the order fused, apart, apart, fused (plain alternation could be
#            biased); 4: in the Thue-Morse order (the last trial was apart's, which a warming process favoured)
_FIELDS = {"fused": (bool,), "fused_s": (float,), "apart_s": (float,), "fused_k": (float, type(None)),
           "apart_k": (float, type(None)), "trials": (int,)}


def digest(group_key: str, backend: str, sizes: tuple) -> str:
    machine = f"{platform.node()};{os.cpu_count()};{config.NUM_THREADS.get()}"
    return hashlib.sha256("\0".join((group_key, backend, repr(sizes), machine)).encode()).hexdigest()


def _path(root: Path, key: str) -> Path:
    return root / "decisions" / key[:2] / f"{key}.json"


class _Outdated(ValueError):
    """A decision an earlier kfuse wrote in another format: not damaged, measured again and replaced."""


def _decode(text: str, key: str) -> dict:
    data = json.loads(text)
    if isinstance(data, dict) and type(data.get("format")) is int and data["format"] < FORMAT:
        raise _Outdated(f"format {data['format']}, older than {FORMAT}")
    if not (isinstance(data, dict) and data.get("format") == FORMAT and data.get("key") == key
            and isinstance(data.get("entry"), dict) and sorted(data) == ["entry", "format", "key"]):
        raise ValueError("not the decision for this key")
    entry = data["entry"]
    if sorted(entry) != sorted(_FIELDS) or any(type(entry[k]) not in t for k, t in _FIELDS.items()) \
            or entry["trials"] < 1 or any((entry[k] or 0.0) < 0 for k in ("fused_s", "apart_s", "fused_k", "apart_k")):
        raise ValueError("unexpected fields")
    return entry


def problem(path: Path) -> str | None:
    """Why the decision file ``path`` must not be used, or None."""
    reason = trust_problem(path)
    if reason is None:
        try:
            _decode(path.read_text(), path.stem)
        except _Outdated:
            return None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            reason = f"is damaged ({exc})"
    return reason


def load(key: str) -> dict | None:
    """{"fused", "fused_s", "apart_s", "fused_k", "apart_k", "trials"} decided earlier for ``key``, or None."""
    path = _path(cache_root(), key)
    reason = trust_problem(path)
    if reason == MISSING:
        return None
    if reason is None:
        try:
            return _decode(path.read_text(), key)
        except _Outdated:
            return None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            reason = f"is damaged ({exc})"
    warn(f"kfuse profitability decision {path} {reason}: measuring again")
    return None


def save(key: str, fused: bool, fused_s: float, apart_s: float, trials: int, fused_k: float | None = None,
         apart_k: float | None = None) -> None:
    def seconds(x):
        return None if x is None else float(x)

    text = json.dumps({"format": FORMAT, "key": key, "entry": {
        "fused": fused, "fused_s": float(fused_s), "apart_s": float(apart_s), "fused_k": seconds(fused_k),
        "apart_k": seconds(apart_k), "trials": int(trials)}})
    using_cache(lambda root: write_private(_path(root, key), text))
