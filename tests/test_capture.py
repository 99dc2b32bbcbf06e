"""``pk.capture`` (kfuse/capturing.py): a captured function's later calls launch its settled flush's kernels without
running its Python, and give what running it would: each test runs the same program eagerly (where a captured
function just runs) and fused, bit for bit, and checks that replays happened where the contract allows them and
not where a check forbids them."""
from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kfuse as pk
from kfuse import config, context
from fusion_check import assert_same, gaussian_chain, kick, push, run_eager_and_fused, view_of

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


def test_a_function_captured_from_its_first_call_replays_while_its_untraced_trial_is_open(monkeypatch, tmp_path):
    """Under KFUSE_PROFIT=measure a repeated flush is timed rerun against untraced; while it records, a captured
    function's calls never run untraced, so that trial cannot end there: the replays do not wait for it (a replay
    compares no call, which is what the trial weighs) and are not timed as its repetitions."""
    monkeypatch.setenv("KFUSE_PROFIT", "measure")
    monkeypatch.setenv("KFUSE_CACHE_DIR", str(tmp_path / "cache"))
    block = Counted()

    def program():
        x, v = view_of(X0), view_of(V0)
        seen = [float(block.step(x, v, 0.01, 2)[0]) for _ in range(12)]
        return seen, x.copy(), v.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] >= 5 * 5 and block.ran < 12 + 8
    assert stats["calls_untraced"] == 0 and stats["profit_trials"] < 12


def test_other_views_or_scalars_are_other_plans():
    block = Counted()

    def program():
        x, v, y, w = view_of(X0), view_of(V0), view_of(X0 * 3.0), view_of(V0)
        seen = []
        for call in range(18):  # two sets of Views in turns share one kept flush, then a third dt joins
            a, b = (x, v) if call % 2 == 0 else (y, w)
            dt = -0.02 if call >= 10 and call % 3 == 0 else 0.01
            seen.append(float(block.step(a, b, dt, 2)[0]))
        return seen, x.copy(), v.copy(), y.copy(), w.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] > 0
    assert len(block.step.plans) == 4


def _reads_a_sum(x, v):
    total = float(pk.parallel_reduce(N, w_sum, x=x))  # steers the next call: no replay may skip it
    pk.parallel_for(N, push, dt=total * 1e-3, x=x, v=v)


def _accumulates_into_its_own(x, v):
    t = pk.View((N,), pk.double)  # each run's starts at zero; a replay would accumulate into the last run's
    pk.parallel_for(N, w_accumulate, x=x, t=t)
    pk.parallel_for(N, w_copy, t=t, y=v)


def _accumulates_into_zeros(x, v):
    t = pk.zeros(N)  # new memory of known contents, which a replay would not fill
    pk.parallel_for(N, w_accumulate, x=x, t=t)
    pk.parallel_for(N, w_copy, t=t, y=v)


def _returns_an_array(x, v):
    pk.parallel_for(N, push, dt=0.5, x=x, v=v)
    pk.parallel_for(N, kick, dt=0.5, x=x, v=v)
    return np.zeros(2)


@pytest.mark.parametrize("body, words", [(_reads_a_sum, "touches data on the host"),
                                         (_accumulates_into_its_own, "a replay would not fill it"),
                                         (_accumulates_into_zeros, "a replay would not fill it"),
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


def test_a_flush_decided_untraced_replays_its_kept_launches(monkeypatch):
    """Under KFUSE_PROFIT=measure a flush none of whose kernels fuses is decided untraced at once (untraced.lone):
    a replay launches its kept launches, each call's own kernel."""
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


def test_calls_an_untraced_repetition_ran_before_are_captured_whole(monkeypatch):
    """The same calls made uncaptured until their flush is decided untraced, then from a captured function: while it
    records no call runs untraced (an untraced repetition would leave the flush without them), so it is replayed."""
    monkeypatch.setenv("KFUSE_PROFIT", "measure")

    def body(x, y):
        scale = pk.multiply(x, 0.5)
        pk.parallel_for(N - 1, w_shift, x=scale, y=y)
        pk.parallel_for(N - 1, w_shift, x=y, y=x)  # reads y one element over: never fused with the first
        return pk.parallel_reduce(N, w_sum, x=x)

    step = pk.capture(body)

    def program():
        x, y = view_of(X0), view_of(np.zeros(N))
        seen = []
        for call in range(20):
            x[call % N] = float(call)
            seen.append(float((body if call < 8 else step)(x, y)))
        return seen, x.copy(), y.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_untraced"] > 0  # the uncaptured calls were decided untraced
    assert stats["calls_captured"] >= 4 * 8 and step.why_not is None


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


def _random_body(body: list):
    """A captured function making ``body``'s calls over (x, v, w), returning its sums and the new arrays it made (an
    array operation's result; ``pk.empty`` a kernel call writes)."""
    def step(x, v, w, dt):
        results = []
        for name in body:
            if name == "push":
                pk.parallel_for(N, push, dt=dt, x=x, v=v)
            elif name == "kick":
                pk.parallel_for(N, kick, dt=0.25, x=x, v=v)
            elif name == "shift":
                pk.parallel_for(N - 1, w_shift, x=x, y=w)
            elif name == "scaled":
                results.append(pk.add(pk.multiply(x, 0.5), v))
            elif name == "made":
                y = pk.empty(N - 1)
                pk.parallel_for(N - 1, w_shift, x=x, y=y)
                results.append(y)
            else:
                results.append(pk.parallel_reduce(N, w_sum, x=w))
        return tuple(results)
    return pk.capture(step)


def _random_program(body: list, events: list):
    """The captured body called once per event, each after that host event: nothing, a host write to v, a write
    through a NumPy alias of x, a call left pending, a read of w, another dt, new Views for v, a resize of w."""
    step = _random_body(body)
    x, v, w = view_of(X0), view_of(V0), view_of(np.zeros(N + 2))
    seen, kept = [], []
    for k, event in enumerate(events):
        dt = 0.5
        if event == "write":
            v[k % N] = 0.125 * k
        elif event == "alias":
            np.asarray(x)[k % N] = -0.25 * k
        elif event == "pending":
            pk.parallel_for(N, kick, dt=0.125, x=x, v=v)
        elif event == "read":
            seen.append(float(w[1]))
        elif event == "dt":
            dt = -0.25
        elif event == "fresh":
            v = view_of(v.copy())
        elif event == "resize":
            w.resize(0, w.shape[0] + 1)
        for result in step(x, v, w, dt):
            if isinstance(result, pk.View):
                kept.append(result)  # read at the end: later calls must not have changed it
            else:
                seen.append(float(result))
    return seen, [k.copy() for k in kept], x.copy(), v.copy(), w.copy()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.lists(st.sampled_from(["push", "kick", "shift", "sum", "scaled", "made"]), min_size=1, max_size=4),
       events=st.lists(st.sampled_from(["none"] * 6 + ["write", "alias", "pending", "read", "dt", "fresh", "resize"]),
                       min_size=4, max_size=14),
       measure=st.booleans(), seed=st.integers(0, 2 ** 32 - 1))
def test_random_captured_loops_agree_with_eager(tmp_path, body, events, measure, seed):
    """Random bodies called between random host events, each flush run fused, or decided fused or untraced by a
    clock of random steps (KFUSE_PROFIT=measure): every value the host sees is eager's."""
    expected = _random_program(body, events)
    profit = "measure" if measure else "off"
    with config.overridden(config.PROFIT, profit), config.overridden(config.PROFIT_TRIALS, 1), \
            config.overridden(config.CACHE_DIR, str(tmp_path)):
        pk.enable_fusion()
        runtime = context.current()
        ticks = iter(np.cumsum(np.random.default_rng(seed).random(100_000)).tolist())
        runtime.profit.clock = lambda: next(ticks)
        try:
            got = _random_program(body, events)
        finally:
            pk.disable_fusion()
            runtime.profit.clock = time.perf_counter
    assert_same(expected, got)


def test_the_random_captured_loops_reach_replays():
    """The generator above must reach replays, not only recordings (a plain stretch of calls after a pending one)."""
    pk.reset_stats()
    pk.enable_fusion()
    try:
        _random_program(["push", "sum"], ["none"] * 4 + ["pending", "none", "none", "alias", "none"])
    finally:
        pk.disable_fusion()
    assert pk.stats()["calls_captured"] >= 2 * 3


def test_a_captured_method_gets_its_instance_and_runs_as_python():
    class Simulation:
        def __init__(self, dt):
            self.dt = dt

        @pk.capture
        def step(self, x, v):
            pk.parallel_for(N, push, dt=self.dt, x=x, v=v)
            pk.parallel_for(N, kick, dt=self.dt, x=x, v=v)

    def program():
        sim, x, v = Simulation(0.25), view_of(X0), view_of(V0)
        for k in range(6):
            sim.dt = 0.25 * (k + 1)  # a field a replay could not see
            sim.step(x, v)
        return x.copy(), v.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] == 0


def test_array_operations_replay_as_the_kernels_of_their_flush():
    """Recorded array operations are logged as kernel calls when the function returns, so its flush holds them;
    with new data under the same Views each call, every replayed sum is eager's."""
    step = pk.capture(gaussian_chain)  # its result a Future

    def program():
        x, mu, var = view_of(X0), view_of(V0), view_of(np.linspace(0.5, 2.0, N))
        seen = []
        for k in range(8):
            x[k % N] = 0.1 * k
            seen.append(float(step(x, mu, var)))
        return seen

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] > 0 and step.why_not is None


def test_small_array_operations_run_as_kernels_while_it_records_and_replay(monkeypatch):
    """Operations small enough for NumPy to compute at once (KFUSE_HOST_ELEMENTS) launch no kernel a replay could
    repeat, so while a captured function records they run as kernels: it replays them, and gives NumPy's values."""
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", "4096")

    @pk.capture
    def step(x, v):
        pk.add(x, v, out=x)
        pk.parallel_for(N, kick, dt=0.5, x=x, v=v)

    def program():
        x, v = view_of(X0), view_of(V0)
        for _ in range(6):
            step(x, v)
        return x.copy(), v.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] > 0 and stats["array_ops_on_host"] == 0 and step.why_not is None


def test_futures_of_calls_made_around_array_operations_are_their_own():
    """The array operations' kernel call is logged when the next call needs it, after that call was counted: a
    Future is named by its call's place in the flush, not in the program's count of calls."""
    @pk.capture
    def step(x, v):
        first = pk.parallel_reduce(N, w_sum, x=x)
        pk.multiply(v, 0.5, out=v)
        second = pk.parallel_reduce(N, w_sum, x=v)
        pk.add(x, v, out=x)
        return first, second

    def program():
        x, v = view_of(X0), view_of(V0)
        seen = []
        for k in range(8):
            v[k % N] = 1.0 + k
            seen += [float(s) for s in step(x, v)]
        return seen, x.copy(), v.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] > 0


def test_new_arrays_it_returns_are_new_memory_at_each_replay():
    """Array operations' results (new memory of undefined contents) are made anew by each replay: every result the
    program keeps holds its own call's values after later calls, as eager's do."""
    @pk.capture
    def step(x, v):
        y = pk.add(pk.multiply(x, 2.0), v)
        return y, pk.sum(pk.square(y))

    def program():
        x, v = view_of(X0), view_of(V0)
        kept, sums = [], []
        for k in range(8):
            x[k % N] = 0.25 * k
            y, total = step(x, v)
            kept.append(y)
            sums.append(float(total))
        assert len({y.ptr for y in kept}) == len(kept)  # all alive: no two share memory
        return sums, [y.copy() for y in kept]

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] > 0 and step.why_not is None


def test_a_kernel_writing_new_memory_it_returns_is_replayed_into_new_memory():
    """``pk.empty`` made inside and written by the function's one kernel call: each replay launches that call over
    a new allocation, which it returns."""
    @pk.capture
    def shifted(x):
        y = pk.empty(N - 1)
        pk.parallel_for(N - 1, w_shift, x=x, y=y)
        return y

    def program():
        x = view_of(X0)
        kept = []
        for k in range(6):
            x[k] = -1.0 - k
            kept.append(shifted(x))
        return [y.copy() for y in kept]

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] >= 3 and shifted.why_not is None


def test_a_view_returned_twice_and_written_by_a_launch_is_one_view_at_each_replay():
    """A View the function returns twice and a launch of its flush writes (so it fills a slot too): each replay
    returns one new View twice, as the recorded call did, over new memory, with eager's values."""
    @pk.capture
    def shifted_twice(x, y):
        z = pk.empty(N - 1)
        pk.parallel_for(N - 1, w_shift, x=x, y=y)  # two launches: a flush of several calls, a kept template
        pk.parallel_for(N - 1, w_copy, t=y, y=z)
        return z, z

    def program():
        x, y = view_of(X0), pk.View([N - 1])
        kept = []
        for k in range(6):
            x[k] = -1.0 - k
            a, b = shifted_twice(x, y)
            assert a is b
            kept.append(a)
        assert len({v.ptr for v in kept}) == len(kept)
        return [v.copy() for v in kept]

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] >= 6 and shifted_twice.why_not is None


@pk.workunit
def w_columns(i: int, x: pk.View1D[pk.double], a: pk.View1D[pk.double], b: pk.View1D[pk.double]):
    a[i] = x[i] * 2.0
    b[i] = x[i] - 1.0


def test_views_into_new_memory_keep_their_overlaps_at_a_replay():
    """Columns of a new 2-D allocation written by kernel calls and array operations, then reduced along rows (the
    shape of GaussianNB's prediction): the replay's new columns lie in one new allocation as the recorded ones did."""
    @pk.capture
    def table(x, v):
        out = pk.empty((N, 3))
        pk.parallel_for(N, w_columns, x=x, a=out[:, 0], b=out[:, 1])
        pk.add(pk.multiply(v, x), 0.5, out=out[:, 2])
        return pk.argmax(out, axis=1), out

    def program():
        x, v = view_of(X0), view_of(V0)
        kept = []
        for k in range(7):
            v[k] = 3.0 * k
            kept.append(table(x, v))
        return [(best.copy(), out.copy()) for best, out in kept]

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["calls_captured"] > 0 and table.why_not is None

