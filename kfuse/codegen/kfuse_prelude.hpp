// Included (as a precompiled header) by every generated kernel. Python semantics that C++ lacks.
#pragma once
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

template <class T>
inline T kf_slot(const char* args, int i) {  // host only: unpacks the launch buffer
  T v;
  std::memcpy(&v, args + 8 * i, sizeof(T));
  return v;
}

// Python's // and % on integers round toward negative infinity; C++'s toward zero.
template <class A, class B>
KOKKOS_INLINE_FUNCTION auto kf_floordiv(A a, B b) -> decltype(a / b) {
  auto q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
template <class A, class B>
KOKKOS_INLINE_FUNCTION auto kf_mod(A a, B b) -> decltype(a % b) {
  auto r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <class A, class B>
KOKKOS_INLINE_FUNCTION auto kf_fmod_py(A a, B b) -> decltype(a + b) {
  auto r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
KOKKOS_INLINE_FUNCTION int64_t kf_ipow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result *= base;
    base *= base;
    exp >>= 1;
  }
  return result;
}
template <class A, class B>
KOKKOS_INLINE_FUNCTION typename std::common_type<A, B>::type kf_min(A a, B b) {
  return b < a ? b : a;
}
template <class A, class B>
KOKKOS_INLINE_FUNCTION typename std::common_type<A, B>::type kf_max(A a, B b) {
  return a < b ? b : a;
}
template <class A>
KOKKOS_INLINE_FUNCTION A kf_abs(A a) {
  return a < 0 ? -a : a;
}

inline void kf_report(char* err, int64_t errlen, const char* what) {
  std::strncpy(err, what, static_cast<size_t>(errlen - 1));
  err[errlen - 1] = '\0';
}

// --- Kernel faults ---------------------------------------------------------------------------------------
// Integer // and % by zero trap in C++ (SIGFPE kills the interpreter), and an index outside a View reads or
// writes other memory. Checked operations record the first fault in a small per-library record instead: the
// thread that wins a compare-and-swap on `claimed` fills it in, every faulting thread goes on with a dummy
// value, and the launch entry reads the record after the fence and returns it to Python as an exception.
struct KfFault {
  int claimed;
  int site;                              // entry of the kernel's kf_sites table
  int dim;                               // index faults: the dimension
  int64_t a, b;                          // division: dividend, divisor; index faults: index, extent; scratch:
                                         // bytes needed, bytes set (dim: the level)
  unsigned long long sites;               // bit k: site k faulted (bit 63: a site >= 63), for every fault of
                                         // the launch, so a fused kernel names each member that faulted
  alignas(16) unsigned char scratch[16];  // the element an out-of-range access uses instead
};

// Where the fault happened, known when the kernel is translated (one table per kernel).
struct KfSite {
  const char* kind;  // "floordiv", "mod", "index" or a ScratchView's "scratch", "scratch_extent", "scratch_refused"
  const char* workunit;
  const char* function;  // the @pk.function the check is in, or ""
  const char* file;
  int line;
  const char* view;
  int member;  // position of the call in a fused kernel, -1 when not fused
};

// One record per kernel library (static: each compiled kernel has its own). Threads running on a GPU need
// it in device memory; host threads (OpenMP, Serial, also in a GPU build) use the host one.
static KfFault kf_fault_host;
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP)
static __device__ KfFault kf_fault_device;
#endif

KOKKOS_INLINE_FUNCTION KfFault& kf_fault_record() {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return kf_fault_device;
#else
  return kf_fault_host;
#endif
}

KOKKOS_INLINE_FUNCTION void kf_fault(int site, int dim, int64_t a, int64_t b) {
  KfFault& f = kf_fault_record();
  Kokkos::atomic_fetch_or(&f.sites, 1ull << (site < 63 ? site : 63));
  if (Kokkos::atomic_compare_exchange(&f.claimed, 0, 1) == 0) {
    f.site = site;
    f.dim = dim;
    f.a = a;
    f.b = b;
  }
}

// C++ also traps on MIN / -1 of a signed type (the quotient does not fit); int8/int16 are promoted and do not.
// (A constexpr scalar, not numeric_limits<T>::min(): CUDA device code may read the one, not call the other.)
template <class T>
constexpr T kf_lowest = std::numeric_limits<T>::min();
template <class A, class B>
KOKKOS_INLINE_FUNCTION bool kf_quotient_overflows(A a, B b) {
  using T = decltype(a / b);
  return std::is_signed<T>::value && static_cast<T>(b) == T(-1) && static_cast<T>(a) == kf_lowest<T>;
}
// Host, before a queued launch: whether a divisor can fault neither kf_floordiv_checked nor kf_mod_checked.
template <class B>
inline bool kf_divisor_safe(B b) {
  return b != 0 && !(std::is_signed<B>::value && b == static_cast<B>(-1));
}
template <class A, class B>
KOKKOS_INLINE_FUNCTION auto kf_floordiv_checked(A a, B b, int site) -> decltype(a / b) {
  if (b == 0 || kf_quotient_overflows(a, b)) {
    kf_fault(site, 0, static_cast<int64_t>(a), static_cast<int64_t>(b));
    return 0;
  }
  return kf_floordiv(a, b);
}
template <class A, class B>
KOKKOS_INLINE_FUNCTION auto kf_mod_checked(A a, B b, int site) -> decltype(a % b) {
  if (b == 0) {
    kf_fault(site, 0, static_cast<int64_t>(a), static_cast<int64_t>(b));
    return 0;
  }
  if (kf_quotient_overflows(a, b)) return 0;  // Python: x % -1 == 0
  return kf_mod(a, b);
}
// pk.atomic_fetch_div / _mod on integers: C++ division (truncating), but a zero divisor is a fault that leaves
// the element as it was, and a divisor of -1 wraps (INT64_MIN / -1) instead of trapping.
template <class T>
KOKKOS_INLINE_FUNCTION T kf_atomic_fetch_divmod(T* p, const T v, const bool mod, int site) {
  if (v == 0) {
    const T old = Kokkos::atomic_fetch_add(p, T(0));  // an atomic read
    kf_fault(site, 0, static_cast<int64_t>(old), 0);
    return old;
  }
  T old = *p, assumed;
  do {
    assumed = old;
    const T next = std::is_signed<T>::value && v == T(-1)
                       ? (mod ? T(0) : T(typename std::make_unsigned<T>::type(0) - assumed))
                       : (mod ? assumed % v : assumed / v);
    old = Kokkos::atomic_compare_exchange(p, assumed, next);
  } while (old != assumed);
  return old;
}

// KFUSE_BOUNDS_CHECK: an element of a View, or the record's scratch element when an index is out of range.
// One unsigned comparison per index also catches negative indices. The fault path is out of line and cold, so
// the check costs the hot loop a compare and a branch that is never taken.
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__HIPCC__)
#define KF_COLD __attribute__((noinline, cold))
#define KF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define KF_COLD
#define KF_UNLIKELY(x) (x)
#endif
template <class T>
KOKKOS_FUNCTION KF_COLD T& kf_index_fault(int site, int dim, int64_t index, int64_t extent) {
  kf_fault(site, dim, index, extent);
  return *reinterpret_cast<T*>(kf_fault_record().scratch);
}
template <class V, class... I>
KOKKOS_INLINE_FUNCTION typename V::reference_type kf_at(const V& v, int site, I... i) {
  const int64_t index[] = {static_cast<int64_t>(i)...};
  for (int d = 0; d < static_cast<int>(sizeof...(I)); ++d) {
    if (KF_UNLIKELY(static_cast<uint64_t>(index[d]) >= static_cast<uint64_t>(v.extent(d))))
      return kf_index_fault<typename V::value_type>(site, d, index[d], static_cast<int64_t>(v.extent(d)));
  }
  return v(i...);
}
// The same for a View passed as a __restrict__ pointer (restrict transform): index, extent, stride per dimension.
struct KfIx {
  int64_t index, extent, stride;
};
template <class T, class... X>
KOKKOS_INLINE_FUNCTION T& kf_at_ptr(T* p, int site, X... x) {
  const KfIx ix[] = {x...};
  int64_t offset = 0;
  for (int d = 0; d < static_cast<int>(sizeof...(X)); ++d) {
    if (KF_UNLIKELY(static_cast<uint64_t>(ix[d].index) >= static_cast<uint64_t>(ix[d].extent)))
      return kf_index_fault<T>(site, d, ix[d].index, ix[d].extent);
    offset += ix[d].index * ix[d].stride;
  }
  return p[offset];
}

// --- Team scratch memory (ScratchView) ---------------------------------------------------------------------
// Kokkos hands out a team's scratch memory in order, each View aligned to its element size, and gives a View that
// does not fit a null pointer (on the host it may even spill into the other level's memory). kfuse counts the bytes
// the same way against what set_scratch_size gave each level, so a View that does not fit is a fault on every
// backend, before anything touches it.
struct KfScratch {
  int64_t used[2];
  int64_t capacity[2];  // per team: PerTeam bytes + team_size * PerThread bytes (the host bound's: PerTeam bytes)
};
KOKKOS_INLINE_FUNCTION KfScratch kf_scratch_start(const int64_t* bytes, int64_t team_size) {
  return KfScratch{{0, 0}, {bytes[0] + team_size * bytes[1], bytes[2] + team_size * bytes[3]}};
}
// Takes a View of `size`-byte elements and these extents (`slices` copies: team_size for thread_scratch) from
// `level`; false, with a fault recorded, for a negative extent or a View that does not fit.
template <class... N>
KOKKOS_INLINE_FUNCTION bool kf_scratch_take(KfScratch& s, int level, int64_t slices, int64_t size, int site,
                                            int extent_site, N... n) {
  const int64_t most = INT64_MAX;  // a macro: device code may not call numeric_limits
  const int64_t extents[] = {static_cast<int64_t>(n)...};
  int64_t bytes = size * slices;  // saturates at `most`
  for (int d = 0; d < static_cast<int>(sizeof...(N)); ++d) {
    if (extents[d] < 0) {
      kf_fault(extent_site, d, extents[d], 0);
      return false;
    }
    bytes = extents[d] == 0 ? 0 : bytes > most / extents[d] ? most : bytes * extents[d];
  }
  const int64_t start = (s.used[level] + size - 1) / size * size;
  const int64_t room = s.capacity[level];
  if (start > room || bytes > room - start) {
    kf_fault(site, level, bytes > most - start ? most : start + bytes, room);
    return false;
  }
  s.used[level] = start + bytes;
  return true;
}
// Host, before a queued launch: the count kf_scratch_sure takes team-level Views from, against the PerTeam bytes
// alone (PerThread bytes only add room).
inline KfScratch kf_scratch_bound_start(const int64_t* bytes) {
  return KfScratch{{0, 0}, {bytes[0], bytes[2]}};
}
// Host, before a queued launch: whether a team-level View of `size`-byte elements and these extents, taken after
// the ones `s` counted, fits for sure; false for a negative extent or a View that might not fit. Kokkos aligns the
// address of each View's start to A = max(size, 8), from a base that need not be aligned, so a View costs it at
// most A - 1 bytes of padding plus its own; kf_scratch_take pads each offset to `size` <= A. Counting A - 1 bytes
// plus the View's for every View, against the PerTeam bytes (both have at least those), bounds both counts.
template <class... N>
inline bool kf_scratch_sure(KfScratch& s, int level, int64_t size, N... n) {
  const int64_t most = std::numeric_limits<int64_t>::max();
  const int64_t extents[] = {static_cast<int64_t>(n)...};
  int64_t bytes = size;  // saturates at `most`
  for (const int64_t e : extents) {
    if (e < 0) return false;
    bytes = e == 0 ? 0 : bytes > most / e ? most : bytes * e;
  }
  const int64_t padding = (size > 8 ? size : 8) - 1;
  if (bytes > s.capacity[level] - s.used[level] - padding) return false;
  s.used[level] += padding + bytes;
  return true;
}
// What Kokkos gave the View: null for one of some bytes would be memory it refused although kfuse counted room.
KOKKOS_INLINE_FUNCTION bool kf_scratch_given(const void* data, size_t span, int level, int site) {
  if (data == nullptr && span != 0) {
    kf_fault(site, level, 0, 0);
    return false;
  }
  return true;
}
// The iterations of a TeamThreadMDRange (Kokkos 3.4 has none; kfuse runs one 1-D range over them): the product of
// the extents, none if one is not positive.
template <class... N>
KOKKOS_INLINE_FUNCTION int64_t kf_md_count(N... n) {
  const int64_t extents[] = {static_cast<int64_t>(n)...};
  int64_t count = 1;
  for (int d = 0; d < static_cast<int>(sizeof...(N)); ++d) count = extents[d] > 0 ? count * extents[d] : 0;
  return count;
}

// Host, after the fence: copy the record out and clear it; true if a thread faulted.
inline bool kf_take_fault(bool on_device, KfFault& out) {
  out = KfFault{};
  if (!on_device) {
    out = kf_fault_host;
    if (out.claimed) kf_fault_host = KfFault{};
    return out.claimed != 0;
  }
  const KfFault clear{};
#if defined(KOKKOS_ENABLE_CUDA)
  cudaError_t rc = cudaMemcpyFromSymbol(&out, kf_fault_device, sizeof(KfFault));
  if (rc == cudaSuccess && out.claimed) rc = cudaMemcpyToSymbol(kf_fault_device, &clear, sizeof(KfFault));
  if (rc != cudaSuccess) throw std::runtime_error(std::string("reading the fault record: ") + cudaGetErrorString(rc));
#elif defined(KOKKOS_ENABLE_HIP)
  hipError_t rc = hipMemcpyFromSymbol(&out, HIP_SYMBOL(kf_fault_device), sizeof(KfFault));
  if (rc == hipSuccess && out.claimed) rc = hipMemcpyToSymbol(HIP_SYMBOL(kf_fault_device), &clear, sizeof(KfFault));
  if (rc != hipSuccess) throw std::runtime_error(std::string("reading the fault record: ") + hipGetErrorString(rc));
#else
  (void)clear;
  throw std::runtime_error("a device fault record was asked for in a build without a GPU backend");
#endif
  return out.claimed != 0;
}

// The record for Python (errors.kernel_fault): fields separated by \x1f; the last one lists every other site that
// faulted in a member other than the first fault's, each as "sure member kind workunit file line" separated by
// \x1d, sites by \x1e ("sure" 0: only known to be a site >= 63, one of which faulted).
inline void kf_describe_fault(char* err, int64_t errlen, const KfSite* sites, int nsites, const KfFault& f) {
  const KfSite& s = sites[f.site];
  const size_t size = static_cast<size_t>(errlen);
  int used = std::snprintf(err, size, "%s\x1f%s\x1f%s\x1f%s\x1f%d\x1f%s\x1f%d\x1f%lld\x1f%lld\x1f%d\x1f",
                           s.kind, s.workunit, s.function, s.file, s.line, s.view, f.dim,
                           static_cast<long long>(f.a), static_cast<long long>(f.b), s.member);
  for (int k = 0; k < nsites && used >= 0 && static_cast<size_t>(used) < size; ++k) {
    const KfSite& o = sites[k];
    if (o.member == s.member || !((f.sites >> (k < 63 ? k : 63)) & 1ull)) continue;
    used += std::snprintf(err + used, size - static_cast<size_t>(used), "%d\x1d%d\x1d%s\x1d%s\x1d%s\x1d%d\x1e",
                          k < 63 ? 1 : 0, o.member, o.kind, o.workunit, o.file, o.line);
  }
}

#ifndef KF_UNROLL  // measurement knobs: KFUSE_OPT_FLAGS="-O3 -DKF_UNROLL=8 -DKF_PREFETCH=0"
#define KF_UNROLL 4
#endif

// The block form's order on the host (codegen/blocks.py; the fuzzer runs host reductions this way): one thread
// takes the range in order, KF_UNROLL elements at a time, loading their leading loads (F::kf_load) before running
// any of their bodies, as each GPU thread of kf_reduce_in_blocks does.
template <class F>
void kf_reduce_in_order(const F& f, const int64_t b0, const int64_t e0, typename F::value_type& result) {
  typename F::value_type v{};
  int64_t i = b0;
  for (; i + KF_UNROLL <= e0; i += KF_UNROLL) {
    decltype(f.kf_load(i)) in[KF_UNROLL];
    for (int u = 0; u < KF_UNROLL; ++u) in[u] = f.kf_load(i + u);
    for (int u = 0; u < KF_UNROLL; ++u) f(i + u, in[u], v);
  }
  for (; i < e0; ++i) f(i, f.kf_load(i), v);
  result = v;
}

#if defined(KOKKOS_ENABLE_CUDA) && defined(__CUDACC__)
// Rank-1 range reductions on a CUDA device (codegen/blocks.py). One wave of blocks strides over the range, each
// thread keeping its sums in registers and taking four elements an iteration: it loads the four elements' leading
// loads (F::kf_load) before running any of their bodies (F's operator() on the loaded values), and asks for the
// next iteration's elements ahead where F asks for any (F::kf_prefetch: into L2, so that several elements' loads are
// under way at once); each block adds its threads' sums with warp shuffles into one partial, and one block then adds
// the partials in block order. The grid depends only on the kernel and the card, so a result is the same from run to
// run. On H200 hosts BabelStream's ten fused sums took 0.31 ms this way (0.53 in lanes of a Kokkos::parallel_reduce),
// the Gaussian chain's single sum 0.40-0.41 (0.48 through Kokkos's reducer; README, "GPU range reductions").
constexpr int KF_BLOCK = 256;
#ifndef KF_PREFETCH
#define KF_PREFETCH 1
#endif

__device__ inline void kf_prefetch_l2(const void* p) { asm volatile("prefetch.L2 [%0];" ::"l"(p)); }

template <class T>
__device__ inline T kf_shfl_down(T v, int offset) {  // any value of at most 8 bytes, moved as one 8- or 4-byte word
  static_assert(sizeof(T) <= 8, "a reduction value wider than 8 bytes");
  if constexpr (sizeof(T) == 8) {
    long long w;
    memcpy(&w, &v, 8);
    w = __shfl_down_sync(0xffffffffu, w, offset);
    memcpy(&v, &w, 8);
  } else {
    int w = 0;
    memcpy(&w, &v, sizeof(T));
    w = __shfl_down_sync(0xffffffffu, w, offset);
    memcpy(&v, &w, sizeof(T));
  }
  return v;
}

// The block's total, in thread 0 (F::kf_shfl_down_all and F::kf_add move and add a whole value).
template <class F>
__device__ inline typename F::value_type kf_block_total(typename F::value_type v) {
  using V = typename F::value_type;
  __shared__ V kf_warp_totals[KF_BLOCK / 32];
  for (int o = 16; o > 0; o >>= 1) F::kf_add(v, F::kf_shfl_down_all(v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) kf_warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < KF_BLOCK / 32 ? kf_warp_totals[lane] : V{};
    for (int o = 16; o > 0; o >>= 1) F::kf_add(v, F::kf_shfl_down_all(v, o));
  }
  return v;
}

template <class F>
__global__ void __launch_bounds__(KF_BLOCK) kf_sum_in_blocks(const F f, const int64_t b0, const int64_t e0,
                                                             typename F::value_type* partials) {
  typename F::value_type v{};
  const int64_t stride = static_cast<int64_t>(gridDim.x) * KF_BLOCK;
  int64_t i = b0 + static_cast<int64_t>(blockIdx.x) * KF_BLOCK + threadIdx.x;
#if KF_PREFETCH
#pragma unroll
  for (int u = 0; u < KF_UNROLL; ++u)
    if (i + u * stride < e0) f.kf_prefetch(i + u * stride);
#endif
  for (; i + (KF_UNROLL - 1) * stride < e0; i += KF_UNROLL * stride) {
#if KF_PREFETCH
#pragma unroll
    for (int u = KF_UNROLL; u < 2 * KF_UNROLL; ++u)
      if (i + u * stride < e0) f.kf_prefetch(i + u * stride);
#endif
    decltype(f.kf_load(i)) in[KF_UNROLL];
#pragma unroll
    for (int u = 0; u < KF_UNROLL; ++u) in[u] = f.kf_load(i + u * stride);
#pragma unroll
    for (int u = 0; u < KF_UNROLL; ++u) f(i + u * stride, in[u], v);
  }
  for (; i < e0; i += stride) f(i, f.kf_load(i), v);
  v = kf_block_total<F>(v);
  if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

template <class F>
__global__ void __launch_bounds__(KF_BLOCK) kf_add_partials(typename F::value_type* partials, const int count) {
  typename F::value_type v{};
  for (int b = threadIdx.x; b < count; b += KF_BLOCK) F::kf_add(v, partials[b]);
  v = kf_block_total<F>(v);
  if (threadIdx.x == 0) partials[count] = v;
}

inline void kf_cuda_check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(rc));
}

// A kernel's set-up for kf_reduce_in_blocks, made once per loaded kernel (launches hold kfuse's launch lock and run
// on one stream, so one set serves every call): one wave of blocks (the blocks an SM holds at once, times the SMs),
// device room for their partials and the total, and pinned host room the total is copied to (a copy to pageable
// memory goes through a staging copy of the driver's). Freed when kfuse unloads the kernel's library (after a fence:
// runtime/launch.py); at the process's exit the CUDA runtime may be gone first, and the frees' errors are ignored.
template <class F>
struct KfBlocksRoom {
  using V = typename F::value_type;
  int most_blocks = 0;
  V* partials = nullptr;
  V* total = nullptr;
  KfBlocksRoom() {
    int device = 0, sms = 0, per_sm = 0;
    kf_cuda_check(cudaGetDevice(&device), "cudaGetDevice");
    kf_cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    kf_cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kf_sum_in_blocks<F>, KF_BLOCK, 0),
                  "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    most_blocks = std::max(1, per_sm) * std::max(1, sms);
    kf_cuda_check(cudaMalloc(reinterpret_cast<void**>(&partials), sizeof(V) * (most_blocks + 1)),
                  "allocating a reduction's partial sums");
    kf_cuda_check(cudaMallocHost(reinterpret_cast<void**>(&total), sizeof(V)), "allocating a reduction's result");
  }
  KfBlocksRoom(const KfBlocksRoom&) = delete;
  KfBlocksRoom& operator=(const KfBlocksRoom&) = delete;
  ~KfBlocksRoom() {
    static_cast<void>(cudaFree(partials));
    static_cast<void>(cudaFreeHost(total));
  }
};

// Launch on Kokkos's own stream (ordered with its kernels and copies) and wait for the total.
template <class F>
void kf_reduce_in_blocks(const F& f, const int64_t b0, const int64_t e0, typename F::value_type& result) {
  static const KfBlocksRoom<F> room;  // made at the first call, freed when the kernel's library is closed
  const int64_t n = e0 > b0 ? e0 - b0 : 0;
  const int blocks =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(room.most_blocks, (n + KF_BLOCK - 1) / KF_BLOCK)));
  const cudaStream_t stream = Kokkos::Cuda().cuda_stream();
  kf_sum_in_blocks<F><<<blocks, KF_BLOCK, 0, stream>>>(f, b0, e0, room.partials);
  kf_cuda_check(cudaGetLastError(), "launching a reduction");
  kf_add_partials<F><<<1, KF_BLOCK, 0, stream>>>(room.partials, blocks);
  kf_cuda_check(cudaGetLastError(), "launching a reduction's last pass");
  kf_cuda_check(cudaMemcpyAsync(room.total, room.partials + blocks, sizeof(typename F::value_type),
                                cudaMemcpyDeviceToHost, stream), "copying a reduction's result");
  kf_cuda_check(cudaStreamSynchronize(stream), "waiting for a reduction");
  result = *room.total;
}
#endif

// Rows in lanes (codegen/lanes.py): on a CUDA device each thread index of a kernel of at most KF_FEW_INDICES
// indices runs on a group of 32 lanes (blockDim.x, threadIdx.x the lane: one warp), blockDim.y indices a block; a
// kernel of more indices runs a thread an index, one lane each (the same code). Results do not depend on it.
// Elsewhere an index has one lane (tests and the fuzzer run the same code on the host that way).
constexpr int KF_LANE_BLOCK = 128;
#ifndef KF_FEW_INDICES  // a measurement knob: KFUSE_OPT_FLAGS="-O3 -DKF_FEW_INDICES=0" gives every index one lane
#define KF_FEW_INDICES 256
#endif

KOKKOS_INLINE_FUNCTION int kf_lane() {
#if defined(__CUDA_ARCH__)
  return static_cast<int>(threadIdx.x);
#else
  return 0;
#endif
}

KOKKOS_INLINE_FUNCTION int kf_lanes() {
#if defined(__CUDA_ARCH__)
  return static_cast<int>(blockDim.x);
#else
  return 1;
#endif
}

// The lanes of this thread index's group, as a mask of the warp's lanes.
KOKKOS_INLINE_FUNCTION unsigned kf_lane_mask() {
#if defined(__CUDA_ARCH__)
  if (blockDim.x == 32) return 0xffffffffu;
  return ((1u << blockDim.x) - 1u) << ((threadIdx.y * blockDim.x) & 31u);
#else
  return 1u;
#endif
}

// Every lane of the group here, and each one's stores so far seen by the others.
KOKKOS_INLINE_FUNCTION void kf_lane_sync() {
#if defined(__CUDA_ARCH__)
  if (blockDim.x > 1) __syncwarp(kf_lane_mask());
#endif
}

// Lane ``from``'s ``v`` (a 4- or 8-byte number), in every lane of the group.
template <class T>
KOKKOS_INLINE_FUNCTION T kf_lane_value(T v, int from) {
#if defined(__CUDA_ARCH__)
  return blockDim.x > 1 ? __shfl_sync(kf_lane_mask(), v, from, blockDim.x) : v;
#else
  (void)from;
  return v;
#endif
}

#if defined(KOKKOS_ENABLE_CUDA) && defined(__CUDACC__)
template <class F>
__global__ void __launch_bounds__(KF_LANE_BLOCK) kf_rows_in_lanes(const F f, const int64_t b0, const int64_t e0) {
  const int64_t i = b0 + static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (i < e0) f(i);  // a group's lanes share i, so they take this branch together
}

// Launch on Kokkos's own stream, like its kernels; the caller fences when it waits.
template <class F>
void kf_cuda_for_in_lanes(const F& f, const int64_t b0, const int64_t e0) {
  if (e0 <= b0) return;
  const int64_t n = e0 - b0;
  const int lanes = n <= KF_FEW_INDICES ? 32 : 1;
  const int per_block = KF_LANE_BLOCK / lanes;
  const int64_t blocks = (n + per_block - 1) / per_block;
  if (blocks > 2147483647) throw std::runtime_error("a kernel in lanes over " + std::to_string(n) + " indices: "
                                                    "more blocks than CUDA launches at once");
  kf_rows_in_lanes<F><<<static_cast<unsigned>(blocks), dim3(lanes, per_block), 0, Kokkos::Cuda().cuda_stream()>>>(
      f, b0, e0);
  kf_cuda_check(cudaGetLastError(), "launching a kernel in lanes");
}
#endif

// A launch's policy as given, except on a CUDA device with Kokkos 4, where it asks for the functor to travel as the
// kernel's argument (Kokkos's "light weight" hint; a functor of over 4 KB goes through global memory). Without it a
// functor of over 512 bytes (a fused kernel's many Views) goes through constant memory: that launch copies the functor
// over in a transfer of its own and first waits until the previous kernel launched that way has finished, so the
// host cannot queue such kernels ahead of the device.
template <class Policy>
inline auto kf_light(const Policy& policy) {
#if defined(KOKKOS_ENABLE_CUDA) && KOKKOS_VERSION >= 40000
  if constexpr (std::is_same<typename Policy::execution_space, Kokkos::Cuda>::value)
    return Kokkos::Experimental::require(policy, Kokkos::Experimental::WorkItemProperty::HintLightWeight);
  else
    return policy;
#else
  return policy;
#endif
}

template <class Exec, class F>
void kf_for_in_lanes(const F& f, const int64_t b0, const int64_t e0) {
#if defined(KOKKOS_ENABLE_CUDA) && defined(__CUDACC__)
  if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
    kf_cuda_for_in_lanes(f, b0, e0);
    return;
  }
#endif
  Kokkos::parallel_for(kf_light(Kokkos::RangePolicy<Exec, Kokkos::IndexType<int64_t>>(b0, e0)), f);
}
