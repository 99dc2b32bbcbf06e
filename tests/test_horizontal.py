"""Horizontal fusion (fuser/planner.py ``_horizontal``, fuser/build.py ``_split_threads``): neighbouring groups
split only by their ranges, none touching memory another writes, run as one launch whose threads are split
between them.

The planner half writes graphs by hand and checks random graphs against a plain reference rule (every call of
a part against every call of the others); the end-to-end half compares fused runs with eager runs bit for bit
and with NumPy, on the Python backend and on compiled kernels.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import kfuse as pk
from kfuse import context
from kfuse.fuser.graph import Graph, Node
from kfuse.fuser.planner import CODE_PER_CALL, MAX_PARTS, Split, plan, vertical
from fusion_check import assert_same, run_eager_and_fused, view_of
from test_schedule import READ_NEIGHBOUR, READ_X_WRITE_Y, SCAN, WRITE_X


def node(number, pattern, views, bounds=((0, 100),), op="for", policy="RangePolicy", space="OpenMP", helpers=(),
         size=1):
    return Node(number, f"k{number}", space, policy, bounds, tuple(views), (), (), tuple(helpers), op, size), pattern


def planned(*nodes, overlaps=(), max_group=32):
    storages = {s for n, _ in nodes for _, s in n.views}
    graph = Graph(tuple(n for n, _ in nodes), frozenset((s, s) for s in storages) | frozenset(overlaps),
                  tuple(p for _, p in nodes))
    result = plan(graph, max_group)
    return result.groups, result.parts, [(i, r.kind) for i, r in result.boundaries]


# --- the planner ------------------------------------------------------------------------------------------------
def test_independent_calls_over_other_ranges_join_as_parts():
    got = planned(node(1, WRITE_X, [("x", 0)]), node(2, READ_X_WRITE_Y, [("x", 0), ("y", 1)]),
                  node(1, WRITE_X, [("x", 2)], bounds=((0, 50),)), node(1, WRITE_X, [("x", 3)], bounds=((5, 9),)))
    assert got == ([[0, 1, 2, 3]], {0: (2, 1, 1)}, [])


@pytest.mark.parametrize("second", [
    node(2, READ_X_WRITE_Y, [("x", 0), ("y", 1)], bounds=((0, 50),)),  # reads what the first writes
    node(1, WRITE_X, [("x", 0)], bounds=((0, 50),)),  # writes what the first writes
    node(2, READ_X_WRITE_Y, [("x", 1), ("y", 2)], bounds=((0, 50),)),  # writes memory that overlaps (below)
])
def test_calls_sharing_memory_one_writes_stay_apart(second):
    got = planned(node(1, WRITE_X, [("x", 0)]), second, overlaps=[(0, 2)])
    assert got == ([[0], [1]], {}, [(1, Split.RANGE)])


def test_a_call_reading_what_a_later_part_writes_stays_apart():
    got = planned(node(2, READ_X_WRITE_Y, [("x", 0), ("y", 1)]), node(1, WRITE_X, [("x", 0)], bounds=((0, 50),)))
    assert got == ([[0], [1]], {}, [(1, Split.RANGE)])


@pytest.mark.parametrize("other", [
    node(1, WRITE_X, [("x", 2)], bounds=((0, 50),), op="reduce"),
    node(1, WRITE_X, [("x", 2)], bounds=((0, 5), (0, 5)), policy="MDRangePolicy"),
    node(1, WRITE_X, [("x", 2)], bounds=(5, 4), policy="TeamPolicy"),
    node(1, WRITE_X, [("x", 2)], bounds=((0, 50),), space="Serial"),
    node(4, SCAN, [], bounds=((0, 50),)),
    node(1, WRITE_X, [("x", 2)], bounds=((0, 50),), helpers=(("h", "other code"),)),
])
def test_only_one_dimensional_parallel_fors_of_one_space_join(other):
    first = node(1, WRITE_X, [("x", 0)], helpers=(("h", "code"),))
    groups, parts, _ = planned(first, other)
    assert groups == [[0], [1]] and parts == {}


def test_a_neighbour_read_split_is_not_a_range_split():
    got = planned(node(1, WRITE_X, [("x", 0)]), node(3, READ_NEIGHBOUR, [("x", 0), ("y", 1)]))
    assert got == ([[0], [1]], {}, [(1, Split.NOT_THREAD_LOCAL)])


def test_parts_and_calls_are_bounded():
    many = [node(1, WRITE_X, [("x", k)], bounds=((0, 10 + k),)) for k in range(MAX_PARTS + 3)]
    groups, parts, _ = planned(*many)
    assert [len(g) for g in groups] == [MAX_PARTS, 3] and parts == {0: (1,) * MAX_PARTS, 1: (1, 1, 1)}
    groups, parts, _ = planned(*many[:5], max_group=2)
    assert groups == [[0, 1], [2, 3], [4]] and parts == {0: (1, 1), 1: (1, 1)}


def test_groups_and_parts_are_bounded_by_their_code():
    """A group holds at most max_group * CODE_PER_CALL syntax nodes: five calls of 100 nodes under a bound of 8
    calls (512 nodes), and two parts of three such calls do not join (600 nodes)."""
    assert CODE_PER_CALL == 64
    chain = [node(1, WRITE_X, [("x", 0)], size=100) for _ in range(10)]
    groups, parts, boundaries = planned(*chain, max_group=8)
    assert groups == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]] and boundaries == [(5, Split.GROUP_SIZE)]
    small = [node(1, WRITE_X, [("x", 0)], size=30) for _ in range(10)]
    assert planned(*small, max_group=8)[0] == [list(range(8)), [8, 9]]  # 8 calls, 240 nodes: the call bound
    apart = [node(1, WRITE_X, [("x", 0)], size=100)] * 3 + [node(1, WRITE_X, [("x", 1)], bounds=((0, 9),),
                                                                 size=100)] * 3
    groups, parts, boundaries = planned(*apart, max_group=8)
    assert groups == [[0, 1, 2], [3, 4, 5]] and parts == {} and boundaries == [(3, Split.RANGE)]
    assert planned(*apart, max_group=10)[1] == {0: (3, 3)}  # 640 nodes fit: one launch, two parts


def _random_graph(rng: random.Random) -> Graph:
    kernels = (WRITE_X, READ_X_WRITE_Y, READ_NEIGHBOUR)
    storages = rng.randint(2, 6)
    nodes, patterns = [], []
    for _ in range(rng.randint(2, 30)):
        k = rng.randrange(3)
        views = (("x", rng.randrange(storages)),) + ((("y", rng.randrange(storages)),) if k else ())
        nodes.append(Node(k, f"k{k}", "OpenMP", "RangePolicy", (rng.choice([(0, 100), (0, 50), (3, 40)]),), views,
                          (), (), (), rng.choice(["for", "for", "for", "reduce"])))
        patterns.append(kernels[k])
    overlaps = {(a, b) for a in range(storages) for b in range(a, storages) if a == b or rng.random() < 0.2}
    return Graph(tuple(nodes), frozenset(overlaps), tuple(patterns))


def _reference(graph: Graph, max_group: int):
    """Vertical groups, then each group joins the open horizontal group when its boundary is a range split and no
    call of it shares memory one of the two writes with any call already there."""
    base = vertical(graph, max_group)
    reasons = dict(base.boundaries)

    def writes(i):
        return {s for p, s in graph.nodes[i].views if graph.patterns[i].params[p].write}

    def touches(i):
        return {s for _, s in graph.nodes[i].views}

    def alone(group):
        return any(graph.nodes[i].op != "for" for i in group)

    def independent(a, b):
        return not any(graph.overlap(w, t) for i in a for j in b
                       for w, t in [(w, t) for w in writes(i) for t in touches(j)] +
                       [(t, w) for t in touches(i) for w in writes(j)])

    groups, parts = [], []
    for members in base.groups:
        reason = reasons.get(members[0])
        if groups and reason is not None and reason.kind is Split.RANGE and not alone(groups[-1]) \
                and not alone(members) and len(parts[-1]) < MAX_PARTS \
                and (max_group <= 0 or len(groups[-1]) + len(members) <= max_group) \
                and independent(groups[-1], members):
            groups[-1] = groups[-1] + members
            parts[-1].append(len(members))
        else:
            groups.append(list(members))
            parts.append([len(members)])
    return groups, {n: tuple(p) for n, p in enumerate(parts) if len(p) > 1}


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_join_as_the_reference_rule_says(seed):
    graph = _random_graph(random.Random(seed))
    for bound in (0, 4):
        result = plan(graph, bound)
        assert (result.groups, result.parts) == _reference(graph, bound)


# --- end to end -------------------------------------------------------------------------------------------------
@pk.workunit
def hz_fill(i: int, x: pk.View1D[pk.double], v: float):
    x[i] = v + i


@pk.workunit
def hz_scale(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 2.0 * x[i] + y[i]


def program():
    """Four parts over other ranges, one a subview's half, and a dependent call that must start a new group."""
    a, b, c, d = view_of(np.arange(10.0)), view_of(np.arange(20.0)), view_of(np.ones(20)), view_of(np.zeros(7))
    half = c.subview(slice(10, 20))
    for step in range(3):
        pk.parallel_for(10, hz_fill, x=a, v=1.0 + step)
        pk.parallel_for(pk.RangePolicy(3, 20), hz_fill, x=b, v=2.0)
        pk.parallel_for(pk.RangePolicy(3, 20), hz_scale, x=b, y=c.subview(slice(0, 20)))
        pk.parallel_for(7, hz_fill, x=d, v=3.0)
        pk.parallel_for(10, hz_scale, x=a, y=half)
        pk.fence()
    return a.copy(), b.copy(), c.copy(), d.copy()


def numpy_program():
    a, b, c, d = np.arange(10.0), np.arange(20.0), np.ones(20), np.zeros(7)
    for step in range(3):
        a[:] = 1.0 + step + np.arange(10)
        b[3:] = 2.0 + np.arange(3, 20)
        c[3:] = 2.0 * b[3:] + c[3:]
        d[:] = 3.0 + np.arange(7)
        c[10:] = 2.0 * a + c[10:]
    return a, b, c, d


@pytest.mark.parametrize("backend", [pytest.param(b, marks=pytest.mark.backend(b)) for b in ("python", "kokkos")])
def test_parts_compute_what_eager_and_numpy_compute(backend):
    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    for g, w in zip(got, numpy_program()):
        np.testing.assert_array_equal(g, w)
    assert "horizontally, 3 ranges" in text  # a's fill, b's fill and scale, d's fill; then the dependent scale
    assert "split before call 4 (hz_scale): different range" in text


@pytest.mark.backend("python")
def test_a_horizontal_group_is_rerun_in_a_loop():
    def loop():
        a, b = view_of(np.zeros(10)), view_of(np.zeros(20))
        for step in range(12):
            pk.parallel_for(10, hz_fill, x=a, v=1.0)
            pk.parallel_for(20, hz_scale, x=b, y=b)
            if step % 3 == 2:
                pk.fence()
        return a.copy(), b.copy()

    expected, got, _, text = run_eager_and_fused(loop)
    assert_same(expected, got)
    assert "rerun" in text and "horizontally, 2 ranges" in text


def test_a_fault_in_a_part_names_its_workunit(monkeypatch):
    monkeypatch.setenv("KFUSE_BOUNDS_CHECK", "1")  # indices checked (the workunit is made after this)

    @pk.workunit
    def hz_past_end(i: int, x: pk.View1D[pk.double]):
        x[i + 5] = 1.0

    pk.enable_fusion()
    a, b = view_of(np.zeros(10)), view_of(np.zeros(20))
    pk.parallel_for(20, hz_fill, x=b, v=1.0)
    pk.parallel_for(10, hz_past_end, x=a)
    with pytest.raises(pk.DeferredError, match="hz_past_end"):
        pk.fence()
    assert context.current().records[-1].parts
    np.testing.assert_array_equal(b.copy(), 1.0 + np.arange(20))  # the other part ran
