"""Per-call overhead of launching an already-compiled kernel, layer by layer.

Each row is the median (and the minimum) over ``--repeats`` batches of ``--calls`` calls, in
microseconds per call: the whole eager ``pk.parallel_for`` / ``pk.parallel_reduce`` (also with six
arguments), making a TeamPolicy with scratch memory (a PyKokkos program makes one per launch), the Python
binding alone (``kfuse.calls.prepare``), pack + ctypes call
(``CompiledKernel.launch``), the bare ctypes call of the kernel entry point and the part of it the
kernel measures in C++ (Kokkos launch + fence), and context: a ctypes call of an empty C function,
an empty one-element ``Kokkos::parallel_for`` + fence and an empty ``#pragma omp parallel`` region
timed in C++ loops. The first row minus the bare call is what kfuse's Python layer costs. On a
shared machine the load average (printed) inflates every row; compare rows of one run.

    .venv/bin/python benchmarks/bench_dispatch.py [--calls 20000] [--repeats 7]
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import time

import kfuse as pk
from kfuse.compiler import cache
from kfuse.calls import prepare
from kfuse.pipeline import kernel_of
from kfuse.runtime import kokkos_runtime, launch

# Context probes, built through kfuse's own cache so they use the same compiler, flags and Kokkos.
_PROBES = r"""
#include <omp.h>
extern "C" void kfb_noop() {}
extern "C" double kfb_omp_region_ns(int64_t n) {
  volatile int sink = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < n; ++k) {
#pragma omp parallel
    { if (omp_get_thread_num() < 0) sink = 1; }
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}
extern "C" double kfb_kokkos_for_ns(int64_t n) {
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < n; ++k) {
    Kokkos::parallel_for(Kokkos::RangePolicy<Kokkos::OpenMP>(0, 1), KOKKOS_LAMBDA(const int64_t) {});
    Kokkos::fence();
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}
"""


@pk.workunit
def touch(i, a: pk.View1D[pk.double], s: pk.double):
    a[i] = s


@pk.workunit
def triad(i, a: pk.View1D[pk.double], b: pk.View1D[pk.double], c: pk.View1D[pk.double], d: pk.View1D[pk.double],
          s: pk.double, t: pk.double):
    a[i] = b[i] + s * c[i] + t * d[i]


@pk.workunit
def total(i, acc: pk.Acc[pk.double], a: pk.View1D[pk.double]):
    acc += a[i]


def _median_us(fn, calls: int, repeats: int) -> tuple[float, float]:
    """(median, min) over ``repeats`` batches of the mean time of one ``fn()`` call, in microseconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples), min(samples)


def _in_cxx_us(launch_once, kernel, calls: int, repeats: int) -> tuple[float, float]:
    """(median, min) over batches of the mean C++-measured launch + fence time (``kfuse_last_ns``), in us."""
    samples = []
    for _ in range(repeats):
        total = 0
        for _ in range(calls):
            launch_once()
            total += kernel._last_ns.value
        samples.append(total / calls / 1e3)
    return statistics.median(samples), min(samples)


def _cxx_us(probe, calls: int, repeats: int) -> tuple[float, float]:
    """(median, min) of a C++ probe timing ``calls`` iterations in a C++ loop, in microseconds."""
    samples = [probe(calls) / 1e3 for _ in range(repeats)]
    return statistics.median(samples), min(samples)


def _probes():
    kokkos_runtime.ensure_initialized()
    lib = ctypes.CDLL(str(cache.build("kfuse_bench_probes", _PROBES).library))
    lib.kfb_omp_region_ns.argtypes = lib.kfb_kokkos_for_ns.argtypes = [ctypes.c_int64]
    lib.kfb_omp_region_ns.restype = lib.kfb_kokkos_for_ns.restype = ctypes.c_double
    return lib


def run(calls: int, repeats: int) -> list[tuple[str, tuple[float, float]]]:
    if pk.fusion_enabled():
        pk.disable_fusion()
    a = pk.View([1], pk.double)
    b, c, d = pk.View([1]), pk.View([1]), pk.View([1])
    pk.parallel_for(1, triad, a=a, b=b, c=c, d=d, s=1.0, t=2.0)  # compile (or load) once, outside the timings
    pk.parallel_for(1, touch, a=a, s=1.0)
    pk.parallel_reduce(1, total, a=a)
    assert a[0] == 1.0 and pk.parallel_reduce(1, total, a=a) == 1.0
    (prepared,) = touch.specializations.values()
    kernel = kernel_of(prepared)
    call = prepare(touch, "for", 1, (), {"a": a, "s": 1.0})
    bounds = launch.policy_slots(call.policy)
    packed = kernel.pack(bounds, call.args)
    entry, out, err, errlen = kernel._fn, kernel._out, launch._err, ctypes.c_int64(launch._ERRLEN)
    lib = _probes()
    lib.kfb_omp_region_ns(1000), lib.kfb_kokkos_for_ns(1000)  # warm the thread pool

    rows = [
        ("pk.parallel_for(1, touch, a=View, s=float)", _median_us(lambda: pk.parallel_for(1, touch, a=a, s=1.0),
                                                                  calls, repeats)),
        ("pk.parallel_for, positional args", _median_us(lambda: pk.parallel_for(1, touch, a, 1.0), calls, repeats)),
        ("pk.parallel_for, 4 Views + 2 scalars", _median_us(
            lambda: pk.parallel_for(1, triad, a=a, b=b, c=c, d=d, s=1.0, t=2.0), calls, repeats)),
        ("pk.parallel_reduce(1, total, a=View)", _median_us(lambda: pk.parallel_reduce(1, total, a=a),
                                                            calls, repeats)),
        ("a TeamPolicy with scratch, as mvt_gpu makes one", _median_us(
            lambda: pk.TeamPolicy(100, 32).set_scratch_size(
                0, pk.PerTeam(pk.ScratchView2D[pk.double].shmem_size(32, 33))), calls, repeats)),
        ("  calls.prepare (Python, no launch)", _median_us(
            lambda: prepare(touch, "for", 1, (), {"a": a, "s": 1.0}), calls, repeats)),
        ("  CompiledKernel.launch (pack + ctypes)", _median_us(lambda: kernel.launch(bounds, call.args),
                                                               calls, repeats)),
        ("  bare ctypes call of kfuse_launch", _median_us(lambda: entry(packed, out, err, errlen),
                                                          calls, repeats)),
        ("    of which C++ parallel_for + fence (kfuse_last_ns)", _in_cxx_us(
            lambda: entry(packed, out, err, errlen), kernel, calls, repeats)),
        ("  ctypes call of an empty C function", _median_us(lib.kfb_noop, calls, repeats)),
        ("C++: empty Kokkos::parallel_for(1) + fence", _cxx_us(lib.kfb_kokkos_for_ns, calls, repeats)),
        ("C++: empty #pragma omp parallel region", _cxx_us(lib.kfb_omp_region_ns, calls, repeats)),
    ]
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls per timed batch")
    parser.add_argument("--repeats", type=int, default=7, help="batches; the median is reported")
    args = parser.parse_args(argv)
    rows = run(args.calls, args.repeats)
    width = max(len(name) for name, _ in rows)
    print(f"us per call: median and min of {args.repeats} batches x {args.calls} calls; "
          f"{kokkos_runtime.concurrency()} OpenMP threads; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    print(f"{'what':<{width}}  {'median':>8}  {'min':>8}")
    for name, (median, least) in rows:
        print(f"{name:<{width}}  {median:8.2f}  {least:8.2f}")
    print(f"{'reference: PyKokkos parallel_for (issue)':<{width}}  {250:8.2f}")
    print(f"{'target (issue)':<{width}}  {5:8.2f}")


if __name__ == "__main__":
    main()
