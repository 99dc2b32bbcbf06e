"""The host's ways to read an array, write it, and use a reduction result: every access path a program
has, each of which must see eager's data (Views through their barrier, NumPy arrays directly)."""
from __future__ import annotations

import numpy as np


def _read_slice(v):
    return np.array(v[1:5] if v.ndim == 1 else v[1:3])  # a slice shares memory: keep a copy


READS = {
    "asarray": lambda v: np.asarray(v).copy(),
    "item": lambda v: v[3] if v.ndim == 1 else v[3, 1],
    "slice": _read_slice,
    "iter": lambda v: [np.asarray(row).copy() for row in v] if v.ndim > 1 else list(v),
    "repr": repr,
    "str": str,
    "copy": lambda v: v.copy(),
    "npsum": np.sum,
    "tolist": lambda v: v.tolist(),
}


def _write_setitem(v, value, at):
    if v.ndim == 1:
        v[at % v.shape[0]] = value
    else:
        v[at % v.shape[0], at % v.shape[1]] = value


def _write_slice(v, value, at):
    start = at % v.shape[0]
    v[start:start + 3] = value


def _write_asarray(v, value, at):
    np.asarray(v).flat[at % v.size] = value  # (into the View's memory also where it is not contiguous: ``Mc``)


def _write_resized(v, value, at):
    """New memory under the same View (``View.resize`` out and back: its shape and contents kept), then one element
    written: kept launches and captured replays that took the old memory must not use it. For Views no other name
    shares memory with (``arrays.RESIZABLE``): the old memory stays theirs, as in Kokkos."""
    held = v[0:1]  # (the old memory stays allocated meanwhile, so the new memory lies at another address)
    v.resize(0, v.shape[0] + 3)
    v.resize(0, v.shape[0] - 3)
    del held
    _write_setitem(v, value, at)


WRITES = {
    "setitem": _write_setitem,
    "slice": _write_slice,
    "fill": lambda v, value, at: v.fill(value),
    "asarray": _write_asarray,
    "resized": _write_resized,
}

USES = {
    "float": float,
    "int": int,
    "bool": bool,
    "add": lambda r: r + 1.5,
    "radd": lambda r: 1.5 + r,
    "rsub": lambda r: 10.0 - r,
    "mul": lambda r: r * 3,
    "rtruediv": lambda r: 1.0 / (1.0 + abs(r)),
    "neg": lambda r: -r,
    "cmp": lambda r: (r > 0.5, r <= 2.0, r == r, r != 0),
    "format": lambda r: f"{r:.3f}",
    "fstring": lambda r: f"{r}",
    "repr": repr,
    "str": str,
    "np_float64": np.float64,
    "np_sqrt": lambda r: np.sqrt(abs(r)),
    "np_array": lambda r: np.array([r, 2 * r]),
    "round": lambda r: round(r, 2),
}
