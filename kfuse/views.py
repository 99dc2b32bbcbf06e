"""Views: n-dimensional arrays that kernels read and write, backed by NumPy memory on the host.

A View owns (or borrows) one NumPy array; kernels receive its raw pointer, extents and strides, so no
copy happens between Python and C++. Every host access goes through :func:`host_barrier`, where the
runtime in charge (kfuse/context.py) runs pending kernels before the host sees or changes the data.
"""
from __future__ import annotations

import enum
import itertools
import math
import numbers
import operator
import threading
import weakref

import numpy as np

from . import context, escape
from .errors import public_error
from .spaces import MemorySpace, on_device
from .types import DType, dtype_of, element_dtype

_uids = itertools.count(1)
#: ``.made``, while ``pk.capture`` records a function in this thread (kfuse/capturing.py): the arrays owning new memory
#: of undefined contents made meanwhile (array-operation results, ``pk.empty``), which a replay may make anew, as
#: id -> weak reference (an id alone could be a freed array's, taken by other memory since).
_recording = threading.local()
#: The memory of Views made while the default space is a GPU's (``pk.View``, ``pk.zeros``, ``pk.full``...) that
#: still holds one value in every element on the host: a GPU's copy of it is filled there, not copied over
#: (runtime/device.py). A host write (the barrier, device.host_access) or a call that runs elsewhere than the GPU
#: (calls.bind, ``touched``) drops it. id -> (weak reference to the array, one element's bytes), in a plain dict
#: (calls.bind tests it at every call: a WeakValueDictionary's truth costs 0.17 us).
constant: dict = {}


def mark_constant(array: np.ndarray) -> None:
    """``array`` (new, owning its memory) holds its first element's value everywhere."""
    if not array.size:
        return

    def gone(ref, key=id(array)):
        if constant.get(key, (None,))[0] is ref:
            del constant[key]
    constant[id(array)] = (weakref.ref(array, gone), array.reshape(-1)[:1].tobytes())


def take_constant(root: np.ndarray) -> bytes | None:
    """The element bytes ``root``'s memory still holds everywhere, if known; not known from now on (its caller
    writes it)."""
    found = constant.get(id(root))
    if found is None or found[0]() is not root:
        return None
    del constant[id(root)]
    return found[1]


def recording_undefined(made: dict | None) -> dict | None:
    """Collect the new memory of undefined contents this thread makes into ``made`` (None: stop); returns what
    collected it before."""
    outer = getattr(_recording, "made", None)
    _recording.made = made
    return outer


def note_undefined(array: np.ndarray) -> None:
    """``array`` owns new memory of undefined contents (see ``_recording``)."""
    made = getattr(_recording, "made", None)
    if made is not None:
        made[id(array)] = weakref.ref(array)


def in_undefined(view: "View", made: dict) -> bool:
    """Whether ``view`` lies in memory ``made`` lists (``recording_undefined``)."""
    owner = memory_owner(view._array)
    ref = made.get(id(owner))
    return ref is not None and ref() is owner


def memory_owner(array: np.ndarray) -> np.ndarray:
    """The array owning ``array``'s memory, through NumPy's base chain and kfuse's own aliases (kfuse/escape.py)."""
    while True:
        base = array.base
        if isinstance(base, np.ndarray):
            array = base
        elif isinstance(base, escape.Alias):
            array = base.target
        else:
            return array


def place(view: "View"):
    """(id of the array owning ``view``'s memory, (the byte offset of ``view`` in it, shape, strides, dtype)), or
    False where that owner does not own its memory (NumPy over a foreign buffer: another array may share it). Two
    Views with different owners share no byte; with one owner, offsets, shapes and strides tell how they overlap
    (kfuse/ops/recorded.py keys groups by this, so a program's new arrays of each run look up what the previous run
    found). An id, not the owner: the View keeps its owner alive through its array, and a second reference would
    count as someone else holding the memory (kfuse/ops/stores.py)."""
    found = view._place
    if found is None:
        root = memory_owner(view._array)
        found = view._place = False if root.base is not None else (
            id(root), (view.ptr - root.__array_interface__["data"][0], view.shape, view.strides, view.dtype))
    return found


def touched(values) -> None:
    """The Views among ``values`` are used by a call that does not run on the GPU: their memory may change on the
    host, so its contents are no longer known (``constant``)."""
    for v in values:
        if isinstance(v, View) and v._array is not None:
            take_constant(memory_owner(v._array))


def host_barrier(view: "View", write: bool, overwrite: bool = False) -> None:
    """Before every host access: ``overwrite`` when the host replaces every element (contents lost to a
    failed call become valid again). Errors reach the user as from any entry point (``errors.public_error``)."""
    try:
        context.current().barrier(view, write, overwrite)
    except Exception as exc:
        raise public_error(exc)


def _whole(index) -> bool:
    """Whether ``view[index] = x`` assigns every element."""
    def full(i) -> bool:
        return i is Ellipsis or (type(i) is slice and i == slice(None))

    return full(index) or (type(index) is tuple and all(full(i) for i in index))


def _sliced(index) -> bool:
    """Whether ``array[index]`` is NumPy basic indexing with a slice (an array sharing memory, never a copy).
    A loop, not generators: array code slices at every statement."""
    if type(index) is slice:
        return True
    if type(index) is not tuple:
        return index is Ellipsis
    sliced = False
    for i in index:
        if type(i) is slice or i is Ellipsis:
            sliced = True
        elif type(i) is not int and (not isinstance(i, numbers.Integral) or isinstance(i, (bool, np.bool_))):
            return False
    return sliced


_PARTS_KEPT = 32  # slices kept per View (a loop over rows or columns slices a View anew each time: start over)
_resizes = 0  # ``View.resize`` calls so far: a View's kept slices made before the last one are stale


def resize_count() -> int:
    """``View.resize`` calls so far: while it stays the same, no View has new memory (kfuse/rerun.py compares a kept
    flush's pointers only when it changed)."""
    return _resizes


def _index_key(index):
    """A dict key for a basic index of slices and ints (Python ints and None only: ``1.0`` must still raise as
    NumPy does), or None: slices are not hashable before Python 3.12."""
    if type(index) is slice:
        return _slice_key(index)
    if type(index) is not tuple:
        return None
    key = []
    for i in index:
        if type(i) is int:
            key.append(i)
        elif type(i) is slice:
            k = _slice_key(i)
            if k is None:
                return None
            key.append(k)
        else:
            return None
    return tuple(key)


def _slice_key(s: slice):
    start, stop, step = s.start, s.stop, s.step
    if (start is None or type(start) is int) and (stop is None or type(stop) is int) and \
            (step is None or type(step) is int):
        return start, stop, step
    return None


def _offset(index, array: np.ndarray) -> int | None:
    """The byte offset of ``array[index]`` (a non-empty result of slices and ints) from ``array``'s start, or
    None for other indices (NumPy is asked then)."""
    items = index if type(index) is tuple else (index,)
    if len(items) > array.ndim:
        return None
    offset = 0
    for item, n, stride in zip(items, array.shape, array.strides):
        if type(item) is slice:
            offset += item.indices(n)[0] * stride
        elif type(item) is int:
            offset += (item + n if item < 0 else item) * stride
        else:
            return None
    return offset


def _escape_entries(view: "View") -> tuple:
    """The escape entries covering ``view``'s bytes, kept per ``escape.version``."""
    cached = view._escapes
    if cached is None or cached[0] != escape.version:
        cached = view._escapes = (escape.version, escape.covering(*view.bounds))
    return cached[1]


def _within(whole: "View", lo: int, hi: int) -> tuple:
    """A part's ``_escapes`` from its whole's (the entries covering the part cover the whole): the whole's own
    tuple where every entry covers the part too, so ``escaped_any`` asks them once for all the parts."""
    entries = _escape_entries(whole)
    for e in entries:
        if not (e.lo < hi and lo < e.hi):
            entries = tuple(e for e in entries if e.lo < hi and lo < e.hi)
            break
    return escape.version, entries


def escaped_any(target: "View | None", views: list) -> bool:
    """Whether a kernel writing ``target`` (None: nothing) and reading ``views`` must run at once (``escaped``),
    each tuple of escape entries asked once: the Views of an array statement are mostly slices of one array,
    which share their whole's (an entry not active for a write is not for a read)."""
    asked = []
    if target is not None:
        entries = _escape_entries(target)
        if entries:
            if escape.is_escaped(entries, True):
                return True
            asked.append(entries)
    for v in views:
        entries = _escape_entries(v)
        if entries and not any(entries is a for a in asked):
            if escape.is_escaped(entries, False):
                return True
            asked.append(entries)
    return False


_sigs: dict = {}  # (id of the dtype, ndim, storage, atomic) -> the one ``sig`` tuple of Views of that kind


def _sig(view) -> tuple:
    """A View's ``sig``: an Atomic View gets its own specialisations (their stores are atomic). One tuple per kind,
    so that comparing two Views' sigs (each call's binding, a rerun's slots) finds them identical at once."""
    return _sig_of(view.dtype, view.ndim, view.storage, view.trait is Trait.Atomic)


def _sig_of(dtype, ndim: int, storage: str, atomic: bool = False) -> tuple:
    key = (id(dtype), ndim, storage, atomic)  # an id: hashing an Enum member runs Python code
    found = _sigs.get(key)
    if found is None:
        found = _sigs[key] = (dtype, ndim, storage, Trait.Atomic) if atomic else (dtype, ndim, storage)
    return found


def _memory(x, write: bool):
    """A View's array, once pending kernels are done with it (others pass as they are)."""
    if not isinstance(x, View):
        return x
    host_barrier(x, write)
    return x._array


def _in_place(op):
    """A View's ``__i<op>__``: ``op`` on its array in place, as NumPy does (same casting rules), after the barrier."""
    def apply(self, other):
        other = _memory(other, False)
        op(_memory(self, True), other)
        return self
    return apply


def storage_key(view) -> tuple:
    """Views with equal keys address exactly the same elements (the same memory, read the same way)."""
    return (view.ptr, view.shape, view.strides, view.dtype)


def overlaps(a, b) -> bool:
    """Whether two Views' byte spans intersect (they may then still share no byte: ``apart``)."""
    return a.bounds[0] < b.bounds[1] and b.bounds[0] < a.bounds[1]


def meet(span: tuple, step: tuple, span2: tuple, step2: tuple) -> bool:
    """Whether the elements of two Views may share a byte, from their byte spans ``(lo, hi)`` and lattices
    (``lattice``): neither is empty, the spans intersect and the lattices do not keep them apart, each seen on the
    other's step where its whole span fits in one (a row's two elements between two elements of a column)."""
    (lo, hi), (lo2, hi2) = span, span2
    if not (lo < hi and lo2 < hi2 and lo < hi2 and lo2 < hi):
        return False
    return not (apart(lo2 - lo, step, _on_step(step2, hi2 - lo2, step[0])) or
                apart(lo - lo2, step2, _on_step(step, hi - lo, step2[0])))


def _on_step(own: tuple, width: int, step: int) -> tuple:
    """A View's lattice on another's ``step``: one block of its ``width`` bytes (its whole span) where that fits in
    a step, else its own."""
    return (step, width) if own[0] != step and width <= step else own


def lattice(view) -> tuple:
    """(step, width) in bytes: every byte of ``view`` lies less than ``width`` bytes after its first byte plus a
    whole number of steps. The greatest common divisor of its byte strides over dimensions of more than one element,
    and the element size (every other element; a column of a matrix); where that says nothing (a step of one
    element) and each row (dimension 0) lies within its stride, the stride and a row's span (a block of a matrix's
    columns)."""
    size = view.dtype.np.itemsize
    step = 0
    for n, stride in zip(view.shape, view.strides):
        if n > 1:
            step = math.gcd(step, abs(stride) * size)
    if step <= size and len(view.shape) > 1 and view.shape[0] > 1 and 0 not in view.shape \
            and view.strides[0] > 0 and min(view.strides[1:]) >= 0:
        span = size + sum((n - 1) * stride * size for n, stride in zip(view.shape[1:], view.strides[1:]))
        if span < view.strides[0] * size:
            return view.strides[0] * size, span
    return (step or size), size


def apart(offset: int, a: tuple, b: tuple) -> bool:
    """Whether two Views of lattices ``a`` and ``b`` share no byte wherever their spans meet, the first byte of the
    second ``offset`` bytes after the first's (any integer): on a common step, every byte of one falls where the
    other has none (the columns of a matrix, every other element, blocks of columns)."""
    (step, size), (step2, size2) = a, b
    if step != step2 or step <= size:
        return False
    return size <= offset % step <= step - size2


class Layout(enum.Enum):
    """PyKokkos's ``pk.Layout``: how a View's elements lie in memory. LayoutLeft is column-major (Fortran order);
    kernels index it like any View and read its strides, so code written for one layout gives the same results
    on the other. The default, as PyKokkos's for host memory, is LayoutRight (row-major)."""

    LayoutDefault = "LayoutDefault"
    LayoutLeft = "LayoutLeft"
    LayoutRight = "LayoutRight"
    LayoutStride = "LayoutStride"  # what ``view.layout`` says of a View over neither order (a strided subview)


class Trait(enum.Enum):
    """PyKokkos's memory traits (``pk.View(..., trait=pk.Atomic)``, ``pk.ViewTypeInfo(trait=...)``). Unmanaged,
    RandomAccess and Restrict only tune Kokkos's access code, so they are accepted and change nothing here.
    Atomic (on the View, or declared by ViewTypeInfo for the parameter or field) makes kernels update the View's
    elements atomically (kfuse/ir/lower.py ``_atomic_form``)."""

    TraitDefault = "TraitDefault"
    Atomic = "Atomic"
    Unmanaged = "Unmanaged"
    RandomAccess = "RandomAccess"
    Restrict = "Restrict"


class ViewTypeInfo:
    """PyKokkos's declaration of a workunit parameter's (or workload field's) View type. kfuse takes the layout
    and space from the View passed, so the declaration is accepted and not needed."""

    def __init__(self, *, space=None, layout=None, trait=None):
        if layout is not None and not isinstance(layout, Layout):
            raise TypeError(f"pk.ViewTypeInfo: unknown layout {layout!r}")
        self.space, self.layout, self.trait = space, layout, _trait(trait, "pk.ViewTypeInfo")


def _trait(trait, what: str) -> Trait:
    if trait is None:
        return Trait.TraitDefault
    if not isinstance(trait, Trait):
        raise TypeError(f"{what}: unknown trait {trait!r}; use pk.Atomic, pk.Unmanaged, pk.RandomAccess or "
                        "pk.Restrict (also spelled pk.Trait.<name>)")
    return trait


def _allocate(shape, dtype, space, layout) -> np.ndarray:
    """The zeroed memory of ``pk.View(shape, dtype, space, layout)``, after checking the PyKokkos arguments."""
    if space is not None and not isinstance(space, MemorySpace):
        raise TypeError(f"pk.View: space must be a pk.MemorySpace (pk.HostSpace, ...), got {space!r}")
    if layout is not None and not isinstance(layout, Layout):
        raise TypeError(f"pk.View: unknown layout {layout!r}; use pk.Layout.LayoutRight or pk.Layout.LayoutLeft")
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"View shape must be non-negative, got {shape}")
    return np.zeros(shape, dtype=element_dtype(dtype).np, order="F" if layout is Layout.LayoutLeft else "C")


class View:
    """An array usable from Python (like NumPy) and from kernels.

    ``uid`` is a process-unique counter (never ``id()``, which Python reuses); ``bounds`` is the byte
    range of the memory, so Views over shared memory are recognised as the same data.
    """

    __slots__ = ("_array", "uid", "born", "dtype", "shape", "ndim", "storage", "ptr", "strides", "bounds", "sig",
                 "trait", "_escapes", "_parts", "_place", "_mirror", "__weakref__")

    def __init__(self, shape, dtype=DType.float64, space=None, layout=None, trait=None, *,
                 _array: np.ndarray | None = None, _ptr: int | None = None):
        self.trait = _trait(trait, "pk.View")
        if _array is None:
            _array = _allocate(shape, dtype, space, layout)
            if on_device(context.current().default_space.value):
                mark_constant(_array)
        self._take(_array, _ptr)

    def _take(self, array: np.ndarray, ptr: int | None = None) -> None:
        """Make ``array`` this View's memory, with the fields derived from it (``pk.View``, ``resize``); ``ptr``: its
        data pointer where the caller has it (NumPy builds ``__array_interface__`` anew at each ask)."""
        self._array = array
        self.uid = self.born = next(_uids)  # born: the uid of the View whose memory this is (a slice: its whole's)
        self.dtype = dtype_of(array.dtype)
        self.shape = array.shape
        self.ndim = array.ndim
        itemsize, strides = array.itemsize, array.strides
        if len(strides) == 1 and not strides[0] % itemsize:  # most Views: no generator
            self.strides = (strides[0] // itemsize,)
        elif any(s % itemsize for s in strides):
            raise ValueError("View strides must be whole elements")
        else:
            self.strides = tuple(s // itemsize for s in strides)
        self.storage = "right" if array.flags.c_contiguous else "stride"  # what kernels specialise on
        self.ptr = ptr = array.__array_interface__["data"][0] if ptr is None else ptr
        self.bounds = escape.span(array, ptr)
        self.sig = _sig(self)  # what a kernel specialises on
        self._escapes = None  # (escape.version, escape entries covering this View's bytes)
        self._parts = None  # (the ``_resizes`` count it was made at, {index key: subview})
        self._place = None  # ``place(self)``, once asked
        self._mirror = None  # its memory's device copy, once a GPU launch asked (kfuse/runtime/device.py)

    # --- construction helpers -------------------------------------------------------------
    @classmethod
    def from_numpy(cls, array: np.ndarray) -> "View":
        """Wrap a user's NumPy array without copying (it must have a supported dtype). The program may keep
        using the array, so its memory counts as escaped while the program holds it (see kfuse/escape.py)."""
        if not isinstance(array, np.ndarray):
            array = np.asarray(array)
        dtype_of(array.dtype)  # raises a clear error for unsupported dtypes
        adopted, ptr = escape.adopt(array)
        view = cls(None, _array=adopted, _ptr=ptr)
        host_barrier(view, True)  # pending calls on this memory (through other Views) run before it escapes
        return view

    @classmethod
    def result(cls, array: np.ndarray, dtype: DType, ptr: int) -> "View":
        """A View over new C-contiguous memory at ``ptr`` (``array``, of kfuse dtype ``dtype``) that no NumPy
        array the program holds reaches: ``_take``'s fields, set directly (array operations make one per call)."""
        view = cls.__new__(cls)
        view._array, view.uid, view.dtype, view.shape = array, next(_uids), dtype, array.shape
        view.born = view.uid
        view.ndim = ndim = len(view.shape)
        view.strides = (1,) if ndim == 1 else tuple(s // array.itemsize for s in array.strides)
        view.storage, view.ptr, view.bounds, view.trait = "right", ptr, (ptr, ptr + array.nbytes), Trait.TraitDefault
        view.sig = _sig_of(dtype, ndim, "right")
        view._escapes, view._parts, view._place, view._mirror = (escape.version, ()), None, None, None
        return view

    @classmethod
    def wrap(cls, array: np.ndarray, trait: Trait | None = None) -> "View":
        """A View over an array only kfuse holds (a new allocation, a reshape of a View's own memory); an
        unsupported dtype raises TypeError (``dtype_of``)."""
        return cls(None, trait=trait, _array=array)

    def escaped(self, write: bool = True) -> bool:
        """Whether a kernel reading (and, with ``write``, writing) this View must run at once, because the
        host can reach its bytes without a barrier right now (kfuse/escape.py)."""
        entries = _escape_entries(self)
        return bool(entries) and escape.is_escaped(entries, write)

    def subview(self, *index) -> "View":
        """A View of a slice of this one, sharing its memory and trait (writes through one are seen by the other).

        No barrier: slicing touches no data, and the tracer orders the two Views by their shared bytes. The same
        slice of a View is the same View (``_parts``): array code slices at every statement, and NumPy's slicing
        plus a View's fields cost several times NumPy's."""
        index = index if len(index) != 1 else index[0]
        key = _index_key(index)
        sub = self._kept(key) if key is not None else None
        if sub is not None:
            return sub
        sub = self._array[index]
        if not isinstance(sub, np.ndarray) or sub.ndim == 0:
            raise IndexError("subview needs slices that keep at least one dimension")
        offset = _offset(index, self._array) if sub.size else None
        sub = View._part(sub, self, None if offset is None else self.ptr + offset)
        if key is not None:
            self._keep(key, sub)
        return sub

    def repeated(self, shape: tuple) -> "View":
        """This View broadcast to ``shape`` (NumPy's rule; zero strides where it repeats), sharing its memory and
        kept as its slices are: array code broadcasts one row against a matrix at every statement."""
        key = ("repeated", shape)
        spread = self._kept(key)
        if spread is None:
            spread = self._keep(key, View._part(np.broadcast_to(self._array, shape), self, self.ptr))
        return spread

    def _kept(self, key) -> "View | None":
        """The part of this View kept under ``key`` (``_parts``), if one was made since the last resize."""
        parts = self._parts
        return parts[1].get(key) if parts is not None and parts[0] == _resizes else None

    def _keep(self, key, part: "View") -> "View":
        """Keep ``part`` under ``key``; the kept parts start anew after a resize or when full."""
        parts = self._parts
        if parts is None or parts[0] != _resizes or len(parts[1]) >= _PARTS_KEPT:
            parts = self._parts = (_resizes, {})
        parts[1][key] = part
        return part

    @classmethod
    def _part(cls, array: np.ndarray, whole: "View", ptr: int | None = None) -> "View":
        """A View over ``array``, a slice of ``whole``'s array at ``ptr`` (None: asked of NumPy): ``_take``'s
        fields, set directly (slices keep the dtype and whole-element strides; array code makes several per
        statement)."""
        view = cls.__new__(cls)
        itemsize = array.itemsize
        view._array, view.uid, view.dtype, view.shape = array, next(_uids), whole.dtype, array.shape
        view.born = whole.born
        view.ndim = ndim = array.ndim
        strides = array.strides
        view.strides = (strides[0] // itemsize,) if ndim == 1 else tuple(s // itemsize for s in strides)
        if ptr is None:
            ptr = array.__array_interface__["data"][0]
        view.ptr = lo = hi = ptr
        view.trait = whole.trait
        if array.flags.c_contiguous:
            view.storage = "right"
            hi += array.nbytes
        else:
            view.storage = "stride"
            if array.size:  # byte_bounds' rule
                for n, s in zip(view.shape, strides):
                    if s < 0:
                        lo += (n - 1) * s
                    else:
                        hi += (n - 1) * s
                hi += itemsize
        view.bounds = (lo, hi) if array.size else (lo, lo)
        view.sig = _sig(view)
        view._escapes, view._parts, view._place, view._mirror = _within(whole, *view.bounds), None, None, None
        return view

    def __copy__(self) -> "View":
        """Copying a View gives the View itself, as in PyKokkos (whose programs deep-copy objects holding Views
        and expect the copies to share them); ``view.copy()`` or ``pk.deep_copy`` copy the elements."""
        return self

    def __deepcopy__(self, memo) -> "View":
        return self

    @property
    def layout(self) -> Layout:
        """PyKokkos's ``view.layout``: LayoutRight for row-major memory, LayoutLeft for column-major (a 1-D or
        single-element View is both: LayoutRight), LayoutStride otherwise."""
        if self.storage == "right":
            return Layout.LayoutRight
        expected, step = [], 1
        for n in self.shape:
            expected.append(step)
            step *= n
        left = all(s == e for s, e, n in zip(self.strides, expected, self.shape) if n > 1)
        return Layout.LayoutLeft if left else Layout.LayoutStride

    def resize(self, dimension: int, size: int) -> None:
        """PyKokkos's ``view.resize(dim, n)``: new memory (same dtype and layout) with extent ``n`` in ``dim``,
        keeping the elements both shapes have; new ones are zero. Pending calls on this View run first: a
        delayed kernel must see it as it was when called (an empty View has no bytes to find them by, so then
        everything pending runs). Views and arrays made from the old memory keep it, as in Kokkos."""
        if not isinstance(dimension, numbers.Integral) or not 0 <= dimension < self.ndim:
            raise ValueError(f"View.resize: dimension {dimension!r} is not one of this {self.ndim}-D View's")
        if not isinstance(size, numbers.Integral) or size < 0:
            raise ValueError(f"View.resize: the new extent must be a non-negative integer, got {size!r}")
        if self.shape[dimension] == size:
            return
        if self.size:
            host_barrier(self, True)  # the readers too: they hold this View, not its old memory
        else:
            try:
                context.current().flush_all()
            except Exception as exc:
                raise public_error(exc)
        old = self._array
        shape = self.shape[:dimension] + (int(size),) + self.shape[dimension + 1:]
        new = np.zeros(shape, old.dtype, order="F" if old.flags.f_contiguous and not old.flags.c_contiguous else "C")
        kept = tuple(slice(0, min(a, b)) for a, b in zip(old.shape, shape))
        new[kept] = old[kept]
        global _resizes
        _resizes += 1  # every View's kept slices are dropped: this one may be one of them, or their whole
        self._take(new)

    # --- shape queries (no barrier: shape never depends on pending kernels) -----------------
    def extent(self, dim: int) -> int:
        return self.shape[dim]

    def rank(self) -> int:
        return self.ndim

    @property
    def size(self) -> int:
        return self._array.size

    def __len__(self) -> int:
        return self.shape[0]

    # --- host access: every path goes through the barrier ------------------------------------
    @property
    def data(self) -> np.ndarray:
        """The NumPy array behind this View (writable, so pending readers and writers run first; the memory
        is escaped while the program holds the array)."""
        host_barrier(self, True)
        return escape.export(self._array)

    @data.setter
    def data(self, values) -> None:
        """``view.data = array`` (PyKokkos programs set it to fill a View): copies the values into this View's
        memory, converted to its dtype as NumPy assignment does (floats into an int View truncate); the shape
        must be the View's. The View keeps its memory, so kernels and other Views over it see the values."""
        _copy_into(self, values if isinstance(values, (View, np.ndarray)) else np.asarray(values), "View.data =")

    def __array__(self, dtype=None, copy=None):
        shared = not copy and (dtype is None or np.dtype(dtype) == self._array.dtype)
        host_barrier(self, shared)  # the caller may write through a shared array; a copy is only a read
        if shared:
            return escape.export(self._array)
        return self._array.astype(dtype or self._array.dtype, copy=True)

    def __getitem__(self, index):
        if _sliced(index):  # `view[3, 2:5]`: a subview, as in PyKokkos
            return self.subview(index)
        host_barrier(self, False)
        item = self._array[index]
        if isinstance(item, np.ndarray):  # a row shares memory, as in PyKokkos: `A[i][j] = v` writes A
            host_barrier(self, True)
            return escape.export(item)
        return item

    def __setitem__(self, index, value) -> None:
        host_barrier(self, True, _whole(index))
        self._array[index] = np.asarray(value) if isinstance(value, View) else value

    # `view[1:-1] += x` (the slice is a View) and `view *= 2`: NumPy's in-place operation on the View's memory
    __iadd__, __isub__, __imul__, __itruediv__ = map(_in_place, (operator.iadd, operator.isub, operator.imul,
                                                                 operator.itruediv))
    __ifloordiv__, __imod__, __ipow__ = map(_in_place, (operator.ifloordiv, operator.imod, operator.ipow))
    __iand__, __ior__, __ixor__, __ilshift__, __irshift__ = map(_in_place, (
        operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift))

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        """NumPy's functions compute on Views' memory, after the barrier: ``np.exp(v, out=v)`` writes the View
        (scikit-learn does this), any other result is a NumPy array."""
        arrays = [_memory(x, False) for x in inputs]
        if out is not None:
            kwargs["out"] = tuple(_memory(o, True) for o in out)
        result = getattr(ufunc, method)(*arrays, **kwargs)
        if out is None:
            return result
        return out[0] if len(out) == 1 else out

    # `view + x`, `2 * view[1:3]` ...: NumPy arrays, computed at once (kfuse's traced array operations are pk.add...)
    __add__, __radd__ = (lambda a, b: np.add(a, b)), (lambda a, b: np.add(b, a))
    __sub__, __rsub__ = (lambda a, b: np.subtract(a, b)), (lambda a, b: np.subtract(b, a))
    __mul__, __rmul__ = (lambda a, b: np.multiply(a, b)), (lambda a, b: np.multiply(b, a))
    __truediv__, __rtruediv__ = (lambda a, b: np.true_divide(a, b)), (lambda a, b: np.true_divide(b, a))
    __floordiv__, __rfloordiv__ = (lambda a, b: np.floor_divide(a, b)), (lambda a, b: np.floor_divide(b, a))
    __mod__, __rmod__ = (lambda a, b: np.mod(a, b)), (lambda a, b: np.mod(b, a))
    __pow__, __rpow__ = (lambda a, b: np.power(a, b)), (lambda a, b: np.power(b, a))
    __neg__, __abs__ = (lambda a: np.negative(a)), (lambda a: np.absolute(a))

    def __iter__(self):
        host_barrier(self, False)
        return iter(self._array.copy())

    def fill(self, value) -> None:
        host_barrier(self, True, True)
        self._array.fill(value)

    def copy(self) -> np.ndarray:
        host_barrier(self, False)
        return self._array.copy()

    def tolist(self):
        host_barrier(self, False)
        return self._array.tolist()

    def __repr__(self) -> str:
        host_barrier(self, False)
        return f"View({np.array2string(self._array)}, dtype={self.dtype!r})"

    def __str__(self) -> str:
        host_barrier(self, False)
        return str(self._array)



def array(obj) -> View:
    """``pk.array(ndarray)``: a View sharing the array's memory (PyKokkos spelling)."""
    return View.from_numpy(np.asarray(obj))


def from_numpy(obj) -> View:
    return View.from_numpy(np.asarray(obj))


def asarray(obj, /, *, dtype=None, device=None, copy=None) -> View:
    """``pk.asarray(obj, dtype=...)`` (PyKokkos, after the array API): a View over ``np.asarray(obj, dtype)``,
    sharing the memory of an array or View of that dtype. ``device`` and ``copy`` are PyKokkos's unused ones."""
    return View.from_numpy(np.asarray(obj, dtype=None if dtype is None else dtype_of(dtype).np))


def deep_copy(dst: View, src) -> None:
    """``pk.deep_copy(dst, src)`` (Kokkos): every element of ``dst`` from the View or array ``src`` of the same
    shape (converted to dst's dtype), or set to the scalar ``src``. Pending kernels on either run first. Two
    Views whose data is on a GPU are copied there, without a round trip through the host."""
    if not isinstance(dst, View):
        raise TypeError(f"pk.deep_copy: the destination must be a pk.View, got {type(dst).__name__}")
    if isinstance(src, (numbers.Number, np.generic)):
        dst.fill(src)
        return
    _copy_into(dst, src, "pk.deep_copy:")


def _copy_into(dst: View, src, what: str) -> None:
    """Every element of ``dst`` from the same-shaped View or array ``src`` (``what`` starts the messages)."""
    if not isinstance(src, (View, np.ndarray)):
        raise TypeError(f"{what} the source must be a pk.View, a NumPy array or a scalar, "
                        f"got {type(src).__name__}")
    if tuple(src.shape) != tuple(dst.shape):
        raise ValueError(f"{what} the source's shape {tuple(src.shape)} differs from the destination's "
                         f"{tuple(dst.shape)}")
    if isinstance(src, View):
        try:
            if context.current().copy(dst, src):
                return
        except Exception as exc:
            raise public_error(exc)
        host_barrier(src, False)
        src = src._array
    host_barrier(dst, True, True)
    np.copyto(dst._array, src, casting="unsafe")


def _check_view(view, what: str) -> None:
    if not isinstance(view, View):
        raise TypeError(f"{what} expects a pk.View, got {type(view).__name__}")


def create_mirror_view(view: View, copy: bool = False) -> View:
    """``pk.create_mirror_view(v)`` (Kokkos, pykokkos-base): a host View of ``v``'s data. A View is readable on
    the host here (its barrier fetches GPU results), so this is ``v`` itself, as Kokkos gives for a View already
    host-accessible: writes through one are seen by the other, and ``copy`` has nothing to do."""
    _check_view(view, "pk.create_mirror_view")
    return view


def create_mirror(view: View, copy: bool = False) -> View:
    """``pk.create_mirror(v, copy=False)`` (Kokkos, pykokkos-base): always a new host View of ``v``'s shape,
    dtype and layout (LayoutLeft stays column-major; any other is row-major), zero-filled as Kokkos
    value-initialises it, or holding ``v``'s values with ``copy=True``."""
    _check_view(view, "pk.create_mirror")
    mirror = View(view.shape, view.dtype, layout=Layout.LayoutLeft if view.layout is Layout.LayoutLeft else None)
    if copy:
        deep_copy(mirror, view)
    return mirror


class NumpyArgument(View):
    """A View made on the fly for a NumPy array passed straight to a kernel.

    The program may change that array behind kfuse's back (no barrier sees it), so device launches copy
    it in before and out after every launch instead of keeping a device copy current.
    """

    __slots__ = ()

    def escaped(self, write: bool = True) -> bool:
        return True


class DeviceView(View):
    """A View over memory that already lives on the GPU: an object with ``__cuda_array_interface__``
    (a CuPy array, say) passed to a GPU kernel. kfuse only borrows the pointer: there is no host copy, and
    the caller reads the result through its own array (kfuse runs such calls at once, even while tracing).
    """

    __slots__ = ("owner",)

    @classmethod
    def from_cuda_array(cls, obj) -> "DeviceView":
        iface = obj.__cuda_array_interface__
        np_dtype = np.dtype(iface["typestr"])
        shape = tuple(int(s) for s in iface["shape"])
        strides = iface.get("strides") or tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * np_dtype.itemsize
                                                for i in range(len(shape)))
        if any(s % np_dtype.itemsize for s in strides):
            raise ValueError("device array strides must be whole elements")
        self = object.__new__(cls)
        self._array = self._mirror = None
        self.owner = obj
        self.uid = self.born = next(_uids)
        self.dtype = dtype_of(np_dtype)
        self.shape, self.ndim = shape, len(shape)
        self.strides = tuple(s // np_dtype.itemsize for s in strides)
        contiguous = self.strides == tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
        self.storage = "right" if contiguous else "stride"
        self.ptr = int(iface["data"][0])
        span = sum((n - 1) * s for n, s in zip(shape, strides) if n > 0) + np_dtype.itemsize if all(shape) else 0
        self.bounds = (self.ptr, self.ptr + span)
        self.trait = Trait.TraitDefault
        self.sig = _sig(self)
        self._escapes = None
        return self

    def escaped(self, write: bool = True) -> bool:
        return True  # the caller reads it through its own GPU library, past every kfuse barrier


def view_argument(value) -> View:
    """The View a kernel argument stands for: a View itself, a NumPy array (borrowed), or a GPU array."""
    if isinstance(value, View):
        return value
    if hasattr(value, "__cuda_array_interface__"):
        return DeviceView.from_cuda_array(value)
    return NumpyArgument.wrap(value if isinstance(value, np.ndarray) else np.asarray(value))
