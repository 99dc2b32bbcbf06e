"""PyKokkos's host-side API beyond plain Views: pk.BinSort with pk.BinOp1D/BinOp3D, pk.DataTypeClass and View
subclasses, MDRangePolicy tile sizes and pk.Rank/pk.Iterate, TeamPolicy(n, "auto"), View traits (pk.Atomic is
refused where a kernel stores into it), the View.data setter and host subviews (view[3, 2:5]). Each is checked
against NumPy or a plain-Python reference, eager and fused where kernels are involved."""
import math

import numpy as np
import pytest

import kfuse as pk
from kfuse import context
from kfuse.errors import ArgumentError

from fusion_check import assert_same, run_eager_and_fused

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler


# --- references -----------------------------------------------------------------------------------
def reference_binning(bins: list, nbins: int, order_key=None):
    """Counts, offsets and permutation of a binning, in plain Python: stable by key index, or by
    (bin, order_key(i), i) when sorting within bins."""
    counts = [0] * nbins
    for b in bins:
        counts[b] += 1
    offsets = [sum(counts[:b]) for b in range(nbins)]
    key = (lambda i: (bins[i], i)) if order_key is None else (lambda i: (bins[i], order_key(i), i))
    return counts, offsets, sorted(range(len(bins)), key=key)


def bin_1d(key, max_bins, lo, hi):
    return math.trunc(max_bins / (hi - lo) * (key - lo))


def check_binsort(sorter, counts, offsets, perm):
    np.testing.assert_array_equal(np.asarray(sorter.get_bin_count()), counts)
    np.testing.assert_array_equal(np.asarray(sorter.get_bin_offsets()), offsets)
    np.testing.assert_array_equal(np.asarray(sorter.get_permute_vector()), perm)
    for view in (sorter.get_bin_count(), sorter.get_bin_offsets(), sorter.get_permute_vector()):
        assert isinstance(view, pk.View) and view.dtype is pk.int32


# --- BinSort --------------------------------------------------------------------------------------
def test_binsort_1d_on_pykokkos_example_values():
    """examples/pykokkos/binsort.py: keys i + 10 for i < 10, 5 bins over [10, 19] (6 bins: the max has one)."""
    keys = pk.View([10], pk.int32)
    keys[:] = np.arange(10) + 10
    sorter = pk.BinSort(keys, pk.BinOp1D(keys, 5, 10, 19))
    sorter.create_permute_vector()
    check_binsort(sorter, [2, 2, 2, 2, 1, 1], [0, 2, 4, 6, 8, 9], list(range(10)))


@pytest.mark.parametrize("dtype", [pk.int32, pk.double, pk.float32])
def test_binsort_1d_against_python(dtype):
    rng = np.random.default_rng(1)
    n, max_bins, lo, hi = 200, 7, -3, 40
    keys = pk.View([n], dtype)
    keys[:] = rng.integers(lo, hi + 1, n) if dtype is pk.int32 else rng.uniform(lo, hi, n)
    k = np.asarray(keys).tolist()
    sorter = pk.BinSort(keys, pk.BinOp1D(keys, max_bins, lo, hi))
    sorter.create_permute_vector()
    counts, offsets, perm = reference_binning([bin_1d(x, max_bins, lo, hi) for x in k], max_bins + 1)
    check_binsort(sorter, counts, offsets, perm)

    values = pk.View([n + 3, 2], pk.int64)  # longer than the keys: only the first n rows move
    before = rng.integers(0, 1000, (n + 3, 2))
    values[:] = before
    sorter.sort(values)
    np.testing.assert_array_equal(np.asarray(values), np.concatenate([before[perm], before[n:]]))
    sorter.sort(keys)
    np.testing.assert_array_equal(np.asarray(keys), np.asarray(k, dtype=keys.dtype.np)[perm])


def test_binsort_1d_int_keys_take_min_and_max_in_their_type():
    """Kokkos converts min and max to the keys' type: 2.9 is 2 for int keys."""
    keys = pk.View([4], pk.int32)
    keys[:] = [2, 3, 4, 5]
    sorter = pk.BinSort(keys, pk.BinOp1D(keys, 3, 2.9, 5.0))
    sorter.create_permute_vector()
    check_binsort(sorter, [1, 1, 1, 1], [0, 1, 2, 3], [0, 1, 2, 3])


def test_binsort_1d_sort_within_bins_ascending_ties_in_index_order():
    keys = pk.View([8], pk.double)
    k = [3.5, 1.0, 3.1, 1.0, 0.2, 3.1, 9.9, 0.1]
    keys[:] = k
    sorter = pk.BinSort(keys, pk.BinOp1D(keys, 2, 0.0, 10.0), True)
    sorter.create_permute_vector()
    counts, offsets, perm = reference_binning([bin_1d(x, 2, 0.0, 10.0) for x in k], 3, order_key=lambda i: k[i])
    check_binsort(sorter, counts, offsets, perm)
    assert perm == [7, 4, 1, 3, 2, 5, 0, 6]


def points(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform([-1.0, 0.0, 2.0], [3.0, 1.0, 5.0], (n, 3))
    x[5] = x[9]  # a tie
    return x


def bin_3d(row, nbins, lo, hi):
    b = [math.trunc(nbins[d] / (hi[d] - lo[d]) * (row[d] - lo[d])) for d in range(3)]
    return (b[0] * nbins[1] + b[1]) * nbins[2] + b[2]


@pytest.mark.parametrize("within", [False, True])
def test_binsort_3d_against_python(within):
    n, nbins, lo, hi = 120, [3, 2, 4], [-1.0, 0.0, 2.0], [3.0, 1.0, 5.0]
    x = points(n, 2)
    keys = pk.View([n, 3], pk.double)
    keys[:] = x
    sorter = pk.BinSort(keys, pk.BinOp3D(keys, nbins, lo, hi), sort_within_bins=within)
    sorter.create_permute_vector()
    rows = x.tolist()
    descending = (lambda i: tuple(-c for c in rows[i])) if within else None  # Kokkos's BinOp3D comparison
    counts, offsets, perm = reference_binning([bin_3d(r, nbins, lo, hi) for r in rows], 24, order_key=descending)
    check_binsort(sorter, counts, offsets, perm)
    sorter.sort(keys)
    np.testing.assert_array_equal(np.asarray(keys), x[perm])


@pk.workunit
def make_keys(i, keys: pk.View1D[pk.int32], n: int):
    keys[i] = (7 * i) % n


@pk.workunit
def copy_values(i, dst: pk.View1D[pk.double], src: pk.View1D[pk.double]):
    dst[i] = src[i]


@pk.workunit
def use_permutation(i, out: pk.View1D[pk.double], perm: pk.View1D[pk.int32], values: pk.View1D[pk.double]):
    out[i] = values[i] * 1000.0 + perm[i]


def binsort_program():
    n = 23
    keys, values = pk.View([n], pk.int32), pk.View([n], pk.double)
    before, after = pk.View([n], pk.double), pk.View([n], pk.double)
    values[:] = np.arange(n) * 0.5
    pk.parallel_for(n, make_keys, keys=keys, n=n)  # pending under fusion: the binning must run it first
    pk.parallel_for(n, copy_values, dst=before, src=values)  # reads values before the sort
    sorter = pk.BinSort(keys, pk.BinOp1D(keys, 4, 0, n - 1))
    sorter.create_permute_vector()
    sorter.sort(values)
    pk.parallel_for(n, use_permutation, out=after, perm=sorter.get_permute_vector(), values=values)
    return (np.array(keys), np.array(before), np.array(values), np.array(after),
            np.array(sorter.get_bin_count()))


def test_binsort_orders_with_pending_kernels_eager_and_fused():
    eager, fused, _, _ = run_eager_and_fused(binsort_program)
    assert_same(eager, fused)
    n = 23
    keys = (7 * np.arange(n)) % n
    bins = [bin_1d(k, 4, 0, n - 1) for k in keys.tolist()]
    counts, _, perm = reference_binning(bins, 5)
    np.testing.assert_array_equal(eager[0], keys)
    np.testing.assert_array_equal(eager[1], np.arange(n) * 0.5)
    np.testing.assert_array_equal(eager[2], (np.arange(n) * 0.5)[perm])
    np.testing.assert_array_equal(eager[3], (np.arange(n) * 0.5)[perm] * 1000.0 + perm)
    np.testing.assert_array_equal(eager[4], counts)


def test_binsort_create_again_refills_the_same_views():
    keys = pk.View([3], pk.double)
    keys[:] = [0.0, 1.0, 2.0]
    sorter = pk.BinSort(keys, pk.BinOp1D(keys, 2, 0.0, 2.0))
    perm = sorter.get_permute_vector()
    sorter.create_permute_vector()
    np.testing.assert_array_equal(np.asarray(perm), [0, 1, 2])
    keys[:] = [2.0, 1.0, 0.0]
    sorter.create_permute_vector()
    np.testing.assert_array_equal(np.asarray(perm), [2, 1, 0])


def test_binsort_errors():
    keys = pk.View([4], pk.double)
    keys[:] = [0.0, 1.0, 2.0, 5.0]
    sorter = pk.BinSort(keys, pk.BinOp1D(keys, 2, 0.0, 2.0))
    with pytest.raises(ValueError, match=r"key 3 \(5.0\) lies outside the BinOp1D's range \[0.0, 2.0\]"):
        sorter.create_permute_vector()
    with pytest.raises(RuntimeError, match="call create_permute_vector"):
        sorter.sort(keys)
    keys[:] = [0.0, 1.0, 2.0, np.nan]
    with pytest.raises(ValueError, match="key 3 \\(nan\\)"):
        sorter.create_permute_vector()
    keys[:] = [0.0, 1.0, 2.0, 2.0]
    sorter.create_permute_vector()
    with pytest.raises(ValueError, match="fewer than the 4 entries"):
        sorter.sort(pk.View([3], pk.double))
    with pytest.raises(ArgumentError, match="values must be a pk.View"):
        sorter.sort(np.zeros(4))
    with pytest.raises(ValueError, match="max_value must be greater than min_value"):
        pk.BinSort(keys, pk.BinOp1D(keys, 2, 1.0, 1.0)).create_permute_vector()
    with pytest.raises(ArgumentError, match="max_bins must be positive integers"):
        pk.BinOp1D(keys, 0, 0.0, 1.0)
    with pytest.raises(ArgumentError, match="max_bins must be a list of 3 values"):
        pk.BinOp3D(keys, 4, [0.0] * 3, [1.0] * 3)
    with pytest.raises(ArgumentError, match="BinOp3D bins the rows"):
        pk.BinSort(keys, pk.BinOp3D(keys, [1, 1, 1], [0.0] * 3, [1.0] * 3))
    with pytest.raises(ArgumentError, match="BinOp1D bins 1-D keys"):
        pk.BinSort(pk.View([4, 3]), pk.BinOp1D(keys, 1, 0.0, 1.0))
    with pytest.raises(ArgumentError, match="use pk.BinOp1D or pk.BinOp3D"):
        pk.BinOp(keys, 1, 0.0, 1.0)
    with pytest.raises(ArgumentError, match="keys must be numbers"):
        pk.BinSort(pk.View([4], pk.bool), pk.BinOp1D(keys, 1, 0.0, 1.0))
    with pytest.raises(ArgumentError, match="keys must be a pk.View"):
        pk.BinSort(np.zeros(4), pk.BinOp1D(keys, 1, 0.0, 1.0))
    x = pk.View([2, 3])
    x[:] = [[0.5, 0.5, 0.5], [0.5, 0.5, 1.0]]  # z equal to its max has no bin in a BinOp3D
    with pytest.raises(ValueError, match=r"key 1 \(1.0\) lies outside the BinOp3D \(dimension 2\)'s range"):
        pk.BinSort(x, pk.BinOp3D(x, [2, 2, 2], [0.0] * 3, [1.0] * 3)).create_permute_vector()


# --- DataTypeClass and View subclasses ------------------------------------------------------------
class MyView(pk.View):
    """examples/pykokkos/binsort.py's View subclass."""

    def __init__(self, x: int, data_type: pk.DataTypeClass = pk.int32):
        super().__init__([x], data_type)


@pk.workunit
def iota(i, v: pk.View1D[pk.int32]):
    v[i] = 3 * i


def test_view_subclass_with_a_datatypeclass_annotation():
    assert isinstance(pk.int32, pk.DataTypeClass) and isinstance(pk.DataType.double, pk.DataTypeClass)

    def program():
        v = MyView(6)
        pk.parallel_for(6, iota, v=v)
        assert isinstance(v, MyView) and v.dtype is pk.int32 and v.shape == (6,)
        return np.array(v), np.array(MyView(2, data_type=pk.double))

    eager, fused, _, _ = run_eager_and_fused(program)
    assert_same(eager, fused)
    assert_same((np.arange(6, dtype=np.int32) * 3, np.zeros(2)), eager)


# --- MDRangePolicy tiles and iteration order ------------------------------------------------------
@pk.workunit
def fill_ij(i, j, a: pk.View2D[pk.double]):
    a[i][j] = i * 100.0 + j


@pk.workunit
def transpose(i, j, a: pk.View2D[pk.double], b: pk.View2D[pk.double]):
    b[j][i] += a[i][j]


def tiled_program():
    n = 9
    a, b = pk.View([n, n], pk.double), pk.View([n, n], pk.double)
    pk.parallel_for(pk.MDRangePolicy([0, 0], [n, n], [4, 4]), fill_ij, a=a)
    pk.parallel_for(pk.MDRangePolicy([0, 0], [n, n], [2, 3], rank=pk.Rank(2, pk.Iterate.Left, pk.Iterate.Right)),
                    transpose, a=a, b=b)
    pk.parallel_for(pk.MDRangePolicy([0, 0], [n, n], tiling=[0, 0], iter_outer=pk.Iterate.Right), transpose, a=a, b=b)
    return np.array(a), np.array(b)


def test_mdrange_tiles_and_iteration_order_keep_results():
    eager, fused, _, _ = run_eager_and_fused(tiled_program)
    assert_same(eager, fused)
    a = np.add.outer(np.arange(9) * 100.0, np.arange(9.0))
    assert_same((a, 2 * a.T), eager)


def test_mdrange_tiles_are_kept_and_do_not_split_fusion():
    p = pk.MDRangePolicy([0, 0, 0], [2, 3, 4], [1, 1, 2], rank=pk.Rank(3, pk.Iterate.Left, pk.Iterate.Right))
    assert p.tiling == (1, 1, 2) and (p.iter_outer, p.iter_inner) == (pk.Iterate.Left, pk.Iterate.Right)
    assert p == pk.MDRangePolicy([0, 0, 0], [2, 3, 4]) and hash(p) == hash(pk.MDRangePolicy([0, 0, 0], [2, 3, 4]))
    pk.enable_fusion()
    tiled_program()  # reads a (fill_ij runs), then b: the two transposes, tiled differently, are one kernel
    assert list(context.current().records)[-1].fused_names == ["transpose__transpose"], pk.explain()


@pytest.mark.parametrize("args, kwargs, error, message", [
    (([0, 0], [4, 4], [2]), {}, TypeError, "tile sizes must be a list of 2 integers"),
    (([0, 0], [4, 4], [2, -1]), {}, ValueError, "tile sizes must be non-negative"),
    (([0, 0], [4, 4], "22"), {}, TypeError, "tile sizes must be a list of 2 integers"),
    (([0, 0], [4, 4], [2, 2]), {"tiling": [2, 2]}, TypeError, "tile sizes given twice"),
    (([0, 0], [4, 4]), {"rank": pk.Rank(3)}, ValueError, r"pk.Rank\(3, ...\) does not match the 2 dimensions"),
    (([0, 0], [4, 4]), {"rank": 2}, TypeError, "rank must be a pk.Rank"),
    (([0, 0], [4, 4]), {"iter_inner": "Left"}, TypeError, "iteration orders are pk.Iterate"),
])
def test_mdrange_tile_and_rank_errors(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        pk.MDRangePolicy(*args, **kwargs)


def test_rank_checks_its_orders():
    with pytest.raises(TypeError, match="pk.Rank: iteration orders are pk.Iterate"):
        pk.Rank(2, "Left", pk.Iterate.Right)


# --- TeamPolicy(n, "auto") ------------------------------------------------------------------------
@pk.workunit
def team_offset_rows(team: pk.TeamMember, a: pk.View2D[pk.double], out: pk.View2D[pk.double]):
    r: int = team.league_rank()

    def offset(j: int):
        out[r][j] = a[r][j] + 100.0 * r

    pk.parallel_for(pk.TeamThreadRange(team, a.extent(1)), offset)


def test_team_policy_auto_string():
    assert pk.TeamPolicy(5, "auto").team_size == pk.AUTO == pk.TeamPolicy(5, "AUTO").team_size
    assert pk.TeamPolicy(5, "auto") == pk.TeamPolicy(5, pk.AUTO)
    with pytest.raises(TypeError, match=r'team_size \(or pk.AUTO, "auto"\) must be an integer, got \'many\''):
        pk.TeamPolicy(5, "many")

    def program():
        a = pk.View([5, 8], pk.double)
        a[:] = np.arange(40.0).reshape(5, 8)
        out = pk.View([5, 8], pk.double)
        pk.parallel_for(pk.TeamPolicy(5, "auto"), team_offset_rows, a=a, out=out)
        return np.array(out)

    eager, fused, _, _ = run_eager_and_fused(program)
    assert_same(eager, fused)
    assert_same(np.arange(40.0).reshape(5, 8) + 100.0 * np.arange(5)[:, None], eager)


# --- traits ---------------------------------------------------------------------------------------
def test_trait_names_and_the_views_trait():
    assert (pk.Atomic, pk.Unmanaged, pk.RandomAccess, pk.Restrict, pk.TraitDefault) == (
        pk.Trait.Atomic, pk.Trait.Unmanaged, pk.Trait.RandomAccess, pk.Trait.Restrict, pk.Trait.TraitDefault)
    v = pk.View([3, 2], pk.int32, pk.HostSpace, pk.LayoutLeft, pk.RandomAccess)  # PyKokkos's positional order
    assert v.trait is pk.RandomAccess and np.asarray(v).flags.f_contiguous and v.dtype is pk.int32
    assert pk.View([2]).trait is pk.TraitDefault
    assert pk.View([4], trait=pk.Atomic)[1:3].trait is pk.Atomic  # a subview keeps its parent's trait
    assert pk.ViewTypeInfo(trait=pk.Unmanaged).trait is pk.Unmanaged
    with pytest.raises(TypeError, match="pk.View: unknown trait 'Atomic'; use pk.Atomic"):
        pk.View([2], trait="Atomic")
    with pytest.raises(TypeError, match="pk.ViewTypeInfo: unknown trait"):
        pk.ViewTypeInfo(trait=1)


@pk.workunit
def plain_count(i, count: pk.View1D[pk.int32]):
    count[0] = count[0] + 1


@pk.workunit
def augmented_count(i, count: pk.View1D[pk.int32]):
    count[0] += 1


@pk.function
def bump(count: pk.View1D[pk.int32]):
    pk.atomic_add(count, [0], 1)


@pk.workunit
def helper_count(i, count: pk.View1D[pk.int32]):
    bump(count)


@pk.workunit
def atomic_count(i, count: pk.View1D[pk.int32], data: pk.View1D[pk.int32]):
    if data[i] % 3 == 0:
        pk.atomic_add(count, [0], 1)


@pk.workunit
def read_count(i, count: pk.View1D[pk.int32], out: pk.View1D[pk.int32]):
    out[i] = count[0] + i


@pytest.mark.parametrize("fusion", [False, True])
@pytest.mark.parametrize("kernel", [plain_count, augmented_count, helper_count])
def test_stores_into_an_atomic_view_are_atomic_updates(kernel, fusion):
    """tests/test_atomic_trait.py checks the same compiled with threads; here, the forms and subviews."""
    if fusion:
        pk.enable_fusion()
    count = pk.View([1], pk.int32, trait=pk.Atomic)
    pk.parallel_for(8, kernel, count=count)
    pk.parallel_for(8, kernel, count=count[0:1])  # a subview of an Atomic View is Atomic
    assert count[0] == 16


def test_atomic_view_updated_with_atomics_and_read():
    def program():
        data = pk.View([30], pk.int32)
        data[:] = np.arange(30)
        count = pk.View([1], pk.int32, trait=pk.Trait.Atomic)
        out = pk.View([4], pk.int32)
        pk.parallel_for(30, atomic_count, count=count, data=data)
        pk.parallel_for(4, read_count, count=count, out=out)
        return np.array(count), np.array(out)

    eager, fused, _, _ = run_eager_and_fused(program)
    assert_same(eager, fused)
    assert_same((np.array([10], dtype=np.int32), np.arange(10, 14, dtype=np.int32)), eager)


@pk.workload
class Primes:
    """examples/kokkos/05_simple_atomics.py's pattern: a counter field with the Atomic trait."""

    def __init__(self):
        self.count: pk.View1D[pk.int32] = pk.View([1], pk.int32, trait=pk.Trait.Atomic)

    @pk.main
    def run(self):
        pk.parallel_for(4, self.found)

    @pk.workunit
    def found(self, i: int):
        self.count[0] = self.count[0] + 1


def test_atomic_field_of_a_workload_counts_every_update():
    w = Primes()
    pk.execute(pk.ExecutionSpace.OpenMP, w)
    assert w.count[0] == 4


@pk.workunit
def scale_into(i, out: pk.View1D[pk.double], a: pk.View1D[pk.double]):
    out[i] = 2.0 * a[i]


@pytest.mark.parametrize("trait", [pk.Unmanaged, pk.RandomAccess, pk.Restrict, pk.TraitDefault])
def test_other_traits_change_nothing(trait):
    def program():
        a = pk.View([6], pk.double, trait=trait)
        a[:] = np.arange(6.0)
        out = pk.View([6], pk.double, pk.HostSpace, pk.LayoutRight, trait)
        pk.parallel_for(6, scale_into, out=out, a=a)
        return np.array(out)

    eager, fused, _, _ = run_eager_and_fused(program)
    assert_same(eager, fused)
    assert_same(np.arange(6.0) * 2.0, eager)


# --- View.data = ... ------------------------------------------------------------------------------
@pk.workunit
def add_one(i, v: pk.View1D[pk.int32]):
    v[i] = v[i] + 1


@pk.workunit
def copy_int(i, dst: pk.View1D[pk.int32], src: pk.View1D[pk.int32]):
    dst[i] = src[i]


def data_setter_program():
    v, old = pk.View([5], pk.int32), pk.View([5], pk.int32)
    pk.parallel_for(5, add_one, v=v)  # pending: it runs before the host replaces the values
    pk.parallel_for(5, copy_int, dst=old, src=v)  # reads v before the assignment
    v.data = np.array([0.5, 1.9, 2.1, -3.7, 40.0])  # float values into an int32 View: converted as NumPy does
    first = np.array(v)
    pk.parallel_for(5, add_one, v=v)
    v.data += 10  # PyKokkos programs do this (ExaMiniMD: s.id.data += to_add)
    return np.array(old), first, np.array(v)


def test_data_setter_copies_into_the_views_memory():
    eager, fused, _, _ = run_eager_and_fused(data_setter_program)
    assert_same(eager, fused)
    converted = np.array([0.5, 1.9, 2.1, -3.7, 40.0]).astype(np.int32)
    assert_same((np.ones(5, dtype=np.int32), converted, converted + 11), eager)


def test_data_setter_keeps_the_memory_and_checks_the_shape():
    v = pk.View([2, 3], pk.int64)
    alias = v[0:1, :]
    v.data = [[1, 2, 3], [4, 5, 6]]
    np.testing.assert_array_equal(np.asarray(alias), [[1, 2, 3]])
    with pytest.raises(ValueError, match=r"View.data = the source's shape \(3,\) differs from the destination's "
                                         r"\(2, 3\)"):
        v.data = np.zeros(3)


# --- View.resize ----------------------------------------------------------------------------------
@pk.workunit
def fill_extent(i, v: pk.View1D[pk.int32]):
    for j in range(v.extent(0)):
        v[j] = 7


def resize_program():
    v, out = pk.View([4], pk.int32), pk.View([4], pk.int32)
    pk.parallel_for(4, add_one, v=v)  # pending writer: its result is kept
    pk.parallel_for(4, copy_int, dst=out, src=v)  # pending reader: it reads the View as it was
    v.resize(0, 6)
    pk.parallel_for(6, add_one, v=v)
    empty = pk.View([0], pk.int32)
    pk.parallel_for(1, fill_extent, v=empty)  # runs over no elements: it must run before the View grows
    empty.resize(0, 3)
    m = pk.View([2, 3], pk.double, layout=pk.LayoutLeft)
    m[:] = [[1, 2, 3], [4, 5, 6]]
    m.resize(1, 2)
    m.resize(0, 3)
    pk.fence()  # would run a kernel still pending on the empty View's old shape
    return np.array(v), np.array(out), np.array(empty), np.array(m), np.asarray(m).flags.f_contiguous


def test_resize_keeps_common_elements_eager_and_fused():
    eager, fused, _, _ = run_eager_and_fused(resize_program)
    assert_same(eager, fused)
    assert_same((np.array([2, 2, 2, 2, 1, 1], dtype=np.int32), np.ones(4, dtype=np.int32),
                 np.zeros(3, dtype=np.int32), np.array([[1.0, 2.0], [4.0, 5.0], [0.0, 0.0]]), True), eager)


def test_resize_gives_new_memory_and_checks_its_arguments():
    v = pk.View([4], pk.int32)
    old = v[0:2]  # as in Kokkos, a View of the old memory keeps it
    v.resize(0, 5)
    old[0] = 9
    assert v[0] == 0 and v.shape == (5,) and v.size == 5 and len(v) == 5
    with pytest.raises(ValueError, match="dimension 1 is not one of this 1-D View's"):
        v.resize(1, 3)
    with pytest.raises(ValueError, match="non-negative integer, got -1"):
        v.resize(0, -1)


# --- host subviews --------------------------------------------------------------------------------
def test_host_slice_is_a_view_sharing_memory():
    v = pk.View([10, 10], pk.int32)
    s = v[3, 2:5]
    assert isinstance(s, pk.View) and s.shape == (3,) and s.dtype is pk.int32
    s[1] = 7
    assert v[3][3] == 7
    v[3, 4] = 9
    assert s[2] == 9
    assert isinstance(s[0:2], pk.View) and s[0:2][1] == 7
    assert isinstance(v[3], np.ndarray)  # a row by an integer is NumPy memory, as in PyKokkos
    assert not isinstance(v[[1, 2]], pk.View)  # fancy indexing copies: not a View
    assert isinstance(v[..., 1], pk.View) and v[..., 1].strides == (10,)


@pk.workunit
def diag_one(i, view: pk.View2D[pk.int32]):
    view[i][i] = 1


@pk.workunit
def add_index(i, a: pk.View1D[pk.int32]):
    a[i] = a[i] + 10 * (i + 1)


def subview_program():
    view = pk.View([6, 6], pk.int32)
    row = view[3, 2:5]
    col = view[::-1, 0]
    pk.parallel_for(6, diag_one, view=view)
    pk.parallel_for(3, add_index, a=row)  # reads the diagonal's 1 at (3, 3)
    pk.parallel_for(6, add_index, a=col)
    first = row.copy()  # the host reads the subview: pending kernels on its bytes run first
    pk.parallel_for(6, diag_one, view=view)
    return first, np.array(view)


def test_kernels_on_host_subviews_eager_and_fused():
    eager, fused, _, _ = run_eager_and_fused(subview_program)
    assert_same(eager, fused)
    view = np.zeros((6, 6), dtype=np.int32)
    view[np.arange(6), np.arange(6)] = 1
    view[3, 2:5] += 10 * np.arange(1, 4, dtype=np.int32)
    view[::-1, 0] += 10 * np.arange(1, 7, dtype=np.int32)
    first = view[3, 2:5].copy()
    view[np.arange(6), np.arange(6)] = 1
    assert_same((first, view), eager)


def in_place_program():
    v, out = pk.View([6], pk.int32), pk.View([6], pk.int32)
    pk.parallel_for(6, add_one, v=v)  # pending: runs before the host updates v
    pk.parallel_for(6, copy_int, dst=out, src=v)  # pending reader: sees v before the update
    v[2:] += 10  # the slice is a View; += works on its memory as NumPy's does
    v *= 3
    v[::2] -= v[1::2]
    return np.array(out), np.array(v)


def test_in_place_operators_on_views_and_slices_eager_and_fused():
    eager, fused, _, _ = run_eager_and_fused(in_place_program)
    assert_same(eager, fused)
    v = np.ones(6, dtype=np.int32)
    v[2:] += 10
    v *= 3
    v[::2] -= v[1::2]
    assert_same((np.ones(6, dtype=np.int32), v), eager)
    w = pk.View([2], pk.int32)
    with pytest.raises(TypeError, match="Cannot cast ufunc 'add' output"):  # NumPy's casting rule
        w[0:] += 1.5


@pk.workload(subview=pk.ViewTypeInfo(trait=pk.Unmanaged))
class SubviewWorkload:
    """examples/pykokkos/subviews.py: a host subview kept as a field, next to its parent."""

    def __init__(self):
        self.view: pk.View2D[pk.int32] = pk.View([10, 10], pk.int32)
        self.subview: pk.View1D[pk.int32] = self.view[3, 2:5]

    @pk.main
    def run(self):
        pk.parallel_for(10, self.work)
        pk.parallel_for(3, self.shift)

    @pk.workunit
    def work(self, i: int):
        self.view[i][i] = 1

    @pk.workunit
    def shift(self, i: int):
        self.subview[i] = self.subview[i] + 5


def test_subview_field_of_a_workload_eager_and_fused():
    def program():
        w = SubviewWorkload()
        pk.execute(pk.ExecutionSpace.Default, w)
        return np.array(w.view), np.array(w.subview)

    eager, fused, _, _ = run_eager_and_fused(program)
    assert_same(eager, fused)
    view = np.eye(10, dtype=np.int32)
    view[3, 2:5] += 5
    assert_same((view, view[3, 2:5]), eager)


# --- with the compiler ----------------------------------------------------------------------------
@pytest.mark.backend("kokkos")
def test_compiled_subviews_tiles_and_atomic_view():
    eager, fused, _, _ = run_eager_and_fused(subview_program)
    assert_same(eager, fused)
    eager, fused, _, _ = run_eager_and_fused(tiled_program)
    assert_same(eager, fused)
    a = np.add.outer(np.arange(9) * 100.0, np.arange(9.0))
    assert_same((a, 2 * a.T), eager)


@pytest.mark.backend("kokkos")
def test_compiled_atomic_view_counts():
    data = pk.View([3000], pk.int32)
    data[:] = np.arange(3000)
    count = pk.View([1], pk.int32, trait=pk.Atomic)
    pk.parallel_for(3000, atomic_count, count=count, data=data)
    assert count[0] == 1000
    pk.parallel_for(3000, plain_count, count=count)
    assert count[0] == 4000


def test_copying_an_object_shares_its_views_as_in_pykokkos():
    import copy

    class Holder:
        def __init__(self):
            self.x = pk.View([2, 3], pk.double)

    original = Holder()
    clone = copy.deepcopy(original)
    assert clone.x is original.x and copy.copy(original.x) is original.x
    clone.x.resize(0, 4)  # ExaMiniMD grows a deep-copied System's Views and reads them through the original
    assert original.x.shape == (4, 3)


@pk.workunit
def plus_one(i, a: pk.View1D[pk.double]):
    a[i] = a[i] + 1.0


@pytest.mark.parametrize("fusion", [False, True])
def test_numpy_functions_and_arithmetic_on_views_see_pending_kernels(fusion):
    """scikit-learn calls np.exp(X, out=X) on what PyKokkos programs hand it; host arithmetic gives arrays."""
    if fusion:
        pk.enable_fusion()
    v = pk.View([4], pk.double)
    pk.parallel_for(4, plus_one, a=v)  # pending under fusion: the NumPy calls below must see it
    doubled = 2 * v + v[0:4]
    np.exp(v, out=v)
    assert isinstance(doubled, np.ndarray) and doubled.tolist() == [3.0] * 4
    np.testing.assert_array_equal(np.asarray(v), np.full(4, np.e))
    pk.parallel_for(4, plus_one, a=v)
    np.testing.assert_array_equal(-v, -(np.e + 1.0) * np.ones(4))


@pk.workunit
def times_two(i, a: pk.View1D[pk.double]):
    a[i] = 2.0 * a[i]


def test_view_subclass_arguments_are_traced_and_fused_like_views():
    """ExaMiniMD's Views are subclasses (class t_x(pk.View)); they are kfuse's memory, not the caller's arrays."""
    pk.enable_fusion()
    v = MyView(6, pk.double)
    v.fill(1.5)
    pk.parallel_for(6, plus_one, a=v)
    pk.parallel_for(6, times_two, a=v)
    assert pk.stats()["escaped_calls"] == 0 and pk.stats()["kernels_launched"] == 0
    np.testing.assert_array_equal(np.asarray(v), np.full(6, 5.0))
    assert list(context.current().records)[-1].fused_names == ["plus_one__times_two"]
