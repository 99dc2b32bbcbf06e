// The Gaussian chain's sum (peers bench: sum(-0.5 log(2 pi v) - (x - m)^2 / (2 v)) over 2^26 doubles) in plain
// CUDA, outside kfuse, in the grid shapes a single GPU sum could take: the prelude's (one wave of blocks striding over
// the range, kf_sum_in_blocks), Triton's (a contiguous slice a block, several elements and sums a thread, 16-byte
// evict-first loads) and a slice per block of many small blocks; each followed by one block adding the partials.
// Which shape to try inside kfuse next (README, "GPU range reductions", Stop 55). Event-timed medians, or per kernel:
//
//   nvcc -O3 -fmad=false -arch=sm_90 -std=c++17 -o /tmp/gpu_sum_shapes benchmarks/gpu_sum_shapes.cu
//   /tmp/gpu_sum_shapes [n]
//   GPU_SUM_REPS=2 ncu --clock-control none --metrics gpu__time_duration.sum --csv /tmp/gpu_sum_shapes
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK(call)                                                               \
  do {                                                                            \
    const cudaError_t rc = (call);                                                \
    if (rc != cudaSuccess) {                                                      \
      std::printf("%s: %s\n", #call, cudaGetErrorString(rc));                     \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

constexpr double TWO_PI = 6.283185307179586;

enum Body { CHAIN, BANDWIDTH };  // the chain, or the three Views added (what the loads alone cost)

template <Body B>
__device__ __forceinline__ double body(double v, double x, double m) {
  if constexpr (B == CHAIN) return log(v * TWO_PI) * -0.5 - ((x - m) * (x - m)) / (v * 2.0);
  return v + x + m;
}

template <bool EVICT_FIRST>
__device__ __forceinline__ double load1(const double* p) {
  if constexpr (!EVICT_FIRST) return *p;
  double r;
  asm volatile("ld.global.L1::evict_first.f64 %0, [%1];" : "=d"(r) : "l"(p));
  return r;
}

template <bool EVICT_FIRST>
__device__ __forceinline__ double2 load2(const double* p) {
  if constexpr (!EVICT_FIRST) return *reinterpret_cast<const double2*>(p);
  double2 r;
  asm volatile("ld.global.L1::evict_first.v2.f64 {%0, %1}, [%2];" : "=d"(r.x), "=d"(r.y) : "l"(p));
  return r;
}

template <int THREADS>
__device__ double block_total(double s) {
  __shared__ double warps[THREADS / 32];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < THREADS / 32 ? warps[threadIdx.x] : 0.0;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  }
  return s;
}

struct Inputs {
  const double* v;
  const double* x;
  const double* m;
  long n;
};

// The prelude's shape: one wave of blocks striding, UNROLL elements a thread an iteration, loads first.
template <Body B, bool EVICT_FIRST, int THREADS, int UNROLL>
__global__ void __launch_bounds__(THREADS) striding(Inputs in, long, double* partials) {
  double s = 0;
  const long stride = static_cast<long>(gridDim.x) * THREADS;
  long i = static_cast<long>(blockIdx.x) * THREADS + threadIdx.x;
  for (; i + (UNROLL - 1) * stride < in.n; i += UNROLL * stride) {
    double a[UNROLL], b[UNROLL], c[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      a[u] = load1<EVICT_FIRST>(in.v + i + u * stride);
      b[u] = load1<EVICT_FIRST>(in.x + i + u * stride);
      c[u] = load1<EVICT_FIRST>(in.m + i + u * stride);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) s += body<B>(a[u], b[u], c[u]);
  }
  for (; i < in.n; i += stride) s += body<B>(in.v[i], in.x[i], in.m[i]);
  s = block_total<THREADS>(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// A contiguous slice a block: PER elements a thread a step in WIDTH-element loads, SUMS sums a thread.
template <Body B, bool EVICT_FIRST, int WIDTH, int THREADS, int PER, int SUMS>
__global__ void __launch_bounds__(THREADS) sliced(Inputs in, long slice, double* partials) {
  double sums[SUMS] = {};
  const long b0 = static_cast<long>(blockIdx.x) * slice, e0 = min(in.n, b0 + slice);
  long at = b0;
  for (; at + THREADS * PER <= e0; at += THREADS * PER) {
    double a[PER], b[PER], c[PER];
#pragma unroll
    for (int r = 0; r < PER / WIDTH; ++r) {
      const long j = at + static_cast<long>(r) * THREADS * WIDTH + threadIdx.x * WIDTH;
      if constexpr (WIDTH == 2) {
        const double2 p = load2<EVICT_FIRST>(in.v + j), q = load2<EVICT_FIRST>(in.x + j),
                      w = load2<EVICT_FIRST>(in.m + j);
        a[2 * r] = p.x, a[2 * r + 1] = p.y, b[2 * r] = q.x, b[2 * r + 1] = q.y, c[2 * r] = w.x, c[2 * r + 1] = w.y;
      } else {
        a[r] = load1<EVICT_FIRST>(in.v + j), b[r] = load1<EVICT_FIRST>(in.x + j), c[r] = load1<EVICT_FIRST>(in.m + j);
      }
    }
#pragma unroll
    for (int k = 0; k < PER; ++k) sums[k % SUMS] += body<B>(a[k], b[k], c[k]);
  }
  for (long j = at + threadIdx.x; j < e0; j += THREADS) sums[0] += body<B>(in.v[j], in.x[j], in.m[j]);
  double s = 0;
#pragma unroll
  for (int k = 0; k < SUMS; ++k) s += sums[k];
  s = block_total<THREADS>(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void add_partials(const double* partials, int count, double* total) {
  double s = 0;
  for (int b = threadIdx.x; b < count; b += 256) s += partials[b];
  s = block_total<256>(s);
  if (threadIdx.x == 0) *total = s;
}

using Kernel = void (*)(Inputs, long, double*);

struct Run {
  Inputs in;
  double* partials;
  double* total;
  double want;
  int sms;
  int reps;
};

void time_shape(const Run& run, const char* name, Kernel kernel, int threads, int blocks, long slice) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  auto go = [&] {
    kernel<<<blocks, threads>>>(run.in, slice, run.partials);
    add_partials<<<1, 256>>>(run.partials, blocks, run.total);
  };
  go();
  go();
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int r = 0; r < run.reps; ++r) {
    CHECK(cudaEventRecord(start));
    go();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  double got = 0;
  CHECK(cudaMemcpy(&got, run.total, sizeof got, cudaMemcpyDeviceToHost));
  std::printf("%-44s blocks %6d  median %.4f ms  min %.4f  relative error %.1e\n", name, blocks, ms[ms.size() / 2],
              ms[0], std::fabs(got - run.want) / std::fabs(run.want));
  std::fflush(stdout);
}

template <Body B, bool EVICT_FIRST, int THREADS, int UNROLL>
void striding_shape(const Run& run, const char* name, int waves) {
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, striding<B, EVICT_FIRST, THREADS, UNROLL>, THREADS, 0));
  time_shape(run, name, striding<B, EVICT_FIRST, THREADS, UNROLL>, THREADS, per_sm * run.sms * waves, 0);
}

// ``blocks`` slices, each a whole number of 4096 elements (so that 16-byte loads stay aligned)
template <Body B, bool EVICT_FIRST, int WIDTH, int THREADS, int PER, int SUMS>
void sliced_shape(const Run& run, const char* name, int blocks) {
  const long slice = ((run.in.n + blocks - 1) / blocks + 4095) / 4096 * 4096;
  time_shape(run, name, sliced<B, EVICT_FIRST, WIDTH, THREADS, PER, SUMS>, THREADS, blocks, slice);
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : (1L << 26);
  const char* reps = std::getenv("GPU_SUM_REPS");
  Run run{};
  run.reps = reps ? std::atoi(reps) : 200;
  int device = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&run.sms, cudaDevAttrMultiProcessorCount, device));
  std::vector<double> v(n), x(n), m(n);
  std::mt19937_64 rng(0);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform(0.5, 2.0);
  for (long i = 0; i < n; ++i) x[i] = normal(rng), m[i] = normal(rng), v[i] = uniform(rng);
  for (long i = 0; i < n; ++i) run.want += -0.5 * std::log(TWO_PI * v[i]) - (x[i] - m[i]) * (x[i] - m[i]) / (2 * v[i]);
  double* arrays[3];
  for (int k = 0; k < 3; ++k) {
    CHECK(cudaMalloc(&arrays[k], n * sizeof(double)));
    CHECK(cudaMemcpy(arrays[k], (k == 0 ? v : k == 1 ? x : m).data(), n * sizeof(double), cudaMemcpyHostToDevice));
  }
  run.in = {arrays[0], arrays[1], arrays[2], n};
  CHECK(cudaMalloc(&run.partials, (1 << 20) * sizeof(double)));
  CHECK(cudaMalloc(&run.total, sizeof(double)));
  std::printf("n %ld, %d SMs, medians of %d (the bandwidth rows' relative error is meaningless)\n", n, run.sms,
              run.reps);
  striding_shape<CHAIN, false, 256, 4>(run, "striding 256 threads, 4 a thread (prelude)", 1);
  sliced_shape<CHAIN, true, 2, 512, 4, 4>(run, "Triton's: 512 slices, 512 threads, 16 B evict-first", 512);
  sliced_shape<CHAIN, false, 2, 512, 4, 4>(run, "Triton's, plain loads", 512);
  sliced_shape<CHAIN, true, 1, 512, 4, 4>(run, "Triton's, 8-byte loads", 512);
  sliced_shape<CHAIN, true, 2, 512, 4, 1>(run, "Triton's, one sum a thread", 512);
  sliced_shape<CHAIN, true, 2, 512, 4, 4>(run, "Triton's, 1024 slices", 1024);
  sliced_shape<CHAIN, true, 2, 256, 4, 4>(run, "Triton's, 1024 slices of 256 threads", 1024);
  sliced_shape<CHAIN, true, 2, 512, 8, 8>(run, "Triton's, 8 a thread", 512);
  sliced_shape<CHAIN, true, 2, 512, 2, 2>(run, "Triton's, 2 a thread", 512);
  sliced_shape<CHAIN, false, 1, 256, 1, 1>(run, "Kokkos-like: 1056 slices, 1 a thread", 1056);
  sliced_shape<BANDWIDTH, true, 2, 512, 4, 4>(run, "Triton's, the three Views added", 512);
  striding_shape<CHAIN, false, 512, 4>(run, "striding 512 threads", 1);
  striding_shape<CHAIN, false, 256, 8>(run, "striding 256 threads, 8 a thread", 1);
  sliced_shape<CHAIN, false, 1, 256, 4, 1>(run, "8192-element slices of 256 threads", int((n + 8191) / 8192));
  sliced_shape<CHAIN, false, 1, 512, 4, 1>(run, "16384-element slices of 512 threads", int((n + 16383) / 16384));
  striding_shape<CHAIN, false, 256, 4>(run, "striding 256 threads, 4 a thread (again)", 1);
  return 0;
}
