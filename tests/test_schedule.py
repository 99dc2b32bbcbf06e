"""Fusion decisions as pure functions: which calls form which groups, and why the others split.

The planner takes a partition's graph (kfuse/fuser/graph.py: kernels, policies, storages and their
overlaps, scalar offsets, Future producers; no Views) and returns groups with a structured ``Reason``.
The first half writes graphs by hand; the second builds them from real workunit calls on the null backend,
which type-checks kernels and records launches but compiles and runs nothing (these tests need no C++
compiler and take milliseconds).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import kfuse as pk
from kfuse import context
from kfuse.calls import prepare
from kfuse.fuser import graph as graphs
from kfuse.fuser.graph import Graph, Node
from kfuse.fuser.planner import Split, plan
from kfuse.fuser.safety import KernelPattern, ParamPattern


# --- hand-written graphs ---------------------------------------------------------------------------------------
def at_thread(offset=0, dim=0) -> tuple:
    """One access indexing dimension ``dim`` by ``thread + offset`` (a 1-D kernel's row of thread-index matches)."""
    return ((frozenset({(dim, ("c", offset))}),), f"x[i + {offset}]")


def elsewhere() -> tuple:
    """One access whose index is no one-to-one function of the thread index (x[idx[i]])."""
    return ((frozenset(),), "x[idx[i]]")


def kernel(name, params: dict, refuse=None) -> KernelPattern:
    """``params``: View parameter -> (read, write, accesses, opaque reason or None)."""
    return KernelPattern({p: ParamPattern(r, w, opaque, tuple(acc)) for p, (r, w, acc, opaque) in params.items()},
                         refuse, frozenset())


WRITE_X = kernel("write_x", {"x": (False, True, [at_thread()], None)})
READ_X_WRITE_Y = kernel("copy", {"x": (True, False, [at_thread()], None), "y": (False, True, [at_thread()], None)})
READ_NEIGHBOUR = kernel("shift", {"x": (True, False, [at_thread(1)], None),
                                  "y": (False, True, [at_thread()], None)})
GATHER = kernel("gather", {"x": (True, False, [elsewhere()], None), "y": (False, True, [at_thread()], None)})
ATOMIC = kernel("hist", {"x": (False, True, [], "atomic update of 'x'")})
SCAN = kernel("scan", {}, refuse="a scan (parallel_scan) has a cross-thread dependence")


def node(number, pattern, views, bounds=((0, 100),), policy="RangePolicy", space="OpenMP", producers=(),
         helpers=()) -> tuple:
    """(Node, its kernel's safety pattern)."""
    return Node(number, f"k{number}", space, policy, bounds, tuple(views), (), tuple(producers), tuple(helpers)), \
        pattern


def groups(*nodes, overlaps=None) -> tuple:
    """(groups, [(split index, Split kind)]) of a graph; by default every storage overlaps only itself."""
    storages = {s for n, _ in nodes for _, s in n.views}
    pairs = frozenset((s, s) for s in storages) | frozenset(overlaps or ())
    result = plan(Graph(tuple(n for n, _ in nodes), pairs, tuple(p for _, p in nodes)))
    return result.groups, [(i, r.kind) for i, r in result.boundaries]


def test_a_writer_and_its_thread_local_reader_form_one_group():
    assert groups(node(1, WRITE_X, [("x", 0)]), node(2, READ_X_WRITE_Y, [("x", 0), ("y", 1)])) == ([[0, 1]], [])


def test_every_split_kind_is_found_where_it_applies():
    write, copy = node(1, WRITE_X, [("x", 0)]), node(2, READ_X_WRITE_Y, [("x", 0), ("y", 1)])
    cases = {
        Split.RANGE: node(2, READ_X_WRITE_Y, [("x", 0), ("y", 1)], bounds=((0, 50),)),
        Split.SPACE: node(2, READ_X_WRITE_Y, [("x", 0), ("y", 1)], space="Serial"),
        Split.NOT_THREAD_LOCAL: node(3, READ_NEIGHBOUR, [("x", 0), ("y", 1)]),
        Split.KERNEL: node(4, SCAN, []),
        Split.OPAQUE: node(5, ATOMIC, [("x", 0)]),
        Split.CONSUMER: node(2, READ_X_WRITE_Y, [("x", 2), ("y", 1)], producers=(0,)),
        Split.HELPER_CLASH: node(2, READ_X_WRITE_Y, [("x", 2), ("y", 1)], helpers=(("h", "other code"),)),
    }
    first = {Split.HELPER_CLASH: node(1, WRITE_X, [("x", 0)], helpers=(("h", "code"),))}
    for kind, second in cases.items():
        assert groups(first.get(kind, write), second) == ([[0], [1]], [(1, kind)]), kind
    assert groups(write, copy) == ([[0, 1]], [])


def test_views_of_shared_memory_that_are_not_the_same_view_split():
    """Storages 0 and 1 overlap (a View and its subview): elements cannot be aligned, so no fusion."""
    got = groups(node(1, WRITE_X, [("x", 0)]), node(2, READ_X_WRITE_Y, [("x", 1), ("y", 2)]), overlaps={(0, 1)})
    assert got == ([[0], [1]], [(1, Split.ALIASED_VIEWS)])
    # the same calls over disjoint memory are independent and fuse
    assert groups(node(1, WRITE_X, [("x", 0)]), node(2, READ_X_WRITE_Y, [("x", 1), ("y", 2)]))[0] == [[0, 1]]


def test_an_indirect_read_of_memory_nobody_writes_still_fuses():
    assert groups(node(1, WRITE_X, [("x", 0)]), node(6, GATHER, [("x", 1), ("y", 2)]))[0] == [[0, 1]]
    assert groups(node(1, WRITE_X, [("x", 0)]), node(6, GATHER, [("x", 0), ("y", 2)]))[1] == \
        [(1, Split.NOT_THREAD_LOCAL)]


def test_groups_are_greedy_in_trace_order():
    a, b = node(1, WRITE_X, [("x", 0)]), node(2, READ_X_WRITE_Y, [("x", 0), ("y", 1)])
    shift = node(3, READ_NEIGHBOUR, [("x", 1), ("y", 2)])  # reads y[i+1], which b writes
    after = node(2, READ_X_WRITE_Y, [("x", 2), ("y", 3)])
    assert groups(a, b, shift, after) == ([[0, 1], [2, 3]], [(2, Split.NOT_THREAD_LOCAL)])


SMALL = ((0, 1),)  # a one-element range, as a class's own step in array code


def test_a_group_takes_later_calls_that_pass_only_independent_ones():
    """Two classes' steps interleaved: small step, pass over the samples that reads it, small step, pass: the small
    steps form one group and the passes another, each pass after the step it reads."""
    t0, big0 = node(1, WRITE_X, [("x", 0)], bounds=SMALL), node(2, READ_X_WRITE_Y, [("x", 0), ("y", 1)])
    t1, big1 = node(1, WRITE_X, [("x", 2)], bounds=SMALL), node(2, READ_X_WRITE_Y, [("x", 2), ("y", 3)])
    assert groups(t0, big0, t1, big1) == ([[0, 2], [1, 3]], [(1, Split.RANGE)])


@pytest.mark.parametrize("later, why", [
    (node(1, READ_X_WRITE_Y, [("x", 1), ("y", 2)], bounds=SMALL), "reads what the call it would pass writes"),
    (node(1, WRITE_X, [("x", 0)], bounds=SMALL), "writes what the call it would pass reads"),
    (node(1, READ_X_WRITE_Y, [("x", 3), ("y", 1)], bounds=SMALL), "writes what the call it would pass writes"),
    (node(1, READ_X_WRITE_Y, [("x", 3), ("y", 4)], bounds=SMALL, producers=(1,)), "takes its Future"),
])
def test_a_later_call_never_passes_one_it_depends_on(later, why):
    small, (big, pattern) = node(1, WRITE_X, [("x", 0)], bounds=SMALL), node(2, READ_X_WRITE_Y, [("x", 0), ("y", 1)])
    big = big._replace(op="reduce"), pattern  # (a reduction: no horizontal part, so only the pull could move it)
    assert groups(small, big, later)[0] == [[0], [1], [2]], why


def test_nothing_passes_a_call_whose_memory_is_unknown_and_the_look_ahead_is_bounded():
    from kfuse.fuser.planner import LOOKAHEAD

    small = node(1, WRITE_X, [("x", 0)], bounds=SMALL)
    later = node(1, WRITE_X, [("x", 9)], bounds=SMALL)
    assert groups(small, node(4, SCAN, []), later)[0] == [[0], [1], [2]]
    fillers = [(n._replace(op="reduce"), p) for n, p in (node(2, READ_X_WRITE_Y, [("x", 10 + k), ("y", 100 + k)])
                                                          for k in range(LOOKAHEAD))]  # (no horizontal parts)
    found = groups(small, *fillers, later)[0]
    assert found[0] == [0] and [LOOKAHEAD + 1] in found  # out of sight: not taken


def test_equal_graphs_are_one_plan_cache_entry():
    """Graphs hold no addresses: the same partition over new arrays is the same key."""
    one = Graph((node(1, WRITE_X, [("x", 0)])[0],), frozenset({(0, 0)}), (WRITE_X,))
    two = Graph((node(1, WRITE_X, [("x", 0)])[0],), frozenset({(0, 0)}), (READ_NEIGHBOUR,))
    assert one == two and hash(one) == hash(two) and {one: "plan"}[two] == "plan"


# --- graphs of real calls, on the null backend ------------------------------------------------------------------
pytestmark = pytest.mark.backend("null")
N = 64


@pk.workunit
def s_scale(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 0.5 * x[i] + 1.0


@pk.workunit
def s_neighbours(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i - 1] + x[i + 1]


@pk.workunit
def s_sum(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i]


@pk.workunit
def s_add_scalar(i: int, s: float, x: pk.View1D[pk.double]):
    x[i] = x[i] + s


def flush() -> tuple:
    """Run what is pending on the null backend; (groups, split kinds, launches) of the flush."""
    runtime = context.current()
    runtime.backend.launches.clear()
    runtime.flush_all()
    record = runtime.records[-1]
    return record.groups, [r.kind for _, r in record.boundaries], runtime.backend.launches


def test_a_chain_of_thread_local_calls_is_one_launch():
    pk.enable_fusion()
    x, y, z = pk.View(N), pk.View(N), pk.View(N)
    pk.parallel_for(N, s_scale, x=x, y=y)
    pk.parallel_for(N, s_scale, x=y, y=z)
    total = pk.parallel_reduce(N, s_sum, x=z)
    got, kinds, launches = flush()
    assert got == [[0, 1, 2]] and kinds == []
    assert [(launch.name, launch.fused, launch.bounds) for launch in launches] == \
        [("s_scale__s_scale__s_sum", True, (0, N))]
    assert total.value() == 0.0  # the null backend computes nothing


def test_a_stencil_splits_and_a_new_range_splits():
    pk.enable_fusion()
    x, y, z = pk.View(N), pk.View(N), pk.View(N)
    pk.parallel_for(pk.RangePolicy(1, N - 1), s_scale, x=x, y=y)
    pk.parallel_for(pk.RangePolicy(1, N - 1), s_neighbours, x=y, y=z)
    pk.parallel_for(N, s_scale, x=z, y=x)
    got, kinds, launches = flush()
    assert got == [[0], [1], [2]] and kinds == [Split.NOT_THREAD_LOCAL, Split.RANGE]
    assert [launch.fused for launch in launches] == [False, False, False]


def test_a_reduction_consumer_splits_from_its_producer():
    pk.enable_fusion()
    x = pk.View(N)
    total = pk.parallel_reduce(N, s_sum, x=x)
    pk.parallel_for(N, s_add_scalar, s=total, x=x)
    got, kinds, _ = flush()
    assert got == [[0], [1]] and kinds == [Split.CONSUMER]


def test_writes_to_different_columns_of_a_matrix_fuse():
    """Columns are interleaved in memory but share no element: the graph knows (views.lattice), so calls writing
    them over the same rows fuse; a call over the whole matrix still splits from them."""
    pk.enable_fusion()
    x, m = pk.View(N), pk.View((N, 3))
    for column in range(3):
        pk.parallel_for(N, s_scale, x=x, y=m[:, column])
    pk.parallel_for(N, s_scale, x=m[:, 1], y=x)  # reads a column: thread-local, the same storage
    pk.parallel_for(N, s_neighbours, x=x, y=m.subview(slice(None), 0))
    got, kinds, _ = flush()
    assert got[0] == [0, 1, 2, 3], got


def test_the_graph_of_calls_numbers_storages_by_first_use():
    x, y = pk.View(N), pk.View(N)
    half = x.subview(slice(0, N // 2))
    calls = [prepare(s_scale, "for", N // 2, (), {"x": half, "y": y}),
             prepare(s_scale, "for", N // 2, (), {"x": y, "y": x})]
    calls.append(prepare(s_neighbours, "for", N // 2, (), {"x": x, "y": y}))
    graph = graphs.of(calls)
    assert [n.name for n in graph.nodes] == ["s_scale", "s_scale", "s_neighbours"]
    kernels = [n.kernel for n in graph.nodes]
    assert kernels[0] == kernels[1] != kernels[2]  # one specialisation, one number; another kernel, another
    assert [n.views for n in graph.nodes][:2] == [(("x", 0), ("y", 1)), (("x", 1), ("y", 2))]
    assert graph.overlap_pairs() == {(0, 0), (1, 1), (2, 2), (0, 2)}  # the subview shares x's bytes
    assert graph.pattern_of([1]) == ((0, 1), ())


def test_schedules_need_no_compiler_and_no_data(monkeypatch):
    """The null backend never calls the C++ compiler: a broken compiler changes nothing."""
    monkeypatch.setenv("KFUSE_CXX", "/bin/false")
    pk.enable_fusion()
    x, y = pk.View(N), pk.View(N)
    x[:] = np.arange(N)
    pk.parallel_for(N, s_scale, x=x, y=y)
    got, _, launches = flush()
    assert got == [[0]] and len(launches) == 1
    np.testing.assert_array_equal(np.asarray(y), np.zeros(N))  # ran nothing: y is as it was made


_bounds = st.tuples(st.integers(0, 80), st.integers(0, 16)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(memory=st.lists(_bounds, max_size=12), shift=st.integers(1, 1000))
def test_a_graph_overlap_is_the_byte_ranges_intersecting_wherever_the_arrays_lie(memory, shift):
    """graph._ranks keeps exactly which storages share bytes, and nothing of the addresses: the same layout moved,
    or with an unrelated cluster moved past the others, gives an equal graph (so the plan cache hits)."""
    from kfuse.fuser.graph import _ranks

    contiguous = [(1, 1)] * len(memory)  # (step, element size) of byte arrays
    graph = Graph((), extents=_ranks(memory, contiguous))
    for a, (lo, hi) in enumerate(memory):
        for b, (lo2, hi2) in enumerate(memory):
            assert graph.overlap(a, b) == (lo < hi2 and lo2 < hi and lo < hi and lo2 < hi2)
    assert _ranks([(lo + shift, hi + shift) for lo, hi in memory], contiguous) == graph.extents


_strided = st.tuples(st.integers(0, 40), st.integers(0, 6), st.sampled_from([1, 2, 3, 4, 6, 8]),
                     st.sampled_from([4, 8]))  # (first byte, elements, stride in elements, element size)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(views=st.lists(_strided, max_size=8), shift=st.integers(1, 1000))
def test_interleaved_views_overlap_only_where_their_elements_share_a_byte(views, shift):
    """Strided Views over one buffer (columns of a matrix, every other element): graph.overlap holds wherever some
    byte lies in an element of both, and, between Views of one step, only there; moving the layout keeps the
    graph."""
    from kfuse.fuser.graph import _ranks

    def layout(at):
        memory = [(at + first, at + first + ((n - 1) * stride + 1) * size if n else at + first)
                  for first, n, stride, size in views]
        lattices = [((stride if n > 1 else 1) * size, size) for _, n, stride, size in views]
        return memory, lattices

    memory, lattices = layout(0)
    graph = Graph((), extents=_ranks(memory, lattices))
    owned = [{first + k * stride * size + b for k in range(n) for b in range(size)}
             for first, n, stride, size in views]
    for a in range(len(views)):
        for b in range(len(views)):
            shared = bool(owned[a] & owned[b])
            if shared or lattices[a][0] == lattices[b][0]:
                assert graph.overlap(a, b) == shared, (views[a], views[b])
    assert _ranks(*layout(shift)) == graph.extents


def _strided_views(layouts: list) -> tuple:
    """Views over one buffer of 64 doubles at ``_strided_2d``'s layouts, and the set of bytes each one holds."""
    from numpy.lib.stride_tricks import as_strided

    buffer = np.zeros(64)
    views, owned = [], []
    for first, rows, row_step, cols, col_step, flat in layouts:
        array = as_strided(buffer[first:], (rows, cols), (row_step * 8, col_step * 8))
        views.append(pk.from_numpy(array[:, 0] if flat else array))
        array = np.asarray(views[-1])
        start = array.__array_interface__["data"][0]
        owned.append({start + sum(k * s for k, s in zip(index, array.strides)) + b
                      for index in np.ndindex(array.shape) for b in range(8)})
    return views, owned


_strided_2d = st.tuples(st.integers(0, 12), st.integers(1, 4), st.integers(0, 6), st.integers(1, 4),
                       st.integers(0, 3), st.booleans())  # first element, rows, row step, columns, column step, 1-D


@settings(max_examples=400, deadline=None, derandomize=True)
@given(layouts=st.lists(_strided_2d, min_size=1, max_size=6))
@example(layouts=[(0, 4, 4, 2, 1, False), (2, 4, 4, 1, 1, True), (3, 4, 4, 1, 1, True)])  # a block, columns past it
def test_strided_views_of_one_buffer_overlap_only_as_their_bytes_say(layouts):
    """Two-dimensional Views of one buffer at any steps (rows apart, touching, overlapping; a column block or a
    single column, as a one-dimensional View or not): graph.overlap holds wherever two share a byte, and, between
    Views of one lattice step that have every byte their lattice allows, only there (a block of a matrix's columns
    and a column outside it do not overlap: views.lattice's row form)."""
    from kfuse.fuser.graph import _ranks
    from kfuse.views import lattice

    views, owned = _strided_views(layouts)
    lattices = [lattice(v) for v in views]
    graph = Graph((), extents=_ranks([v.bounds for v in views], lattices))
    # Views whose bytes are all those their lattice allows (every step's first width bytes in their span)
    exact = [owned[k] == {x for x in range(*v.bounds) if (x - v.bounds[0]) % step < width}
             for k, (v, (step, width)) in enumerate(zip(views, lattices))]
    for a in range(len(views)):
        for b in range(len(views)):
            shared = bool(owned[a] & owned[b])
            if shared or exact[a] and exact[b] and lattices[a][0] == lattices[b][0]:
                assert graph.overlap(a, b) == shared, (layouts[a], layouts[b])
    if layouts == [(0, 4, 4, 2, 1, False), (2, 4, 4, 1, 1, True), (3, 4, 4, 1, 1, True)]:
        assert not graph.overlap(0, 1) and not graph.overlap(0, 2)  # the block's lattice keeps the columns apart


@settings(max_examples=400, deadline=None, derandomize=True)
@given(layouts=st.lists(_strided_2d, min_size=2, max_size=4))
@example(layouts=[(0, 8, 4, 1, 1, True), (1, 1, 4, 2, 1, False)])  # a column, and two elements of a row beside it
def test_views_meet_wherever_they_share_a_byte_and_a_short_view_between_a_lattice_does_not(layouts):
    """``views.meet`` (failures and lost data: tracer/failures.py, pipeline.after_fault) holds wherever two Views of
    one buffer share a byte; and a View whose bytes fill a span that fits in one step of another's lattice (one row's
    elements between a column's) meets a View that has every byte its lattice allows only where they share a
    byte."""
    from kfuse.views import lattice, meet

    views, owned = _strided_views(layouts)
    lattices = [lattice(v) for v in views]
    exact = [owned[k] == {x for x in range(*v.bounds) if (x - v.bounds[0]) % step < width}
             for k, (v, (step, width)) in enumerate(zip(views, lattices))]
    for a in range(len(views)):
        for b in range(len(views)):
            shared = bool(owned[a] & owned[b])
            met = meet(views[a].bounds, lattices[a], views[b].bounds, lattices[b])
            assert met or not shared, (layouts[a], layouts[b])
            lo, hi = views[b].bounds
            if exact[a] and hi - lo <= lattices[a][0] and owned[b] == set(range(lo, hi)):
                assert met == shared, (layouts[a], layouts[b])
    if layouts == [(0, 8, 4, 1, 1, True), (1, 1, 4, 2, 1, False)]:
        assert not meet(views[0].bounds, lattices[0], views[1].bounds, lattices[1])


def test_unrelated_arrays_in_either_order_in_memory_give_equal_graphs():
    from kfuse.fuser.graph import _ranks

    def ranks(memory):
        return _ranks(memory, [(1, 1)] * len(memory))

    assert ranks([(0, 8), (100, 108), (104, 120)]) == ranks([(200, 208), (0, 8), (4, 20)])
    assert ranks([(0, 8), (4, 12)]) != ranks([(0, 8), (8, 12)])  # overlapping or merely adjacent: not equal
