"""``python -m kfuse.check --programs N [--seed S] [--jobs J] [--timeout T]``: run N random cases.

Cases run in worker processes (``--jobs`` of them, each on its share of the cases), so a crash
(the worker dies) or a hang (no answer within ``--timeout`` seconds) is caught, counted against the
case that caused it, and the worker restarted after it. Prints the number of programs run, mismatches,
crashes and hangs, then each failing case shrunk to a small one, as Python. Exit status 1 if any.
"""
from __future__ import annotations

import argparse
import os
import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field

from .. import backends, config, context
from . import case_for, check, shrink
from .program import as_python, from_json, to_json

SHRINK_BUDGET_IN_PROCESS = 400
SHRINK_BUDGET_SUBPROCESS = 40  # each try of a crashing/hanging case starts a process


@dataclass
class Outcome:
    index: int
    kind: str  # "ok", "mismatch", "crash", "hang"
    details: list = field(default_factory=list)
    minimal: str = ""


def _launch_as_on_a_gpu() -> None:
    """Host kernels get the queued entry GPU loops have (kfuse/codegen/kernel.py ``QUEUED_SPACES``), which reruns
    and replays take, as on a GPU: its launch without the fence, and its host check of the divisors a loop divides
    by and of the team scratch memory it takes (a divisor that could fault, or a View that might not fit, runs the
    waiting entry); and loops adding up terms split as on a GPU
    (kfuse/codegen/lanes.py ``LANE_SPACES``: one lane an index on the host, the same C++ otherwise); and range
    reductions run in blocks' order, their leading loads loaded first (kfuse/codegen/blocks.py: every sum, a
    single one too, so eager and fused sums add in one order). For this process and the workers it starts; set
    before any kernel is generated, since kernels are kept as first made."""
    from ..codegen import blocks, lanes
    from ..codegen import kernel as codegen
    host = {"OpenMP", "Serial"}
    codegen.QUEUED_SPACES = codegen.QUEUED_SPACES | host
    lanes.LANE_SPACES = lanes.LANE_SPACES | host
    blocks.BLOCK_SPACES, blocks.SINGLE_SUM_SPACES = blocks.BLOCK_SPACES | host, blocks.SINGLE_SUM_SPACES | host


# --- worker side ----------------------------------------------------------------------------------
def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def _check_one(case) -> tuple:
    """(kind, details) for one case, in this process."""
    try:
        mismatches = check(case)
    except TimeoutError as exc:  # a program thread never finished
        return "hang", [str(exc)]
    except Exception:  # noqa: BLE001 - anything escaping the runner is a crash of the check
        return "crash", [traceback.format_exc()]
    return ("mismatch" if mismatches else "ok"), mismatches


def _worker(seed: int, start: int, stop: int) -> int:
    for index in range(start, stop):
        _emit({"start": index})
        case = case_for(seed, index)
        kind, details = _check_one(case)
        record = {"done": index, "kind": kind, "details": details}
        if kind == "mismatch":
            minimal = shrink(case, lambda c: bool(_check_one(c)[1]), SHRINK_BUDGET_IN_PROCESS)
            record["minimal"] = as_python(minimal)
            record["details"] = _check_one(minimal)[1] or details
        _emit(record)
        if kind == "hang":
            sys.stdout.flush()
            os._exit(3)  # a thread is stuck: this process cannot go on
    return 0


def _run_case(text: str) -> int:
    kind, details = _check_one(from_json(text))
    _emit({"done": 0, "kind": kind, "details": details})
    return 0


# --- driver side ----------------------------------------------------------------------------------
def _worker_command(*args) -> list:
    return [sys.executable, "-m", "kfuse.check", *map(str, args)]


def _lines(stream, sink: queue.Queue) -> None:
    for line in stream:
        sink.put(line)
    sink.put(None)


def _drive(seed: int, start: int, stop: int, timeout: float, outcomes: list, progress) -> None:
    """Run cases [start, stop) in a worker; restart it after a crash or a hang."""
    while start < stop:
        with tempfile.TemporaryFile(mode="w+") as stderr:
            proc = subprocess.Popen(_worker_command("--seed", seed, "--worker", start, stop), stdout=subprocess.PIPE,
                                    stderr=stderr, text=True)
            lines: queue.Queue = queue.Queue()
            threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
            current = None
            while True:
                try:
                    line = lines.get(timeout=timeout)
                except queue.Empty:
                    proc.kill()
                    proc.wait()
                    index = start if current is None else current
                    outcomes.append(Outcome(index, "hang", [f"no answer in {timeout:.0f} s"]))
                    progress()
                    start = index + 1
                    break
                if line is None:  # the worker ended
                    proc.wait()
                    if current is not None or start < stop:
                        index = start if current is None else current
                        stderr.seek(0)
                        tail = stderr.read()[-3000:]
                        outcomes.append(Outcome(index, "crash", [f"worker exit status {proc.returncode}", tail]))
                        progress()
                        start = index + 1
                    break
                record = json.loads(line)
                if "start" in record:
                    current = record["start"]
                    continue
                outcomes.append(Outcome(record["done"], record["kind"], record["details"], record.get("minimal", "")))
                progress()
                current, start = None, record["done"] + 1
                if record["kind"] == "hang":
                    proc.wait()
                    break


def _subprocess_kind(case, timeout: float) -> str:
    try:
        proc = subprocess.run(_worker_command("--run-case"), input=to_json(case), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang"
    if proc.returncode != 0:
        return "crash"
    return json.loads(proc.stdout.strip().splitlines()[-1])["kind"]


def _shrink_in_subprocesses(outcome: Outcome, seed: int, timeout: float) -> None:
    minimal = shrink(case_for(seed, outcome.index), lambda c: _subprocess_kind(c, timeout) == outcome.kind,
                     SHRINK_BUDGET_SUBPROCESS)
    outcome.minimal = as_python(minimal)


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kfuse.check", description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=1000, help="random cases to run (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="case i is the same for the same seed (default 0)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one case may take before it counts as a hang (default 120; first runs "
                             "compile kernels)")
    parser.add_argument("--show", type=int, default=5, help="failing cases to shrink and print (default 5)")
    parser.add_argument("--backend", choices=("kokkos", "python"), default=None,
                        help="what runs the kernels (default: KFUSE_BACKEND, else kokkos); python needs no compiler")
    parser.add_argument("--worker", nargs=2, type=int, metavar=("START", "STOP"), help=argparse.SUPPRESS)
    parser.add_argument("--run-case", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    _launch_as_on_a_gpu()
    if args.backend:
        config.put(config.BACKEND, args.backend)  # for the workers this process starts
        context.current().backend = backends.named(args.backend)  # and for the cases it shrinks itself
    if args.worker:
        return _worker(args.seed, *args.worker)
    if args.run_case:
        return _run_case(sys.stdin.read())

    began = time.perf_counter()
    outcomes: list = []
    lock = threading.Lock()
    done = [0]

    def progress():
        with lock:
            done[0] += 1
            if done[0] % 100 == 0:
                print(f"kfuse.check: {done[0]}/{args.programs} programs, {time.perf_counter() - began:.0f} s",
                      file=sys.stderr, flush=True)

    jobs = max(1, min(args.jobs, args.programs))
    bounds = [args.programs * j // jobs for j in range(jobs + 1)]
    drivers = [threading.Thread(target=_drive, args=(args.seed, bounds[j], bounds[j + 1], args.timeout, outcomes,
                                                     progress)) for j in range(jobs)]
    for d in drivers:
        d.start()
    for d in drivers:
        d.join()
    seconds = time.perf_counter() - began
    failed = sorted((o for o in outcomes if o.kind != "ok"), key=lambda o: o.index)
    counts = {kind: sum(o.kind == kind for o in outcomes) for kind in ("mismatch", "crash", "hang")}
    print(f"kfuse.check: {len(outcomes)} programs run (seed {args.seed}): {counts['mismatch']} mismatches, "
          f"{counts['crash']} crashes, {counts['hang']} hangs; {seconds:.1f} s with {jobs} job(s), "
          f"load average {_load()}")
    for outcome in failed[:args.show]:
        if not outcome.minimal:
            _shrink_in_subprocesses(outcome, args.seed, args.timeout)
        print(f"\n--- case {outcome.index} (seed {args.seed}): {outcome.kind}; shrunk to:\n{outcome.minimal}")
        for line in outcome.details[:10]:
            print("  " + line.replace("\n", "\n  "))
    if len(failed) > args.show:
        print(f"\n({len(failed) - args.show} more failing cases: {[o.index for o in failed[args.show:]]})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
