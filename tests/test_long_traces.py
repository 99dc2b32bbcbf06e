"""Long traces: planning is linear in the calls, groups are bounded, and a time-step loop reuses one fused kernel.

Planning is measured by counting the pairwise safety checks (``planner.pair_conflict``), never by timing: a
check against every member of a group would make 4,000 calls cost 16 times what 1,000 cost. The planner's
decisions are compared with a reference that checks each newcomer against every member in order (the
planner's original, quadratic rule) on random graphs. No compiler: hand-written graphs, the null backend (which
records launches) and the python backend (which runs kernels in kfuse's interpreter).
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import kfuse as pk
from kfuse.fuser import planner
from kfuse.fuser.graph import Graph, Node
from kfuse.fuser.planner import Reason, Split, plan, vertical
from kfuse.fuser.safety import KernelPattern, ParamPattern
from fusion_check import assert_same, kick, push


# --- hand-written graphs -----------------------------------------------------------------------------------------
def _row(offset=0):
    return ((frozenset({(0, ("c", offset))}),), f"x[i + {offset}]")


def _kernel(params: dict, refuse=None) -> KernelPattern:
    """``params``: View parameter -> (write, accesses, opaque reason or None)."""
    return KernelPattern({p: ParamPattern(True, w, opaque, tuple(acc)) for p, (w, acc, opaque) in params.items()},
                         refuse, frozenset())


COPY = _kernel({"x": (False, [_row()], None), "y": (True, [_row()], None)})  # y[i] = x[i]
SHIFT = _kernel({"x": (False, [_row(1)], None), "y": (True, [_row()], None)})  # y[i] = x[i + 1]
UPDATE = _kernel({"x": (True, [_row()], None), "y": (False, [_row()], None)})  # x[i] += y[i]
ATOMIC = _kernel({"x": (True, [], "atomic update of 'x'"), "y": (False, [_row()], None)})
SCAN = _kernel({}, refuse="a scan (parallel_scan) has a cross-thread dependence")
KERNELS = (COPY, SHIFT, UPDATE, ATOMIC, SCAN)


def _graph(spec: list, overlaps=()) -> Graph:
    """``spec``: (kernel number, x storage, y storage, bounds, helpers) per call."""
    nodes, patterns = [], []
    for number, x, y, bounds, helpers in spec:
        views = () if KERNELS[number % len(KERNELS)] is SCAN else (("x", x), ("y", y))
        nodes.append(Node(number, f"k{number}", "OpenMP", "RangePolicy", bounds, views, (), (), helpers))
        patterns.append(KERNELS[number % len(KERNELS)])
    storages = {s for n in nodes for _, s in n.views}
    return Graph(tuple(nodes), frozenset((s, s) for s in storages) | frozenset(overlaps), tuple(patterns))


def _reference(graph: Graph) -> planner.Plan:
    """The planner's rule written plainly: a newcomer is checked against every member of the group, in order; a
    group about to end at another range takes the later calls (``LOOKAHEAD``) that could join it and depend on none
    of the calls they would pass (``MOST_PASSED``), each checked against every one of those, until ``MOST_REFUSED``
    calls over its range could not join."""
    result, group, taken = planner.Plan(), [], set()
    nodes = graph.nodes

    def join_reason(index):
        node, first = nodes[index], nodes[group[0]]
        if node.policy != first.policy or node.bounds != first.bounds:
            return Reason(Split.RANGE, "range")
        helpers = dict(node.helpers)
        for i in group:
            clash = [n for n, d in nodes[i].helpers if helpers.get(n, d) != d]
            if clash:
                return Reason(Split.HELPER_CLASH, f"two different helper functions are both named '{clash[0]}'")
            reason = planner.pair_conflict(graph, i, index)
            if reason:
                return reason
        return None

    def touches(index, writes_only):
        params = graph.patterns[index].params
        return [s for p, s in nodes[index].views if not writes_only or params[p].write]

    def depends(j, k):
        return k in nodes[j].producers or \
            any(graph.overlap(w, t) for w in touches(k, True) for t in touches(j, False)) or \
            any(graph.overlap(t, w) for t in touches(k, False) for w in touches(j, True))

    def pull(stop):
        if any(graph.patterns[i].refuse for i in group):
            return
        passed, refused = [], 0
        for j in range(stop, min(len(nodes), stop + planner.LOOKAHEAD)):
            if j in taken:
                continue
            if graph.patterns[j].refuse:
                return
            if j != stop and (nodes[j].policy, nodes[j].bounds) == (nodes[group[0]].policy, nodes[group[0]].bounds):
                if not any(depends(j, k) for k in passed) and join_reason(j) is None:
                    group.append(j)
                    taken.add(j)
                    continue
                refused += 1
                if refused == planner.MOST_REFUSED:
                    return
            if len(passed) == planner.MOST_PASSED:
                return
            passed.append(j)

    for index in range(len(nodes)):
        if index in taken:
            continue
        if group:
            reason = join_reason(index)
            if reason is None:
                group.append(index)
                continue
            if reason.kind is Split.RANGE:
                pull(index)
            result.groups.append(group)
            result.boundaries.append((index, reason))
        group = [index]
    if group:
        result.groups.append(group)
    return result


def _decisions(result: planner.Plan) -> tuple:
    return result.groups, [(i, r.kind, r.detail if r.kind is not Split.RANGE else "") for i, r in result.boundaries]


def _random_graph(rng: random.Random, long_groups: bool) -> Graph:
    """A random partition; ``long_groups``: mostly fusable calls over one range (groups of tens of calls)."""
    storages = rng.randint(2, 7) if not long_groups else rng.randint(3, 12)
    kernels = [0, 2, 5, 7, 0, 2, 1, 3, 4, 6] if not long_groups else [0, 2, 5, 7] * 12 + [1, 3, 4, 6]
    ranges = (((0, 100),), ((0, 100),), ((0, 50),)) if not long_groups else (((0, 100),),) * 30 + (((0, 50),),)
    helpers = ((), (), (("h", "a"),), (("h", "b"),), (("g", "a"), ("h", "a")))
    if long_groups:
        helpers = ((),) * 30 + helpers
    spec = [(rng.choice(kernels), rng.randrange(storages), rng.randrange(storages), rng.choice(ranges),
             rng.choice(helpers)) for _ in range(rng.randint(2, 60 if not long_groups else 200))]
    overlaps = {(a, b) for a in range(storages) for b in range(a + 1, storages)
                if rng.random() < (0.15 if not long_groups else 0.03)}
    return _graph(spec, overlaps)


@pytest.mark.parametrize("long_groups", [False, True])
@pytest.mark.parametrize("seed", range(30))
def test_decisions_equal_a_check_against_every_member(seed, long_groups):
    graph = _random_graph(random.Random(seed), long_groups)
    assert _decisions(vertical(graph, 0)) == _decisions(_reference(graph))


def _pair_checks(monkeypatch, graph: Graph, max_group: int) -> int:
    count = [0]
    original = planner.pair_conflict

    def counted(*args):
        count[0] += 1
        return original(*args)

    monkeypatch.setattr(planner, "pair_conflict", counted)
    plan(graph, max_group)
    monkeypatch.setattr(planner, "pair_conflict", original)
    return count[0]


def _time_steps(calls: int) -> Graph:  # x[i] += y[i]; y[i] = x[i] on the same two arrays, step after step
    return _graph([(2 if k % 2 else 0, 0, 1, ((0, 100),), ()) for k in range(calls)])


def _chain(calls: int) -> Graph:  # each call copies the array the previous one wrote into a new one
    return _graph([(0, k, k + 1, ((0, 100),), ()) for k in range(calls)])


def _fan(calls: int) -> Graph:  # every call reads one array and writes its own
    return _graph([(0, 0, k + 1, ((0, 100),), ()) for k in range(calls)])


@pytest.mark.parametrize("shape", [_time_steps, _chain, _fan])
@pytest.mark.parametrize("max_group", [0, 32])
def test_pair_checks_grow_linearly(monkeypatch, shape, max_group):
    small, large = (_pair_checks(monkeypatch, shape(n), max_group) for n in (1000, 4000))
    assert large <= 5 * max(small, 1)  # a check against every member: 16 times (about 8 million checks)
    assert large <= 4 * 4000


def test_a_full_group_splits_with_its_reason_and_ends_on_a_whole_step():
    three = _graph([(0 if k % 3 == 0 else 2 if k % 3 == 1 else 5, 0, 1, ((0, 100),), ()) for k in range(100)])
    result = plan(three, 32)
    assert [len(g) for g in result.groups] == [30, 30, 30, 10]  # whole steps of three calls
    assert [(i, r.kind) for i, r in result.boundaries] == [(30, Split.GROUP_SIZE), (60, Split.GROUP_SIZE),
                                                           (90, Split.GROUP_SIZE)]
    assert "group size limit" in str(result.boundaries[0][1])
    assert [len(g) for g in plan(_chain(70), 32).groups] == [32, 32, 6]  # nothing repeats: cut at the bound
    assert [len(g) for g in plan(_chain(70), 0).groups] == [70]


def test_another_reason_wins_over_the_bound():
    spec = [(0, 0, 1, ((0, 100),), ())] * 4 + [(0, 0, 1, ((0, 50),), ())]
    result = plan(_graph(spec), 4)
    assert [(i, r.kind) for i, r in result.boundaries] == [(4, Split.RANGE)]


_B = ((0, 100),)
_X, _Y = (0, 0, 1, _B, ()), (2, 2, 1, _B, ())  # s1[i] = s0[i]; s2[i] += s1[i]: a step's two calls, fused
_SCAN = (4, 0, 0, _B, ())  # cannot fuse: ends every step's group
_Z = (5, 2, 3, _B, ())  # s3[i] = s2[i]: an observable that joins the step before it
_W = (7, 0, 4, _B, ())  # s0[i] += s4[i]: one that joins the step after it


def test_a_rarer_group_that_extends_a_repeated_one_runs_the_repeated_kernel_and_the_rest_apart():
    result = plan(_graph([_X, _Y, _SCAN] * 3 + [_X, _Y, _Z]))
    assert result.groups == [[0, 1], [2], [3, 4], [5], [6, 7], [8], [9, 10], [11]]
    assert [(i, r.kind) for i, r in result.boundaries][-1] == (11, Split.REUSE)
    assert "k0+k2 runs as a group 3 times" in str(result.boundaries[-1][1])
    ahead = plan(_graph([_W, _X, _Y] + [_SCAN, _X, _Y] * 3))  # the extension in front
    assert ahead.groups == [[0], [1, 2], [3], [4, 5], [6], [7, 8], [9], [10, 11]]
    assert [(i, r.kind) for i, r in ahead.boundaries][0] == (1, Split.REUSE)


def test_a_group_extending_one_no_more_frequent_than_itself_stays_whole():
    assert plan(_graph([_X, _Y, _SCAN, _X, _Y, _Z])).groups == [[0, 1], [2], [3, 4, 5]]  # [k0, k2] once only
    twice = [_X, _Y, _Z, _SCAN] * 2 + [_X, _Y]  # the extended group is the more frequent one
    assert plan(_graph(twice)).groups == [[0, 1, 2], [3], [4, 5, 6], [7], [8, 9]]


# --- real programs ---------------------------------------------------------------------------------------------
@pk.workunit
def lt_energy(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], v: pk.View1D[pk.double]):
    acc += x[i] * x[i] + v[i] * v[i]


def _particles(steps: int, n: int = 64) -> tuple:
    x = pk.View(n)
    v = pk.View(n)
    x[:] = np.linspace(0.0, 1.0, n)
    v[:] = np.linspace(1.0, -1.0, n)
    for _ in range(steps):
        pk.parallel_for(n, push, dt=0.01, x=x, v=v)
        pk.parallel_for(n, kick, dt=0.01, x=x, v=v)
    energy = pk.parallel_reduce(n, lt_energy, x=x, v=v)
    return float(energy), np.array(x), np.array(v)


@pytest.mark.backend("python")
@pytest.mark.parametrize("bound", [None, "7", "0"])
def test_a_long_time_step_loop_computes_what_eager_computes(kfuse_runtime, monkeypatch, bound):
    eager = _particles(150)
    if bound is not None:
        monkeypatch.setenv("KFUSE_MAX_GROUP", bound)
    pk.enable_fusion()
    fused = _particles(150)
    pk.disable_fusion()
    assert fused[0] == eager[0]
    np.testing.assert_array_equal(fused[1], eager[1])
    np.testing.assert_array_equal(fused[2], eager[2])
    assert all(len(g) <= (int(bound) or 301 if bound else planner.MAX_GROUP) for r in kfuse_runtime.records
               for g in r.groups)


@pytest.mark.backend("python")
def test_the_repeated_groups_of_a_loop_reuse_one_fused_kernel(kfuse_runtime, monkeypatch):
    loads = []
    original = kfuse_runtime.backend.load
    monkeypatch.setattr(kfuse_runtime.backend, "load", lambda rendered: loads.append(rendered) or original(rendered))
    pk.enable_fusion()
    _particles(320)  # 640 calls: ten groups of 64, then the reduction
    rec = [r for r in kfuse_runtime.records if len(r.call_names) > 1][-1]
    assert [len(g) for g in rec.groups] == [64] * 10 + [1]
    assert {r.kind for _, r in rec.boundaries} == {Split.GROUP_SIZE}
    assert len(set(rec.fused_names)) == 1 and len(rec.fused_names) == 10
    assert len(kfuse_runtime.fused) == 1  # one fused kernel built and loaded ...
    assert len(loads) <= 2  # ... and the reduction's own kernel (unless an earlier test loaded it)
    assert "group size limit" in pk.explain()
    pk.disable_fusion()


@pk.workunit
def lt_force(i: int, x: pk.View1D[pk.double], f: pk.View1D[pk.double]):
    f[i] = x[(i + 1) % 64] - x[i]


@pk.workunit
def lt_kick(i: int, dt: float, v: pk.View1D[pk.double], f: pk.View1D[pk.double]):
    v[i] = v[i] + dt * f[i]


def _chain_of_springs(steps: int) -> tuple:
    """ExaMiniMD's step in small: drift; force (reads the neighbour's x, so it starts a group) and kick; and an
    observable after the last step, which joins that step's force and kick."""
    x, v, f = pk.View(64), pk.View(64), pk.View(64)
    x[:] = np.cos(np.arange(64.0))
    for _ in range(steps):
        pk.parallel_for(64, push, dt=0.01, x=x, v=v)
        pk.parallel_for(64, lt_force, x=x, f=f)
        pk.parallel_for(64, lt_kick, dt=0.01, v=v, f=f)
    energy = pk.parallel_reduce(64, lt_energy, x=x, v=v)
    return float(energy), np.array(x), np.array(v)


@pytest.mark.backend("python")
def test_the_step_that_also_computes_an_observable_reuses_the_steps_kernel(kfuse_runtime):
    eager = _chain_of_springs(6)
    pk.enable_fusion()
    fused = _chain_of_springs(6)
    rec = [r for r in kfuse_runtime.records if len(r.call_names) > 1][-1]
    pk.disable_fusion()
    assert_same(eager, fused)
    assert [len(g) for g in rec.groups] == [1, 2] * 6 + [1]
    assert len(set(rec.fused_names)) == 1  # one kernel for all six steps, the last one included
    assert [r.kind for _, r in rec.boundaries][-1] == Split.REUSE
    assert "kernel reuse: lt_force+lt_kick runs as a group 5 times" in pk.explain()
