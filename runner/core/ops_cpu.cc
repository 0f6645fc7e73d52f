// The CPU backend of ops.h: the row kernels of kernels.h in OpenMP loops, GEMMs by Eigen (its
// own threads, the same count). Loops whose result is a sum over rows run in a fixed number of
// chunks added in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <Eigen/Dense>
#include <omp.h>

#include "runner/core/kernels.h"
#include "runner/core/ops.h"

namespace tunepar::core {

namespace {
using RowMatrix = Eigen::Matrix<real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVector = Eigen::Matrix<real, 1, Eigen::Dynamic>;
using Map = Eigen::Map<RowMatrix>;
using ConstMap = Eigen::Map<const RowMatrix>;
constexpr int kChunks = 16;
}  // namespace

std::string BackendName() {
  return "cpu";
}
std::string BackendVersion() {
  return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION) + ", OpenMP " + std::to_string(_OPENMP);
}
int DeviceCount() {
  return 1;
}
std::string UseDevice(int) {
  return "cpu";
}
void* DeviceAllocate(size_t bytes) {
  return std::calloc(bytes == 0 ? 1 : bytes, 1);
}
void DeviceFree(void* p) {
  std::free(p);
}
void Upload(void* device, const void* host, size_t bytes) {
  std::memcpy(device, host, bytes);
}
void Download(void* host, const void* device, size_t bytes) {
  std::memcpy(host, device, bytes);
}
void Synchronize() {}

void SetThreads(int threads) {
  omp_set_num_threads(threads);
  Eigen::setNbThreads(threads);
}

void Fill(real* p, int64_t n, real value) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

void Copy(real* dst, const real* src, int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(real));
}

void Scale(real* p, int64_t n, real factor) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) p[i] *= factor;
}

void Add(real* out, const real* a, const real* b, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Accumulate(real* a, const real* b, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) a[i] += b[i];
}

void RoundStorage(real* p, int64_t n, int precision) {
  if (precision == 0) return;
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) p[i] = RoundTo(p[i], precision);
}

void MatmulForward(real* out, const real* inp, const real* w, const real* bias, int N, int C, int OC) {
  Map o(out, N, OC);
  o.noalias() = ConstMap(inp, N, C) * ConstMap(w, OC, C).transpose();
  if (bias != nullptr) o.rowwise() += Eigen::Map<const RowVector>(bias, OC);
}

void MatmulBackward(real* dinp, real* dw, real* dbias, const real* dout, const real* inp, const real* w,
                    int N, int C, int OC) {
  const ConstMap d(dout, N, OC);
  if (dinp != nullptr) Map(dinp, N, C).noalias() = d * ConstMap(w, OC, C);
  Map(dw, OC, C).noalias() += d.transpose() * ConstMap(inp, N, C);
  if (dbias != nullptr) Eigen::Map<RowVector>(dbias, OC) += d.colwise().sum();
}

void LayerNormForward(real* out, real* mean, real* rstd, const real* inp, const real* w, const real* b, int N,
                      int C) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n)
    LayerNormRow(inp + int64_t{n} * C, w, b, out + int64_t{n} * C, mean + n, rstd + n, C);
}

void LayerNormBackward(real* dinp, real* dw, real* db, const real* dout, const real* inp, const real* w,
                       const real* mean, const real* rstd, int N, int C) {
  std::vector<real> partial(static_cast<size_t>(kChunks) * 2 * C, real(0));
#pragma omp parallel for
  for (int c = 0; c < kChunks; ++c) {
    real* pdw = partial.data() + static_cast<size_t>(c) * 2 * C;
    for (int n = c; n < N; n += kChunks) {
      LayerNormRowBackward(inp + int64_t{n} * C, w, mean[n], rstd[n], dout + int64_t{n} * C,
                           dinp + int64_t{n} * C, pdw, pdw + C, C);
    }
  }
  for (int c = 0; c < kChunks; ++c) {
    const real* pdw = partial.data() + static_cast<size_t>(c) * 2 * C;
    for (int i = 0; i < C; ++i) {
      dw[i] += pdw[i];
      db[i] += pdw[C + i];
    }
  }
}

namespace {

// A head's (T, hs) slice of the qkv (B, T, 3 Cl) or y (B, T, Cl) rows.
using HeadMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;
using ConstHeadMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

}  // namespace

void AttentionForward(real* y, real* att, const real* qkv, int B, int T, int Cl, int NHl) {
  const int hs = Cl / NHl;
  const real scale = real(1) / Sqrt(static_cast<real>(hs));
  // One thread per (b, head), its three products as small single-threaded GEMMs.
#pragma omp parallel for collapse(2)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NHl; ++h) {
      const real* base = qkv + int64_t{b} * T * 3 * Cl + h * hs;
      const ConstHeadMap q(base, T, hs, Eigen::OuterStride<>(3 * Cl)),
          k(base + Cl, T, hs, Eigen::OuterStride<>(3 * Cl)),
          v(base + 2 * Cl, T, hs, Eigen::OuterStride<>(3 * Cl));
      real* p = att + (int64_t{b} * NHl + h) * T * T;
      Map s(p, T, T);
      s.noalias() = (q * k.transpose()) * scale;
      for (int t = 0; t < T; ++t) CausalSoftmaxRow(p + int64_t{t} * T, t, T);
      HeadMap(y + int64_t{b} * T * Cl + h * hs, T, hs, Eigen::OuterStride<>(Cl)).noalias() = s * v;
    }
  }
}

void AttentionBackward(real* dqkv, const real* dy, const real* qkv, const real* att, int B, int T, int Cl,
                       int NHl) {
  const int hs = Cl / NHl;
  const real scale = real(1) / Sqrt(static_cast<real>(hs));
#pragma omp parallel
  {
    RowMatrix ds(T, T);
#pragma omp for collapse(2)
    for (int b = 0; b < B; ++b) {
      for (int h = 0; h < NHl; ++h) {
        const Eigen::OuterStride<> stride(3 * Cl);
        const real* base = qkv + int64_t{b} * T * 3 * Cl + h * hs;
        real* dbase = dqkv + int64_t{b} * T * 3 * Cl + h * hs;
        const ConstHeadMap q(base, T, hs, stride), k(base + Cl, T, hs, stride),
            v(base + 2 * Cl, T, hs, stride);
        HeadMap dq(dbase, T, hs, stride), dk(dbase + Cl, T, hs, stride), dv(dbase + 2 * Cl, T, hs, stride);
        const ConstHeadMap dyh(dy + int64_t{b} * T * Cl + h * hs, T, hs, Eigen::OuterStride<>(Cl));
        const real* p = att + (int64_t{b} * NHl + h) * T * T;
        const ConstMap pm(p, T, T);
        ds.noalias() = dyh * v.transpose();  // dP
        for (int t = 0; t < T; ++t)
          CausalSoftmaxRowBackward(p + int64_t{t} * T, ds.data() + int64_t{t} * T, t, T, scale);
        dv.noalias() = pm.transpose() * dyh;
        dq.noalias() = ds * k;
        dk.noalias() = ds.transpose() * q;
      }
    }
  }
}

void GeluForward(real* out, const real* inp, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = Gelu(inp[i]);
}

void GeluBackward(real* dinp, const real* inp, const real* dout, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) dinp[i] = GeluGrad(inp[i]) * dout[i];
}

void EncoderForward(real* out, const int* tokens, const real* wte, const real* wpe, int v0, int Vl, int B,
                    int T, int C) {
#pragma omp parallel for
  for (int bt = 0; bt < B * T; ++bt) {
    real* o = out + int64_t{bt} * C;
    const int row = tokens[bt] - v0;
    const real* p = wpe == nullptr ? nullptr : wpe + int64_t{bt % T} * C;
    for (int i = 0; i < C; ++i) {
      const real e = (row >= 0 && row < Vl) ? wte[int64_t{row} * C + i] : real(0);
      o[i] = e + (p == nullptr ? real(0) : p[i]);
    }
  }
}

void EncoderBackward(real* dwte, real* dwpe, const real* dout, const int* tokens, int v0, int Vl, int B,
                     int T, int C) {
  // Channels split over threads: rows hitting the same token never race, and each sum runs in
  // row order whatever the thread count.
#pragma omp parallel for
  for (int i = 0; i < C; ++i) {
    for (int bt = 0; bt < B * T; ++bt) {
      const real d = dout[int64_t{bt} * C + i];
      const int row = tokens[bt] - v0;
      if (row >= 0 && row < Vl) dwte[int64_t{row} * C + i] += d;
      if (dwpe != nullptr) dwpe[int64_t{bt % T} * C + i] += d;
    }
  }
}

void CrossEntropyStats(real* row_max, real* row_sum, real* target_logit, const real* logits,
                       const int* targets, const real* global_max, int v0, int N, int Vl) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    CrossEntropyStatsRow(row_max, row_sum, target_logit, logits, targets, global_max, v0, n, Vl);
  }
}

void CrossEntropyBackward(real* dlogits, const real* logits, const real* log_sum, const int* targets, int v0,
                          real scale, int N, int Vl) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    CrossEntropyRowBackward(logits + int64_t{n} * Vl, log_sum[n], targets[n], v0, dlogits + int64_t{n} * Vl,
                            scale, Vl);
  }
}

void AdamWUpdate(real* params, const real* grads, real* m, real* v, int64_t n, real lr, real beta1,
                 real beta2, real eps, real weight_decay, real correction1, real correction2) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    AdamW(params + i, grads[i], m + i, v + i, lr, beta1, beta2, eps, weight_decay, correction1, correction2);
  }
}

double SumOfSquares(const real* p, int64_t n) {
  double partial[kChunks] = {};
  const int64_t chunk = (n + kChunks - 1) / kChunks;
#pragma omp parallel for
  for (int c = 0; c < kChunks; ++c) {
    double s = 0;
    for (int64_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) s += static_cast<double>(p[i]) * p[i];
    partial[c] = s;
  }
  double s = 0;
  for (double x : partial) s += x;
  return s;
}

int64_t CountNonFinite(const real* p, int64_t n) {
  int64_t count = 0;
#pragma omp parallel for reduction(+ : count)
  for (int64_t i = 0; i < n; ++i) count += std::isfinite(p[i]) ? 0 : 1;
  return count;
}

}  // namespace tunepar::core
