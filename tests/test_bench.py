"""The benchmark driver and the demo, run as a user would (subprocesses): the bench's JSON carries every
field the reports promise, its PNG is a real image, and the demo validates its results and exits 0."""
import contextlib
import json
from collections import Counter
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
GROUP_FIELDS = ("name", "kernels", "unfused_ms", "fused_uo_ms", "fused_o_ms", "speedup_uo", "speedup_o",
                "unfused_traced_ms", "speedup_o_traced")
SUBJECT_FIELDS = ("eager_s", "trace_s", "fused_uo_s", "fused_s", "trace_overhead_pct", "analysis_ms", "groups")


def _run(*args, timeout=600):
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_bench_smoke_writes_json_markdown_and_png(tmp_path):
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    proc = _run("-m", "kfuse.bench", "--smoke", "--subjects", "paper_fig2,mvt,nstream", "--json", str(out_json),
                "--plot", str(out_png))
    data = json.loads(out_json.read_text())
    assert set(data["subjects"]) == {"paper_fig2", "mvt", "nstream"} and not data["skipped"]
    for key in ("platform", "cpu_count", "kfuse_num_threads", "compiler", "kokkos_version"):
        assert data["machine"][key] not in (None, "")
    for name, res in data["subjects"].items():
        for key in SUBJECT_FIELDS:
            assert key in res, (name, key)
        assert res["eager_s"]["min"] <= res["eager_s"]["median"] <= res["eager_s"]["max"]
        assert res["groups"], f"{name}: the fuser formed no group"
        for g in res["groups"]:
            for key in GROUP_FIELDS:
                assert g[key] is not None and (not isinstance(g[key], float) or g[key] > 0), (name, g)
    # Every subject here fuses a known number of calls per group: add+mul, the two products, 5 iterations.
    assert [g["kernels"] for g in data["subjects"]["paper_fig2"]["groups"]] == [2]
    assert [g["kernels"] for g in data["subjects"]["mvt"]["groups"]] == [2]
    assert [g["kernels"] for g in data["subjects"]["nstream"]["groups"]] == [5]
    assert data["subjects"]["paper_fig2"]["validation"] == "PASS"
    assert data["subjects"]["mvt"]["validation"] == "PASS" and data["subjects"]["mvt"]["numpy_s"]["median"] > 0
    ablation = data["subjects"]["paper_fig2"]["groups"][0]["ablation"]
    assert list(ablation) == ["none", "args", "args+loops", "args+loops+restrict", "all"]
    compile_ = data["compile"]
    assert compile_["cold"]["compiles"] > 0 and compile_["warm"]["compiles"] == 0
    assert compile_["warm"]["cache_hits"] >= compile_["cold"]["compiles"]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for heading in ("Fused groups", "End to end", "Transform ablation", "Compile vs cache load", "paper"):
        assert heading in proc.stdout
    assert "NS (50) 6.55/24.63" in proc.stdout  # the paper's Table 5 row, next to ours
    _check_merge(tmp_path, data)


def _check_merge(tmp_path, data: dict) -> None:
    """``--merge``: a bench split by subjects reports as one (same subjects, same Markdown sections); parts of
    another size are refused."""
    parts = []
    for k, names in enumerate((["paper_fig2"], ["mvt", "nstream"])):
        part = dict(data, subjects={n: data["subjects"][n] for n in names}, bench_seconds=1.5)
        parts.append(tmp_path / f"part{k}.json")
        parts[-1].write_text(json.dumps(part))
    merged_json = tmp_path / "merged.json"
    proc = _run("-m", "kfuse.bench", "--merge", *map(str, parts), "--json", str(merged_json))
    merged = json.loads(merged_json.read_text())
    assert merged["subjects"] == data["subjects"] and merged["bench_seconds"] == 3.0
    assert merged["machine"] == data["machine"] and "End to end" in proc.stdout and "| nstream |" in proc.stdout
    parts[1].write_text(json.dumps(dict(data, size="medium")))
    refused = subprocess.run([sys.executable, "-m", "kfuse.bench", "--merge", *map(str, parts)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "has size medium" in refused.stderr


def test_bench_skips_unknown_subject_with_reason(tmp_path):
    out_json = tmp_path / "bench.json"
    _run("-m", "kfuse.bench", "--smoke", "--subjects", "mvt,no_such_subject", "--compile-subject", "none",
         "--json", str(out_json))
    data = json.loads(out_json.read_text())
    assert list(data["subjects"]) == ["mvt"]
    assert "no_such_subject" in data["skipped"]["no_such_subject"]


def test_a_bench_cut_short_keeps_the_subjects_it_measured(tmp_path, monkeypatch):
    """A time limit that stops the bench in its second subject leaves the first one's results in the JSON, whole,
    for ``--merge`` with a run of the rest."""
    from kfuse.bench import __main__ as bench, measure

    out_json = tmp_path / "bench.json"
    measured = measure.measure

    def second_times_out(subject, size, repeat):
        if subject.name == "nstream":
            raise KeyboardInterrupt  # what a SIGINT from a time limit raises
        return measured(subject, size, repeat)

    monkeypatch.setattr(measure, "measure", second_times_out)
    with pytest.raises(KeyboardInterrupt):
        bench.main(["--smoke", "--subjects", "mvt,nstream", "--compile-subject", "none", "--json", str(out_json)])
    data = json.loads(out_json.read_text())
    assert list(data["subjects"]) == ["mvt"] and data["subjects"]["mvt"]["groups"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.json"]  # no partial file left


def test_demo_validates_and_exits_zero():
    proc = _run("-m", "kfuse.demo")
    lines = [ln for ln in proc.stdout.splitlines() if ln.rstrip().endswith(("PASS", "FAIL"))]
    assert len(lines) == 3 and all(ln.rstrip().endswith("PASS") for ln in lines), proc.stdout
    assert "add + mul" in proc.stdout and "fused 2 calls" in proc.stdout


def test_peers_bench_on_the_host_writes_every_workload_against_numpy(tmp_path):
    out_json = tmp_path / "peers.json"
    proc = _run("-m", "kfuse.bench", "--peers", "--smoke", "--space", "OpenMP", "--subjects", "nstream,gaussian",
                "--json", str(out_json))
    data = json.loads(out_json.read_text())
    assert data["card"] == "cpu" and data["space"] == "OpenMP" and data["peers"] == ["numpy"] and data["isolated"]
    assert list(data["workloads"]) == ["nstream", "gaussian"]
    assert data["checks"] == {"nstream": "PASS", "gaussian": "PASS"}
    for row in data["workloads"].values():
        assert set(row) == {"kfuse_fused_ms", "kfuse_captured_ms", "kfuse_eager_ms", "numpy_ms"}
        assert all(v > 0 for v in row.values())
    assert "| nstream |" in proc.stdout


def test_peers_are_found_or_reported_missing_and_wrong_results_are_caught(monkeypatch):
    from kfuse.bench import peers

    (numpy_peer,), missing = peers.find_peers(on_gpu=False)
    assert numpy_peer.name == "numpy" and missing == {}
    found, missing = peers.find_peers(on_gpu=True)
    assert {p.name for p in found} | set(missing) == {"cupy", "torch_compile", "jax"}
    assert all(why for why in missing.values())  # e.g. "ModuleNotFoundError: No module named 'cupy'"
    assert peers.check(lambda: (np.ones(3), 2.0), (np.ones(3), 2.0)) == "PASS"
    assert peers.check(lambda: (np.ones(3), 2.0), (np.ones(3), 2.5)).startswith("output 1 differs")
    for gpu, name in (("NVIDIA H100 80GB HBM3; release 13.0", "h100"), ("NVIDIA H200", "h200"),
                      ("NVIDIA GeForce RTX 4090", "gpu")):
        monkeypatch.setattr(peers.report, "machine", lambda gpu=gpu: {"gpu": gpu})
        assert peers.card() == name


def test_each_peer_workload_is_measured_in_a_process_of_its_own(monkeypatch):
    """``peers.measure`` hands every workload to a fresh process and merges what each measured, in order, saving
    after each."""
    from kfuse.bench import peers

    asked, saved = [], []

    def isolated(repeat, smoke, name):
        asked.append(name)
        return {"card": "cpu", "peers": ["numpy"], "missing": {}, "checks": {name: "PASS"},
                "workloads": {name: {"kfuse_fused_ms": float(len(asked))}}}
    monkeypatch.setattr(peers, "_isolated", isolated)
    data = peers.measure(1, True, ["mvt", "nstream"], save=lambda d: saved.append(list(d["workloads"])))
    assert asked == ["mvt", "nstream"] and saved == [["mvt"], ["mvt", "nstream"]] and data["isolated"]
    assert data["checks"] == {"mvt": "PASS", "nstream": "PASS"}
    assert data["workloads"] == {"mvt": {"kfuse_fused_ms": 1.0}, "nstream": {"kfuse_fused_ms": 2.0}}


def test_peer_timings_fill_their_sample_time_unless_asked_for_exact_runs(monkeypatch):
    """``peers.median_ms`` times at least ``repeat`` runs after its warm-up and, sampling, enough that they fill
    ``SAMPLE_S``, at most ``MOST_REPEATS``; the median is of those timings."""
    from kfuse.bench import measure, peers

    clock = {"now": 0.0}
    monkeypatch.setattr(peers.time, "perf_counter", lambda: clock["now"])
    runs = []

    step = 2.0 ** -9  # each run takes about 2 ms on the fake clock (a binary fraction: the sums stay exact)

    def run():
        runs.append(1)
        clock["now"] += step

    assert peers.median_ms(run, 7, sample=False) == step * 1e3 and len(runs) == 8
    runs.clear()
    assert peers.median_ms(run, 7) == step * 1e3
    assert len(runs) == 1 + int(measure.SAMPLE_S / step)  # the warm-up, then 0.25 s of timed runs
    monkeypatch.setattr(measure, "MOST_REPEATS", 20)
    runs.clear()
    peers.median_ms(run, 7)
    assert len(runs) == 1 + 20
    data = {"card": "h200", "space": "Cuda", "repeat": 7, "sample_s": 0.25, "peers": [], "workloads": {},
            "checks": {}, "missing": {}}
    assert "median of at least 7 runs filling 0.25 s" in peers.markdown(data)
    assert "median of 7," in peers.markdown({**data, "sample_s": 0.0})


def test_peer_array_code_equals_numpy_for_every_workload():
    """The peers' version of each workload, run with NumPy as ``xp``, against the repository's NumPy references."""
    from kfuse.bench import numpy_refs, peers, subjects

    rng = np.random.default_rng(1)
    A, B, C = rng.random(64), rng.random(64), rng.random(64)
    want = A.copy()
    for _ in range(peers.ITERATIONS):
        want += B + 3.0 * C
    np.testing.assert_allclose(peers.nstream_xp(np, A, B, C), want, rtol=1e-14)
    x, mu, var = rng.random(64), rng.random(64), rng.uniform(0.5, 2, 64)
    assert peers.gaussian_xp(np, x, mu, var) == pytest.approx(
        np.sum(-0.5 * np.log(2 * np.pi * var) - (x - mu) ** 2 / (2 * var)), rel=1e-14)
    a, *rest = peers.babelstream_xp(np, A, B, C)
    assert len(rest[-1]) == peers.BABEL_ITERATIONS
    M = rng.random((8, 8))
    for got, ref in zip(peers.mvt_xp(np, M, A[:8], B[:8], C[:8], x[:8]), numpy_refs.mvt(M, A[:8], B[:8], C[:8], x[:8])):
        np.testing.assert_array_equal(got, ref)
    nb = subjects.import_example("examples.gaussian_nb_array", "numpy_fit_predict")
    X, y = subjects.import_example("examples.gaussian_nb", "make_data").make_data(300, 4, 3)
    ref = nb.numpy_fit_predict(X[:200], y[:200], X[200:])
    got = peers.gaussian_nb_xp(np, X[200:], ref["theta"], ref["var"], np.log(ref["class_prior"]))
    np.testing.assert_array_equal(got, np.argmax(ref["jll"], axis=1))


def test_each_fused_mode_runs_on_a_runtime_of_its_own_while_the_modes_alternate(monkeypatch):
    """The bench alternates eager, trace, uo and o runs. On one runtime the modes' repeated flushes, untraced streaks
    and profitability timings evicted or reset each other's (measured: ExaMiniMD's o runs planned and timed flushes
    again after every uo run, where o runs alone rerun them), so each fused mode runs on a runtime of its own over
    the same backend, and eager on the process's."""
    from kfuse import context
    from kfuse.bench import measure, subjects

    process = context.current()
    seen: dict = {}
    real = measure.run_once

    def run_once(go, mode, transforms):
        seen.setdefault((mode, transforms), set()).add(id(context.current()))
        assert context.current().backend is process.backend
        return real(go, mode, transforms)

    monkeypatch.setattr(measure, "run_once", run_once)
    measure.measure(subjects.load("paper_fig2"), "smoke", 2)
    assert seen[("eager", None)] == {id(process)}
    assert all(len(runtimes) == 1 for runtimes in seen.values()), seen  # each mode keeps its runtime
    main = [seen[key].pop() for key in (("eager", None), ("trace", None), ("o", "none"), ("o", "all"))]
    assert len(set(main)) == 4, seen


def test_a_trace_run_places_each_launch_at_its_call_and_skips_a_flush_that_does_not_match():
    from kfuse.bench import measure
    from kfuse.fuser.explain import FlushRecord

    def record(number, names, positions):
        return FlushRecord(number, names, [[k] for k in range(len(names))], [], 0.0, "", False, positions=positions)

    run = {"first_call": 11, "flushes": [record(1, ["a", "b"], [11, 13]), record(2, ["c", "d"], [14, 15])],
           "launches": [("a", 1.0, False, 13, 1), ("b", 2.0, False, 13, 1), ("c", 3.0, False, 15, 2),
                        ("x", 4.0, False, 15, 2)]}  # flush 2 launched another kernel than its second call's
    assert measure._traced_places([run]) == [{0: ("a", 1.0), 2: ("b", 2.0)}]


def test_the_modes_take_turns_so_each_runs_in_each_place_and_after_each_other_mode_equally_often(monkeypatch):
    """A mode that always ran in one place, or right after the same mode, would pay (or gain) for it at every
    repeat: over 8 repeats of the 4 modes each mode runs twice in each place, and right after each other mode twice
    within a repeat."""
    from kfuse.bench import measure, subjects

    order = []
    real = measure.run_once

    def run_once(go, mode, transforms):
        order.append(f"{mode}:{transforms}")
        return real(go, mode, transforms)

    monkeypatch.setattr(measure, "run_once", run_once)
    monkeypatch.setattr(measure, "repeats_for", lambda asked, seconds: asked)
    monkeypatch.setattr(measure, "E2E_EXTRA_S", 0.0)  # (the end-to-end pair's further turns: tested below)
    subject = subjects.load("paper_fig2")
    measure.measure(subjects.Subject(subject.name, subject.prepare), "small", 8)
    modes = ["eager:None", "trace:None", "uo:none", "o:all"]
    rounds = [order[-32:][k:k + 4] for k in range(0, 32, 4)]
    assert all(sorted(r) == sorted(modes) for r in rounds), rounds
    for place in range(4):
        assert sorted(r[place] for r in rounds) == sorted(modes * 2), (place, rounds)
    pairs = Counter((a, b) for r in rounds for a, b in zip(r, r[1:]))
    assert pairs == {(a, b): 2 for a in modes for b in modes if a != b}, (pairs, rounds)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7])
def test_each_cycle_of_turn_orders_is_a_williams_design(n):
    from kfuse.bench import measure

    cycle = n if n % 2 == 0 else 2 * n
    orders = [measure.turn_order(list(range(n)), r) for r in range(cycle)]
    assert measure.turn_order(list(range(n)), cycle) == orders[0]
    for place in range(n):
        assert Counter(o[place] for o in orders) == {m: cycle // n for m in range(n)}
    pairs = Counter((a, b) for o in orders for a, b in zip(o, o[1:]))
    assert pairs == {(a, b): cycle // n for a in range(n) for b in range(n) if a != b}


def test_a_timed_run_collects_garbage_once_its_mode_is_set(monkeypatch):
    """The switch to a fused mode allocates more than the switch to eager; collected before it, that garbage made
    the fused runs meet a collection more often than eager ones (mvt_statements 5% slower untraced, 1% once
    collected after the switch), so the collection comes after it, just before the program runs."""
    from kfuse import context
    from kfuse.bench import measure, subjects
    from kfuse.transforms import manager

    seen = []
    monkeypatch.setattr(measure.gc, "collect", lambda: seen.append((context.current().enabled,
                                                                     context.current().transforms)))
    go = subjects.load("paper_fig2").prepare("smoke")
    for mode, transforms in measure.MODES:
        seen.clear()
        measure.run_once(go, mode, transforms)
        want = (mode != "eager", manager.parse(transforms) if transforms else None)
        assert seen == [want], (mode, seen)


def test_the_end_to_end_ratio_interval_narrows_with_runs_and_holds_the_true_ratio():
    """Over 60 draws of skewed run times (equal sides), the 90% interval holds the true ratio 1.0 about 90% of the
    times; with 10 times the runs it is about 3 times narrower; a side 20% slower is told apart."""
    from kfuse.bench import measure

    rng = np.random.default_rng(5)

    def draws(n):
        return [measure.ratio_interval(list(10.0 + rng.exponential(1.0, n)), list(10.0 + rng.exponential(1.0, n)))
                for _ in range(60)]

    few, many = draws(20), draws(200)
    assert sum(lo <= 1.0 <= hi for lo, hi in few) >= 48 and sum(lo <= 1.0 <= hi for lo, hi in many) >= 48
    width = [float(np.median([hi - lo for lo, hi in d])) for d in (few, many)]
    assert 2.0 < width[0] / width[1] < 5.0
    slower = measure.ratio_interval(list(10.0 + rng.exponential(1.0, 20)), list(12.0 + rng.exponential(1.0, 20)))
    assert slower[1] < 0.95


def test_a_wide_end_to_end_interval_gets_eager_and_fused_turns_until_narrow_or_out_of_time(monkeypatch):
    """Runs of one kernel whose times scatter by 20% give an interval wider than E2E_WIDTH at 20 runs a mode: more
    eager and fused O runs, in turns, narrow it; a budget of none adds nothing, and the turns stop at the budget."""
    from kfuse.bench import measure

    rng = np.random.default_rng(7)
    order = []

    def run_once(go, mode, transforms):
        order.append(mode)
        return {"seconds": 0.010 * (1.0 + 0.2 * rng.random())}

    monkeypatch.setattr(measure, "run_once", run_once)
    own = {"eager": None, "o": None}
    monkeypatch.setattr(measure.context, "using", lambda runtime: contextlib.nullcontext())
    start = [0.010 * (1.0 + 0.2 * rng.random()) for _ in range(40)]
    eager, fused = start[:20], start[20:]
    assert measure._narrowed(None, own, list(eager), list(fused), 0.0) == measure.ratio_interval(eager, fused)
    assert not order
    lo, hi = measure._narrowed(None, own, eager, fused, 100.0)
    assert hi - lo <= measure.E2E_WIDTH * (lo + hi) / 2 < measure.ratio_interval(start[:20], start[20:])[1] - \
        measure.ratio_interval(start[:20], start[20:])[0]
    assert len(eager) == len(fused) > 20 and Counter(order) == {"eager": len(eager) - 20, "o": len(fused) - 20}
    order.clear()
    eager, fused = start[:20], start[20:]
    measure._narrowed(None, own, eager, fused, 0.05)  # 5 runs of ~11 ms: the first step of 5 pairs, then no more
    assert len(order) == 10
