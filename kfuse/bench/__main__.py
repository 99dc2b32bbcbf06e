"""``python -m kfuse.bench [--subjects a,b] [--size small|medium|large] [--repeat N] [--json F] [--plot F.png]
[--smoke] [--space S] [--peers] [--merge A.json B.json ...]``: Markdown on stdout, progress on stderr (``--peers``:
kfuse/bench/peers.py)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .. import config
from ..spaces import ExecutionSpace, get_default_space, set_default_space
from . import measure, peers, report, subjects
from .paper import TABLE5_CPU


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kfuse.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", default=",".join(subjects.ORDER), help="comma list (default: all)")
    parser.add_argument("--size", choices=("small", "medium", "large"), default="small")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="write the results as JSON")
    parser.add_argument("--plot", help="write a PNG bar chart of the group speedups")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat (checks the bench runs)")
    parser.add_argument("--compile-subject", default="paper_fig2",
                        help="subject timed cold vs warm cache in fresh processes ('none' to skip)")
    parser.add_argument("--space", choices=("OpenMP", "Serial", "Cuda", "HIP"), default=None,
                        help="execution space of every kernel (default: KFUSE_DEFAULT_SPACE, else OpenMP)")
    parser.add_argument("--peers", action="store_true",
                        help="time the peer workloads in kfuse and in CuPy / torch.compile / JAX (GPU) or NumPy "
                             "(host); writes bench_results/gpu_<card>_peers.json (cpu_peers.json), or --json")
    parser.add_argument("--merge", nargs="+", metavar="JSON",
                        help="report the subjects of earlier --json files (runs of one bench split by subjects, e.g. "
                             "where a command may run only so long) as one: their Markdown, and --json / --plot")
    args = parser.parse_args(argv)
    if args.merge:
        return _report(_merged(args.merge), args)
    if args.space:  # the environment too, so the cold/warm compile subprocesses use the same space
        config.put(config.DEFAULT_SPACE, args.space)
        set_default_space(ExecutionSpace[args.space])
    if args.peers:
        names = None if args.subjects == parser.get_default("subjects") else args.subjects.split(",")
        return peers.main(1 if args.smoke else args.repeat, args.smoke, args.json, names)
    size, repeat = ("smoke", 1) if args.smoke else (args.size, args.repeat)
    names = [n.strip() for n in args.subjects.split(",") if n.strip()]
    data = {"machine": {**report.machine(), "space": get_default_space().value}, "size": size, "repeat": repeat, "subjects": {}, "skipped": {},
            "paper_table5_cpu": TABLE5_CPU}
    start = time.perf_counter()
    for name in names:
        try:
            subject = subjects.load(name)
        except (ImportError, AttributeError, KeyError) as exc:
            data["skipped"][name] = f"{type(exc).__name__}: {exc}"
            measure.log(f"skipping {name}: {exc}")
            continue
        t0 = time.perf_counter()
        data["subjects"][name] = measure.measure(subject, size, repeat)
        measure.log(f"{name} done in {time.perf_counter() - t0:.1f} s")
        if args.json:  # after each subject: a run cut short (a time limit) keeps what it measured, for --merge
            report.write_json({**data, "bench_seconds": time.perf_counter() - start}, args.json)
    if args.compile_subject != "none":
        data["compile"] = measure.compile_times(args.compile_subject, "smoke" if args.smoke else "small")
    data["bench_seconds"] = time.perf_counter() - start
    return _report(data, args)


def _report(data: dict, args) -> int:
    sys.stdout.write(report.markdown(data))
    if args.json:
        report.write_json(data, args.json)
    if args.plot:
        report.plot(data, args.plot)
    failed = [n for n, r in data["subjects"].items() if r.get("validation", "PASS") != "PASS"]
    return 1 if failed else 0


def _merged(paths: list) -> dict:
    """One bench result from several: the first file's machine and settings, every file's subjects in order."""
    parts = [json.loads(Path(p).read_text()) for p in paths]
    data = dict(parts[0])
    data["subjects"], data["skipped"] = {}, {}
    for part in parts:
        if (part["size"], part["repeat"]) != (data["size"], data["repeat"]):
            raise SystemExit(f"--merge: {paths[parts.index(part)]} has size {part['size']}, repeat {part['repeat']}; "
                             f"{paths[0]} has {data['size']}, {data['repeat']}")
        data["subjects"].update(part["subjects"])
        data["skipped"].update(part.get("skipped", {}))
        if "compile" in part:
            data["compile"] = part["compile"]
    data["bench_seconds"] = sum(part.get("bench_seconds", 0.0) for part in parts)
    return data


if __name__ == "__main__":
    sys.exit(main())
