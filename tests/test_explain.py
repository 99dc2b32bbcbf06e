"""``pk.explain()``: the account of recent flushes — partitions, groups, split reasons, plan-cache hits."""
import re

import numpy as np
import pytest

import kfuse as pk
from kfuse import context

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

N = 32
FLUSH = re.compile(r"flush #(\d+): (\d+) call\(s\) -> (\d+) kernel launch\(es\)(.*); analysis (\d+\.\d{3}) ms(.*)")


@pk.workunit
def ex_fill(i: int, x: pk.View1D[pk.double]):
    x[i] = x[i] + i


@pk.workunit
def ex_neighbours(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i - 1] + x[i + 1]


@pk.workunit
def ex_double(i: int, y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[i] = 2.0 * y[i]


def three_calls():
    """fill | neighbours + double: one split (neighbour reads of x), then a fused pair."""
    x, y, z = pk.View(N), pk.View(N), pk.View(N)
    x[:] = np.linspace(0.0, 1.0, N)
    policy = pk.RangePolicy(1, N - 1)
    pk.parallel_for(policy, ex_fill, x=x)
    pk.parallel_for(policy, ex_neighbours, x=x, y=y)
    pk.parallel_for(policy, ex_double, y=y, z=z)
    return z.copy()


def new_lines(before: int) -> list:
    return "\n".join(r.text() for r in list(context.current().records) if r.number > before).splitlines()


def last_number() -> int:
    records = list(context.current().records)
    return records[-1].number if records else 0


def test_explain_before_any_flush_says_so():  # each test has a fresh runtime (tests/conftest.py)
    assert pk.explain() == "kfuse: no flushes yet (is fusion enabled? pk.enable_fusion())"


def test_explain_lists_groups_and_the_reason_for_each_split():
    before = last_number()
    pk.enable_fusion()
    z = three_calls()
    pk.disable_fusion()
    x = np.linspace(0.0, 1.0, N)
    x[1:-1] += np.arange(1, N - 1)
    np.testing.assert_array_equal(z[1:-1], 2.0 * (x[:-2] + x[2:]))
    lines = new_lines(before)
    assert len(lines) == 4, lines
    head = FLUSH.fullmatch(lines[0])
    assert head, lines[0]
    assert int(head.group(1)) == before + 1
    assert head.group(2, 3, 4, 6) == ("3", "2", "", "")
    assert lines[1] == "  group 1: ex_fill  [single call; calls 0..0]"
    # the reason names the first access that breaks thread-locality and what it was compared with
    assert re.fullmatch(r"  \| split before call 1 \(ex_neighbours\): unsafe access to 'x': ex_neighbours uses "
                        r"x\[i [+-] 1\], not the same one-to-one function of thread index 0 as x\[i\] \(ex_fill\)",
                        lines[2]), lines[2]
    assert lines[3] == "  group 2: ex_neighbours + ex_double  [fused 2 calls; calls 1..2]"
    assert pk.explain().splitlines()[-4:] == lines  # pk.explain() ends with the latest flush


def test_trace_only_mode_is_marked_and_runs_every_call_alone():
    before = last_number()
    pk.reset_stats()
    pk.enable_fusion(trace_only=True)
    three_calls()
    assert pk.stats()["kernels_launched"] == 3 and pk.stats()["fused_kernels_launched"] == 0
    lines = new_lines(before)
    head = FLUSH.fullmatch(lines[0])
    assert head and head.group(2, 3, 4) == ("3", "3", " (fusion off: traced only)")
    assert lines[1:] == ["  group 1: ex_fill  [single call; calls 0..0]",
                         "  group 2: ex_neighbours  [single call; calls 1..1]",
                         "  group 3: ex_double  [single call; calls 2..2]"]


def test_repeated_partition_is_marked_plan_cached():
    before = last_number()
    pk.enable_fusion()
    first = three_calls()
    second = three_calls()
    np.testing.assert_array_equal(first, second)
    heads = [FLUSH.fullmatch(line) for line in new_lines(before) if line.startswith("flush #")]
    assert len(heads) == 2 and all(heads)
    assert heads[0].group(6) in ("", " (plan cached)")  # an earlier test may have planned this shape already
    assert heads[1].group(6) == " (plan cached)"
    assert int(heads[1].group(1)) == int(heads[0].group(1)) + 1


def test_single_call_flush():
    before = last_number()
    pk.enable_fusion()
    x = pk.View(N)
    x[:] = 1.0
    pk.parallel_for(N, ex_fill, x=x)
    assert x[3] == 4.0  # host read: a partition of one call
    lines = new_lines(before)
    assert FLUSH.fullmatch(lines[0]).group(2, 3) == ("1", "1")
    assert lines[1:] == ["  group 1: ex_fill  [single call; calls 0..0]"]


def test_explain_keeps_the_last_16_flushes():
    pk.enable_fusion()
    x = pk.View(N)
    for _ in range(20):
        pk.parallel_for(N, ex_fill, x=x)
        pk.parallel_for(N, ex_fill, x=x)  # a pair that fuses: a call alone would soon run untraced (untraced.py)
        x.copy()  # one flush each
    heads = [FLUSH.fullmatch(line) for line in pk.explain().splitlines() if line.startswith("flush #")]
    numbers = [int(h.group(1)) for h in heads]
    assert len(numbers) == 16
    assert numbers == list(range(numbers[0], numbers[0] + 16)) and numbers[-1] == last_number()
    np.testing.assert_array_equal(x.copy(), 40 * np.arange(N))
