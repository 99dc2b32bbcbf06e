"""The cost model: is a fused kernel worth its compile, for the runs seen so far?

Fusing saves, per run, the launches of all members but one and the memory traffic of Views that the members each
sweep again (the bytes of the Views each member reads and writes, summed, less those of the fused kernel: each View
loaded once unless a member wrote it first, stored once, and never for the Views nothing reads afterwards, which
the memory transform does not store). It costs a compile when the fused kernel is not built yet, less the compiles
of members not built yet (they would be compiled to run apart). Rule, like renting skis: fuse once the runs seen so
far would have repaid that compile (``runs * saving >= compile``), so a group that runs once never waits seconds to
save microseconds, and one that recurs pays at most about twice what the best choice in hindsight would.

The constants are this repository's measured figures, kept round on purpose: the model only has to tell
microseconds from seconds, and ``KFUSE_PROFIT=measure`` times the groups that recur.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ..policies import MDRangePolicy, RangePolicy

LAUNCH_SECONDS = 5e-6  # one eager launch, binding included (README: 4.3 us)
BYTES_PER_SECOND = 1e10  # one core streaming memory, the order of magnitude


@dataclass(frozen=True)
class Estimate:
    """What fusing one group would save per run, and the compile seconds it costs beyond running it apart."""

    launches_saved: int
    bytes_saved: int
    compile_seconds: float

    @property
    def saving(self) -> float:
        return self.launches_saved * LAUNCH_SECONDS + self.bytes_saved / BYTES_PER_SECOND


def traffic(footprints: list, unstored: tuple = ()) -> tuple:
    """(bytes moved apart, bytes moved fused) by calls with these ``footprints`` (each (reads, writes): byte
    ranges, tracer/trace.footprint), in order. Fused, a View is loaded once unless an earlier member wrote it (the
    fuser proved each thread touches its own elements: the value is in a register or the cache) and stored once;
    ``unstored``: ranges of Views the fused kernel does not store (nothing reads them afterwards)."""
    apart = sum(hi - lo for reads, writes in footprints for lo, hi in reads + writes)
    loads, stores = set(), set()
    for reads, writes in footprints:
        loads.update(r for r in reads if r not in stores)
        stores.update(writes)
    return apart, sum(hi - lo for lo, hi in loads) + sum(hi - lo for lo, hi in stores - set(unstored))


def estimate(members: int, footprints: list, unstored: tuple, compile_fused: float, compile_apart: float) -> Estimate:
    """``compile_fused``: seconds to build the fused kernel (0 when built); ``compile_apart``: to build the
    members that are not built yet."""
    apart, fused = traffic(footprints, unstored)
    return Estimate(members - 1, max(0, apart - fused), compile_fused - compile_apart)


def judge(est: Estimate, runs: int) -> tuple:
    """(fuse?, the reason in explain()'s words) after ``runs`` occurrences of the group, this one included."""
    if est.compile_seconds <= 0:
        return True, "fused: costs no compile beyond its members'"
    saves = f"saves ~{_seconds(est.saving)} a run"
    if runs * est.saving >= est.compile_seconds:
        return True, f"fused: a {_seconds(est.compile_seconds)} compile repaid by {runs} run(s) ({saves})"
    return False, (f"unfused: a {_seconds(est.compile_seconds)} compile not repaid by {runs} run(s) ({saves}; "
                   "cost model)")


def iterations(policy) -> int:
    """Thread indices a launch runs (a TeamPolicy: league size times team size)."""
    if isinstance(policy, RangePolicy):
        return max(0, policy.end - policy.begin)
    if isinstance(policy, MDRangePolicy):
        return prod(max(0, e - b) for b, e in zip(policy.begins, policy.ends))
    return policy.league_size * max(1, policy.team_size)


def _seconds(s: float) -> str:
    return f"{s:.2g} s" if s >= 0.1 else f"{s * 1e3:.2g} ms" if s >= 1e-4 else f"{s * 1e6:.2g} us"
