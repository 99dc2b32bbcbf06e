"""Differential tests of the tracer's dependency walk: hand-written programs for each hazard over kfuse
Views and Futures must observe bit-identical arrays and scalars in every mode of ``programs.MODES`` as
in eager execution. Random programs (and escaped memory, failures, threads) are in test_differential.py."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from programs import (MODES, READS, USES, WRITES, Call, Read, Realloc, UseResult, Write, assert_same, run_program,
                      runs_clean_up)  # noqa: F401 - runs_clean_up is autouse

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

OTHER_MODES = [m for m in MODES if m != "eager"]


PROGRAMS = {
    "raw_chain": [Call("scale", ("a", "b")), Call("stencil", ("b", "c")), Call("sin", ("c",)),
                  Call("axpy", ("c", "b"), 0.5), Read("b", "asarray")],
    "war_reader_then_writer": [Call("scale", ("a", "b")), Call("sin", ("a",)), Read("a", "item"), Read("b", "copy")],
    "war_read_other_first": [Call("stencil", ("a", "b")), Call("scale", ("c", "a")), Read("b", "slice"),
                             Read("a", "asarray")],
    "waw": [Call("scale", ("a", "c")), Call("stencil", ("b", "c")), Call("axpy", ("a", "c"), 2.0),
            Call("scale", ("b", "c")), Read("c", "iter")],
    "waw_future_needs_only_later_writer": [Call("scale", ("a", "c")), Call("scan", ("b", "c")), UseResult(0, "float"),
                                           Read("c", "asarray")],
    "host_setitem_between": [Call("scale", ("a", "b")), Write("a", "setitem", 7.0, 3), Call("scale", ("a", "c")),
                             Read("c", "asarray"), Read("b", "asarray")],
    "host_fill_between": [Call("stencil", ("b", "c")), Write("b", "fill", -1.0), Call("axpy", ("b", "c"), 1.0)],
    "host_asarray_write_between": [Call("sin", ("b",)), Call("scale", ("b", "c")), Write("b", "asarray", 3.0, 9),
                                   Call("stencil", ("b", "a")), Read("c", "npsum")],
    "host_slice_write_on_subview": [Call("scale", ("b", "a")), Write("hi", "slice", 4.0, 2),
                                    Call("stencil", ("a", "c")), Read("lo", "tolist")],
    "reduce_feeds_kernels": [Call("dot", ("a", "b")), Call("axpy", ("a", "c"), ("r", 0)), Call("dot", ("c", "c")),
                             Call("axpy", ("c", "b"), ("r", 1)), Read("b", "asarray"), UseResult(1, "float")],
    "reduce_of_pending_then_overwrite": [Call("scale", ("a", "b")), Call("dot", ("b", "b")), Call("sin", ("b",)),
                                         Call("axpy", ("b", "c"), ("r", 0)), UseResult(0, "format"),
                                         Read("c", "asarray")],
    "scan_total_feeds_kernel": [Call("scan", ("a", "b")), Call("axpy", ("b", "c"), ("r", 0)),
                                UseResult(0, "np_sqrt"), Read("c", "copy")],
    "future_uses": [Call("dot", ("a", "b"))] +
                   [UseResult(0, how) for how in sorted(USES)],
    "subview_halves": [Call("sin", ("lo",)), Call("scale", ("hi", "b")), Read("hi", "asarray"),
                       Call("stencil", ("lo", "c")), Call("scale", ("c", "hi")), Read("a", "repr")],
    "subview_vs_parent_war": [Call("scale", ("lo", "b")), Call("sin", ("a",)), Read("b", "asarray")],
    "two_views_one_buffer": [Call("sin", ("d",)), Call("scale", ("d2", "c")), Write("d2", "setitem", 5.0, 1),
                             Call("axpy", ("d", "b"), 1.5), Read("b", "asarray"), Read("d", "str")],
    "numpy_passed_directly": [Call("scale", ("a", "buf")), Call("stencil", ("buf", "c")), Read("d", "asarray"),
                              Call("sin", ("buf",)), Read("d2", "item")],
    "realloc_in_loop": [step for k in range(4) for step in
                        (Realloc("c"), Call("axpy", ("a", "c"), float(k)), Call("sin", ("c",)), Call("scale", ("c", "b")),
                         Read("b", "item"))],
    "realloc_with_pending_history": [Call("scale", ("a", "c")), Realloc("c"), Call("sin", ("c",)), Read("c", "asarray"),
                                     Realloc("a"), Call("scale", ("lo", "a")), Read("hi", "asarray")],
    "two_dims": [Call("rank1", ("a", "b", "M")), Call("rowsum", ("M", "c")), Write("M", "setitem", 2.0, 5),
                 Call("rank1", ("c", "lo", "M")), Read("M", "iter"), Call("rowsum", ("M", "b"))],
    "interleaved_partial_reads": [Call("scale", ("a", "b")), Call("sin", ("c",)), Call("stencil", ("b", "d")),
                                  Call("scale", ("c", "a")), Read("d2", "item"), Call("rank1", ("d", "c", "M")),
                                  Read("c", "asarray"), Call("dot", ("a", "d")), UseResult(0, "cmp")],
    "every_read_path": [Call("scale", ("a", "b"))] + [step for how in sorted(READS) for step in
                                                       (Call("sin", ("b",)), Read("b", how))],
    "every_write_path": [step for how in sorted(WRITES) for step in
                         (Call("scale", ("b", "c")), Write("b", how, 1.25, 4), Call("stencil", ("b", "c")),
                          Read("c", "item"))],
}


_eager_cache: dict = {}


def eager(name: str, program):
    if name not in _eager_cache:
        _eager_cache[name] = run_program(program, "eager")
    return _eager_cache[name]


@pytest.mark.parametrize("mode", OTHER_MODES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_hand_written_program(name, mode):
    program = PROGRAMS[name]
    assert_same(eager(name, program), run_program(program, mode), f"{name} [{mode}]")


# --- the walk's range set against a brute-force overlap test ------------------------------------------
_range = st.tuples(st.integers(0, 60), st.integers(0, 12)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(added=st.lists(_range, max_size=12), probes=st.lists(_range, min_size=1, max_size=6))
def test_range_set_matches_brute_force(added, probes):
    from kfuse.tracer.trace import Ranges

    ranges = Ranges()
    ranges.add_all(added)
    assert ranges.starts == sorted(ranges.starts) and all(
        s < e for s, e in zip(ranges.starts, ranges.ends)) and all(
        e < s for e, s in zip(ranges.ends, ranges.starts[1:]))  # disjoint, not even touching
    covered = {b for lo, hi in added for b in range(lo, hi)}
    assert covered == {b for lo, hi in zip(ranges.starts, ranges.ends) for b in range(lo, hi)}
    for probe in probes:
        assert ranges.hits([probe]) == any(b in covered for b in range(*probe))
    assert ranges.hits(probes) == any(b in covered for p in probes for b in range(*p))


def _reference_partition(entries, bounds, write, calls):
    """The dependency walk written plainly: byte sets, every entry looked at."""
    need_reads = set(range(*bounds)) if bounds else set()
    need_writes = set(range(*bounds)) if bounds and write else set()
    needed, picked = {id(c) for c in calls}, []
    for entry in reversed(entries):
        reads = {b for lo, hi in entry.reads for b in range(lo, hi)}
        writes = {b for lo, hi in entry.writes for b in range(lo, hi)}
        if id(entry.call) in needed or writes & need_reads or writes & need_writes or reads & need_writes:
            picked.append(entry)
            need_reads |= reads
            need_writes |= writes
    return picked[::-1]


_footprint = st.lists(_range, max_size=2)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(steps=st.lists(st.one_of(
    st.tuples(st.just("call"), _footprint, _footprint),  # a call: its reads, its writes
    st.tuples(st.just("host"), _range, st.booleans()),  # a host access: its bytes, write?
    st.tuples(st.just("at_once"), _footprint, _footprint)), max_size=14))  # a call that runs as soon as logged
def test_the_walk_with_its_shortcuts_matches_a_plain_walk(steps):
    """Host accesses and calls run at once (escaped memory) take shortcuts when nothing pending is involved
    (trace.Trace._alone) and drop entries as a flush does; every answer must be the plain walk's."""
    from types import SimpleNamespace

    from kfuse.tracer.trace import Entry, Trace

    trace = Trace()

    def log(reads, writes):
        call = SimpleNamespace(futures=())
        entry = Entry(call, tuple(reads), tuple(writes), trace.arrivals)
        trace.arrivals += 1
        trace.entries.append(entry)
        return call

    for step in steps:
        if step[0] == "host":
            expected = _reference_partition(list(trace.entries), step[1], step[2], ())
            got = trace.partition_for(step[1], step[2])
        else:
            call = log(step[1], step[2])
            if step[0] == "call":
                continue
            expected = _reference_partition(list(trace.entries), None, False, (call,))
            got = trace.partition_for(None, False, (call,))
        assert [id(e) for e in got] == [id(e) for e in expected]
        trace.remove(got)
