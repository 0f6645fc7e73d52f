// The GPU backend of ops.h apart from Gemm (gemm_gpu.cc): the runtime (device, the compute
// stream, a caching allocator under the TrackingAllocator, checked launches) and the kernels,
// written once against HIP's names (nvcc through device_alias.h). Row operations run one warp
// per row (layer norm, softmax) or one block per row (cross-entropy over a vocabulary), sums over
// rows (bias, layer-norm weights, position embeddings) in two passes over fixed chunks of rows,
// so results do not depend on scheduling; only the token-embedding gradient adds with atomics.
// The row maths is kernels.h's, shared with the CPU backend.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runner/core/gpu_runtime.h"
#include "runner/core/kernels.h"
#include "runner/core/memory.h"

namespace tunepar::core {

namespace gpu {

void Check(hipError_t error, const char* what) {
  if (error != hipSuccess) throw DeviceError(fmt::format("{}: {}", what, hipGetErrorString(error)));
}

void CheckLaunch(const char* kernel) {
  Check(hipGetLastError(), kernel);
}

hipStream_t ComputeStream() {
  static hipStream_t stream = [] {
    hipStream_t s;
    Check(hipStreamCreateWithFlags(&s, hipStreamNonBlocking), "hipStreamCreate (compute)");
    return s;
  }();
  return stream;
}

// At the device's highest priority, so a collective starts ahead of queued GEMMs (as PyTorch's
// and Megatron's communication streams do).
hipStream_t CommStream() {
  static hipStream_t stream = [] {
    int lowest = 0, highest = 0;
    Check(hipDeviceGetStreamPriorityRange(&lowest, &highest), "hipDeviceGetStreamPriorityRange");
    hipStream_t s;
    Check(hipStreamCreateWithPriority(&s, hipStreamNonBlocking, highest), "hipStreamCreate (communication)");
    return s;
  }();
  return stream;
}

hipStream_t StreamOf(Stream stream) {
  return stream == Stream::kComm ? CommStream() : ComputeStream();
}

namespace {

struct TimedRegion {
  const char* name;
  hipEvent_t start, stop;
};

bool Profiling() {
  static const bool on = [] {
    const char* v = std::getenv("TUNEPAR_CORE_PROFILE");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

std::vector<TimedRegion>& Regions() {
  static std::vector<TimedRegion> regions;
  return regions;
}

// At exit: GPU milliseconds per region name, largest first.
void PrintProfile() {
  std::map<std::string, std::pair<double, int>> total;
  double all = 0;
  for (const TimedRegion& r : Regions()) {
    float ms = 0;
    if (hipEventSynchronize(r.stop) != hipSuccess || hipEventElapsedTime(&ms, r.start, r.stop) != hipSuccess) continue;
    total[r.name].first += ms;
    total[r.name].second += 1;
    all += ms;
  }
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [name, t] : total) rows.push_back({t.first, name});
  std::sort(rows.rbegin(), rows.rend());
  std::fprintf(stderr, "tunepar-core: GPU time per kernel (TUNEPAR_CORE_PROFILE), %.1f ms in all\n", all);
  for (const auto& [ms, name] : rows) {
    std::fprintf(stderr, "  %10.2f ms %5.1f%% %8d x  %s\n", ms, 100 * ms / all, total[name].second, name.c_str());
  }
}

}  // namespace

ProfiledRegion::ProfiledRegion(const char* name) : name_(name) {
  if (!Profiling()) return;
  // The core ends a run with quick_exit (core_main.cc EndRank), other exits with exit.
  static const bool registered = [] { return std::atexit(PrintProfile) == 0 && std::at_quick_exit(PrintProfile) == 0; }();
  (void)registered;
  Check(hipEventCreate(&start_), "hipEventCreate (profile)");
  Check(hipEventRecord(start_, ComputeStream()), "hipEventRecord (profile)");
}

ProfiledRegion::~ProfiledRegion() {
  if (start_ == nullptr) return;
  hipEvent_t stop;
  if (hipEventCreate(&stop) != hipSuccess || hipEventRecord(stop, ComputeStream()) != hipSuccess) return;
  Regions().push_back({name_, start_, stop});
}

namespace {

// Outgrown scratch buffers, until FreeRetiredScratchWhenIdle (gpu_runtime.h) finds both streams
// idle: at the latest at the step's closing Synchronize, after which the compute stream has
// awaited the communication stream's sums.
std::vector<void*>& RetiredScratch() {
  static std::vector<void*> retired;
  return retired;
}

bool StreamIdle(hipStream_t stream) {
  const hipError_t state = hipStreamQuery(stream);
  if (state == hipErrorNotReady) {
    (void)hipGetLastError();  // "not ready" is an answer, not the next launch's error
    return false;
  }
  Check(state, "hipStreamQuery");
  return true;
}

}  // namespace

void FreeRetiredScratchWhenIdle() {
  std::vector<void*>& retired = RetiredScratch();
  if (retired.empty() || !StreamIdle(ComputeStream()) || !StreamIdle(CommStream())) return;
  for (void* p : retired) Check(hipFree(p), "hipFree (scratch)");
  retired.clear();
}

void* Scratch(ScratchSlot slot, size_t bytes) {
  static void* buffers[static_cast<int>(ScratchSlot::kCount)] = {};
  static size_t sizes[static_cast<int>(ScratchSlot::kCount)] = {};
  const int i = static_cast<int>(slot);
  if (bytes > sizes[i]) {
    // Work queued on the compute stream may still read the old buffer: it is retired, not freed.
    if (buffers[i] != nullptr) RetiredScratch().push_back(buffers[i]);
    FreeRetiredScratchWhenIdle();
    if (hipMalloc(&buffers[i], bytes) != hipSuccess) {
      (void)hipGetLastError();
      buffers[i] = nullptr;
      sizes[i] = 0;
      throw OutOfMemory(MemoryCategory::kWorkspace,
                        fmt::format("out of memory on the device: no room for {:.1f} MB of scratch", bytes / 1e6));
    }
    sizes[i] = bytes;
  }
  return buffers[i];
}

}  // namespace gpu

namespace {

using gpu::Check;
using gpu::CheckLaunch;
using gpu::ComputeStream;

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;  // one warp per row
constexpr int kChunks = 64;                      // row chunks of the two-pass column sums

// Blocks for a grid-stride loop over n elements.
int Blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535 * 4));
}

#define TP_FOR_EACH(i, n) \
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// Sums and maxima over a group of 32 lanes (a CUDA warp; half an AMD wavefront of 64: the
// shuffle's width keeps it inside the 32).
__device__ inline real ShuffleXor(real v, int offset) {
#if defined(__HIPCC__)
  return __shfl_xor(v, offset, kWarp);
#else
  return __shfl_xor_sync(0xffffffffu, v, offset);
#endif
}
__device__ inline real WarpSum(real v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += ShuffleXor(v, offset);
  return v;
}
__device__ inline real WarpMax(real v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmaxf(v, ShuffleXor(v, offset));
  return v;
}
// The block's sum or max, returned to every thread (blockDim.x = kThreads).
__device__ real BlockReduce(real v, bool max) {
  __shared__ real partial[kThreads / kWarp];
  __shared__ real result;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = max ? WarpMax(v) : WarpSum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    real w = lane < kThreads / kWarp ? partial[lane] : (max ? -INFINITY : real(0));
    w = max ? WarpMax(w) : WarpSum(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  const real r = result;
  __syncthreads();
  return r;
}

__global__ void FillKernel(real* p, int64_t n, real value) {
  TP_FOR_EACH(i, n) p[i] = value;
}
__global__ void ScaleKernel(real* p, int64_t n, real factor) {
  TP_FOR_EACH(i, n) p[i] *= factor;
}
__global__ void AddKernel(real* out, const real* a, const real* b, int64_t n) {
  TP_FOR_EACH(i, n) out[i] = a[i] + b[i];
}
__global__ void AccumulateKernel(real* a, const real* b, int64_t n) {
  TP_FOR_EACH(i, n) a[i] += b[i];
}
__global__ void RoundKernel(real* p, int64_t n, int precision) {
  TP_FOR_EACH(i, n) p[i] = RoundTo(p[i], precision);
}
__global__ void ResidualAddKernel(real* out, const real* x, const real* branch, int64_t n, int precision) {
  TP_FOR_EACH(i, n) out[i] = RoundTo(x[i] + RoundTo(branch[i], precision), precision);
}
__global__ void ResidualAdd16Kernel(uint16_t* out, const uint16_t* x, const real* branch, int64_t n, int precision) {
  TP_FOR_EACH(i, n) {
    const real sum = From16BitValue(x[i], precision) + RoundTo(branch[i], precision);
    out[i] = To16BitValue(RoundTo(sum, precision), precision);
  }
}
__global__ void GeluForwardKernel(real* out, const real* inp, int64_t n, int precision) {
  TP_FOR_EACH(i, n) out[i] = RoundTo(Gelu(inp[i]), precision);
}
__global__ void GeluBackwardKernel(real* dinp, const real* inp, const real* dout, int64_t n, int precision) {
  TP_FOR_EACH(i, n) dinp[i] = RoundTo(GeluGrad(inp[i]) * dout[i], precision);
}
__global__ void GeluForward16Kernel(uint16_t* out, const uint16_t* inp, int64_t n, int precision) {
  const SixteenBitOutputs o{out, precision};
  TP_FOR_EACH(i, n) o.Set(i, Gelu(From16BitValue(inp[i], precision)));
}
__global__ void GeluBackward16Kernel(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, int64_t n,
                                     int precision) {
  const SixteenBitOutputs d{dinp, precision};
  TP_FOR_EACH(i, n) d.Set(i, GeluGrad(From16BitValue(inp[i], precision)) * From16BitValue(dout[i], precision));
}
__global__ void AddBiasTo16BitKernel(uint16_t* out, const real* sums, const real* bias, int64_t n, int OC,
                                     int precision) {
  const SixteenBitOutputs o{out, precision};
  TP_FOR_EACH(i, n) o.Set(i, bias != nullptr ? sums[i] + bias[i % OC] : sums[i]);
}
__global__ void AddBiasKernel(real* out, const real* bias, int64_t n, int OC, int precision) {
  TP_FOR_EACH(i, n) out[i] = RoundTo(out[i] + bias[i % OC], precision);
}

// Pass 1 of column sums over (N, cols): block (x, chunk) sums its chunk's rows of 32 columns;
// value(n, j) is the summand. Pass 2 adds the chunks in order.
template <typename Value>
__global__ void ColumnPartialsKernel(real* partial, int N, int cols, Value value) {
  const int j = blockIdx.x * kWarp + threadIdx.x % kWarp;
  const int rows_per_chunk = (N + kChunks - 1) / kChunks;
  const int lo = blockIdx.y * rows_per_chunk, hi = min(N, lo + rows_per_chunk);
  __shared__ real sums[kRowsPerBlock][kWarp];
  real s = 0;
  if (j < cols) {
    for (int n = lo + threadIdx.x / kWarp; n < hi; n += kRowsPerBlock) s += value(n, j);
  }
  sums[threadIdx.x / kWarp][threadIdx.x % kWarp] = s;
  __syncthreads();
  if (threadIdx.x < kWarp && j < cols) {
    real t = 0;
    for (int r = 0; r < kRowsPerBlock; ++r) t += sums[r][threadIdx.x];
    partial[int64_t{blockIdx.y} * cols + j] = t;
  }
}

__global__ void AddColumnPartialsKernel(real* out, const real* partial, int cols) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  real s = 0;
  for (int c = 0; c < kChunks; ++c) s += partial[int64_t{c} * cols + j];
  out[j] += s;
}

// out (cols) += sum over the N rows of value(n, j).
template <typename Value>
void AddColumnSums(const char* what, real* out, int N, int cols, Value value) {
  auto* partial = static_cast<real*>(gpu::Scratch(gpu::ScratchSlot::kReduction, size_t{kChunks} * cols * sizeof(real)));
  const dim3 grid((cols + kWarp - 1) / kWarp, kChunks);
  gpu::ProfiledRegion profiled(what);
  ColumnPartialsKernel<<<grid, kThreads, 0, ComputeStream()>>>(partial, N, cols, value);
  CheckLaunch("ColumnPartialsKernel");
  AddColumnPartialsKernel<<<(cols + kThreads - 1) / kThreads, kThreads, 0, ComputeStream()>>>(out, partial, cols);
  CheckLaunch("AddColumnPartialsKernel");
}

// Element (n, j) of a row-major array with rows ld apart: reals or 16-bit numbers.
template <typename Values>
struct ElementOf {
  Values p;
  int ld;
  __device__ real operator()(int n, int j) const { return p[int64_t{n} * ld + j]; }
};
using Element = ElementOf<const real*>;

// Layer norm: one warp per row; the input reals or 16-bit numbers (kernels.h SixteenBitValues),
// the output as well (RealOutputs, SixteenBitOutputs: rounded as written).
template <typename Values, typename Outputs>
__global__ void LayerNormForwardKernel(Outputs out, real* mean, real* rstd, Values inp, const real* w, const real* b,
                                       int N, int C) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const Values x = inp + int64_t{n} * C;
  real s = 0;
  for (int i = lane; i < C; i += kWarp) s += x[i];
  const real m = WarpSum(s) / C;
  real v = 0;
  for (int i = lane; i < C; i += kWarp) v += (x[i] - m) * (x[i] - m);
  const real r = real(1) / Sqrt(WarpSum(v) / C + real(1e-5));
  const int64_t row = int64_t{n} * C;
  for (int i = lane; i < C; i += kWarp) out.Set(row + i, (x[i] - m) * r * w[i] + b[i]);
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = r;
  }
}

// dx += the row's gradient (LayerNormRowBackward's, one warp per row); dx read and written as
// Outputs (rounded as written).
template <typename Values, typename Outputs>
__global__ void LayerNormInputGradKernel(Outputs dinp, const real* dout, Values inp, const real* w, const real* mean,
                                         const real* rstd, int N, int C) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const Values x = inp + int64_t{n} * C;
  const real* d = dout + int64_t{n} * C;
  const real m = mean[n], r = rstd[n];
  real dnorm_mean = 0, dnorm_norm_mean = 0;
  for (int i = lane; i < C; i += kWarp) {
    const real dnorm = w[i] * d[i];
    dnorm_mean += dnorm;
    dnorm_norm_mean += dnorm * (x[i] - m) * r;
  }
  dnorm_mean = WarpSum(dnorm_mean) / C;
  dnorm_norm_mean = WarpSum(dnorm_norm_mean) / C;
  const int64_t row = int64_t{n} * C;
  for (int i = lane; i < C; i += kWarp) {
    const real norm = (x[i] - m) * r;
    dinp.Set(row + i, dinp[row + i] + (w[i] * d[i] - dnorm_mean - norm * dnorm_norm_mean) * r);
  }
}

template <typename Values>
struct NormTimesGrad {
  Values x;
  const real* dout;
  const real* mean;
  const real* rstd;
  int C;
  __device__ real operator()(int n, int i) const {
    const int64_t at = int64_t{n} * C + i;
    return (x[at] - mean[n]) * rstd[n] * dout[at];
  }
};

// Causal softmax: one warp per row of T (query position t = row % T).
__global__ void CausalSoftmaxForwardKernel(real* att, int64_t rows, int T, int precision, uint16_t* out16) {
  const int64_t r = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  real* row = att + r * T;
  const int t = static_cast<int>(r % T);
  real m = -INFINITY;
  for (int i = lane; i <= t; i += kWarp) m = fmaxf(m, row[i]);
  m = WarpMax(m);
  real s = 0;
  for (int i = lane; i <= t; i += kWarp) s += Exp(row[i] - m);
  const real inv = real(1) / WarpSum(s);
  for (int i = lane; i < T; i += kWarp) {
    const real p = i <= t ? RoundTo(Exp(row[i] - m) * inv, precision) : real(0);
    row[i] = p;
    if (out16 != nullptr) out16[r * T + i] = To16BitValue(p, precision);
  }
}

__global__ void CausalSoftmaxBackwardKernel(real* dp, const real* p, int64_t rows, int T, real scale,
                                            int precision, uint16_t* out16) {
  const int64_t r = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  real* d = dp + r * T;
  const real* pr = p + r * T;
  const int t = static_cast<int>(r % T);
  real dot = 0;
  for (int i = lane; i <= t; i += kWarp) dot += pr[i] * d[i];
  dot = WarpSum(dot);
  for (int i = lane; i < T; i += kWarp) {
    const real ds = i <= t ? RoundTo(pr[i] * (d[i] - dot) * scale, precision) : real(0);
    d[i] = ds;
    if (out16 != nullptr) out16[r * T + i] = To16BitValue(ds, precision);
  }
}

__global__ void To16BitKernel(uint16_t* out, const real* in, int64_t n, int precision) {
  TP_FOR_EACH(i, n) out[i] = To16BitValue(in[i], precision);
}

__global__ void From16BitKernel(real* out, const uint16_t* in, int64_t n, int precision) {
  TP_FOR_EACH(i, n) out[i] = From16BitValue(in[i], precision);
}

__global__ void Round16BitKernel(uint16_t* out, const real* in, int64_t n, int precision) {
  TP_FOR_EACH(i, n) out[i] = To16BitValue(RoundTo(in[i], precision), precision);
}

__global__ void EncoderForward16Kernel(real* out, const int* tokens, const uint16_t* wte, const real* wpe, int v0,
                                       int Vl, int64_t n, int T, int C, int precision) {
  TP_FOR_EACH(id, n) {
    const int64_t bt = id / C;
    const int i = static_cast<int>(id % C), row = tokens[bt] - v0;
    const real e = (row >= 0 && row < Vl) ? From16BitValue(wte[int64_t{row} * C + i], precision) : real(0);
    out[id] = e + (wpe != nullptr ? wpe[(bt % T) * C + i] : real(0));
  }
}

__global__ void EncoderForwardKernel(real* out, const int* tokens, const real* wte, const real* wpe, int v0,
                                     int Vl, int64_t n, int T, int C) {
  TP_FOR_EACH(id, n) {
    const int64_t bt = id / C;
    const int i = static_cast<int>(id % C), row = tokens[bt] - v0;
    const real e = (row >= 0 && row < Vl) ? wte[int64_t{row} * C + i] : real(0);
    out[id] = e + (wpe != nullptr ? wpe[(bt % T) * C + i] : real(0));
  }
}

// dwte rows of the tokens held here += dout rows (atomics: tokens repeat); dout reals or 16-bit
// numbers.
template <typename Values>
__global__ void TokenEmbeddingGradKernel(real* dwte, Values dout, const int* tokens, int v0, int Vl, int64_t n,
                                         int C) {
  TP_FOR_EACH(id, n) {
    const int row = tokens[id / C] - v0;
    if (row >= 0 && row < Vl) atomicAdd(dwte + int64_t{row} * C + id % C, dout[id]);
  }
}

// dwpe (T, C) += the sum over sequences of dout, in sequence order.
template <typename Values>
__global__ void PositionEmbeddingGradKernel(real* dwpe, Values dout, int B, int T, int C) {
  TP_FOR_EACH(id, int64_t{T} * C) {
    real s = 0;
    for (int b = 0; b < B; ++b) s += dout[int64_t{b} * T * C + id];
    dwpe[id] += s;
  }
}

// The loss from the all-reduced row statistics: one block; each thread's rows, then the block's
// sum in double (a tree in shared memory; kThreads is a power of two).
__global__ void CrossEntropyLossKernel(real* row_max, const real* row_sum, const real* target_logit, int N,
                                       double* loss) {
  static_assert((kThreads & (kThreads - 1)) == 0, "the tree needs a power of two");
  __shared__ double partial[kThreads];
  double s = 0;
  for (int n = threadIdx.x; n < N; n += kThreads) {
    const real log_sum = Log(row_sum[n]) + row_max[n];
    row_max[n] = log_sum;
    s += static_cast<double>(log_sum) - target_logit[n];
  }
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = partial[0];
}

// Cross-entropy: one block per row of Vl logits, each rounded to `precision` as it is loaded
// (RoundedValues: the LM head leaves its fp32 sums unrounded).
__global__ void CrossEntropyStatsKernel(real* row_max, real* row_sum, real* target_logit, const real* logits,
                                        const int* targets, const real* global_max, int v0, int Vl,
                                        int precision) {
  const int n = blockIdx.x;
  const RoundedValues l = RoundedValues{logits, precision} + int64_t{n} * Vl;
  if (global_max == nullptr) {
    real m = -INFINITY;
    for (int i = threadIdx.x; i < Vl; i += kThreads) m = fmaxf(m, l[i]);
    m = BlockReduce(m, true);
    if (threadIdx.x == 0) row_max[n] = m;
    return;
  }
  const real m = global_max[n];
  real s = 0;
  for (int i = threadIdx.x; i < Vl; i += kThreads) s += Exp(l[i] - m);
  s = BlockReduce(s, false);
  if (threadIdx.x == 0) {
    row_sum[n] = s;
    const int t = targets[n] - v0;
    target_logit[n] = (t >= 0 && t < Vl) ? l[t] : real(0);
  }
}

// dlogits written as Outputs (RealOutputs, or SixteenBitOutputs: straight into 16 bits).
template <typename Outputs>
__global__ void CrossEntropyBackwardKernel(Outputs dlogits, const real* logits, const real* log_sum,
                                           const int* targets, int v0, real scale, int Vl, int precision) {
  const int n = blockIdx.x;
  const int64_t row = int64_t{n} * Vl;
  const RoundedValues l = RoundedValues{logits, precision} + row;
  const real ls = log_sum[n];
  const int target = targets[n];
  for (int i = threadIdx.x; i < Vl; i += kThreads)
    dlogits.Set(row + i, (Exp(l[i] - ls) - (i + v0 == target ? real(1) : real(0))) * scale);
}

__global__ void AdamWKernel(real* params, const real* grads, real* m, real* v, int64_t n, real lr, real beta1,
                            real beta2, real eps, real weight_decay, real correction1, real correction2) {
  TP_FOR_EACH(i, n) AdamW(params + i, grads[i], m + i, v + i, lr, beta1, beta2, eps, weight_decay, correction1, correction2);
}

constexpr int kReductionBlocks = 256;

__global__ void SumOfSquaresKernel(double* partial, const real* p, int64_t n) {
  __shared__ double sums[kThreads];
  double s = 0;
  TP_FOR_EACH(i, n) s += static_cast<double>(p[i]) * p[i];
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) sums[threadIdx.x] += sums[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
}

__global__ void CountNonFiniteKernel(unsigned long long* count, const real* p, int64_t n) {
  unsigned long long c = 0;
  TP_FOR_EACH(i, n) c += isfinite(p[i]) ? 0 : 1;
  if (c > 0) atomicAdd(count, c);
}

int RowBlocks(int64_t rows) {
  return static_cast<int>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

// Freed device blocks kept by size and handed out again (a framework's caching allocator), so
// micro-batches after the first allocate nothing from the driver. Every user of a freed block ran
// on the compute stream (the communication stream only sums the gradients, which live as long as
// the run), so a block freed and reused is ordered after the work that used it.
class CachingAllocator {
 public:
  void* Allocate(size_t bytes) {
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      return p;
    }
    void* p = nullptr;
    if (hipMalloc(&p, bytes) != hipSuccess) {
      (void)hipGetLastError();  // clear it, release the cache, and try once more
      Release();
      if (hipMalloc(&p, bytes) != hipSuccess) {
        (void)hipGetLastError();
        return nullptr;
      }
    }
    size_[p] = bytes;
    return p;
  }
  void Free(void* p) { free_[size_.at(p)].push_back(p); }

 private:
  void Release() {
    Check(hipStreamSynchronize(ComputeStream()), "hipStreamSynchronize (release)");
    for (auto& [bytes, blocks] : free_) {
      for (void* p : blocks) {
        Check(hipFree(p), "hipFree");
        size_.erase(p);
      }
      blocks.clear();
    }
  }
  std::map<size_t, std::vector<void*>> free_;
  std::map<void*, size_t> size_;
};

CachingAllocator& Allocator() {
  static CachingAllocator allocator;
  return allocator;
}

}  // namespace

std::string BackendName() {
#if defined(__CUDACC__)
  return "cuda";
#else
  return "hip";
#endif
}

std::string BackendVersion() {
  int version = 0;
  if (hipRuntimeGetVersion(&version) != hipSuccess) version = 0;
  return BackendName() + " runtime " + std::to_string(version);
}

int DeviceCount() {
  int count = 0;
  if (hipGetDeviceCount(&count) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return count;
}

std::string DevicePciBusId(int index) {
  char bus_id[64] = {};
  if (hipDeviceGetPCIBusId(bus_id, sizeof(bus_id), index) != hipSuccess) {
    (void)hipGetLastError();
    return "";
  }
  return bus_id;
}

double MemoryOfDevice(int index) {
  hipDeviceProp_t props;
  Check(hipGetDeviceProperties(&props, index), "hipGetDeviceProperties");
  return static_cast<double>(props.totalGlobalMem);
}

std::string UseDevice(int index) {
  Check(hipSetDevice(index), "hipSetDevice");
  hipDeviceProp_t props;
  Check(hipGetDeviceProperties(&props, index), "hipGetDeviceProperties");
  return BackendName() + ":" + std::to_string(index) + " " + props.name;
}

void* DeviceAllocate(size_t bytes, bool zeroed) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  void* p = Allocator().Allocate(rounded);
  if (!zeroed) return p;
  gpu::ProfiledRegion profiled("memset (allocation)");
  if (p != nullptr) Check(hipMemsetAsync(p, 0, rounded, ComputeStream()), "hipMemsetAsync");
  return p;
}

void DeviceFree(void* p) {
  Allocator().Free(p);
}
void Upload(void* device, const void* host, size_t bytes) {
  Check(hipMemcpyAsync(device, host, bytes, hipMemcpyHostToDevice, ComputeStream()), "hipMemcpy (upload)");
  Check(hipStreamSynchronize(ComputeStream()), "hipStreamSynchronize (upload)");
}
namespace {
// Page-locked host buffers UploadAsync copies from, each free again once the copy out of it has
// run on the compute stream (its event). At most kMaxStaging; past that the oldest is waited for.
struct UploadStaging {
  void* host = nullptr;
  size_t bytes = 0;
  hipEvent_t copied = nullptr;
};
constexpr size_t kMaxStaging = 64;
std::deque<UploadStaging>& StagingPool() {
  static std::deque<UploadStaging> pool;
  return pool;
}
bool CopyHasRun(const UploadStaging& s) {
  const hipError_t state = hipEventQuery(s.copied);
  if (state == hipErrorNotReady) {
    (void)hipGetLastError();  // "not ready" is an answer, not the next launch's error
    return false;
  }
  Check(state, "hipEventQuery (upload staging)");
  return true;
}
// A staging buffer of at least `bytes` whose last copy has run, moved to the back of the pool (so
// the pool stays in the order of use, the front the least recently used): a free one, else a new
// one, else (the pool full) the front one, waited for; grown if it is too small.
UploadStaging& FreeStaging(size_t bytes) {
  std::deque<UploadStaging>& pool = StagingPool();
  auto chosen = pool.end();
  for (auto it = pool.begin(); it != pool.end() && chosen == pool.end(); ++it) {
    if (it->bytes >= bytes && CopyHasRun(*it)) chosen = it;
  }
  if (chosen == pool.end() && pool.size() >= kMaxStaging) {
    chosen = pool.begin();
    Check(hipEventSynchronize(chosen->copied), "hipEventSynchronize (upload staging)");
  }
  if (chosen != pool.end()) {
    const UploadStaging reused = *chosen;
    pool.erase(chosen);
    pool.push_back(reused);
  } else {
    hipEvent_t copied = nullptr;
    Check(hipEventCreateWithFlags(&copied, hipEventDisableTiming), "hipEventCreate (upload staging)");
    pool.push_back({nullptr, 0, copied});
  }
  UploadStaging& s = pool.back();
  if (s.bytes < bytes) {
    if (s.host != nullptr) Check(hipHostFree(s.host), "hipHostFree (upload staging)");
    s.host = nullptr;
    s.bytes = 0;
    Check(hipHostMalloc(&s.host, bytes, hipHostMallocDefault), "hipHostMalloc (upload staging)");
    s.bytes = bytes;
  }
  return s;
}
}  // namespace

void UploadAsync(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  UploadStaging& s = FreeStaging(bytes);
  std::memcpy(s.host, host, bytes);
  Check(hipMemcpyAsync(device, s.host, bytes, hipMemcpyHostToDevice, ComputeStream()), "hipMemcpy (upload)");
  Check(hipEventRecord(s.copied, ComputeStream()), "hipEventRecord (upload staging)");
}

void Download(void* host, const void* device, size_t bytes) {
  Check(hipMemcpyAsync(host, device, bytes, hipMemcpyDeviceToHost, ComputeStream()), "hipMemcpy (download)");
  Check(hipStreamSynchronize(ComputeStream()), "hipStreamSynchronize (download)");
}
void Synchronize() {
  Check(hipStreamSynchronize(ComputeStream()), "hipStreamSynchronize");
  gpu::FreeRetiredScratchWhenIdle();
}

namespace {
hipEvent_t AsEvent(void* event) {
  return static_cast<hipEvent_t>(event);
}
}  // namespace

DeviceEvent::~DeviceEvent() {
  if (event_ != nullptr) (void)hipEventDestroy(AsEvent(event_));
}
DeviceEvent::DeviceEvent(DeviceEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
DeviceEvent& DeviceEvent::operator=(DeviceEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) (void)hipEventDestroy(AsEvent(event_));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}
void DeviceEvent::Record(Stream stream) {
  if (event_ == nullptr) {
    hipEvent_t event;
    Check(hipEventCreate(&event), "hipEventCreate");
    event_ = event;
  }
  Check(hipEventRecord(AsEvent(event_), gpu::StreamOf(stream)), "hipEventRecord");
}
bool DeviceEvent::Done() const {
  if (event_ == nullptr) return true;
  const hipError_t state = hipEventQuery(AsEvent(event_));
  if (state == hipErrorNotReady) {
    (void)hipGetLastError();  // "not ready" is an answer, not the next launch's error
    return false;
  }
  Check(state, "hipEventQuery");
  return true;
}
void DeviceEvent::Await(Stream stream) const {
  if (event_ != nullptr) Check(hipStreamWaitEvent(gpu::StreamOf(stream), AsEvent(event_), 0), "hipStreamWaitEvent");
}
double SecondsBetween(const DeviceEvent& from, const DeviceEvent& to) {
  if (from.event_ == nullptr || to.event_ == nullptr) return 0;
  Check(hipEventSynchronize(AsEvent(to.event_)), "hipEventSynchronize");
  Check(hipEventSynchronize(AsEvent(from.event_)), "hipEventSynchronize");
  float ms = 0;
  Check(hipEventElapsedTime(&ms, AsEvent(from.event_), AsEvent(to.event_)), "hipEventElapsedTime");
  return ms / 1e3;
}
real* OpScratch(size_t values, int slot) {
  const auto at = static_cast<gpu::ScratchSlot>(static_cast<int>(gpu::ScratchSlot::kOpScratch) + slot);
  return static_cast<real*>(gpu::Scratch(at, values * sizeof(real)));
}
void SetThreads(int) {}

#define TP_LAUNCH(kernel, blocks, threads, ...)                              \
  do {                                                                       \
    gpu::ProfiledRegion profiled(#kernel);                                   \
    kernel<<<(blocks), (threads), 0, ComputeStream()>>>(__VA_ARGS__);        \
    CheckLaunch(#kernel);                                                    \
  } while (0)

void Fill(real* p, int64_t n, real value) {
  if (n > 0) TP_LAUNCH(FillKernel, Blocks(n), kThreads, p, n, value);
}
void Copy(real* dst, const real* src, int64_t n) {
  if (n > 0) {
    gpu::ProfiledRegion profiled("copy (device)");
    Check(hipMemcpyAsync(dst, src, n * sizeof(real), hipMemcpyDeviceToDevice, ComputeStream()), "hipMemcpy (copy)");
  }
}
void Scale(real* p, int64_t n, real factor) {
  if (n > 0) TP_LAUNCH(ScaleKernel, Blocks(n), kThreads, p, n, factor);
}
void Add(real* out, const real* a, const real* b, int64_t n) {
  if (n > 0) TP_LAUNCH(AddKernel, Blocks(n), kThreads, out, a, b, n);
}
void ResidualAdd(real* out, const real* x, const real* branch, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(ResidualAddKernel, Blocks(n), kThreads, out, x, branch, n, precision);
}
void ResidualAdd16(uint16_t* out, const uint16_t* x, const real* branch, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(ResidualAdd16Kernel, Blocks(n), kThreads, out, x, branch, n, precision);
}
void Accumulate(real* a, const real* b, int64_t n) {
  if (n > 0) TP_LAUNCH(AccumulateKernel, Blocks(n), kThreads, a, b, n);
}
void RoundStorage(real* p, int64_t n, int precision) {
  if (precision != 0 && n > 0) TP_LAUNCH(RoundKernel, Blocks(n), kThreads, p, n, precision);
}

void AddBias(real* out, const real* bias, int N, int OC, int precision) {
  const int64_t n = int64_t{N} * OC;
  if (n > 0) TP_LAUNCH(AddBiasKernel, Blocks(n), kThreads, out, bias, n, OC, precision);
}

void AddBiasTo16Bit(uint16_t* out, const real* sums, const real* bias, int N, int OC, int precision) {
  const int64_t n = int64_t{N} * OC;
  if (n > 0) TP_LAUNCH(AddBiasTo16BitKernel, Blocks(n), kThreads, out, sums, bias, n, OC, precision);
}

void BiasBackward(real* dbias, const real* dout, int N, int OC) {
  AddColumnSums("ColumnSums (bias gradient)", dbias, N, OC, Element{dout, OC});
}

void CausalSoftmaxForward(real* att, int64_t rows, int T, int precision, uint16_t* out16) {
  if (rows > 0) TP_LAUNCH(CausalSoftmaxForwardKernel, RowBlocks(rows), kThreads, att, rows, T, precision, out16);
}

void CausalSoftmaxBackward(real* dp, const real* p, int64_t rows, int T, real scale, int precision,
                           uint16_t* out16) {
  if (rows > 0) {
    TP_LAUNCH(CausalSoftmaxBackwardKernel, RowBlocks(rows), kThreads, dp, p, rows, T, scale, precision, out16);
  }
}

void To16Bit(uint16_t* out, const real* in, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(To16BitKernel, Blocks(n), kThreads, out, in, n, precision);
}

void From16Bit(real* out, const uint16_t* in, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(From16BitKernel, Blocks(n), kThreads, out, in, n, precision);
}

void Round16Bit(uint16_t* out, const real* in, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(Round16BitKernel, Blocks(n), kThreads, out, in, n, precision);
}

uint16_t* OpScratch16(Scratch16 slot, size_t values) {
  const auto at = static_cast<gpu::ScratchSlot>(static_cast<int>(gpu::ScratchSlot::kSixteenBit) + static_cast<int>(slot));
  return static_cast<uint16_t*>(gpu::Scratch(at, values * sizeof(uint16_t)));
}

void Copy16(uint16_t* dst, const uint16_t* src, int64_t n) {
  if (n > 0) {
    gpu::ProfiledRegion profiled("copy (device, 16-bit)");
    Check(hipMemcpyAsync(dst, src, n * sizeof(uint16_t), hipMemcpyDeviceToDevice, ComputeStream()),
          "hipMemcpy (copy)");
  }
}

void Zero16(uint16_t* p, int64_t n) {
  if (n > 0) {
    gpu::ProfiledRegion profiled("memset (16-bit zeros)");
    Check(hipMemsetAsync(p, 0, n * sizeof(uint16_t), ComputeStream()), "hipMemsetAsync");
  }
}

void BiasBackward16(real* dbias, const uint16_t* dout, int N, int OC, int precision) {
  AddColumnSums("ColumnSums (bias gradient)", dbias, N, OC, ElementOf<SixteenBitValues>{{dout, precision}, OC});
}

namespace {

template <typename Values, typename Outputs>
void LayerNormForwardRows(Outputs out, real* mean, real* rstd, Values inp, const real* w, const real* b, int N,
                          int C) {
  if (N == 0) return;
  gpu::ProfiledRegion profiled("LayerNormForwardKernel");
  LayerNormForwardKernel<<<RowBlocks(N), kThreads, 0, ComputeStream()>>>(out, mean, rstd, inp, w, b, N, C);
  CheckLaunch("LayerNormForwardKernel");
}

template <typename Values, typename Outputs>
void LayerNormBackwardRows(Outputs dinp, real* dw, real* db, const real* dout, Values inp, const real* w,
                           const real* mean, const real* rstd, int N, int C) {
  if (N == 0) return;
  {
    gpu::ProfiledRegion profiled("LayerNormInputGradKernel");
    LayerNormInputGradKernel<<<RowBlocks(N), kThreads, 0, ComputeStream()>>>(dinp, dout, inp, w, mean, rstd, N, C);
    CheckLaunch("LayerNormInputGradKernel");
  }
  AddColumnSums("ColumnSums (layer norm dw)", dw, N, C, NormTimesGrad<Values>{inp, dout, mean, rstd, C});
  AddColumnSums("ColumnSums (layer norm db)", db, N, C, Element{dout, C});
}

}  // namespace

void LayerNormForward(real* out, real* mean, real* rstd, const real* inp, const real* w, const real* b, int N,
                      int C, int precision) {
  LayerNormForwardRows(RealOutputs{out, precision}, mean, rstd, inp, w, b, N, C);
}

void LayerNormForward16(uint16_t* out, real* mean, real* rstd, const uint16_t* inp, const real* w, const real* b,
                        int N, int C, int precision) {
  LayerNormForwardRows(SixteenBitOutputs{out, precision}, mean, rstd, SixteenBitValues{inp, precision}, w, b, N, C);
}

void LayerNormBackward(real* dinp, real* dw, real* db, const real* dout, const real* inp, const real* w,
                       const real* mean, const real* rstd, int N, int C, int precision) {
  LayerNormBackwardRows(RealOutputs{dinp, precision}, dw, db, dout, inp, w, mean, rstd, N, C);
}

void LayerNormBackward16(uint16_t* dinp, real* dw, real* db, const real* dout, const uint16_t* inp, const real* w,
                         const real* mean, const real* rstd, int N, int C, int precision) {
  LayerNormBackwardRows(SixteenBitOutputs{dinp, precision}, dw, db, dout, SixteenBitValues{inp, precision}, w, mean,
                        rstd, N, C);
}

void GeluForward(real* out, const real* inp, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(GeluForwardKernel, Blocks(n), kThreads, out, inp, n, precision);
}
void GeluBackward(real* dinp, const real* inp, const real* dout, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(GeluBackwardKernel, Blocks(n), kThreads, dinp, inp, dout, n, precision);
}
void GeluForward16(uint16_t* out, const uint16_t* inp, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(GeluForward16Kernel, Blocks(n), kThreads, out, inp, n, precision);
}
void GeluBackward16(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(GeluBackward16Kernel, Blocks(n), kThreads, dinp, inp, dout, n, precision);
}

void EncoderForward(real* out, const int* tokens, const real* wte, const real* wpe, int v0, int Vl, int B,
                    int T, int C) {
  const int64_t n = int64_t{B} * T * C;
  if (n > 0) TP_LAUNCH(EncoderForwardKernel, Blocks(n), kThreads, out, tokens, wte, wpe, v0, Vl, n, T, C);
}

void EncoderForward16(real* out, const int* tokens, const uint16_t* wte, const real* wpe, int v0, int Vl, int B,
                      int T, int C, int precision) {
  const int64_t n = int64_t{B} * T * C;
  if (n > 0) {
    TP_LAUNCH(EncoderForward16Kernel, Blocks(n), kThreads, out, tokens, wte, wpe, v0, Vl, n, T, C, precision);
  }
}

namespace {
template <typename Values>
void EncoderBackwardOf(real* dwte, real* dwpe, Values dout, const int* tokens, int v0, int Vl, int B, int T, int C) {
  const int64_t n = int64_t{B} * T * C;
  if (n == 0) return;
  TP_LAUNCH(TokenEmbeddingGradKernel<Values>, Blocks(n), kThreads, dwte, dout, tokens, v0, Vl, n, C);
  if (dwpe != nullptr) {
    TP_LAUNCH(PositionEmbeddingGradKernel<Values>, Blocks(int64_t{T} * C), kThreads, dwpe, dout, B, T, C);
  }
}
}  // namespace

void EncoderBackward(real* dwte, real* dwpe, const real* dout, const int* tokens, int v0, int Vl, int B,
                     int T, int C) {
  EncoderBackwardOf(dwte, dwpe, dout, tokens, v0, Vl, B, T, C);
}

void EncoderBackward16(real* dwte, real* dwpe, const uint16_t* dout, const int* tokens, int v0, int Vl, int B,
                       int T, int C, int precision) {
  EncoderBackwardOf(dwte, dwpe, SixteenBitValues{dout, precision}, tokens, v0, Vl, B, T, C);
}

void CrossEntropyStats(real* row_max, real* row_sum, real* target_logit, const real* logits,
                       const int* targets, const real* global_max, int v0, int N, int Vl, int precision) {
  if (N > 0) {
    TP_LAUNCH(CrossEntropyStatsKernel, N, kThreads, row_max, row_sum, target_logit, logits, targets, global_max,
              v0, Vl, precision);
  }
}

void CrossEntropyLoss(real* row_max, const real* row_sum, const real* target_logit, int N, double* loss) {
  TP_LAUNCH(CrossEntropyLossKernel, 1, kThreads, row_max, row_sum, target_logit, N, loss);
}

void CrossEntropyBackward(real* dlogits, const real* logits, const real* log_sum, const int* targets, int v0,
                          real scale, int N, int Vl, int precision) {
  if (N > 0) {
    TP_LAUNCH(CrossEntropyBackwardKernel<RealOutputs>, N, kThreads, RealOutputs{dlogits, precision}, logits,
              log_sum, targets, v0, scale, Vl, precision);
  }
}

void CrossEntropyBackward16(uint16_t* dlogits, const real* logits, const real* log_sum, const int* targets, int v0,
                            real scale, int N, int Vl, int precision) {
  if (N > 0) {
    TP_LAUNCH(CrossEntropyBackwardKernel<SixteenBitOutputs>, N, kThreads, SixteenBitOutputs{dlogits, precision},
              logits, log_sum, targets, v0, scale, Vl, precision);
  }
}

void AdamWUpdate(real* params, const real* grads, real* m, real* v, int64_t n, real lr, real beta1,
                 real beta2, real eps, real weight_decay, real correction1, real correction2) {
  if (n > 0) {
    TP_LAUNCH(AdamWKernel, Blocks(n), kThreads, params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
              correction1, correction2);
  }
}

double SumOfSquares(const real* p, int64_t n) {
  if (n == 0) return 0;
  auto* partial = static_cast<double*>(gpu::Scratch(gpu::ScratchSlot::kReduction, kReductionBlocks * sizeof(double)));
  TP_LAUNCH(SumOfSquaresKernel, kReductionBlocks, kThreads, partial, p, n);
  std::vector<double> host(kReductionBlocks);
  Download(host.data(), partial, kReductionBlocks * sizeof(double));
  double s = 0;
  for (double x : host) s += x;
  return s;
}

double SumOfSquares(const std::vector<DeviceRange>& ranges) {
  const size_t values = ranges.size() * kReductionBlocks;
  if (values == 0) return 0;
  auto* partial = static_cast<double*>(gpu::Scratch(gpu::ScratchSlot::kReduction, values * sizeof(double)));
  Check(hipMemsetAsync(partial, 0, values * sizeof(double), ComputeStream()), "hipMemsetAsync");
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].n > 0) {
      TP_LAUNCH(SumOfSquaresKernel, kReductionBlocks, kThreads, partial + i * kReductionBlocks, ranges[i].p,
                ranges[i].n);
    }
  }
  std::vector<double> host(values);
  Download(host.data(), partial, values * sizeof(double));
  double s = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    double range = 0;
    for (int b = 0; b < kReductionBlocks; ++b) range += host[i * kReductionBlocks + b];
    s += range;
  }
  return s;
}

int64_t CountNonFinite(const real* p, int64_t n) {
  if (n == 0) return 0;
  auto* count = static_cast<unsigned long long*>(gpu::Scratch(gpu::ScratchSlot::kReduction, sizeof(unsigned long long)));
  Check(hipMemsetAsync(count, 0, sizeof(unsigned long long), ComputeStream()), "hipMemsetAsync");
  TP_LAUNCH(CountNonFiniteKernel, kReductionBlocks, kThreads, count, p, n);
  unsigned long long host = 0;
  Download(&host, count, sizeof(host));
  return static_cast<int64_t>(host);
}

}  // namespace tunepar::core
