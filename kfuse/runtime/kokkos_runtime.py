"""Kokkos's lifetime in this process: initialise before the first launch, finalise at exit.

The shim that calls ``Kokkos::initialize``/``finalize`` is itself a cached kernel library linking the
same ``libkokkoscore.so`` as every kernel, so there is exactly one Kokkos runtime. Views are NumPy
memory that Kokkos never owns, so nothing can be deallocated after finalize (the pykokkos-base trap).
"""
from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading

from .. import config
from .. import guard

_SHIM = r"""
// kfuse runtime shim: Kokkos lifetime, and device buffers for the Views GPU kernels use
static bool kf_started_here = false;
// Kokkos 3.4's OpenMP backend accepts launches only from the thread that initialised it (a thread-local
// instance pointer). kfuse serialises launches with one lock, so another Python thread may borrow that
// instance while it holds the lock: kfuse_enter_thread gives the calling thread the same pointer.
#if defined(KOKKOS_ENABLE_OPENMP) && KOKKOS_VERSION < 30500
static Kokkos::Impl::OpenMPExec* kf_openmp_master = nullptr;
static void kfuse_remember_openmp_master() { kf_openmp_master = Kokkos::Impl::t_openmp_instance; }
extern "C" void kfuse_enter_thread() {
  if (!Kokkos::Impl::t_openmp_instance) Kokkos::Impl::t_openmp_instance = kf_openmp_master; }
#else
static void kfuse_remember_openmp_master() {}
extern "C" void kfuse_enter_thread() {}
#endif
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
  kfuse_remember_openmp_master();
  return 1;
}
extern "C" void kfuse_finalize() {
  if (kf_started_here && Kokkos::is_initialized()) Kokkos::finalize();
  kf_started_here = false;
}
extern "C" void kfuse_fence() { if (Kokkos::is_initialized()) Kokkos::fence(); }
extern "C" int kfuse_concurrency() { return Kokkos::DefaultHostExecutionSpace::concurrency(); }
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP)
// whether an element of ``size`` bytes (the low bytes of ``pattern``) is one byte repeated: a plain memset fills it
static bool kfuse_one_byte(unsigned long long pattern, int size) {
  for (int k = 1; k < size; ++k)
    if (((pattern >> (8 * k)) & 0xff) != (pattern & 0xff)) return false;
  return true;
}
__global__ void kfuse_fill_bytes(unsigned char* p, size_t n, unsigned long long pattern, int size) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (unsigned char)(pattern >> (8 * (i % size)));
}
#endif
#ifdef KOKKOS_ENABLE_CUDA
extern "C" void* kfuse_device_malloc(size_t n) { void* p = nullptr; return cudaMalloc(&p, n) == cudaSuccess ? p : nullptr; }
extern "C" void kfuse_device_free(void* p) { cudaFree(p); }
extern "C" int kfuse_copy_to_device(void* dst, const void* src, size_t n) {
  Kokkos::fence(); return cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice); }
extern "C" int kfuse_copy_to_host(void* dst, const void* src, size_t n) {
  Kokkos::fence(); return cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost); }
extern "C" int kfuse_copy_on_device(void* dst, const void* src, size_t n) {
  Kokkos::fence(); return cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice); }
extern "C" int kfuse_device_fill(void* p, size_t n, unsigned long long pattern, int size) {
  Kokkos::fence();
  if (kfuse_one_byte(pattern, size)) return cudaMemset(p, (int)(pattern & 0xff), n);
  kfuse_fill_bytes<<<1024, 256>>>((unsigned char*)p, n, pattern, size);
  cudaError_t rc = cudaGetLastError();
  return rc != cudaSuccess ? rc : cudaDeviceSynchronize();
}
#elif defined(KOKKOS_ENABLE_HIP)  // generated, not tested here (no AMD GPU)
extern "C" void* kfuse_device_malloc(size_t n) { void* p = nullptr; return hipMalloc(&p, n) == hipSuccess ? p : nullptr; }
extern "C" void kfuse_device_free(void* p) { (void)hipFree(p); }
extern "C" int kfuse_copy_to_device(void* dst, const void* src, size_t n) {
  Kokkos::fence(); return hipMemcpy(dst, src, n, hipMemcpyHostToDevice); }
extern "C" int kfuse_copy_to_host(void* dst, const void* src, size_t n) {
  Kokkos::fence(); return hipMemcpy(dst, src, n, hipMemcpyDeviceToHost); }
extern "C" int kfuse_copy_on_device(void* dst, const void* src, size_t n) {
  Kokkos::fence(); return hipMemcpy(dst, src, n, hipMemcpyDeviceToDevice); }
extern "C" int kfuse_device_fill(void* p, size_t n, unsigned long long pattern, int size) {
  Kokkos::fence();
  if (kfuse_one_byte(pattern, size)) return hipMemset(p, (int)(pattern & 0xff), n);
  kfuse_fill_bytes<<<1024, 256>>>((unsigned char*)p, n, pattern, size);
  hipError_t rc = hipGetLastError();
  return rc != hipSuccess ? rc : hipDeviceSynchronize();
}
#else
extern "C" void* kfuse_device_malloc(size_t) { return nullptr; }
extern "C" void kfuse_device_free(void*) {}
extern "C" int kfuse_copy_to_device(void*, const void*, size_t) { return 1; }
extern "C" int kfuse_copy_to_host(void*, const void*, size_t) { return 1; }
extern "C" int kfuse_copy_on_device(void*, const void*, size_t) { return 1; }
extern "C" int kfuse_device_fill(void*, size_t, unsigned long long, int) { return 1; }
#endif
"""

_lib = None
_exit_hooks: list = []


def on_exit(fn) -> None:
    """Run ``fn`` at interpreter exit before Kokkos is finalised (the tracer flushes pending work here);
    a non-zero int it returns becomes the process's exit status."""
    _exit_hooks.append(fn)


def _shutdown() -> None:
    status = 0
    try:
        for fn in _exit_hooks:
            status = max(status, fn() or 0)
    finally:
        if _lib is not None and not guard.forked_after_start:  # libgomp cannot finalise in a forked child
            from . import device

            device.sync_all()  # GPU results reach host memory (a memory-mapped file, say) even if never read
            device.release_all()
            _lib.kfuse_finalize()
    if status:
        # atexit cannot change the exit status; exiting here skips the exit handlers registered before kfuse
        # was imported, so the streams are flushed first.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def ensure_initialized() -> ctypes.CDLL:
    global _lib
    if _lib is not None:
        return _lib
    from ..compiler import cache

    config.prefer_unbound_openmp_threads()
    artifact = cache.build("kfuse_runtime", _SHIM)
    lib = ctypes.CDLL(str(artifact.library))
    lib.kfuse_initialize.argtypes = [ctypes.c_int]
    lib.kfuse_concurrency.restype = ctypes.c_int
    lib.kfuse_device_malloc.argtypes = [ctypes.c_size_t]
    lib.kfuse_device_malloc.restype = ctypes.c_void_p
    lib.kfuse_device_free.argtypes = [ctypes.c_void_p]
    lib.kfuse_device_fill.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_ulonglong, ctypes.c_int]
    for name in ("kfuse_copy_to_device", "kfuse_copy_to_host", "kfuse_copy_on_device"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    lib.kfuse_initialize(config.NUM_THREADS.get())
    guard.mark_started()
    _lib = lib
    return lib


atexit.register(_shutdown)  # at import, so pending work is run at exit even if no kernel ran yet


_this_thread = threading.local()  # per thread, not per ident: a new thread may reuse a dead one's ident


def enter_thread() -> None:
    """Let the calling Python thread launch host kernels (call with ``guard.lock`` held, before a launch)."""
    try:
        _this_thread.entered
    except AttributeError:
        ensure_initialized().kfuse_enter_thread()
        _this_thread.entered = True


def is_running() -> bool:
    return _lib is not None


def library() -> ctypes.CDLL:
    return _lib


def fence() -> None:
    if _lib is not None:
        _lib.kfuse_fence()


def concurrency() -> int:
    return ensure_initialized().kfuse_concurrency()
