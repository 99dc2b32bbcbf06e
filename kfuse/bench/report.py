"""The bench's outputs: machine description, Markdown tables (stdout), JSON, and a PNG of group speedups."""
from __future__ import annotations

import json
import os
import platform

from .. import config
from ..compiler import toolchain
from .paper import TABLE5_CPU
from .subjects import npbench_name


def machine() -> dict:
    tc = toolchain.current()
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(), "cpu_count": os.cpu_count(),
            "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "kfuse_num_threads": config.NUM_THREADS.get(), "load_average_1min": os.getloadavg()[0],
            "compiler": tc.cxx_version, "opt_flags": " ".join(tc.opt_flags), "kokkos_version": tc.kokkos_version,
            "kokkos_backends": list(tc.backends), "gpu": _gpu() if tc.device else None}


def _gpu() -> str | None:
    """GPU name, driver and CUDA compiler version, as nvidia-smi and nvcc report them."""
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return None
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    return f"{smi}; {nvcc[-1] if nvcc else 'nvcc ?'}"


def _f(x, digits=3) -> str:
    return "-" if x is None else f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:.0f}"


def _s(s: dict | None, scale=1.0) -> str:
    if not s or s.get("median") is None:
        return "-"
    return f"{_f(s['median'] * scale)} [{_f(s['min'] * scale)}-{_f(s['max'] * scale)}]"


def _n(r: dict, data: dict) -> str:
    """Timed runs of a subject: per mode, and where more eager and fused O runs narrowed their ratio, theirs."""
    n = r.get("repeat", data["repeat"])
    return f"{n} ({r['e2e_runs']})" if r.get("e2e_runs", n) != n else str(n)


def _band(r: dict) -> str:
    """The end-to-end ratio's 90% interval, where measured (``measure.ratio_interval``)."""
    lo, hi = r.get("fused_vs_eager_interval") or (None, None)
    return f" [{lo:.2f}-{hi:.2f}]" if lo is not None else ""


def _x(x) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _by_paper_row(subs: dict) -> list:
    """Subject names in run order, each NPBench subject's forms (adi, adi_statements) next to each other: they
    share the paper's rows."""
    rows: dict = {}
    for name in subs:
        rows.setdefault(npbench_name(name), []).append(name)
    return [name for names in rows.values() for name in names]


def markdown(data: dict) -> str:
    m = data["machine"]
    out = ["# kfuse benchmark", "",
           f"Machine: {m['platform']}, {m['cpus_usable']} usable CPUs of {m['cpu_count']}, "
           f"KFUSE_NUM_THREADS={m['kfuse_num_threads']}, load average {m['load_average_1min']:.1f} at start; "
           f"compiler: {m['compiler']} {m['opt_flags']}; Kokkos "
           f"{m['kokkos_version']} ({', '.join(m['kokkos_backends'])}); Python {m['python']}; execution space "
           f"{m.get('space', 'OpenMP')}{'; GPU: ' + m['gpu'] if m.get('gpu') else ''}.",
           f"Size `{data['size']}`, {data['repeat']} timed repeats after a warm-up, more for a subject whose runs are "
           f"short (each mode's timed runs take 0.25 s at least, up to 200 repeats; the end-to-end table's *n*); "
           f"medians with [min-max].", ""]
    subs = data["subjects"]
    out += ["## Fused groups: kernel time per launch (C++-timed, ms)", "",
            "Groups the fuser formed; *run* says whether the O runs launched the fused kernel or, by a "
            "profitability decision (KFUSE_PROFIT), the members apart (then no fused time, and the members' time "
            "is what the program got: speedup 1.00x). *unfused* is the members' eager time at exactly the calls the "
            "group fused (the same places in the program), else the sum of their medians over every eager "
            "launch (each row's unfused_from). *in flush*: the same calls launched one by one inside the trace "
            "mode's flushes, as deferred launches run, and O's speedup over that (fusion alone).", "",
            "| subject | group | # kernels | launches/run | unfused | fused UO | fused O | speedup UO | speedup O "
            "| unfused in flush | speedup O in flush | run | decided by |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in subs.items():
        if not r["groups"]:
            out.append(f"| {name} | (no fused group) | | | | | | | | | | | |")
        for g in r["groups"]:
            out.append(f"| {name} | {g['name']} | {g['kernels']} | {g['launches_per_run']:g} | {_f(g['unfused_ms'])} "
                       f"| {_f(g['fused_uo_ms'])} | {_f(g['fused_o_ms'])} | {_x(g['speedup_uo'])} "
                       f"| {_x(g['speedup_o'])} | {_f(g.get('unfused_traced_ms'))} | {_x(g.get('speedup_o_traced'))} "
                       f"| {g.get('run', 'fused')} | {g.get('decision', '-')} |")
    apart = [f"{n}: {g['name']}" for n, r in subs.items() for g in r["groups"] if g.get("run") == "apart"]
    if apart:
        out += ["", f"Run apart by a profitability decision ({len(apart)}): " + "; ".join(apart) + "."]
    out += ["", "## Ours next to the paper (PyFuser Table 5, CPU speedups UO/O)", "",
            "| subject | ours: group (# kernels) UO/O | paper: kernel (# kernels) Xeon UO/O, EPYC UO/O |",
            "|---|---|---|"]
    for name in _by_paper_row(subs):
        r = subs[name]
        ours = "; ".join(f"{g['name']} ({g['kernels']}) {_x(g['speedup_uo'])}/{_x(g['speedup_o'])}"
                         for g in r["groups"]) or "no fused group"
        paper = "; ".join(f"{k} ({n}) {a:.2f}/{b:.2f}, {c:.2f}/{d:.2f}"
                          for k, n, a, b, c, d in TABLE5_CPU.get(npbench_name(name), []))
        out.append(f"| {name} | {ours} | {paper or '(not in the paper)'} |")
    out += ["", "## End to end (seconds per run, Python included, warm cache)", "",
            "| subject | n | eager | traced only | fused UO | fused O | fused O vs eager [90%] | tracing overhead | "
            "fusion analysis (ms/run) | NumPy | check |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in subs.items():
        out.append(f"| {name} | {_n(r, data)} | {_s(r['eager_s'])} | {_s(r['trace_s'])} "
                   f"| {_s(r['fused_uo_s'])} | {_s(r['fused_s'])} | {_x(r['fused_vs_eager_speedup'])}{_band(r)} "
                   f"| {r['trace_overhead_pct']:+.1f}% | {_s(r['analysis_ms'])} | {_s(r.get('numpy_s'))} "
                   f"| {r.get('validation', '-')} |")
    ablated = [(n, g) for n, r in subs.items() for g in r["groups"] if "ablation" in g]
    if ablated:
        names = list(ablated[0][1]["ablation"])
        out += ["", "## Transform ablation: fused kernel ms (speedup over unfused)", "",
                "| subject | group | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
        for n, g in ablated:
            cells = [f"{_f(a['ms'])} ({_x(a['speedup'])})" for a in g["ablation"].values()]
            out.append(f"| {n} | {g['name']} | " + " | ".join(cells) + " |")
    c = data.get("compile")
    if c:
        out += ["", f"## Compile vs cache load ({c['subject']}, size {c['size']}, fused O, fresh processes)", "",
                "| cache | first run s | steady run s | kernels compiled | cache hits | process s |",
                "|---|---|---|---|---|---|"]
        for phase in ("cold", "warm"):
            p = c[phase]
            out.append(f"| {phase} | {p['first_s']:.3f} | {p['steady_s']:.3f} | {p['compiles']} | {p['cache_hits']} "
                       f"| {p['process_s']:.2f} |")
        out.append(f"\nCompiling costs {c['compile_s']:.2f} s; loading the same kernels from the cache "
                   f"{c['cache_load_s'] * 1e3:.0f} ms.")
    if data.get("skipped"):
        out += ["", "## Skipped", ""] + [f"- {n}: {why}" for n, why in data["skipped"].items()]
    return "\n".join(out) + "\n"


def write_json(data: dict, path: str) -> None:
    """Written whole or not at all (a run killed while writing keeps the file it had)."""
    partial = f"{path}.partial"
    with open(partial, "w") as fh:
        json.dump(data, fh, indent=1, default=str)
    os.replace(partial, path)


def plot(data: dict, path: str) -> None:
    """Bars of UO and O speedup per fused group; the dashed line is 1 (no gain)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(f"{n}: {g['name']}", g["speedup_uo"] or float("nan"), g["speedup_o"] or float("nan"))
            for n, r in data["subjects"].items() for g in r["groups"]]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(rows) + 2), 5))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r[1] for r in rows], 0.4, label="fused UO (no transforms)")
    ax.bar([x + 0.2 for x in xs], [r[2] for r in rows], 0.4, label="fused O (all transforms)")
    ax.axhline(1.0, color="k", linestyle="--", linewidth=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r[0][:40] for r in rows], rotation=60, ha="right", fontsize=7)
    ax.set_yscale("log")  # speedups span 0.5x to hundreds on a loaded machine
    ax.set_ylabel("speedup over unfused kernels (log scale)")
    ax.set_title(f"kfuse fusion speedup per fused group ({data['machine']['cpus_usable']} CPUs, size {data['size']})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
