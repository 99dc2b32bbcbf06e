"""PyKokkos's ``pk.BinSort`` with ``pk.BinOp1D``/``pk.BinOp3D`` (Kokkos's BinSort), computed on the host with NumPy.

As in Kokkos, ``create_permute_vector()`` puts each key (row) in a bin, counts the bins, takes their offsets (an
exclusive sum of the counts) and the permutation ``perm``, where entries ``perm[offset[b]:offset[b] + count[b]]``
are the key indices of bin ``b``; ``sort(values)`` reorders ``values`` along its first dimension in place as
``values[:n] = values[perm]``. The Views ``get_*`` return are the BinSort's own: a later ``create_permute_vector()``
refills them, and ``sort`` reads the permutation from its View.

Order within a bin: Kokkos fills the bins with atomic counters, so it is unspecified there (thread timing). Here
entries keep the order of their key indices (what Kokkos gives with one thread), so results are deterministic;
with ``sort_within_bins=True`` they are ordered by the BinOp's comparison (BinOp1D: ascending keys; BinOp3D, as
Kokkos's: descending (x, y, z)), ties in index order.

Every read of the keys and write of the values goes through the host barrier, so pending kernels run first.
"""
from __future__ import annotations

import numpy as np

from .errors import ArgumentError
from .types import DType
from .views import View, host_barrier


class BinOp:
    """A binning of keys (PyKokkos's base class): ``max_bins`` bins per dimension between min and max."""

    rank = 0  # dimensions of a key; each subclass sets it

    def __init__(self, keys, max_bins, min_value, max_value):
        name = type(self).__name__
        if not self.rank:
            raise ArgumentError("pk.BinOp is the base class of binnings; use pk.BinOp1D or pk.BinOp3D")
        bins, lo, hi = (_per_dimension(v, self.rank, name, what)
                        for v, what in ((max_bins, "max_bins"), (min_value, "min_value"), (max_value, "max_value")))
        if any(not isinstance(b, (int, np.integer)) or isinstance(b, bool) or b < 1 for b in bins):
            raise ArgumentError(f"pk.{name}: max_bins must be positive integers, got {max_bins!r}")
        self.keys, self.max_bins, self.min_value, self.max_value = keys, max_bins, min_value, max_value
        self._bins, self._lo, self._hi = [int(b) for b in bins], lo, hi

    def _dimension_bins(self, column: np.ndarray, d: int):
        """Bin of each key along dimension ``d``, as Kokkos computes it: ``int(mul * (key - min))`` with
        ``mul = 1.0 * max_bins / (max - min)``, min and max converted to the keys' type, the difference taken
        in it, the product in double and truncated toward zero. Also the bounds of min and max for messages."""
        lo, hi = np.asarray(self._lo[d]).astype(column.dtype), np.asarray(self._hi[d]).astype(column.dtype)
        if not hi > lo:
            raise ValueError(f"pk.{type(self).__name__}: max_value must be greater than min_value in each dimension "
                             f"(dimension {d}: min {self._lo[d]}, max {self._hi[d]} as the keys' type {column.dtype})")
        mul = 1.0 * self._bins[d] / np.float64(hi - lo)
        return np.trunc(mul * (column - lo).astype(np.float64)), (lo, hi)


class BinOp1D(BinOp):
    """``pk.BinOp1D(keys, max_bins, min_value, max_value)``: 1-D keys in ``max_bins + 1`` bins (the last holds
    ``max_value`` itself, as in Kokkos)."""

    rank = 1

    def bin_count(self) -> int:
        """How many bins there are (Kokkos's ``max_bins()``)."""
        return self._bins[0] + 1

    def _check_keys(self, keys: View) -> None:
        if keys.ndim != 1:
            raise ArgumentError(f"pk.BinSort with a BinOp1D bins 1-D keys, got a {keys.ndim}-D View")

    def _bins_of(self, keys: np.ndarray) -> np.ndarray:
        bins, (lo, hi) = self._dimension_bins(keys, 0)
        _check_range(bins, self.bin_count(), keys, lo, hi, "BinOp1D")
        return bins.astype(np.int64)

    def _order_within_bins(self, keys: np.ndarray) -> tuple:
        return (keys,)  # ascending, Kokkos's BinOp1D comparison


class BinOp3D(BinOp):
    """``pk.BinOp3D(keys, [nx, ny, nz], [min_x, min_y, min_z], [max_x, max_y, max_z])``: rows (x, y, z) of 2-D
    keys in ``nx * ny * nz`` bins, numbered ``(ix * ny + iy) * nz + iz``. Kokkos has no bin for a coordinate
    equal to its max (it would count it in a neighbouring bin or out of bounds): here that is an error."""

    rank = 3

    def bin_count(self) -> int:
        return self._bins[0] * self._bins[1] * self._bins[2]

    def _check_keys(self, keys: View) -> None:
        if keys.ndim != 2 or keys.shape[1] < 3:
            raise ArgumentError(f"pk.BinSort with a BinOp3D bins the rows (x, y, z) of 2-D keys of at least 3 "
                                f"columns, got a View of shape {keys.shape}")

    def _bins_of(self, keys: np.ndarray) -> np.ndarray:
        flat = np.zeros(keys.shape[0], dtype=np.int64)
        for d in range(3):
            bins, (lo, hi) = self._dimension_bins(keys[:, d], d)
            _check_range(bins, self._bins[d], keys[:, d], lo, hi, f"BinOp3D (dimension {d})")
            flat = flat * self._bins[d] + bins.astype(np.int64)
        return flat

    def _order_within_bins(self, keys: np.ndarray) -> tuple:
        # descending (x, y, z), Kokkos's BinOp3D comparison; lexsort takes the most significant key last
        return tuple(-np.unique(keys[:, d], return_inverse=True)[1] for d in (2, 1, 0))


def _per_dimension(value, rank: int, name: str, what: str) -> list:
    if rank == 1:
        return [value]
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != rank:
        raise ArgumentError(f"pk.{name}: {what} must be a list of {rank} values, one per dimension, got {value!r}")
    return list(value)


def _check_range(bins: np.ndarray, count: int, keys: np.ndarray, lo, hi, name: str) -> None:
    outside = ~((bins >= 0) & (bins < count))  # NaN keys fail both comparisons
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        raise ValueError(f"pk.BinSort: key {i} ({keys[i]}) lies outside the {name}'s range [{lo}, {hi}]: it falls "
                         f"in none of its {count} bins (Kokkos would count it out of bounds)")


class BinSort:
    """``pk.BinSort(keys, bin_op, sort_within_bins=False)``: see the module docstring."""

    def __init__(self, keys: View, bin_op: BinOp, sort_within_bins: bool = False):
        if not isinstance(keys, View):
            raise ArgumentError(f"pk.BinSort: keys must be a pk.View, got {type(keys).__name__}")
        if not isinstance(bin_op, BinOp):
            raise ArgumentError(f"pk.BinSort: bin_op must be a pk.BinOp1D or pk.BinOp3D, got {bin_op!r}")
        if keys.dtype is DType.bool:
            raise ArgumentError("pk.BinSort: keys must be numbers, got a View of pk.bool")
        bin_op._check_keys(keys)
        self.keys, self.bin_op, self.sort_within_bins = keys, bin_op, bool(sort_within_bins)
        self._count = View([bin_op.bin_count()], DType.int32)
        self._offsets = View([bin_op.bin_count()], DType.int32)
        self._permute = View([keys.shape[0]], DType.int32)
        self._created = False

    def create_permute_vector(self) -> None:
        """Bin the keys as they are now (pending kernels writing them run first) and fill the bin counts,
        offsets and permutation."""
        host_barrier(self.keys, False)
        keys = self.keys._array
        bins = self.bin_op._bins_of(keys)
        within = self.bin_op._order_within_bins(keys) if self.sort_within_bins else ()
        order = np.lexsort((*within, bins))  # stable: ties keep index order
        counts = np.bincount(bins, minlength=self.bin_op.bin_count())
        self._count[:] = counts
        self._offsets[:] = np.cumsum(counts) - counts
        self._permute[:] = order
        self._created = True

    def get_permute_vector(self) -> View:
        return self._permute

    def get_bin_offsets(self) -> View:
        return self._offsets

    def get_bin_count(self) -> View:
        return self._count

    def sort(self, values: View) -> None:
        """Reorder the first ``len(keys)`` entries of ``values`` along its first dimension by the permutation:
        entry ``j`` becomes the old entry ``perm[j]`` (the rest of ``values`` is left as it is, as in Kokkos)."""
        if not self._created:
            raise RuntimeError("pk.BinSort.sort: call create_permute_vector() first; the permutation is not made yet")
        if not isinstance(values, View):
            raise ArgumentError(f"pk.BinSort.sort: values must be a pk.View, got {type(values).__name__}")
        n = self._permute.shape[0]
        if values.ndim == 0 or values.shape[0] < n:
            raise ValueError(f"pk.BinSort.sort: values of shape {values.shape} have fewer than the {n} entries "
                             "along the first dimension that the keys have")
        host_barrier(self._permute, False)
        perm = self._permute._array.astype(np.intp)
        if n and not (0 <= perm.min() and perm.max() < n):
            raise ValueError(f"pk.BinSort.sort: the permute vector holds indices outside [0, {n}); was it changed?")
        host_barrier(values, True)
        values._array[:n] = values._array[perm]
