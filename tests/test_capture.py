"""``pk.capture`` (kfuse/capturing.py): a captured function's later calls launch its settled flush's kernels without
running its Python, and give what running it would: each test runs the same program eagerly (where a captured
function just runs) and fused, bit for bit, and checks that replays happened where the contract allows them and
not where a check forbids them."""
from __future__ import annotations

import numpy as np
import pytest

import kfuse as pk
from fusion_check import assert_same, kick, push, run_eager_and_fused, view_of

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

N = 16
X0, V0 = np.linspace(-1.0, 1.0, N), np.linspace(0.5, -0.5, N)


@pk.workunit
def w_sum(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i]


@pk.workunit
def w_accumulate(i: int, x: pk.View1D[pk.double], t: pk.View1D[pk.double]):
    t[i] = t[i] + x[i]


@pk.workunit
def w_shift(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i + 1]


@pk.workunit
def w_copy(i: int, t: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = t[i]


class Counted:
    """A captured time-step block that counts how often its Python ran."""

    def __init__(self):
        self.ran = 0
        self.step = pk.capture(self._step)

    def _step(self, x, v, dt, steps):
        self.ran += 1
        for _ in range(steps):
            pk.parallel_for(N, push, dt=dt, x=x, v=v)
            pk.parallel_for(N, kick, dt=dt, x=x, v=v)
        return pk.parallel_reduce(N, w_sum, x=x), x


def test_a_captured_loop_replays_without_its_python_and_gives_eager_results():
    block = Counted()

    def program():
        x, v = view_of(X0), view_of(V0)
        seen = []
        for call in range(10):
            total, same = block.step(x, v, 0.01, 3)
            assert same is x
            seen.append(float(total))
            if call == 6:
                v[:] = V0 * 2.0  # new data under the same View: the replay reads it
        return seen, x.copy(), v.copy()

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    assert block.ran < 10 + 10  # eager ran it 10 times; fused, most calls were replays
    assert stats["calls_captured"] >= 5 * 7
    assert block.step.why_not is None
    assert "(rerun" in text


def test_other_views_or_scalars_are_other_plans():
    block = Counted()

    def program():
        x, v, y, w = view_of(X0), view_of(V0), view_of(X0 * 3.0), view_of(V0)
        seen = []
        for call in range(12):
            a, b, dt = (x, v, 0.01) if call % 3 == 0 else (y, w, 0.01) if call % 3 == 1 else (x, v, -0.02)
            seen.append(float(block.step(a, b, dt, 2)[0]))
        return seen, x.copy(), v.copy(), y.copy(), w.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] > 0
    assert len(block.step.plans) == 3


def _reads_a_sum(x, v):
    total = float(pk.parallel_reduce(N, w_sum, x=x))  # steers the next call: no replay may skip it
    pk.parallel_for(N, push, dt=total * 1e-3, x=x, v=v)


def _accumulates_into_its_own(x, v):
    t = pk.View((N,), pk.double)  # each run's starts at zero; a replay would accumulate into the last run's
    pk.parallel_for(N, w_accumulate, x=x, t=t)
    pk.parallel_for(N, w_copy, t=t, y=v)


def _adds_with_an_array_operation(x, v):
    pk.add(x, v, out=x)  # a recorded step (or NumPy's, this small): no kernel call of the function's flush
    pk.parallel_for(N, kick, dt=0.5, x=x, v=v)


def _returns_an_array(x, v):
    pk.parallel_for(N, push, dt=0.5, x=x, v=v)
    pk.parallel_for(N, kick, dt=0.5, x=x, v=v)
    return np.zeros(2)


@pytest.mark.parametrize("body, words", [(_reads_a_sum, "touches data on the host"),
                                         (_accumulates_into_its_own, "memory it makes itself"),
                                         (_adds_with_an_array_operation, "array operations"),
                                         (_returns_an_array, "its result (ndarray)")])
def test_what_a_replay_could_not_repeat_is_never_replayed(body, words):
    step = pk.capture(body)

    def program():
        x, v = view_of(X0), view_of(V0)
        out = []
        for _ in range(6):
            step(x, v)
            out.append(v.copy())
        return out, x.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] == 0
    assert words in step.why_not


def test_pending_calls_resized_views_and_host_aliases_around_replays():
    """Calls pending before a replay run first; a View given new memory (``resize``) of its shape is followed, of
    another shape makes the function run as Python again; a NumPy alias the host writes through between calls is
    read by the next replay."""
    block = Counted()

    def program():
        x, v = view_of(X0), view_of(V0)
        seen = []
        for call in range(14):
            if call % 4 == 1:
                pk.parallel_for(N, kick, dt=0.5, x=x, v=v)  # pending when the captured call comes
            if call == 5:
                alias = np.asarray(v)
            if call in (5, 6):
                alias[:] = 0.25 * call  # through the alias: no kfuse call sees it
            if call == 7:
                del alias
            if call == 9:
                v.resize(0, N)  # same shape, new memory
            if call == 11:
                v.resize(0, N + 2)
            seen.append(float(block.step(x, v, 0.01, 2)[0]))
        return seen, x.copy(), v.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] > 0


def test_scalars_and_other_arguments_are_compared_by_value_and_kind():
    """-0.0 and 0.0 are other plans (a kernel may tell them apart); a NumPy argument makes the call run as Python."""
    block = Counted()

    def program():
        x, v = view_of(X0), view_of(V0)
        seen = [float(block.step(x, v, dt, 1)[0]) for dt in (0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0)]
        block.step.fn(x, np.asarray(v), 0.01, 1)
        return seen, x.copy(), v.copy()

    expected, got, _, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert len(block.step.plans) == 2


def test_with_fusion_off_it_just_runs():
    block = Counted()
    x, v = view_of(X0), view_of(V0)
    for _ in range(3):
        block.step(x, v, 0.01, 1)
    assert block.ran == 3 and not block.step.plans


def test_a_decided_untraced_flush_replays_its_calls_one_by_one(monkeypatch):
    """Under KFUSE_PROFIT=measure a flush none of whose kernels fuses is decided untraced at once (untraced.lone):
    a replay launches each call's own kernel."""
    monkeypatch.setenv("KFUSE_PROFIT", "measure")

    @pk.capture
    def step(x, y):
        pk.parallel_for(N - 1, w_shift, x=x, y=y)
        pk.parallel_for(N - 1, w_shift, x=y, y=x)  # reads y one element over: never fused with the first
        return pk.parallel_reduce(N, w_sum, x=x)

    def program():
        x, y = view_of(X0), view_of(np.zeros(N))
        seen = []
        for call in range(12):
            x[call % N] = float(call)
            seen.append(float(step(x, y)))
        return seen, x.copy(), y.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] > 0


def test_threads_each_replaying_their_own_captured_loop():
    """A recording holds kfuse's lock, so another thread's calls and reads never count as the function's."""
    import threading

    def program():
        results = [None, None]

        def work(t):
            block = Counted()
            x, v = view_of(X0 * (t + 1)), view_of(V0)
            seen = [float(block.step(x, v, 0.01, 2)[0]) for _ in range(8)]
            results[t] = (seen, x.copy(), v.copy())

        threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    expected, got, _, _ = run_eager_and_fused(program)
    assert_same(expected, got)


def test_a_slice_made_inside_follows_its_argument_to_new_memory():
    """The function slices its argument each call; after ``resize`` gives the argument new memory, a replay of the
    kept slice would write the old memory: the function runs as Python again."""
    @pk.capture
    def step(x, v):
        inner = x[1:N - 1]
        pk.parallel_for(N - 2, w_copy, t=v[0:N - 2], y=inner)
        pk.parallel_for(N - 2, kick, dt=0.5, x=inner, v=v[0:N - 2])

    def program():
        x, v = view_of(X0), view_of(V0)
        seen = []
        for call in range(8):
            if call == 5:
                x.resize(0, N + 4)  # new memory (its first N elements kept): the slice keeps its shape
            step(x, v)
            seen.append(x.copy())
        return seen, v.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] > 0


def test_a_tuple_subclass_result_is_never_replayed():
    import collections

    Pair = collections.namedtuple("Pair", "total x")

    @pk.capture
    def step(x, v):
        pk.parallel_for(N, push, dt=0.5, x=x, v=v)
        pk.parallel_for(N, kick, dt=0.5, x=x, v=v)
        return Pair(pk.parallel_reduce(N, w_sum, x=x), x)

    def program():
        x, v = view_of(X0), view_of(V0)
        return [float(step(x, v).total) for _ in range(6)], x.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] == 0 and "Pair" in step.why_not
