"""Escaped memory: bytes the host can read or write without passing a kfuse barrier.

A View's own accesses (indexing, ``np.asarray``, printing) go through the host barrier, which runs
pending kernels first. But a NumPy array the program holds reaches the same bytes directly, so while
such an array exists, a delayed kernel touching those bytes could run too late (or after the host's
write). The rule: memory is *escaped* while a NumPy object the user can hold aliases it, and a traced
call that touches escaped memory runs before control returns to the user (with what it depends on).
At the moment memory escapes, the barrier has already run every pending call on it, so no pending
call ever touches escaped memory.

Two ways memory escapes, both tracked here without scanning anything at kernel calls:
- an *export*: an array kfuse hands out (``np.asarray(view)``, ``view.data``, a row ``view[i]``). It is
  made over an :class:`Alias` owner, and every array derived from it (slices, reshapes) keeps that
  owner alive through NumPy's ``base`` chain; the escape ends when the owner dies (a weak reference
  tells), so ``np.asarray(view).sum()`` escapes for one expression only.
- a *user base*: the array given to ``pk.array``/``pk.from_numpy``. kfuse holds it through one
  :class:`Alias` only, so it is escaped exactly while something else (the user's name for it, a slice
  of it) holds its memory owner: a reference count above kfuse's own.
NumPy arrays passed straight to a kernel are escaped by definition (the caller holds them).
A user base that is read-only (``writeable`` off through its whole base chain) does not escape for
kernels that only read it: the program cannot change it behind kfuse's back.

Not seen (documented): memory reached through weak references resurrected later, ctypes pointers,
another process, or a read-only array made writeable again while a kernel reading it is pending;
``pk.fence()`` makes such memory current on the host spaces (on a GPU, a read through a View brings it back).
"""
from __future__ import annotations

import sys
import weakref

import numpy as np

try:  # NumPy 2 moved byte_bounds
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # pragma: no cover - NumPy 1.x
    from numpy import byte_bounds


class Alias:
    """The ``base`` of arrays that kfuse makes over memory it tracks; it keeps ``target`` alive."""

    __slots__ = ("__array_interface__", "target", "__weakref__")

    def __init__(self, target: np.ndarray, interface: dict | None = None):
        self.__array_interface__ = target.__array_interface__ if interface is None else interface
        self.target = target


class _Entry:
    __slots__ = ("lo", "hi", "chain", "ref")

    def __init__(self, lo: int, hi: int, chain, ref):
        self.lo, self.hi = lo, hi
        # An export: None (escaped while it lives). A user base: the arrays from the user's array to its memory
        # owner, each held once by kfuse's alias or by the previous link; ALWAYS when the owner is not countable.
        self.chain = chain
        self.ref = ref  # its key in ``_entries``

    def active(self, write: bool) -> bool:
        """Whether a kernel that reads (``write`` False) or also writes this memory must run at once."""
        chain = self.chain
        if chain is None or chain is ALWAYS:
            return True
        # loops, not generators: this runs for every array operation on a user's array
        if not write:
            for i in range(len(chain)):
                if chain[i].flags.writeable:
                    break
            else:
                return False  # the program cannot change read-only memory, so a delayed read sees what it would now
        # kfuse's own references: the alias (or the previous link), this chain, and getrefcount's argument
        # (indexing, not a loop variable, which would be one more)
        for i in range(len(chain)):
            if sys.getrefcount(chain[i]) > 3:
                return True
        # Nothing but kfuse holds the user's array or its bases now, and kfuse never hands them out (exports are
        # new arrays with entries of their own): no one can reach them again, so the memory is kfuse's for good.
        # The entry goes, and with the last one every escape check (``live``).
        self.chain = _KFUSE_ONLY
        _forget(self.ref)
        return False


ALWAYS = object()
_KFUSE_ONLY = ()  # the chain of an entry found unreachable by the program (never active again)
_entries: dict = {}  # weakref(alias) -> _Entry
version = 0  # bumped when the set changes, so Views re-derive which entries cover them


def _changed() -> None:
    global version
    version += 1


def _forget(ref) -> None:
    """Weak-reference callback: may run inside any allocation (garbage collection), even while the
    entries are being iterated, so it only marks; ``_purge`` removes at a safe point."""
    if _dead is not None:  # (None while the interpreter shuts down)
        _dead.append(ref)
        _changed()


_dead: list = []


def _purge() -> None:
    while _dead:
        _entries.pop(_dead.pop(), None)


def span(array: np.ndarray, ptr: int) -> tuple:
    """The byte range [lo, hi) of ``array``, whose data pointer is ``ptr`` (the caller has it: NumPy builds
    ``__array_interface__`` anew at each ask); empty at ``ptr`` for an empty array."""
    if not array.size:
        return (ptr, ptr)
    if array.flags.c_contiguous:
        return (ptr, ptr + array.nbytes)
    return byte_bounds(array)


def export(array: np.ndarray) -> np.ndarray:
    """An array sharing ``array``'s memory, handed to the user: the memory is escaped while it (or
    anything derived from it) is alive. The caller has already run the barrier for a write."""
    _purge()  # (with fusion off nothing else asks: the dead entries of an eager loop's Views piled up)
    interface = array.__array_interface__
    lo, hi = span(array, interface["data"][0])
    if lo == hi:
        return array
    alias = Alias(array, interface)
    ref = weakref.ref(alias, _forget)
    _entries[ref] = _Entry(lo, hi, None, ref)
    _changed()
    return np.asarray(alias)


def adopt(base: np.ndarray) -> tuple:
    """The array a View keeps for a user's array ``base`` (``pk.array``), and its data pointer: same memory, held
    through one alias, so the user's own references to it (or to the arrays it is a view of) can be counted."""
    _purge()
    interface = base.__array_interface__
    alias = Alias(base, interface)
    chain = [base]
    while isinstance(chain[-1], np.ndarray) and chain[-1].base is not None:
        chain.append(chain[-1].base)
    owner = chain[-1]
    if isinstance(owner, Alias):  # the memory of an export: escaped as long as that export lives
        chain = None
    elif not isinstance(owner, np.ndarray):  # bytes, mmap, a foreign buffer: the host may reach it any time
        chain = ALWAYS
    else:
        chain = tuple(chain)
    lo, hi = span(base, interface["data"][0])
    if lo != hi:
        ref = weakref.ref(alias, _forget)
        _entries[ref] = _Entry(lo, hi, chain, ref)
        _changed()
    return np.asarray(alias), interface["data"][0]


def live() -> bool:
    """Whether any export or user base may be alive (else no View is escaped: the fast path)."""
    if _dead:
        _purge()
    return bool(_entries)


def covering(lo: int, hi: int) -> tuple:
    """The entries whose memory overlaps [lo, hi) (Views cache this per ``version``)."""
    _purge()
    return tuple(e for e in list(_entries.values()) if e.lo < hi and lo < e.hi)


def is_escaped(entries: tuple, write: bool) -> bool:
    for e in entries:
        if e.active(write):
            return True
    return False
