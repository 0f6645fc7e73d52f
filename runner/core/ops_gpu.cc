// The GPU backend of ops.h (built by hipcc with -DTUNEPAR_GPU=hip; nvcc through the aliases in
// device_alias.h): the row kernels of kernels.h launched one thread per row or element, and a
// shared-memory tiled GEMM. Correctness is validated on the CPU backend, which runs the same
// row kernels; this file is compile-checked in CI (no GPU there) and reports "no device" cleanly.
// MPI is given device pointers: the MPI library must be GPU-aware (Cray MPICH with
// MPICH_GPU_SUPPORT_ENABLED=1 on LUMI and Frontier, or a ROCm-aware Open MPI).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runner/core/kernels.h"
#include "runner/core/ops.h"

namespace tunepar::core {

namespace {

constexpr int kThreads = 256;
constexpr int kTile = 16;

void Check(hipError_t error, const char* what) {
  if (error != hipSuccess) {
    std::fprintf(stderr, "tunepar-core: %s: %s\n", what, hipGetErrorString(error));
    std::abort();
  }
}

int Blocks(int64_t n) {
  return static_cast<int>((n + kThreads - 1) / kThreads);
}

__global__ void FillKernel(real* p, int64_t n, real value) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}
__global__ void ScaleKernel(real* p, int64_t n, real factor) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= factor;
}
__global__ void AddKernel(real* out, const real* a, const real* b, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
__global__ void AccumulateKernel(real* a, const real* b, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) a[i] += b[i];
}
__global__ void RoundKernel(real* p, int64_t n, int precision) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) p[i] = RoundTo(p[i], precision);
}
__global__ void GeluForwardKernel(real* out, const real* inp, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) out[i] = Gelu(inp[i]);
}
__global__ void GeluBackwardKernel(real* dinp, const real* inp, const real* dout, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) dinp[i] = GeluGrad(inp[i]) * dout[i];
}

// C (M, Nc) = [C +] op(A) (M, K) op(B) (K, Nc) [+ bias]; op transposes when the flag is set:
// A(i, k) = transA ? A[k lda + i] : A[i lda + k], likewise B(k, j).
__global__ void GemmKernel(int M, int Nc, int K, const real* A, int lda, bool transA, const real* B, int ldb,
                           bool transB, real* C, int ldc, bool accumulate, const real* bias) {
  __shared__ real a_tile[kTile][kTile];
  __shared__ real b_tile[kTile][kTile];
  const int row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  real sum = 0;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    a_tile[threadIdx.y][threadIdx.x] =
        (row < M && ka < K) ? (transA ? A[int64_t{ka} * lda + row] : A[int64_t{row} * lda + ka]) : real(0);
    b_tile[threadIdx.y][threadIdx.x] =
        (kb < K && col < Nc) ? (transB ? B[int64_t{col} * ldb + kb] : B[int64_t{kb} * ldb + col]) : real(0);
    __syncthreads();
    for (int k = 0; k < kTile; ++k) sum += a_tile[threadIdx.y][k] * b_tile[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < Nc) {
    real* c = C + int64_t{row} * ldc + col;
    *c = (accumulate ? *c : real(0)) + sum + (bias != nullptr ? bias[col] : real(0));
  }
}

void Gemm(int M, int Nc, int K, const real* A, int lda, bool transA, const real* B, int ldb, bool transB,
          real* C, int ldc, bool accumulate, const real* bias) {
  const dim3 block(kTile, kTile), grid((Nc + kTile - 1) / kTile, (M + kTile - 1) / kTile);
  GemmKernel<<<grid, block>>>(M, Nc, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, bias);
}

__global__ void ColumnSumKernel(real* out, const real* in, int rows, int cols) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  real s = 0;
  for (int i = 0; i < rows; ++i) s += in[int64_t{i} * cols + j];
  out[j] += s;
}

__global__ void LayerNormForwardKernel(real* out, real* mean, real* rstd, const real* inp, const real* w,
                                       const real* b, int N, int C) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) LayerNormRow(inp + int64_t{n} * C, w, b, out + int64_t{n} * C, mean + n, rstd + n, C);
}

// dx per row; the row's dw, db contributions go to scratch (N, 2C), summed per channel after.
__global__ void LayerNormBackwardKernel(real* dinp, real* scratch, const real* dout, const real* inp,
                                        const real* w, const real* mean, const real* rstd, int N, int C) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  real* row = scratch + int64_t{n} * 2 * C;
  for (int i = 0; i < 2 * C; ++i) row[i] = 0;
  LayerNormRowBackward(inp + int64_t{n} * C, w, mean[n], rstd[n], dout + int64_t{n} * C,
                       dinp + int64_t{n} * C, row, row + C, C);
}

__global__ void LayerNormParamsKernel(real* dw, real* db, const real* scratch, int N, int C) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= C) return;
  real sw = 0, sb = 0;
  for (int n = 0; n < N; ++n) {
    sw += scratch[int64_t{n} * 2 * C + i];
    sb += scratch[int64_t{n} * 2 * C + C + i];
  }
  dw[i] += sw;
  db[i] += sb;
}

__global__ void AttentionForwardKernel(real* y, real* att, const real* qkv, int B, int T, int Cl, int NHl) {
  const int64_t id = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (id >= int64_t{B} * NHl * T) return;
  const int t = id % T, h = (id / T) % NHl, b = id / (int64_t{T} * NHl);
  const int hs = Cl / NHl;
  AttentionRow(qkv + int64_t{b} * T * 3 * Cl, att + ((int64_t{b} * NHl + h) * T + t) * T,
               y + (int64_t{b} * T + t) * Cl + h * hs, t, h, T, Cl, hs);
}

// One thread per (b, head): its rows accumulate into the same dk, dv.
__global__ void AttentionBackwardKernel(real* dqkv, real* scratch, const real* dy, const real* qkv,
                                        const real* att, int B, int T, int Cl, int NHl) {
  const int id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id >= B * NHl) return;
  const int h = id % NHl, b = id / NHl, hs = Cl / NHl;
  for (int t = 0; t < T; ++t) {
    AttentionRowBackward(qkv + int64_t{b} * T * 3 * Cl, att + ((int64_t{b} * NHl + h) * T + t) * T,
                         dy + (int64_t{b} * T + t) * Cl + h * hs, dqkv + int64_t{b} * T * 3 * Cl,
                         scratch + int64_t{id} * T, t, h, T, Cl, hs);
  }
}

__global__ void EncoderForwardKernel(real* out, const int* tokens, const real* wte, const real* wpe, int v0,
                                     int Vl, int B, int T, int C) {
  const int64_t id = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (id >= int64_t{B} * T * C) return;
  const int bt = id / C, i = id % C, row = tokens[bt] - v0;
  const real e = (row >= 0 && row < Vl) ? wte[int64_t{row} * C + i] : real(0);
  out[id] = e + (wpe != nullptr ? wpe[int64_t{bt % T} * C + i] : real(0));
}

__global__ void EncoderBackwardKernel(real* dwte, real* dwpe, const real* dout, const int* tokens, int v0,
                                      int Vl, int B, int T, int C) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= C) return;
  for (int bt = 0; bt < B * T; ++bt) {
    const real d = dout[int64_t{bt} * C + i];
    const int row = tokens[bt] - v0;
    if (row >= 0 && row < Vl) dwte[int64_t{row} * C + i] += d;
    if (dwpe != nullptr) dwpe[int64_t{bt % T} * C + i] += d;
  }
}

__global__ void CrossEntropyStatsKernel(real* row_max, real* row_sum, real* target_logit, const real* logits,
                                        const int* targets, const real* global_max, int v0, int N, int Vl) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  CrossEntropyStatsRow(row_max, row_sum, target_logit, logits, targets, global_max, v0, n, Vl);
}

__global__ void CrossEntropyBackwardKernel(real* dlogits, const real* logits, const real* log_sum,
                                           const int* targets, int v0, real scale, int N, int Vl) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) {
    CrossEntropyRowBackward(logits + int64_t{n} * Vl, log_sum[n], targets[n], v0, dlogits + int64_t{n} * Vl,
                            scale, Vl);
  }
}

__global__ void AdamWKernel(real* params, const real* grads, real* m, real* v, int64_t n, real lr, real beta1,
                            real beta2, real eps, real weight_decay, real correction1, real correction2) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n)
    AdamW(params + i, grads[i], m + i, v + i, lr, beta1, beta2, eps, weight_decay, correction1, correction2);
}

__global__ void SumOfSquaresKernel(double* partial, const real* p, int64_t n) {
  __shared__ double sums[kThreads];
  double s = 0;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    s += static_cast<double>(p[i]) * p[i];
  }
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) sums[threadIdx.x] += sums[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
}

__global__ void CountNonFiniteKernel(unsigned long long* count, const real* p, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n && !isfinite(p[i])) atomicAdd(count, 1ull);
}

// Scratch reused across calls (layer-norm partial sums, reductions); not tracked: it is tiny
// next to the activations and a real framework's workspace is not either.
void* Scratch(size_t bytes) {
  static void* scratch = nullptr;
  static size_t size = 0;
  if (bytes > size) {
    if (scratch != nullptr) Check(hipFree(scratch), "hipFree");
    Check(hipMalloc(&scratch, bytes), "hipMalloc (scratch)");
    size = bytes;
  }
  return scratch;
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
  if (hipGetDeviceCount(&count) != hipSuccess) return 0;
  return count;
}

std::string UseDevice(int index) {
  Check(hipSetDevice(index), "hipSetDevice");
  hipDeviceProp_t props;
  Check(hipGetDeviceProperties(&props, index), "hipGetDeviceProperties");
  return BackendName() + ":" + std::to_string(index) + " " + props.name;
}

void* DeviceAllocate(size_t bytes) {
  void* p = nullptr;
  if (hipMalloc(&p, bytes == 0 ? 1 : bytes) != hipSuccess) return nullptr;
  Check(hipMemset(p, 0, bytes == 0 ? 1 : bytes), "hipMemset");
  return p;
}

void DeviceFree(void* p) {
  Check(hipFree(p), "hipFree");
}
void Upload(void* device, const void* host, size_t bytes) {
  Check(hipMemcpy(device, host, bytes, hipMemcpyHostToDevice), "hipMemcpy (upload)");
}
void Download(void* host, const void* device, size_t bytes) {
  Check(hipMemcpy(host, device, bytes, hipMemcpyDeviceToHost), "hipMemcpy (download)");
}
void Synchronize() {
  Check(hipDeviceSynchronize(), "hipDeviceSynchronize");
}
void SetThreads(int) {}

void Fill(real* p, int64_t n, real value) {
  FillKernel<<<Blocks(n), kThreads>>>(p, n, value);
}
void Copy(real* dst, const real* src, int64_t n) {
  if (n > 0) Check(hipMemcpy(dst, src, n * sizeof(real), hipMemcpyDeviceToDevice), "hipMemcpy (copy)");
}
void Scale(real* p, int64_t n, real factor) {
  ScaleKernel<<<Blocks(n), kThreads>>>(p, n, factor);
}
void Add(real* out, const real* a, const real* b, int64_t n) {
  AddKernel<<<Blocks(n), kThreads>>>(out, a, b, n);
}
void Accumulate(real* a, const real* b, int64_t n) {
  AccumulateKernel<<<Blocks(n), kThreads>>>(a, b, n);
}
void RoundStorage(real* p, int64_t n, int precision) {
  if (precision != 0) RoundKernel<<<Blocks(n), kThreads>>>(p, n, precision);
}

void MatmulForward(real* out, const real* inp, const real* w, const real* bias, int N, int C, int OC) {
  Gemm(N, OC, C, inp, C, false, w, C, true, out, OC, false, bias);
}

void MatmulBackward(real* dinp, real* dw, real* dbias, const real* dout, const real* inp, const real* w,
                    int N, int C, int OC) {
  if (dinp != nullptr) Gemm(N, C, OC, dout, OC, false, w, C, false, dinp, C, false, nullptr);
  Gemm(OC, C, N, dout, OC, true, inp, C, false, dw, C, true, nullptr);
  if (dbias != nullptr) ColumnSumKernel<<<Blocks(OC), kThreads>>>(dbias, dout, N, OC);
}

void LayerNormForward(real* out, real* mean, real* rstd, const real* inp, const real* w, const real* b, int N,
                      int C) {
  LayerNormForwardKernel<<<Blocks(N), kThreads>>>(out, mean, rstd, inp, w, b, N, C);
}

void LayerNormBackward(real* dinp, real* dw, real* db, const real* dout, const real* inp, const real* w,
                       const real* mean, const real* rstd, int N, int C) {
  real* scratch = static_cast<real*>(Scratch(static_cast<size_t>(N) * 2 * C * sizeof(real)));
  LayerNormBackwardKernel<<<Blocks(N), kThreads>>>(dinp, scratch, dout, inp, w, mean, rstd, N, C);
  LayerNormParamsKernel<<<Blocks(C), kThreads>>>(dw, db, scratch, N, C);
}

void AttentionForward(real* y, real* att, const real* qkv, int B, int T, int Cl, int NHl) {
  AttentionForwardKernel<<<Blocks(int64_t{B} * NHl * T), kThreads>>>(y, att, qkv, B, T, Cl, NHl);
}

void AttentionBackward(real* dqkv, const real* dy, const real* qkv, const real* att, int B, int T, int Cl,
                       int NHl) {
  real* scratch = static_cast<real*>(Scratch(static_cast<size_t>(B) * NHl * T * sizeof(real)));
  Check(hipMemset(dqkv, 0, static_cast<size_t>(B) * T * 3 * Cl * sizeof(real)),
        "hipMemset");  // rows accumulate
  AttentionBackwardKernel<<<Blocks(B * NHl), kThreads>>>(dqkv, scratch, dy, qkv, att, B, T, Cl, NHl);
}

void GeluForward(real* out, const real* inp, int64_t n) {
  GeluForwardKernel<<<Blocks(n), kThreads>>>(out, inp, n);
}
void GeluBackward(real* dinp, const real* inp, const real* dout, int64_t n) {
  GeluBackwardKernel<<<Blocks(n), kThreads>>>(dinp, inp, dout, n);
}

void EncoderForward(real* out, const int* tokens, const real* wte, const real* wpe, int v0, int Vl, int B,
                    int T, int C) {
  EncoderForwardKernel<<<Blocks(int64_t{B} * T * C), kThreads>>>(out, tokens, wte, wpe, v0, Vl, B, T, C);
}

void EncoderBackward(real* dwte, real* dwpe, const real* dout, const int* tokens, int v0, int Vl, int B,
                     int T, int C) {
  EncoderBackwardKernel<<<Blocks(C), kThreads>>>(dwte, dwpe, dout, tokens, v0, Vl, B, T, C);
}

void CrossEntropyStats(real* row_max, real* row_sum, real* target_logit, const real* logits,
                       const int* targets, const real* global_max, int v0, int N, int Vl) {
  CrossEntropyStatsKernel<<<Blocks(N), kThreads>>>(row_max, row_sum, target_logit, logits, targets,
                                                   global_max, v0, N, Vl);
}

void CrossEntropyBackward(real* dlogits, const real* logits, const real* log_sum, const int* targets, int v0,
                          real scale, int N, int Vl) {
  CrossEntropyBackwardKernel<<<Blocks(N), kThreads>>>(dlogits, logits, log_sum, targets, v0, scale, N, Vl);
}

void AdamWUpdate(real* params, const real* grads, real* m, real* v, int64_t n, real lr, real beta1,
                 real beta2, real eps, real weight_decay, real correction1, real correction2) {
  AdamWKernel<<<Blocks(n), kThreads>>>(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
                                       correction1, correction2);
}

double SumOfSquares(const real* p, int64_t n) {
  const int blocks = 256;
  auto* partial = static_cast<double*>(Scratch(blocks * sizeof(double)));
  SumOfSquaresKernel<<<blocks, kThreads>>>(partial, p, n);
  std::vector<double> host(blocks);
  Download(host.data(), partial, blocks * sizeof(double));
  double s = 0;
  for (double x : host) s += x;
  return s;
}

int64_t CountNonFinite(const real* p, int64_t n) {
  auto* count = static_cast<unsigned long long*>(Scratch(sizeof(unsigned long long)));
  Check(hipMemset(count, 0, sizeof(unsigned long long)), "hipMemset");
  CountNonFiniteKernel<<<Blocks(n), kThreads>>>(count, p, n);
  unsigned long long host = 0;
  Download(&host, count, sizeof(host));
  return static_cast<int64_t>(host);
}

}  // namespace tunepar::core
