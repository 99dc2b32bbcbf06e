"""Per-call overhead of launching an already-compiled kernel, layer by layer.

Each row is the median over ``--repeats`` batches of ``--calls`` calls, in microseconds per call:
the whole ``pk.parallel_for`` / ``pk.parallel_reduce`` (eager), the part of it spent in Python
before the C call (``prepare``), packing + ctypes call (``CompiledKernel.launch``), the bare ctypes
call of the kernel entry point, and C++-side context: a ctypes call of an empty C function, one
empty ``#pragma omp parallel`` region, and an empty one-element ``Kokkos::parallel_for`` + fence.
The difference between the first row and the C++ rows is what kfuse's Python layer costs.

    .venv/bin/python benchmarks/bench_dispatch.py [--calls 20000] [--repeats 7]
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import kfuse as pk
from kfuse.compiler import cache
from kfuse.runtime import dispatch, kokkos_runtime, launch

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
def total(i, acc: pk.Acc[pk.double], a: pk.View1D[pk.double]):
    acc += a[i]


def _median_us(fn, calls: int, repeats: int) -> float:
    """Median over ``repeats`` batches of the mean time of one ``fn()`` call, in microseconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def _probes():
    kokkos_runtime.ensure_initialized()
    lib = ctypes.CDLL(str(cache.build("kfuse_bench_probes", _PROBES).library))
    lib.kfb_omp_region_ns.argtypes = lib.kfb_kokkos_for_ns.argtypes = [ctypes.c_int64]
    lib.kfb_omp_region_ns.restype = lib.kfb_kokkos_for_ns.restype = ctypes.c_double
    return lib


def run(calls: int, repeats: int) -> list[tuple[str, float]]:
    if pk.fusion_enabled():
        pk.disable_fusion()
    a = pk.View([1], pk.double)
    pk.parallel_for(1, touch, a=a, s=1.0)  # compile (or load) once, outside the timings
    pk.parallel_reduce(1, total, a=a)
    assert a[0] == 1.0 and pk.parallel_reduce(1, total, a=a) == 1.0
    (prepared,) = touch.specializations.values()
    kernel = prepared.compiled()
    call = dispatch.prepare(touch, "for", 1, (), {"a": a, "s": 1.0})
    bounds = launch.policy_slots(call.policy)
    packed = kernel.pack(bounds, call.args)
    entry, out, err, errlen = kernel._fn, kernel._out, launch._err, ctypes.c_int64(launch._ERRLEN)
    lib = _probes()
    n_cxx = calls * repeats
    lib.kfb_omp_region_ns(1000), lib.kfb_kokkos_for_ns(1000)  # warm the thread pool

    rows = [
        ("pk.parallel_for(1, touch, a=View, s=float)", _median_us(lambda: pk.parallel_for(1, touch, a=a, s=1.0),
                                                                  calls, repeats)),
        ("pk.parallel_for, positional args", _median_us(lambda: pk.parallel_for(1, touch, a, 1.0), calls, repeats)),
        ("pk.parallel_reduce(1, total, a=View)", _median_us(lambda: pk.parallel_reduce(1, total, a=a),
                                                            calls, repeats)),
        ("  dispatch.prepare (Python, no launch)", _median_us(
            lambda: dispatch.prepare(touch, "for", 1, (), {"a": a, "s": 1.0}), calls, repeats)),
        ("  CompiledKernel.launch (pack + ctypes)", _median_us(lambda: kernel.launch(bounds, call.args),
                                                               calls, repeats)),
        ("  bare ctypes call of kfuse_launch", _median_us(lambda: entry(packed, out, err, errlen),
                                                          calls, repeats)),
        ("  ctypes call of an empty C function", _median_us(lib.kfb_noop, calls, repeats)),
        ("C++: empty Kokkos::parallel_for(1) + fence", lib.kfb_kokkos_for_ns(n_cxx) / 1e3),
        ("C++: empty #pragma omp parallel region", lib.kfb_omp_region_ns(n_cxx) / 1e3),
    ]
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls per timed batch")
    parser.add_argument("--repeats", type=int, default=7, help="batches; the median is reported")
    args = parser.parse_args(argv)
    rows = run(args.calls, args.repeats)
    width = max(len(name) for name, _ in rows)
    print(f"{'what':<{width}}  us/call   (median of {args.repeats} x {args.calls} calls, "
          f"{kokkos_runtime.concurrency()} OpenMP threads)")
    for name, us in rows:
        print(f"{name:<{width}}  {us:8.2f}")
    print(f"{'reference: PyKokkos parallel_for (issue)':<{width}}  {250:8.2f}")
    print(f"{'target (issue)':<{width}}  {5:8.2f}")


if __name__ == "__main__":
    main()
