"""Running a subject under each fusion mode and turning launches and flushes into per-group figures.

Modes: eager (no tracing), trace (traced, every call launched alone: the tracing overhead), uo (fused,
no transforms), o (fused, all transforms), plus the transform ablation for subjects that ask for it.
Every run records each launch's C++-measured time (``launch.profile``) and every flush the fuser made.

Fused modes run under the profitability setting in force (KFUSE_PROFIT, fuser/profit.py): the warm-up first
builds every fused kernel (KFUSE_PROFIT=off), as it compiles or loads every kernel, then repeats the run until
no group is being timed any more, so the timed runs follow settled decisions. Each group row says what
decided it; a group kept apart is reported as such, with its members' launches as its kernel time.

Each fused mode runs on a runtime of its own (``engine.Runtime`` over the same backend, so kernels are shared):
the modes' runs alternate (in orders that vary by repeat, ``turn_order``), and on one runtime each mode's
repeated flushes, untraced streaks and decisions would evict or reset the others' (a uo run's templates push out the
o run's, whose next run is then traced and timed again), so no mode would reach the steady state a program running
in that mode alone has.
"""
from __future__ import annotations

import contextlib
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np

import kfuse as pk

from .. import config, context, engine
from ..runtime import launch
from ..transforms import manager
from . import subjects

MODES = (("eager", None), ("trace", None), ("uo", "none"), ("o", "all"))
SAMPLE_S = 0.25  # seconds of timed runs per mode, at least (``repeats_for``)
MOST_REPEATS = 1000
E2E_WIDTH = 0.04  # the end-to-end ratio is known well enough once its 90% interval is this wide (of the ratio)
E2E_EXTRA_S = 3.0  # seconds of further eager and fused O turns a subject may take to narrow it (``_narrowed``)


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def fusion_mode(mode: str, transforms: str | None):
    """Set the runtime's tracing and transform set for one run (subjects run with their own fusion flag off)."""
    if mode == "eager":
        pk.disable_fusion()
    else:
        manager.set_transforms(transforms)
        pk.enable_fusion(trace_only=mode == "trace")
    try:
        yield
    finally:
        pk.disable_fusion()
        manager.set_transforms(None)


@contextlib.contextmanager
def _flushes(into: list):
    """Keep every FlushRecord of the block (``explain`` itself keeps only the last few)."""
    runtime = context.current()
    runtime.record_sink = into
    try:
        yield
    finally:
        runtime.record_sink = None


def run_once(go, mode: str, transforms: str | None) -> dict:
    """One timed run of ``go`` in ``mode``. The garbage left by earlier runs is collected first, once the mode is
    set, so that a run does not pay for a collection that its predecessor's allocations (another mode's traces) or
    the switch to its own mode made due (the switch to a fused mode allocates more than the switch to eager: with
    the collection before it, mvt_statements' untraced runs were 5% slower than eager, its eager-priced calls
    meeting a collection more often; 1% with it after, 2 threads here)."""
    profile, flushes = [], []
    launch.profile = profile
    first_call = context.current().calls_made + 1  # the place of the run's first kernel call
    try:
        with _flushes(flushes), fusion_mode(mode, transforms):
            gc.collect()
            seconds = go()
    finally:
        launch.profile = None
    return {"seconds": seconds, "launches": profile, "flushes": flushes, "first_call": first_call}


def spread(values) -> dict:
    values = list(values)
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def label(members: tuple) -> str:
    """'copy+mul+add+triad+dot x2' for a group that repeats a sequence of kernels."""
    n = len(members)
    for p in range(1, n + 1):
        if n % p == 0 and members == members[:p] * (n // p):
            return "+".join(members[:p]) + (f" x{n // p}" if n > p else "")
    return "+".join(members)


def _groups(runs: list) -> dict:
    """Fused kernel name (or "apart:" and the members' names, for a group run apart by a profitability decision)
    -> (member call names, the last profitability text of the group), from the flushes of fused runs (a group
    that launched no fused kernel of its own, having failed to build, is left out)."""
    found = {}
    for run in runs:
        for rec in run["flushes"]:
            for g in rec.groups:
                members = tuple(rec.call_names[i] for i in g)
                kernel = "apart:" + "+".join(members) if rec.apart(g) else rec.kernels.get(g[0])
                if len(g) > 1 and kernel is not None:
                    found[kernel] = (members, rec.choices.get(g[0], "fused: KFUSE_PROFIT=off"))
    return found


def until_settled(run, limit: int = 24) -> list:
    """Repeat ``run`` until two runs in a row time nothing for profitability: a group's trial (fuser/profit.py) or a
    repeated flush's, rerun against untraced (untraced.Trial). One quiet run is not enough: the run that keeps a
    repeated flush times nothing, and the next ones time it. Returns what the runs returned."""
    quiet, results = 0, []
    for _ in range(limit):
        before = pk.stats()["profit_trials"]
        results.append(run())
        quiet = quiet + 1 if pk.stats()["profit_trials"] == before else 0
        if quiet == 2:
            break
    return results


def settle(go, transforms: str | None) -> list:
    """Warm-up of a fused mode: build every fused kernel, then run until nothing is timed for profitability. The
    repeated flushes kept while building (under KFUSE_PROFIT=off) are dropped: a program run under the measured
    setting never makes them, and each costs its first workunit's calls a look. Returns the records of repeated
    flushes decided untraced (their calls then leave no record: the group rows report them from these)."""
    with config.overridden(config.PROFIT, "off"):
        run_once(go, "o", transforms)
    context.current().rerun.forget()
    runs = until_settled(lambda: run_once(go, "o", transforms))
    return [rec for run in runs for rec in run["flushes"] if rec.how == "untraced"]


def _per_launch(runs: list, fused: bool) -> dict:
    times = defaultdict(list)
    for run in runs:
        for name, seconds, is_fused, *_ in run["launches"]:
            if is_fused == fused:
                times[name].append(seconds)
    return times


def _ms(s: dict) -> dict:
    return {k: (v * 1e3 if v is not None else None) for k, v in s.items()}


_E2E = {"eager": "eager", "trace": "trace", "uo": "fused_uo", "o": "fused"}


def _base(mode: str) -> str:
    """Ablation modes are fused runs with another transform set."""
    return "o" if mode.startswith("abl:") else mode


def repeats_for(asked: int, run_seconds: float) -> int:
    """Timed runs per mode: at least ``asked``, and enough that a mode's runs take ``SAMPLE_S`` (up to
    ``MOST_REPEATS``): a median of 9 runs of half a millisecond moved by 10% from run to run of the bench, and of 200
    runs on 16 cores by 3% (mvt_statements: 0.965 and 0.938 of eager in two lent-host runs of the bench)."""
    return max(asked, min(MOST_REPEATS, int(SAMPLE_S / max(run_seconds, 1e-9))))


def measure(subject: subjects.Subject, size: str, repeat: int) -> dict:
    go = subject.prepare(size)
    modes = list(MODES)
    if subject.ablation:
        modes += [(f"abl:{name}", t) for name, t in subjects.ABLATION if t not in ("none", "all")]
    runs = {m: [] for m, _ in modes}
    own = _runtimes(modes)
    untraced = []  # the o mode's repeated flushes decided untraced
    for m, t in modes:  # warm-up: compiles or loads every kernel, and settles the profitability decisions
        log(f"{subject.name}: warm-up {m}")
        with context.using(own[m]):
            if _base(m) in ("uo", "o"):
                decided = settle(go, t)
                untraced = decided if m == "o" else untraced
            else:
                run_once(go, _base(m), t)
    if size != "smoke":  # --smoke checks that the bench runs: once
        repeat = repeats_for(repeat, min(run_once(go, "eager", None)["seconds"] for _ in range(3)))
    for r in range(repeat):
        log(f"{subject.name}: repeat {r + 1}/{repeat}")
        for m, t in turn_order(modes, r):
            with context.using(own[m]):
                runs[m].append(run_once(go, _base(m), t))
    seconds = {m: [r["seconds"] for r in runs[m]] for m in ("eager", "trace", "uo", "o")}
    interval = _narrowed(go, own, seconds["eager"], seconds["o"], E2E_EXTRA_S if size != "smoke" else 0.0)
    result = {"size": size, "repeat": repeat, "e2e_runs": len(seconds["o"]), "fused_vs_eager_interval": interval}
    for m in ("eager", "trace", "uo", "o"):
        result[f"{_E2E[m]}_s"] = spread(seconds[m])
        result[f"{m}_kernel_s"] = spread(sum(entry[1] for entry in r["launches"]) for r in runs[m])
    eager, trace = result["eager_s"]["median"], result["trace_s"]["median"]
    result["trace_overhead_pct"] = 100.0 * (trace - eager) / eager
    result["fused_vs_eager_speedup"] = eager / result["fused_s"]["median"]
    result["analysis_ms"] = spread(1e3 * sum(f.analysis_seconds for f in r["flushes"]) for r in runs["o"])
    result["flushes_per_run"] = len(runs["o"][0]["flushes"]) if runs["o"] else 0
    result["groups"] = _group_rows(runs, modes, repeat, untraced)
    if subject.check:
        with context.using(own["o"]), fusion_mode("o", "all"):
            problem = subject.check(size)
        result["validation"] = "PASS" if problem is None else f"FAIL: {problem}"
    if subject.numpy:
        log(f"{subject.name}: numpy")
        np_go = subject.numpy(size)
        np_go()
        result["numpy_s"] = spread(np_go() for _ in range(repeat))
    return result


def ratio_interval(eager: list, fused: list) -> list:
    """The 90% interval of median(eager) / median(fused), by resampling each side's runs (a fixed seed: the same
    runs give the same interval)."""
    rng = np.random.default_rng(0)
    e, f = np.asarray(eager), np.asarray(fused)
    ratios = np.median(rng.choice(e, (400, e.size)), axis=1) / np.median(rng.choice(f, (400, f.size)), axis=1)
    return [float(q) for q in np.quantile(ratios, [0.05, 0.95])]


def _narrowed(go, own: dict, eager: list, fused: list, budget: float) -> list:
    """Add eager and fused O runs (in turns) to ``eager`` and ``fused`` while their end-to-end ratio's interval is
    wider than ``E2E_WIDTH`` and ``budget`` seconds of runs allow; the interval then. Why: a subject of 10-ms runs
    gets ~20 runs a mode from ``SAMPLE_S``, and on a lent 16-core host the medians of 20 runs of the same kernels
    (GUPS and syrk, their groups run apart, so fused O launches what eager does) stood 6% and 10% apart in one run
    of the bench, under the 0.95 that issue 16 asks of every subject, and 1% apart in the next."""
    spent, r = 0.0, 0
    pair = [("eager", None), ("o", "all")]
    while True:
        interval = ratio_interval(eager, fused)
        if spent >= budget or interval[1] - interval[0] <= E2E_WIDTH * (interval[0] + interval[1]) / 2:
            return interval
        for _ in range(max(2, len(fused) // 4)):  # in steps of a quarter more runs: the interval costs a few ms
            for m, t in turn_order(pair, r):
                with context.using(own[m]):
                    seconds = run_once(go, m, t)["seconds"]
                (eager if m == "eager" else fused).append(seconds)
                spent += seconds
            r += 1


def turn_order(modes: list, r: int) -> list:
    """Repeat ``r``'s order of the modes, so that no mode pays (or gains) by always running in one place or right
    after the same mode: over each cycle of orders (a Williams design: ``len(modes)`` of them, twice as many for an
    odd count), each mode runs in each place, and right after each other mode, equally often."""
    n = len(modes)
    first, low, high = [0], 1, n - 1  # 0, 1, n - 1, 2, n - 2, ...: each step between neighbours is another
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    orders = [[(k + shift) % n for k in first] for shift in range(n)]
    if n % 2:
        orders += [order[::-1] for order in orders]
    return [modes[k] for k in orders[r % len(orders)]]


def _runtimes(modes) -> dict:
    """The runtime each mode runs on: eager on the process's, every other mode on one of its own."""
    process = context.current()
    return {m: process if m == "eager" else engine.Runtime(backend=process.backend) for m, _ in modes}


def _eager_places(eager_runs: list) -> list:
    """Per eager run: each call's place counted from the run's start -> (its kernel's name, seconds)."""
    return [{entry[3] - run["first_call"]: entry[:2] for entry in run["launches"]} for run in eager_runs]


def _by_flush(run: dict) -> dict:
    """A run's launches made by flushes: flush record number -> [(kernel name, seconds), ...] in launch order."""
    launched = defaultdict(list)
    for name, seconds, _, _, flush in run["launches"]:
        if flush is not None:
            launched[flush].append((name, seconds))
    return launched


def _traced_places(trace_runs: list) -> list:
    """Per trace run: each call's place counted from the run's start -> (its kernel's name, seconds). A trace run
    launches each flush's calls one by one, back to back at the host access, as the fused modes launch their groups
    (a flush whose launches do not match its calls one for one is left out)."""
    places = []
    for run in trace_runs:
        launched, at = _by_flush(run), {}
        for rec in run["flushes"]:
            ran = launched.get(rec.number, [])
            if rec.positions is None or [name for name, _ in ran] != rec.call_names:
                continue
            at.update((p - run["first_call"], entry) for p, entry in zip(rec.positions, ran) if p is not None)
        places.append(at)
    return places


def _occurrences(runs: list, launched: list, kernel: str, eager_places: list) -> list:
    """(its members' eager seconds at exactly its calls, its fused launch's seconds) per occurrence of a fused group in
    ``runs`` (``launched``: each run's ``_by_flush``). A flush record keeps each call's place in the program
    (``positions``, ``Runtime.calls_made``), so its k-th call is the eager run's call at that place (same repeat,
    places counted from the run's start, ``_eager_places``; the names must agree, else the occurrence is left out);
    its fused launch is the one of that name in its flush. The places need not be in a row: a flush runs only what
    its host access depends on (ExaMiniMD's setup reads two energies before the virial, so the force kernels run
    in the virial's flush, after both). A kernel's time changes from step to step (ExaMiniMD's force
    loop doubles over 40 steps as the atoms leave their lattice), and one fused kernel may serve groups of several
    sizes, so each side is taken at the same occurrences."""
    pairs = []
    for run, by_flush, at in zip(runs, launched, eager_places):
        for rec in run["flushes"]:
            fused = iter([seconds for name, seconds in by_flush.get(rec.number, ()) if name == kernel])
            for g in rec.groups:
                if len(g) < 2 or rec.apart(g) or rec.kernels.get(g[0]) != kernel:
                    continue
                seconds = next(fused, None)
                if rec.positions is None or seconds is None:
                    continue
                found = [at.get(rec.positions[i] - run["first_call"]) if rec.positions[i] is not None else None
                         for i in g]
                if all(f is not None and f[0] == rec.call_names[i] for f, i in zip(found, g)):
                    pairs.append((sum(f[1] for f in found), seconds))
    return pairs


def _group_rows(runs: dict, modes: list, repeat: int, untraced: list) -> list:
    eager = {n: statistics.median(v) for n, v in _per_launch(runs["eager"], False).items()}
    fused_times = {m: _per_launch(runs[m], True) for m, _ in modes if m not in ("eager", "trace")}
    eager_places, traced_places = _eager_places(runs["eager"]), _traced_places(runs.get("trace", []))
    o_launched = [_by_flush(run) for run in runs["o"]]  # (every group pairs its occurrences in them)
    rows = []
    for fused, (members, decision) in _groups([*runs["o"], {"flushes": untraced}]).items():
        missing = [n for n in members if n not in eager]
        unfused, baseline = None if missing else sum(eager[n] for n in members), "all eager launches"
        apart = fused.startswith("apart:")
        paired = [] if apart else _occurrences(runs["o"], o_launched, fused, eager_places)
        if paired:
            unfused, baseline = statistics.median(p[0] for p in paired), "the same calls eager"
        row = {"name": label(members), "kernel": None if apart else fused, "kernels": len(members),
               "run": "apart" if apart else "fused", "decision": decision,
               "launches_per_run": len(fused_times["o"].get(fused, [])) / max(1, repeat),
               "unfused_ms": unfused * 1e3 if unfused is not None else None, "unfused_from": baseline}
        for m, key in (("uo", "fused_uo"), ("o", "fused_o")):
            s = _ms(spread(p[1] for p in paired) if m == "o" and paired else spread(fused_times[m].get(fused, [])))
            row[f"{key}_ms"], row[f"{key}_range_ms"] = s["median"], [s["min"], s["max"]]
            row[f"speedup_{m}"] = unfused * 1e3 / s["median"] if unfused and s["median"] else None
        ablation = {}
        for m, _ in modes:
            if m.startswith("abl:") or m in ("uo", "o"):
                name = {"uo": "none", "o": "all"}.get(m, m[4:])
                ms = row["fused_o_ms"] if m == "o" else _ms(spread(fused_times[m].get(fused, [])))["median"]
                ablation[name] = {"ms": ms, "speedup": unfused * 1e3 / ms if unfused and ms else None}
        # the same calls launched one by one inside the trace mode's flushes: fusion alone, without what deferring
        # the launches changes (measured: ExaMiniMD's thermo group is slower inside a flush, fused or not)
        in_flush = [] if apart else _occurrences(runs["o"], o_launched, fused, traced_places)
        traced = statistics.median(p[0] for p in in_flush) if in_flush else None
        row["unfused_traced_ms"] = traced * 1e3 if traced is not None else None
        row["speedup_o_traced"] = traced * 1e3 / row["fused_o_ms"] if traced and row["fused_o_ms"] else None
        # what the program got: the fused kernel, or its members' own time when the group ran apart
        row["speedup_chosen"] = 1.0 if apart else row["speedup_o"]
        if len(ablation) > 2:
            row["ablation"] = {name: ablation[name] for name, _ in subjects.ABLATION if name in ablation}
        rows.append(row)
    return rows


# --- compile and cache-load times, in fresh processes -------------------------------------------------
def compile_times(name: str, size: str) -> dict:
    """Run ``name`` fused in a new process with an empty cache (cold: every kernel compiles), then again in a
    new process with that cache (warm: every kernel loads from disk)."""
    with tempfile.TemporaryDirectory(prefix="kfuse_bench_cache_") as tmp:
        env = config.child_environment(CACHE_DIR=tmp)
        out = {}
        for phase in ("cold", "warm"):
            log(f"compile probe ({phase} cache): {name}")
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "kfuse.bench.probe", name, size], env=env,
                                  capture_output=True, text=True, cwd=str(subjects.ROOT))
            wall = time.perf_counter() - start
            if proc.returncode != 0:
                raise RuntimeError(f"compile probe failed: {proc.stderr[-2000:]}")
            data = json.loads(proc.stdout.strip().splitlines()[-1])
            data["process_s"] = wall
            out[phase] = data
    cold, warm = out["cold"], out["warm"]
    return {"subject": name, "size": size, "cold": cold, "warm": warm,
            "compile_s": cold["first_s"] - cold["steady_s"], "cache_load_s": warm["first_s"] - warm["steady_s"]}
