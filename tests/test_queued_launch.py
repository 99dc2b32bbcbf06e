"""GPU ``parallel_for`` kernels that cannot fault launch without waiting for the device in replays (kfuse/codegen/
kernel.py ``kfuse_launch_queued``, kfuse/rerun.py): which kernels get the queued entry is checked on generated source
without a compiler; the replay path itself runs here on the host with the queued entry made for OpenMP too (Kokkos's
OpenMP launches finish before they return, so what is checked is that replays take that entry and compute what NumPy
does)."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import kfuse as pk
from kfuse.calls import prepare
from kfuse.codegen import kernel as codegen
from kfuse import config, context, untraced
from kfuse.runtime import kokkos_runtime, launch
from fusion_check import assert_same
from test_untraced import costed_clock, fused_under, time_steps
from test_team_api import two_views  # (two team-scratch Views of different element sizes)

N = 64


@pk.workunit
def scaled(i, x: pk.View1D[pk.double], y: pk.View1D[pk.double], by: float):
    y[i] = by * x[i]


@pk.workunit
def shifted(i, y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[i] = y[i] + 1.0


@pk.workunit
def halved(i, k: pk.View1D[pk.int64], by: int):
    k[i] = k[i] // by  # a zero divisor is a fault: the launch must wait to report it


@pk.workunit
def halved_twice(i, k: pk.View1D[pk.int64], by: int, step: int):
    k[i] = k[i] // by + i % step


@pk.workunit
def by_data(i, k: pk.View1D[pk.int64], m: pk.View1D[pk.int64]):
    k[i] = k[i] // m[i]


@pk.workunit
def by_reassigned(i, k: pk.View1D[pk.int64], by: int):
    by = by - k[i]  # the divisor is no longer the argument the host sees
    k[i] = k[i] // by


@pk.workunit
def by_shadowed(team: pk.TeamMember, k: pk.View1D[pk.int64], n: int):
    r: int = team.league_rank()

    def part(n: int, acc: pk.Acc[pk.double]):  # this n is the nested def's index, not the argument
        acc += r // n

    s: float = pk.parallel_reduce(pk.TeamThreadRange(team, 4), part)
    k[r] = k[r] + int(s) // n


@pk.workunit
def staged(team: pk.TeamMember, x: pk.View2D[pk.double], y: pk.View1D[pk.double], width: int):
    """Team r stages row r of x and its squares in team scratch memory, then adds them up."""
    r: int = team.league_rank()
    tile: pk.ScratchView2D[pk.double] = pk.ScratchView2D(team.team_scratch(0), 2, width)

    def fill(j: int):
        tile[0][j] = x[r][j]
        tile[1][j] = x[r][j] * x[r][j]

    pk.parallel_for(pk.TeamThreadRange(team, width), fill)
    team.team_barrier()
    s: float = 0.0
    if team.team_rank() == 0:
        for j in range(width):
            s += tile[0][j] + tile[1][j]
        y[r] = s


@pk.workunit
def per_thread_scratch(team: pk.TeamMember, out: pk.View1D[pk.double], n: int):
    mine: pk.ScratchView1D[pk.double] = pk.ScratchView1D(team.thread_scratch(0), n)
    mine[0] = 1.0
    out[team.league_rank()] = mine[0]


@pk.workunit
def scratch_of_a_sum(team: pk.TeamMember, out: pk.View1D[pk.double], n: int):
    s: pk.ScratchView1D[pk.double] = pk.ScratchView1D(team.team_scratch(0), n + 1)  # the host sees n, not n + 1
    s[0] = 1.0
    out[team.league_rank()] = s[0]


@pk.workunit
def scratch_of_an_extent(team: pk.TeamMember, out: pk.View1D[pk.double]):
    s: pk.ScratchView1D[pk.double] = pk.ScratchView1D(team.team_scratch(0), out.extent(0))
    s[0] = 1.0
    out[team.league_rank()] = s[0]


@pk.workunit
def printed(i, x: pk.View1D[pk.double]):
    pk.printf("%f\n", x[i])


@pk.workunit
def summed(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i]


def _source(wu, space: str, op: str = "for", **kwargs) -> str:
    prepared = prepare(wu, op, N, (), kwargs).prepared
    spec = dataclasses.replace(prepared.spec, space=space)
    return codegen.generate(prepared.source, spec, prepared.name).source


def _team_source(wu, scratch_bytes: int, **kwargs) -> str:
    """The CUDA source of team kernel ``wu`` given ``scratch_bytes`` of level-0 scratch memory per team."""
    policy = pk.TeamPolicy(N, 1).set_scratch_size(0, pk.PerTeam(scratch_bytes))
    prepared = prepare(wu, "for", policy, (), kwargs).prepared
    return codegen.generate(prepared.source, dataclasses.replace(prepared.spec, space="Cuda"), prepared.name).source


def _entry(source: str, name: str) -> str | None:
    found = re.search(rf'extern "C" int {name}\(.*?\n}}\n', source, re.S)
    return found.group(0) if found else None


@pytest.mark.backend("null")
@pytest.mark.parametrize("space", ["Cuda", "HIP"])
def test_gpu_loops_that_cannot_fault_get_an_entry_that_does_not_wait(space):
    x, y = pk.View([N]), pk.View([N])
    source = _source(scaled, space, x=x, y=y, by=2.0)
    waiting, queued = _entry(source, "kfuse_launch"), _entry(source, "kfuse_launch_queued")
    assert "Kokkos::fence();" in waiting and "kfuse_last_ns =" in waiting
    assert queued is not None and "Kokkos::parallel_for(" in queued
    assert "Kokkos::fence();" not in queued and "kfuse_last_ns =" not in queued


@pytest.mark.backend("null")
def test_kernels_that_may_fault_print_or_return_values_always_wait():
    x, k = pk.View([N]), pk.View([N], pk.int64)
    shadowed = prepare(by_shadowed, "for", pk.TeamPolicy(N, 1), (), dict(k=k, n=3)).prepared
    for source in (codegen.generate(shadowed.source, dataclasses.replace(shadowed.spec, space="Cuda"),
                                    shadowed.name).source,
                   _source(by_data, "Cuda", k=k, m=k), _source(by_reassigned, "Cuda", k=k, by=3),
                   _source(printed, "Cuda", x=x), _source(summed, "Cuda", op="reduce", x=x),
                   _source(scaled, "OpenMP", x=x, y=pk.View([N]), by=2.0)):
        assert _entry(source, "kfuse_launch") is not None
        assert _entry(source, "kfuse_launch_queued") is None


@pytest.mark.backend("null")
def test_a_kernel_dividing_only_by_its_arguments_is_checked_on_the_host_then_queued():
    k = pk.View([N], pk.int64)
    queued = _entry(_source(halved_twice, "Cuda", k=k, by=3, step=2), "kfuse_launch_queued")
    check = "if (!kf_divisor_safe(kf_f.by) || !kf_divisor_safe(kf_f.step)) return kfuse_launch(kf_args, kf_out, " \
            "kf_err, kf_errlen);"
    assert queued is not None and check in queued
    assert queued.index(check) < queued.index("Kokkos::parallel_for(")
    assert "Kokkos::fence();" not in queued


@pytest.mark.backend("null")
def test_team_scratch_of_constant_and_argument_extents_is_checked_on_the_host_then_queued():
    out = pk.View([N])
    queued = _entry(_team_source(two_views, 64, out=out, n=4), "kfuse_launch_queued")
    assert queued is not None and "Kokkos::fence();" not in queued
    fallback = "return kfuse_launch(kf_args, kf_out, kf_err, kf_errlen);"
    checks = ["KfScratch kf_bound = kf_scratch_bound_start(kf_f.kf_scratch_bytes);",
              f"if (!kf_scratch_sure(kf_bound, 0, sizeof(int32_t), 3)) {fallback}",
              f"if (!kf_scratch_sure(kf_bound, 0, sizeof(double), kf_f.n)) {fallback}",
              "Kokkos::parallel_for("]
    places = [queued.find(c) for c in checks]
    assert -1 not in places and places == sorted(places), places  # in statement order, before the launch
    assert queued.index("kf_scratch_total") < places[0]  # after the guards that throw
    staged_queued = _entry(_team_source(staged, 1024, x=pk.View([N, 4]), y=pk.View([N]), width=4),
                           "kfuse_launch_queued")
    assert f"if (!kf_scratch_sure(kf_bound, 0, sizeof(double), 2, kf_f.width)) {fallback}" in staged_queued


@pytest.mark.backend("null")
def test_thread_scratch_and_extents_the_host_does_not_know_always_wait():
    out = pk.View([N])
    for source in (_team_source(per_thread_scratch, 1024, out=out, n=4),
                   _team_source(scratch_of_a_sum, 1024, out=out, n=4),
                   _team_source(scratch_of_an_extent, 1024, out=out)):
        assert _entry(source, "kfuse_launch") is not None
        assert _entry(source, "kfuse_launch_queued") is None


@pytest.fixture
def queued_entries(monkeypatch):
    """OpenMP kernels get the queued entry; yields the names of the kernels each call of a queued entry launched."""
    monkeypatch.setattr(codegen, "QUEUED_SPACES", codegen.QUEUED_SPACES | {"OpenMP"})
    calls, real = [], launch.CompiledKernel._load

    def load(self):
        real(self)
        entry = self._queued
        if entry is not None:
            self._queued = lambda *args: calls.append(self.name) or entry(*args)

    monkeypatch.setattr(launch.CompiledKernel, "_load", load)
    return calls


@pytest.fixture
def queued_on_host(queued_entries):
    """``queued_entries`` with fusion on."""
    pk.enable_fusion()
    yield queued_entries
    pk.disable_fusion()


def _steps(x, y, z, repetitions: int) -> None:
    for k in range(repetitions):
        pk.parallel_for(N, scaled, x=x, y=y, by=2.0)
        pk.parallel_for(N, shifted, y=y, z=z)
        np.testing.assert_array_equal(np.asarray(z), 2.0 * np.asarray(x) + 1.0)  # a host read: a flush


@pytest.mark.backend("kokkos")
def test_replays_launch_queued_and_compute_what_numpy_does(queued_on_host):
    values = np.random.default_rng(3).standard_normal(N)
    x, y, z = pk.from_numpy(values.copy()), pk.View([N]), pk.View([N])
    _steps(x, y, z, 6)
    np.testing.assert_array_equal(np.asarray(y), 2.0 * values)
    assert len(queued_on_host) >= 3  # the repetitions after the first ones were rerun through the queued entry
    assert pk.stats()["fused_kernels_launched"] == 6


@pytest.mark.backend("kokkos")
def test_the_kernel_profile_times_every_launch_even_in_replays(queued_on_host, monkeypatch):
    monkeypatch.setattr(launch, "profile", [])
    x, y, z = pk.from_numpy(np.arange(N, dtype=np.float64)), pk.View([N]), pk.View([N])
    _steps(x, y, z, 6)
    assert sum(fused for _, _, fused, *_ in launch.profile) == 6  # the fused kernel's launches, traced and rerun
    assert queued_on_host == []


@pytest.fixture
def every_launch_queued(monkeypatch):
    """OpenMP kernels get the queued entry and every launch (eager too) asks for it; yields the names of the kernels
    launched through a queued entry."""
    monkeypatch.setattr(codegen, "QUEUED_SPACES", codegen.QUEUED_SPACES | {"OpenMP"})
    calls, real = [], launch.CompiledKernel.launch

    def queued(self, bounds, args, packed=None, wait=True):
        if self._queued is not None and launch.profile is None:  # (launch takes that entry then)
            calls.append(self.name)
        return real(self, bounds, args, packed, wait=False)

    monkeypatch.setattr(launch.CompiledKernel, "launch", queued)
    yield calls


@pytest.mark.backend("kokkos")
@pytest.mark.parametrize("by", [3, -2, 1])
def test_a_queued_division_by_an_argument_computes_what_numpy_does(every_launch_queued, by):
    values = np.arange(-N // 2, N // 2, dtype=np.int64) * 7
    k = pk.from_numpy(values.copy())
    pk.parallel_for(N, halved_twice, k=k, by=by, step=5)
    np.testing.assert_array_equal(np.asarray(k), values // by + np.arange(N) % 5)
    assert every_launch_queued == ["halved_twice"]


@pytest.mark.backend("kokkos")
@pytest.mark.parametrize("by,step", [(0, 5), (3, 0), (-1, 5)])
def test_a_queued_division_that_could_fault_waits_and_reports_as_eager(every_launch_queued, by, step):
    values = np.arange(N, dtype=np.int64)
    k = pk.from_numpy(values.copy())
    if by == -1:  # -1 only faults on the lowest int64: the launch waits, and computes
        pk.parallel_for(N, halved_twice, k=k, by=by, step=step)
        np.testing.assert_array_equal(np.asarray(k), values // by + np.arange(N) % step)
    else:
        with pytest.raises(ZeroDivisionError, match="halved_twice"):
            pk.parallel_for(N, halved_twice, k=k, by=by, step=step)
    assert every_launch_queued == ["halved_twice"]  # the queued entry ran the waiting one


def _two_scratch_views(n: int, level0_bytes: int) -> pk.View:
    out = pk.View([3])
    pk.parallel_for(pk.TeamPolicy(3, 1).set_scratch_size(0, pk.PerTeam(level0_bytes)), two_views, out=out, n=n)
    return out


@pytest.mark.backend("kokkos")
def test_a_queued_team_kernel_staging_through_scratch_computes_what_numpy_does(every_launch_queued):
    values = np.random.default_rng(5).standard_normal((5, 6))
    x, y = pk.from_numpy(values.copy()), pk.View([5])
    team = min(2, kokkos_runtime.concurrency())  # teams of several threads where the machine has them
    policy = pk.TeamPolicy(5, team).set_scratch_size(0, pk.PerTeam(pk.ScratchView2D[pk.double].shmem_size(2, 6)))
    pk.parallel_for(policy, staged, x=x, y=y, width=6)
    np.testing.assert_allclose(np.asarray(y), (values + values * values).sum(axis=1), rtol=1e-14)
    assert every_launch_queued == ["staged"]
    kernel = prepare(staged, "for", policy, (), dict(x=x, y=y, width=6)).prepared.kernel
    assert kernel.last_seconds == 0.0  # the waiting entry, which times its launch, never ran


@pytest.mark.backend("kokkos")
def test_queued_scratch_that_does_not_fit_waits_and_reports_as_the_waiting_entry(every_launch_queued, monkeypatch):
    with pytest.raises(pk.KernelScratchError) as queued:
        _two_scratch_views(4, 47)  # first at 0..12, second at 16..48: one byte short
    assert every_launch_queued == ["two_views"]  # the queued entry ran the waiting one
    monkeypatch.undo()  # launches take the waiting entry alone again
    with pytest.raises(pk.KernelScratchError) as waiting:
        _two_scratch_views(4, 47)
    assert every_launch_queued == ["two_views"]
    assert str(queued.value) == str(waiting.value)
    assert (queued.value.view, queued.value.needed, queued.value.available) == ("second", 48, 47)


@pytest.mark.backend("kokkos")
def test_queued_scratch_not_sure_to_fit_waits_and_computes(every_launch_queued):
    """The host bound pads each View by max(size, 8) - 1 bytes: 7 + 12 + 7 + 32 = 58 bytes for these two, where
    kfuse's count on the device needs 48; in between, the waiting entry runs (and times its launch)."""
    np.testing.assert_array_equal(_two_scratch_views(4, 58), [3.0, 3.0, 3.0])
    kernel = prepare(two_views, "for", pk.TeamPolicy(3, 1).set_scratch_size(0, pk.PerTeam(58)), (),
                     dict(out=pk.View([3]), n=4)).prepared.kernel
    for level0_bytes, waits in [(57, True), (58, False), (48, True), (1024, False)]:
        before = kernel.last_seconds
        np.testing.assert_array_equal(_two_scratch_views(4, level0_bytes), [3.0, 3.0, 3.0])
        assert (kernel.last_seconds != before) == waits, level0_bytes
    assert every_launch_queued == ["two_views"] * 5


@pytest.mark.backend("null")
def test_the_mvt_example_tile_kernel_is_queued_on_a_gpu():
    """examples/npbench/mvt.py's one-pass GPU kernel divides only by its ``blocks`` argument and takes team scratch
    of argument extents (rows by width), sized by ``shmem_size``: a replay queues it, after the host checks both."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from examples.npbench import mvt

    n, width = 40, mvt.TILE_COLUMNS + 1
    x = [pk.View([n]) for _ in range(4)]
    source = _team_source(mvt.add_matvecs_tiles, pk.ScratchView2D[pk.double].shmem_size(mvt.TILE_ROWS, width),
                          x1=x[0], x2=x[1], A=pk.View([n, n]), y1=x[2], y2=x[3], n=n, rows=mvt.TILE_ROWS,
                          width=width, blocks=1)
    queued = _entry(source, "kfuse_launch_queued")
    assert queued is not None and "kf_divisor_safe(kf_f.blocks)" in queued
    assert "kf_scratch_sure(kf_bound, 0, sizeof(double), kf_f.rows, kf_f.width)" in queued


@pytest.mark.backend("kokkos")
def test_a_captured_function_of_one_call_replays_through_the_queued_entry(queued_on_host):
    """A function whose flush is one kernel call (mvt's GPU products) is replayed as that call alone
    (kfuse/capturing.py), which launches queued as a replayed flush's kept launches do."""
    @pk.capture
    def step(x, y):
        pk.parallel_for(N, scaled, x=x, y=y, by=3.0)
        return y

    values = np.random.default_rng(5).standard_normal(N)
    x, y = pk.from_numpy(values.copy()), pk.View([N])
    for k in range(6):
        x[k] = float(k)
        values[k] = float(k)
        np.testing.assert_array_equal(np.asarray(step(x, y)), 3.0 * values)
    assert pk.stats()["calls_captured"] >= 3
    assert len(queued_on_host) == pk.stats()["calls_captured"]  # every replayed launch was queued


# --- fusion on, calls that run at once queue too; fusion off, every launch waits -------------------------------
@pk.workunit
def grown(i, x: pk.View1D[pk.double], by: float):
    x[i] = by * x[i] + 1.0


def _read_after_each(x, calls: int) -> list:
    seen = []
    for _ in range(calls):
        pk.parallel_for(N, grown, x=x, by=0.5)
        seen.append(float(x[3]))  # a host read: each flush is the call alone
    return seen


@pytest.mark.backend("kokkos")
def test_a_kernel_run_untraced_in_a_streak_launches_queued_and_eager_waits(queued_entries):
    values = np.random.default_rng(7).standard_normal(N)
    calls = 3 * untraced.STREAK
    x = pk.from_numpy(values.copy())
    eager = _read_after_each(x, calls)
    assert queued_entries == []  # fusion off: every launch waited
    y = pk.from_numpy(values.copy())
    with pk.fusion():
        fused = _read_after_each(y, calls)
    assert fused == eager and np.array_equal(np.asarray(y), np.asarray(x))
    want = values.copy()
    for _ in range(calls):
        want = 0.5 * want + 1.0
    np.testing.assert_array_equal(np.asarray(y), want)
    assert pk.stats()["calls_untraced"] > 0
    assert queued_entries == ["grown"] * pk.stats()["calls_untraced"]  # each call run untraced was queued


@pytest.mark.backend("kokkos")
def test_untraced_repetitions_launch_queued_and_compute_what_eager_does(queued_entries, monkeypatch, tmp_path):
    """A repeated flush decided untraced (a clock that makes tracing dear, as test_untraced.py's) launches its
    parallel_for calls queued; its reduction, whose value the host reads, waits."""
    monkeypatch.setenv("KFUSE_PROFIT", "measure")
    monkeypatch.setenv("KFUSE_PROFIT_TRIALS", "2")
    monkeypatch.setenv("KFUSE_CACHE_DIR", str(tmp_path / "cache"))
    with config.overridden(config.PROFIT, "off"), pk.fusion():
        time_steps(2)  # builds the fused kernel, so the measured setting weighs no compile
    context.current().rerun.forget()
    # the group's own fused-or-apart trial on the same clock, not the kernels' C++ times (a loaded host's)
    monkeypatch.setattr(context.current().profit, "kernel_time", lambda kernels: None)
    pk.reset_stats()
    expected, got, stats, text = fused_under(lambda: costed_clock(10.0), lambda: time_steps(12))
    assert_same(expected, got)
    assert "run untraced" in text and stats["calls_untraced"] == 3 * 5, (stats, text)
    assert queued_entries.count("push") == queued_entries.count("kick") == 5, queued_entries


@pytest.mark.backend("kokkos")
def test_array_operations_run_at_once_launch_queued(queued_on_host):
    values = np.random.default_rng(9).standard_normal(N)
    x = pk.from_numpy(values.copy())
    for k in range(3):
        y = pk.add(pk.multiply(x, 2.0), float(k))
        np.testing.assert_array_equal(np.asarray(y), 2.0 * values + k)
    assert pk.stats()["array_ops_recorded"] == 6 and len(queued_on_host) == 3, queued_on_host
