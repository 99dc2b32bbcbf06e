"""Kokkos's lifetime in this process: initialise before the first launch, finalise at exit.

The shim that calls ``Kokkos::initialize``/``finalize`` is itself a cached kernel library linking the
same ``libkokkoscore.so`` as every kernel, so there is exactly one Kokkos runtime. Views are NumPy
memory that Kokkos never owns, so nothing can be deallocated after finalize (the pykokkos-base trap).
"""
from __future__ import annotations

import atexit
import ctypes
import os

from .. import config

_SHIM = r"""
// kfuse runtime shim: Kokkos lifetime, and device buffers for the Views GPU kernels use
static bool kf_started_here = false;
extern "C" int kfuse_initialize(int num_threads) {
  if (Kokkos::is_initialized()) return 0;
#if KOKKOS_VERSION >= 30700
  Kokkos::InitializationSettings settings;
  if (num_threads > 0) settings.set_num_threads(num_threads);
  settings.set_disable_warnings(true);
  Kokkos::initialize(settings);
#else
  Kokkos::InitArguments args;
  args.num_threads = num_threads;
  args.disable_warnings = true;
  Kokkos::initialize(args);
#endif
  kf_started_here = true;
  return 1;
}
extern "C" void kfuse_finalize() {
  if (kf_started_here && Kokkos::is_initialized()) Kokkos::finalize();
  kf_started_here = false;
}
extern "C" void kfuse_fence() { if (Kokkos::is_initialized()) Kokkos::fence(); }
extern "C" int kfuse_concurrency() { return Kokkos::DefaultHostExecutionSpace::concurrency(); }
#ifdef KOKKOS_ENABLE_CUDA
extern "C" void* kfuse_device_malloc(size_t n) { void* p = nullptr; return cudaMalloc(&p, n) == cudaSuccess ? p : nullptr; }
extern "C" void kfuse_device_free(void* p) { cudaFree(p); }
extern "C" int kfuse_copy_to_device(void* dst, const void* src, size_t n) {
  Kokkos::fence(); return cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice); }
extern "C" int kfuse_copy_to_host(void* dst, const void* src, size_t n) {
  Kokkos::fence(); return cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost); }
#elif defined(KOKKOS_ENABLE_HIP)  // generated, not tested here (no AMD GPU)
extern "C" void* kfuse_device_malloc(size_t n) { void* p = nullptr; return hipMalloc(&p, n) == hipSuccess ? p : nullptr; }
extern "C" void kfuse_device_free(void* p) { (void)hipFree(p); }
extern "C" int kfuse_copy_to_device(void* dst, const void* src, size_t n) {
  Kokkos::fence(); return hipMemcpy(dst, src, n, hipMemcpyHostToDevice); }
extern "C" int kfuse_copy_to_host(void* dst, const void* src, size_t n) {
  Kokkos::fence(); return hipMemcpy(dst, src, n, hipMemcpyDeviceToHost); }
#else
extern "C" void* kfuse_device_malloc(size_t) { return nullptr; }
extern "C" void kfuse_device_free(void*) {}
extern "C" int kfuse_copy_to_device(void*, const void*, size_t) { return 1; }
extern "C" int kfuse_copy_to_host(void*, const void*, size_t) { return 1; }
#endif
"""

_lib = None
_exit_hooks: list = []


def on_exit(fn) -> None:
    """Run ``fn`` at interpreter exit before Kokkos is finalised (the tracer flushes pending work here)."""
    _exit_hooks.append(fn)


def _shutdown() -> None:
    try:
        for fn in _exit_hooks:
            fn()
    finally:
        if _lib is not None:
            from . import device

            device.sync_all()  # GPU results reach host memory (a memory-mapped file, say) even if never read
            device.release_all()
            _lib.kfuse_finalize()


def ensure_initialized() -> ctypes.CDLL:
    global _lib
    if _lib is not None:
        return _lib
    from ..compiler import cache

    # libgomp and Kokkos read these at start-up; binding threads to cores hurts on shared 2-core machines.
    os.environ.setdefault("OMP_PROC_BIND", "false")
    artifact = cache.build("kfuse_runtime", _SHIM)
    lib = ctypes.CDLL(str(artifact.library))
    lib.kfuse_initialize.argtypes = [ctypes.c_int]
    lib.kfuse_concurrency.restype = ctypes.c_int
    lib.kfuse_device_malloc.argtypes = [ctypes.c_size_t]
    lib.kfuse_device_malloc.restype = ctypes.c_void_p
    lib.kfuse_device_free.argtypes = [ctypes.c_void_p]
    for name in ("kfuse_copy_to_device", "kfuse_copy_to_host"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    lib.kfuse_initialize(config.NUM_THREADS.get())
    _lib = lib
    return lib


atexit.register(_shutdown)  # at import, so pending work is run at exit even if no kernel ran yet


def is_running() -> bool:
    return _lib is not None


def library() -> ctypes.CDLL:
    return _lib


def fence() -> None:
    if _lib is not None:
        _lib.kfuse_fence()


def concurrency() -> int:
    return ensure_initialized().kfuse_concurrency()
