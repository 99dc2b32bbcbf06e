"""Compile latency: a cold kernel compile, a warm cache load, and what a cold compile is made of.

1. Cold: a fresh process with an empty temporary ``KFUSE_CACHE_DIR`` builds, in order, the precompiled
   header (once per toolchain), the runtime shim (once per toolchain) and two small kernels (a
   parallel_for and a parallel_reduce), each timed on its own.
2. Warm: a second process on the same cache loads everything from disk.
3. Breakdown: g++ on the cold run's generated ``kernel.cpp`` with kfuse's flags, then one thing
   changed at a time (no precompiled header, -O2, -O0, parse only, compile without linking), and
   the same kernel wrapped as a pybind11 module without a PCH, as PyKokkos builds its kernels.

Subprocesses keep in-process caches out of the timings; every g++ figure is a median of ``--repeats``.

    .venv/bin/python benchmarks/bench_compile.py [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import kfuse as pk

N = 1000


@pk.workunit
def axpy(i, y: pk.View1D[pk.double], x: pk.View1D[pk.double], a: pk.double):
    y[i] = a * x[i] + y[i]


@pk.workunit
def dot(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    acc += x[i] * y[i]


# --- the child processes ----------------------------------------------------------------------
def child() -> None:
    """Time each stage of a first run in this process; print the timings (and cache keys) as JSON."""
    from kfuse.compiler import cache, toolchain
    from kfuse.runtime import kokkos_runtime

    keys: dict = {}
    cache.hooks.append(lambda event, name, key: keys.setdefault(name, (event, key)))
    out: dict = {}

    def timed(label, fn):
        start = time.perf_counter()
        result = fn()
        out[label] = time.perf_counter() - start
        return result

    timed("precompiled header", lambda: cache._ensure_pch(toolchain.current()))  # the stage build() starts with
    timed("runtime shim + Kokkos init", kokkos_runtime.ensure_initialized)
    x, y = pk.View([N]), pk.View([N])
    x.fill(1.0)
    timed("kernel 1 (parallel_for axpy)", lambda: pk.parallel_for(N, axpy, y=y, x=x, a=2.0))
    total = timed("kernel 2 (parallel_reduce dot)", lambda: pk.parallel_reduce(N, dot, x=x, y=y))
    assert total == 2.0 * N, total  # the kernels ran and are right
    out["events"] = keys
    print(json.dumps(out))


def _run_child(cache_dir: str) -> dict:
    env = dict(os.environ, KFUSE_CACHE_DIR=cache_dir, KFUSE_FUSION="0")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["whole process (python start to exit)"] = wall
    return result


# --- g++ breakdown ----------------------------------------------------------------------------
def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _median_seconds(cmd: list[str], repeats: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of a command; CPU time is the steadier figure on a loaded machine."""
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), _children_cpu()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        walls.append(time.perf_counter() - start)
        cpus.append(_children_cpu() - cpu)
        if proc.returncode != 0:
            raise SystemExit(f"command failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return statistics.median(walls), statistics.median(cpus)


def _build_pch(tc, opt: list[str], folder: Path) -> tuple[Path, tuple[float, float]]:
    """A precompiled prelude for ``opt`` (g++ ignores a PCH built with other -O flags): (header, (wall, CPU))."""
    folder.mkdir(parents=True, exist_ok=True)
    header = folder / "kfuse_prelude.hpp"
    header.write_text(Path(_prelude()).read_text())
    cmd = [tc.cxx, *opt, *_base_flags(tc), "-x", "c++-header", str(header), "-o", str(header) + ".gch"]
    return header, _median_seconds(cmd, 1)


def _prelude() -> str:
    from kfuse.compiler import toolchain

    return str(toolchain.PRELUDE)


def _base_flags(tc) -> list[str]:
    """kfuse's compile flags without the optimisation level."""
    return [f for f in tc.compile_flags if f not in tc.opt_flags]


def _uses_pch(cxx: str, flags: list[str], header: str, src: str) -> bool:
    """True if g++ really loads the .gch (it silently falls back to the header when the PCH is invalid)."""
    cmd = [cxx, *flags, "-include", header, "-H", "-fsyntax-only", src]
    lines = subprocess.run(cmd, capture_output=True, text=True).stderr.splitlines()
    return any(line.startswith("!") and line.rstrip().endswith(".gch") for line in lines)


def breakdown(kernel_cpp: Path, repeats: int, work: Path) -> list[tuple[str, tuple[float, float], str]]:
    from kfuse.compiler import toolchain

    tc = toolchain.current()
    base, link, src, so = _base_flags(tc), tc.link_flags, str(kernel_cpp), str(work / "k.so")
    o3 = " ".join(tc.opt_flags)
    rows = []
    pch = {}
    for level in (o3, "-O2", "-O0"):
        pch[level], seconds = _build_pch(tc, level.split(), work / f"pch{level}")
        rows.append((f"build the precompiled header ({level}, once per toolchain)", seconds, ""))

    def gxx(label: str, level: str, header: str | None, *rest: str) -> None:
        """Time ``g++ <level> <kfuse flags> -include <header> <rest>``; header None: the prelude, no PCH."""
        flags = [*level.split(), *base]
        note = ""
        if header is not None:
            note = "PCH used" if _uses_pch(tc.cxx, flags, str(header), src) else "PCH NOT USED"
        cmd = [tc.cxx, *flags, "-include", str(header or _prelude()), *rest]
        rows.append((label, _median_seconds(cmd, repeats), note))

    gxx(f"kfuse: g++ {o3}, PCH, -shared (compile + link)", o3, pch[o3], "-shared", src, "-o", so, *link)
    gxx(f"  {o3}, PCH, compile only (-c)", o3, pch[o3], "-c", src, "-o", str(work / "k.o"))
    rows.append(("  link only (-shared k.o)", _median_seconds([tc.cxx, "-shared", str(work / "k.o"), "-o", so,
                                                                *link], repeats), ""))
    gxx(f"  {o3}, PCH, parse only (-fsyntax-only)", o3, pch[o3], "-fsyntax-only", src)
    gxx(f"  {o3}, NO PCH, -shared", o3, None, "-shared", src, "-o", so, *link)
    gxx(f"  {o3}, NO PCH, parse only", o3, None, "-fsyntax-only", src)
    gxx("  -O2, PCH, -shared", "-O2", pch["-O2"], "-shared", src, "-o", so, *link)
    gxx("  -O0, PCH, -shared", "-O0", pch["-O0"], "-shared", src, "-o", so, *link)

    import pybind11

    wrapped = work / "pybind_kernel.cpp"  # the kernel plus a pybind11 module exposing its entry point
    wrapped.write_text("#include <pybind11/pybind11.h>\n" + kernel_cpp.read_text()
                       + "PYBIND11_MODULE(pybind_kernel, m) { m.def(\"launch\", [](long a) {"
                         " return kfuse_launch(reinterpret_cast<const char*>(a), nullptr, nullptr, 0); }); }\n")
    gxx(f"PyKokkos-like: {o3}, Kokkos + pybind11 headers, NO PCH", o3, None, f"-I{pybind11.get_include()}",
        f"-I{sysconfig.get_paths()['include']}", "-shared", str(wrapped), "-o", str(work / "pybind_kernel.so"),
        *link)
    return rows


# --- report -----------------------------------------------------------------------------------
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each g++ command; the median is shown")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child()
    with tempfile.TemporaryDirectory(prefix="kfuse-bench-compile-") as tmp:
        cache_dir = str(Path(tmp) / "cache")
        cold = _run_child(cache_dir)
        warm = _run_child(cache_dir)
        entries = {}
        for name, (event, key) in cold["events"].items():
            assert event == "compile" and warm["events"][name][0] == "hit", (cold["events"], warm["events"])
            entries[name] = Path(cache_dir) / "kernels" / key[:2] / key
        for name, stage in (("kfuse_runtime", "runtime shim + Kokkos init"), ("axpy", "kernel 1 (parallel_for axpy)"),
                            ("dot", "kernel 2 (parallel_reduce dot)")):
            cold[f"  of which g++ (cache.build, {name})"] = json.loads((entries[name] / "meta.json").read_text())[
                "seconds"]
            warm[f"  of which g++ (cache.build, {name})"] = 0.0
        rows = breakdown(entries["axpy"] / "kernel.cpp", args.repeats, Path(tmp))

    stages = [k for k in cold if k != "events"]  # in the order they were added
    width = max(len(s) for s in stages + [r[0] for r in rows])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'first run, fresh cache (wall s)':<{width}}  {'cold':>7}  {'warm':>7}")
    for stage in stages:
        print(f"{stage:<{width}}  {cold[stage]:7.3f}  {warm[stage]:7.3f}")
    print(f"\n{'g++ on the axpy kernel (median of ' + str(args.repeats) + ')':<{width}}  {'wall s':>7}  {'CPU s':>7}")
    for label, (wall, cpu), note in rows:
        print(f"{label:<{width}}  {wall:7.3f}  {cpu:7.3f}  {note}")
    print(f"\n{'reference (issue): g++ -O3, Kokkos + pybind11, per kernel':<{width}}  {6.8:7.3f}")
    print(f"{'reference (issue): PyKokkos per kernel, median (9-16 s)':<{width}}  {11.1:7.3f}")
    print(f"{'target (issue)':<{width}}  {2.0:7.3f}")


if __name__ == "__main__":
    main()
