"""Data types and the annotation objects of the DSL (``pk.double``, ``pk.View2D[pk.int32]``, ``pk.Acc``).

A kernel's scalar types are named by :class:`DType` values; the code generator maps them to C++.
"""
from __future__ import annotations

import enum
import math

import numpy as np


class DType(enum.Enum):
    """Element types that kernels and Views support, with their NumPy and C++ spellings."""

    int8 = ("int8", "int8_t")
    int16 = ("int16", "int16_t")
    int32 = ("int32", "int32_t")
    int64 = ("int64", "int64_t")
    uint8 = ("uint8", "uint8_t")
    uint16 = ("uint16", "uint16_t")
    uint32 = ("uint32", "uint32_t")
    uint64 = ("uint64", "uint64_t")
    float32 = ("float32", "float")
    float64 = ("float64", "double")
    bool = ("bool", "bool")

    __hash__ = object.__hash__  # members are singletons compared by identity; Enum's hash of the name is slow

    @property
    def np(self) -> np.dtype:
        return _NP[self]  # asked on every kernel call: made once

    @property
    def cpp(self) -> str:
        return self.value[1]

    @property
    def is_float(self) -> bool:
        return self in (DType.float32, DType.float64)

    @property
    def is_int(self) -> bool:
        return not self.is_float and self is not DType.bool

    @property
    def is_signed(self) -> bool:
        return self.value[0].startswith("int") or self.is_float

    @property
    def bits(self) -> int:
        return 8 if self is DType.bool else self.np.itemsize * 8

    def __repr__(self) -> str:
        return f"pk.{self.name}"


_NP = {d: np.dtype(d.value[0]) for d in DType}
_BY_NP = {d.np: d for d in DType}


def dtype_of(obj) -> DType:
    """The DType for a NumPy dtype, a DType, a Python type (int/float/bool) or a NumPy scalar type."""
    found = _BY_NP.get(obj) if isinstance(obj, np.dtype) else None
    if found is not None:
        return found
    if isinstance(obj, DType):
        return obj
    if obj is float:
        return DType.float64
    if obj is int:
        return DType.int64
    if obj is bool:
        return DType.bool
    try:
        return _BY_NP[np.dtype(obj)]
    except (TypeError, KeyError):
        raise TypeError(f"unsupported element type {obj!r}; use one of "
                        + ", ".join(f"pk.{d.name}" for d in DType)) from None


def promote(a: DType, b: DType) -> DType:
    """Result type of arithmetic on a and b, as C++ would compute it for the spellings we emit."""
    if a.is_float or b.is_float:
        if DType.float64 in (a, b) or not (a.is_float and b.is_float) and DType.float32 not in (a, b):
            return DType.float64
        return DType.float32
    if a is DType.bool and b is DType.bool:
        return DType.int64
    ints = [d for d in (a, b) if d is not DType.bool]
    widest = max(ints, key=lambda d: (d.bits, not d.is_signed))
    return DType.int64 if widest.bits < 64 else widest


def element_dtype(obj) -> DType:
    """A View's element type, as ``dtype_of`` gives it except that Python's ``int`` is ``pk.int32`` (a C++ int),
    as PyKokkos makes ``pk.View(shape, int)`` and reads ``pk.View1D[int]``. Scalars keep ``int`` as int64."""
    return DType.int32 if obj is int else dtype_of(obj)


class _ViewAnnotation:
    """``pk.View1D[pk.double]``: a View of fixed rank, optionally a fixed dtype."""

    def __init__(self, rank: int | None, dtype: DType | None = None):
        self.rank = rank
        self.dtype = dtype

    def __getitem__(self, dtype) -> "_ViewAnnotation":
        return _ViewAnnotation(self.rank, element_dtype(dtype))

    def __repr__(self) -> str:
        return f"View{self.rank or ''}D[{self.dtype!r}]"


class _AccAnnotation:
    """``pk.Acc[pk.double]``: the accumulator of a reduction or scan."""

    def __init__(self, dtype: DType | None = None):
        self.dtype = dtype

    def __getitem__(self, dtype) -> "_AccAnnotation":
        return _AccAnnotation(dtype_of(dtype))


class _ScratchAnnotation:
    """``pk.ScratchView2D[pk.double]``: a View in a team's scratch memory, declared at the top of a TeamPolicy
    workunit as ``s: pk.ScratchView1D[float] = pk.ScratchView1D(team_member.team_scratch(0), n)``."""

    def __init__(self, rank: int, dtype: DType | None = None):
        self.rank = rank
        self.dtype = dtype

    def __getitem__(self, dtype) -> "_ScratchAnnotation":
        return _ScratchAnnotation(self.rank, dtype_of(dtype))

    def shmem_size(self, *extents) -> int:
        """Kokkos' ``View::shmem_size(n0, ...)``: the scratch bytes one such View takes, an element more than
        its elements for alignment (what to give ``set_scratch_size``)."""
        if self.dtype is None:
            raise TypeError(f"give the element type: pk.ScratchView{self.rank}D[pk.double].shmem_size(...)")
        if len(extents) != self.rank or any(not isinstance(n, (int, np.integer)) or n < 0 for n in extents):
            raise TypeError(f"{self!r}.shmem_size takes {self.rank} non-negative integer extent(s), got {extents}")
        return (math.prod(map(int, extents)) + 1) * self.dtype.np.itemsize  # (exact: Python ints)

    def __call__(self, space, *extents):
        """The Debug space: a View allocated from ``space`` (``team_member.team_scratch(level)``)."""
        return space.view(self, extents)

    def __repr__(self) -> str:
        return f"ScratchView{self.rank}D[{self.dtype!r}]"


View1D = _ViewAnnotation(1)
View2D = _ViewAnnotation(2)
View3D = _ViewAnnotation(3)
Acc = _AccAnnotation()
ScratchView1D, ScratchView2D, ScratchView3D, ScratchView4D, ScratchView5D, ScratchView6D, ScratchView7D, \
    ScratchView8D = (_ScratchAnnotation(rank) for rank in range(1, 9))


class TeamMember:
    """Annotation of a TeamPolicy workunit's first parameter; at run time, the team handle."""


# PyKokkos spellings. ``pk.float`` is 32-bit and ``pk.double`` 64-bit, as in PyKokkos.
int8, int16, int32, int64 = DType.int8, DType.int16, DType.int32, DType.int64
uint8, uint16, uint32, uint64 = DType.uint8, DType.uint16, DType.uint32, DType.uint64
float32, float64 = DType.float32, DType.float64
double = DType.float64
real = DType.float64
bool_ = DType.bool


DataTypeClass = DType
"""PyKokkos's ``pk.DataTypeClass``, the base of its dtype classes (``data_type: pk.DataTypeClass = pk.int32``): here
the type of kfuse's dtypes, so ``isinstance(pk.int32, pk.DataTypeClass)`` holds."""


class DataType:
    """PyKokkos's ``pk.DataType.<name>``: each is the DType itself, so ``view.dtype is pk.DataType.int32`` holds
    and either spelling works wherever a dtype is taken."""

    int8, int16, int32, int64 = int8, int16, int32, int64
    uint8, uint16, uint32, uint64 = uint8, uint16, uint32, uint64
    float = float32
    double = float64
    float32, float64 = float32, float64
    real = real
    bool = bool_
