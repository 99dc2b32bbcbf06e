"""The named arrays programs work on, and a model of which memory each name covers.

Aliasing is part of the fixture: ``lo``/``hi`` are halves of ``a``; ``m0``/``m1`` are columns 0 and 1 of ``M``
(interleaved in memory, no element shared), ``Mc`` its columns 1 and 2 (a 2-D View whose rows lie in M's rows);
``d`` and ``d2`` are two
``pk.array`` Views over the NumPy array ``buf``, which kernels may also receive directly and the host
reads and writes with plain NumPy (no kfuse barrier sees that); ``raw`` is a NumPy array only ever
passed to kernels as it is. ``f32``/``i32``/``i64``/``flag`` are Views of the other dtypes. A kept
alias ``@name`` (see :class:`~kfuse.check.program.Export`) is a NumPy array over a View's memory.

:class:`Memory` follows, without running anything, which storage and elements each name covers as
a program reallocates and exports arrays: the oracle needs it to know what a failing call touched.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import kfuse as pk

N = 32  # length of the 1-D arrays
K = 4  # columns of the 2-D array M (rows: N)

#: 1-D float64 arrays a kernel's ``f64`` parameter may take
ONE_D = ("a", "b", "c", "lo", "hi", "d", "d2", "buf", "raw", "m0", "m1")
#: the columns of ``M`` among them: a kernel that also takes ``M`` (or ``Mc``) never gets one (it may read any row
#: of one)
COLUMNS = ("m0", "m1")
#: 2-D float64 arrays a kernel's ``M`` parameter may take
TWO_D = ("M", "Mc")
#: arrays sharing memory (a kernel must not read a neighbour of an element another thread writes)
GROUPS = {"a": "a", "lo": "a", "hi": "a", "d": "d", "d2": "d", "buf": "d", "b": "b", "c": "c", "raw": "raw",
          "m0": "M", "m1": "M", "Mc": "M"}
TYPED = ("f32", "i32", "i64", "flag")
#: names the host reads and writes (kept aliases ``@name`` come on top)
HOST_NAMES = ("a", "b", "c", "lo", "hi", "d", "d2", "M", "Mc", "buf", "raw", "m0", "m1", *TYPED)
REALLOCATABLE = ("a", "b", "c", "M", "raw", *TYPED)
#: Views the host may give new memory (``View.resize``, host.WRITES' "resized"): no other name covers their memory
RESIZABLE = ("b", "c", *TYPED)
EXPORTABLE = ("a", "b", "c", "lo", "hi", "d", "M", *TYPED)

_DTYPES = {"f32": np.float32, "i32": np.int32, "i64": np.int64, "flag": np.bool_}


def _typed(name: str, fresh: bool) -> pk.View:
    v = pk.View(N, _DTYPES[name])
    i = np.arange(N)
    initial = {"f32": np.cos(i) * 0.7, "i32": i % 5 - 2, "i64": i * 3 - 7, "flag": i % 3 == 0}[name]
    v[:] = initial[::-1] if fresh else initial
    return v


def make_arrays() -> dict:
    """Fresh arrays with distinct, deterministic contents (the same in every mode)."""
    a = pk.View(N)
    a[:] = np.linspace(-1.0, 1.0, N)
    b = pk.View(N)
    b[:] = np.cos(np.arange(N))
    c = pk.View(N)
    c[:] = 0.1 * np.arange(N)
    buf = np.sin(np.arange(N) * 0.3) + 0.5
    m = pk.View((N, K))
    m[:] = np.arange(N * K).reshape(N, K) / (N * K)
    arrays = {"a": a, "b": b, "c": c, "lo": a.subview(slice(0, N // 2)), "hi": a.subview(slice(N // 2, N)),
              "buf": buf, "d": pk.array(buf), "d2": pk.array(buf), "M": m, "raw": np.exp(-np.arange(N) / 9.0),
              "m0": m[:, 0], "m1": m[:, 1], "Mc": m[:, 1:3]}
    arrays.update((name, _typed(name, fresh=False)) for name in TYPED)
    return arrays


def fresh(name: str):
    """The new array ``Realloc(name)`` puts under ``name``."""
    if name == "M":
        m = pk.View((N, K))
        m[:] = 0.25
        return m
    if name in TYPED:
        return _typed(name, fresh=True)
    if name == "raw":
        return np.linspace(2.0, -2.0, N)
    v = pk.View(N)
    v[:] = np.arange(N) * -0.05
    return v


@dataclass(frozen=True)
class Place:
    """Where a name's elements live: ``rows`` rows of ``width`` elements from element ``start`` of
    ``storage`` (an allocation), a row every ``stride`` elements (0: rows follow one another)."""

    storage: str
    start: int
    rows: int
    width: int = 1
    stride: int = 0

    def elements(self, rows: int | None = None) -> list:
        """The storage elements of the first ``rows`` rows (all by default)."""
        stride = self.stride or self.width
        return [self.start + r * stride + k for r in range(self.rows if rows is None else rows)
                for k in range(self.width)]


class Memory:
    """Name -> Place as a program runs (Realloc gives a name new storage, Export adds ``@name``)."""

    def __init__(self):
        half = N // 2
        self.places = {"a": Place("a", 0, N), "lo": Place("a", 0, half), "hi": Place("a", half, half),
                       "b": Place("b", 0, N), "c": Place("c", 0, N), "raw": Place("raw", 0, N),
                       "d": Place("d", 0, N), "d2": Place("d", 0, N), "buf": Place("d", 0, N),
                       "M": Place("M", 0, N, K), "m0": Place("M", 0, N, 1, K), "m1": Place("M", 1, N, 1, K),
                       "Mc": Place("M", 1, N, 2, K)}
        self.places.update((name, Place(name, 0, N)) for name in TYPED)
        self._reallocs = 0

    def __getitem__(self, name: str) -> Place:
        return self.places[name]

    def realloc(self, name: str) -> None:
        self._reallocs += 1
        old = self.places[name]
        self.places[name] = Place(f"{name}#{self._reallocs}", 0, old.rows, old.width, old.stride)

    def export(self, name: str) -> None:
        self.places["@" + name] = self.places[name]
