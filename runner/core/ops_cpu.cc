// The CPU backend of ops.h: the row kernels of kernels.h in OpenMP loops, GEMMs by Eigen (its
// own threads, the same count). Loops whose result is a sum over rows run in a fixed number of
// chunks added in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <chrono>
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
std::string DevicePciBusId(int) {
  return "";
}
double MemoryOfDevice(int) {
  return 0;
}
std::string UseDevice(int) {
  return "cpu";
}
void* DeviceAllocate(size_t bytes, bool zeroed) {
  if (zeroed) return std::calloc(bytes == 0 ? 1 : bytes, 1);
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (p != nullptr) std::memset(p, 0xff, bytes);  // all ones: NaN as a float
  return p;
}
void DeviceFree(void* p) {
  std::free(p);
}
void Upload(void* device, const void* host, size_t bytes) {
  std::memcpy(device, host, bytes);
}
void UploadAsync(void* device, const void* host, size_t bytes) {
  Upload(device, host, bytes);
}
void Download(void* host, const void* device, size_t bytes) {
  std::memcpy(host, device, bytes);
}
void Synchronize() {}

// The host runs everything in order: an event is the time it was recorded.
DeviceEvent::~DeviceEvent() = default;
DeviceEvent::DeviceEvent(DeviceEvent&& other) noexcept : time_(other.time_) {}
DeviceEvent& DeviceEvent::operator=(DeviceEvent&& other) noexcept {
  time_ = other.time_;
  return *this;
}
void DeviceEvent::Record(Stream) {
  time_ = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
bool DeviceEvent::Done() const {
  return true;
}
void DeviceEvent::Await(Stream) const {}
double SecondsBetween(const DeviceEvent& from, const DeviceEvent& to) {
  return to.time_ - from.time_;
}

real* OpScratch(size_t values, int slot) {
  static std::vector<real> scratch[kOpScratchSlots];
  std::vector<real>& s = scratch[slot];
  if (s.size() < values) s.resize(values);
  return s.data();
}

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

void ResidualAdd(real* out, const real* x, const real* branch, int64_t n, int precision) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = RoundTo(x[i] + RoundTo(branch[i], precision), precision);
}

void ResidualAdd16(uint16_t* out, const uint16_t* x, const real* branch, int64_t n, int precision) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const real sum = From16BitValue(x[i], precision) + RoundTo(branch[i], precision);
    out[i] = To16BitValue(static_cast<float>(RoundTo(sum, precision)), precision);
  }
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

namespace {

using ColMatrix = Eigen::Matrix<real, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using ConstColMap = Eigen::Map<const ColMatrix, 0, Eigen::OuterStride<>>;
using ColMap = Eigen::Map<ColMatrix, 0, Eigen::OuterStride<>>;

// c = alpha x y + beta c, never reading c when beta is 0 (BLAS's rule).
template <typename X, typename Y>
void Product(ColMap& c, const X& x, const Y& y, real alpha, real beta) {
  if (beta == real(0)) {
    c.noalias() = alpha * (x * y);
  } else {
    if (beta != real(1)) c *= beta;
    c.noalias() += alpha * (x * y);
  }
}

// One problem of Gemm: the stored A is (k, m) when transposed, else (m, k); likewise B.
void GemmOne(Op op_a, Op op_b, int m, int n, int k, real alpha, const real* A, int lda, const real* B, int ldb,
             real beta, real* C, int ldc) {
  const ConstColMap a(A, op_a == Op::kT ? k : m, op_a == Op::kT ? m : k, Eigen::OuterStride<>(lda));
  const ConstColMap b(B, op_b == Op::kT ? n : k, op_b == Op::kT ? k : n, Eigen::OuterStride<>(ldb));
  ColMap c(C, m, n, Eigen::OuterStride<>(ldc));
  if (op_a == Op::kN && op_b == Op::kN) Product(c, a, b, alpha, beta);
  if (op_a == Op::kN && op_b == Op::kT) Product(c, a, b.transpose(), alpha, beta);
  if (op_a == Op::kT && op_b == Op::kN) Product(c, a.transpose(), b, alpha, beta);
  if (op_a == Op::kT && op_b == Op::kT) Product(c, a.transpose(), b.transpose(), alpha, beta);
}

}  // namespace

void Gemm(Op op_a, Op op_b, int m, int n, int k, real alpha, const real* A, int lda, const real* B, int ldb,
          real beta, real* C, int ldc, const GemmBatch& batch, int) {
  if (batch.count == 1) {  // Eigen's own threads split the one product
    GemmOne(op_a, op_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // Several problems: one thread each (Eigen runs single-threaded inside a parallel region).
#pragma omp parallel for
  for (int i = 0; i < batch.count; ++i) {
    GemmOne(op_a, op_b, m, n, k, alpha, A + i * batch.stride_a, lda, B + i * batch.stride_b, ldb, beta,
            C + i * batch.stride_c, ldc);
  }
}

void AddBias(real* out, const real* bias, int N, int OC, int precision) {
  Map(out, N, OC).rowwise() += Eigen::Map<const RowVector>(bias, OC);
  RoundStorage(out, int64_t{N} * OC, precision);
}

void BiasBackward(real* dbias, const real* dout, int N, int OC) {
  Eigen::Map<RowVector>(dbias, OC) += ConstMap(dout, N, OC).colwise().sum();
}

void CausalSoftmaxForward(real* att, int64_t rows, int T, int precision, uint16_t* out16) {
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    real* row = att + r * T;
    const int t = static_cast<int>(r % T);
    CausalSoftmaxRow(row, t, T);
    for (int t2 = 0; t2 <= t; ++t2) row[t2] = RoundTo(row[t2], precision);
    if (out16 != nullptr) {
      for (int t2 = 0; t2 < T; ++t2) out16[r * T + t2] = To16BitValue(static_cast<float>(row[t2]), precision);
    }
  }
}

void CausalSoftmaxBackward(real* dp, const real* p, int64_t rows, int T, real scale, int precision,
                           uint16_t* out16) {
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    real* row = dp + r * T;
    const int t = static_cast<int>(r % T);
    CausalSoftmaxRowBackward(p + r * T, row, t, T, scale);
    for (int t2 = 0; t2 <= t; ++t2) row[t2] = RoundTo(row[t2], precision);
    if (out16 != nullptr) {
      for (int t2 = 0; t2 < T; ++t2) out16[r * T + t2] = To16BitValue(static_cast<float>(row[t2]), precision);
    }
  }
}

void To16Bit(uint16_t* out, const real* in, int64_t n, int precision) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = To16BitValue(static_cast<float>(in[i]), precision);
}

void From16Bit(real* out, const uint16_t* in, int64_t n, int precision) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = From16BitValue(in[i], precision);
}

void Round16Bit(uint16_t* out, const real* in, int64_t n, int precision) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = To16BitValue(static_cast<float>(RoundTo(in[i], precision)), precision);
}

namespace {
// The reals a strided 16-bit operand stands for (exact), spanning `span` values.
std::vector<real> FromSixteenBits(const uint16_t* in, int64_t span, int precision) {
  std::vector<real> out(static_cast<size_t>(span));
#pragma omp parallel for
  for (int64_t i = 0; i < span; ++i) out[i] = From16BitValue(in[i], precision);
  return out;
}
}  // namespace

void Gemm16(Op op_a, Op op_b, int m, int n, int k, real alpha, const uint16_t* A, int lda, const uint16_t* B,
            int ldb, real beta, real* C, int ldc, const GemmBatch& batch, int precision) {
  const std::vector<real> a = FromSixteenBits(
      A, OperandSpan(op_a, m, k, lda, batch.count, batch.stride_a), precision);
  const std::vector<real> b = FromSixteenBits(
      B, OperandSpan(op_b, k, n, ldb, batch.count, batch.stride_b), precision);
  Gemm(op_a, op_b, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, C, ldc, batch, precision);
}

// The product in fp32 (compact, m x n per problem), then each C element rounded once from
// product + beta C: what a BLAS writing 16-bit outputs computes.
void Gemm16(Op op_a, Op op_b, int m, int n, int k, real alpha, const uint16_t* A, int lda, const uint16_t* B,
            int ldb, real beta, uint16_t* C, int ldc, const GemmBatch& batch, int precision) {
  if (m == 0 || n == 0 || batch.count == 0) return;
  const int64_t mn = int64_t{m} * n;
  std::vector<real> product(static_cast<size_t>(mn * batch.count));
  Gemm16(op_a, op_b, m, n, k, alpha, A, lda, B, ldb, real(0), product.data(), m,
         {batch.count, batch.stride_a, batch.stride_b, mn}, precision);
#pragma omp parallel for
  for (int64_t column = 0; column < int64_t{batch.count} * n; ++column) {
    uint16_t* c = C + (column / n) * batch.stride_c + (column % n) * ldc;
    const real* p = product.data() + column * m;
    for (int r = 0; r < m; ++r) {
      const real sum = beta == real(0) ? p[r] : p[r] + beta * From16BitValue(c[r], precision);
      c[r] = To16BitValue(static_cast<float>(RoundTo(sum, precision)), precision);
    }
  }
}

// The sums in fp32 (Gemm16 into reals), then the bias and the one rounding: what cublasLt's bias
// epilogue computes.
void Gemm16Bias(Op op_a, Op op_b, int m, int n, int k, const uint16_t* A, int lda, const uint16_t* B, int ldb,
                const real* bias, uint16_t* C, int precision) {
  if (m == 0 || n == 0) return;
  std::vector<real> sums(static_cast<size_t>(int64_t{m} * n));
  Gemm16(op_a, op_b, m, n, k, real(1), A, lda, B, ldb, real(0), sums.data(), m, {}, precision);
  AddBiasTo16Bit(C, sums.data(), bias, n, m, precision);
}

void AddBiasTo16Bit(uint16_t* out, const real* sums, const real* bias, int N, int OC, int precision) {
  const SixteenBitOutputs o{out, precision};
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    const int64_t row = int64_t{n} * OC;
    for (int j = 0; j < OC; ++j) o.Set(row + j, bias != nullptr ? sums[row + j] + bias[j] : sums[row + j]);
  }
}

void Copy16(uint16_t* dst, const uint16_t* src, int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(uint16_t));
}

void Zero16(uint16_t* p, int64_t n) {
  if (n > 0) std::memset(p, 0, static_cast<size_t>(n) * sizeof(uint16_t));
}

uint16_t* OpScratch16(Scratch16 slot, size_t values) {
  static std::vector<uint16_t> scratch[static_cast<int>(Scratch16::kCount)];
  std::vector<uint16_t>& s = scratch[static_cast<int>(slot)];
  if (s.size() < values) s.resize(values);
  return s.data();
}

namespace {

template <typename Values>
void LayerNormForwardRows(real* out, real* mean, real* rstd, Values inp, const real* w, const real* b, int N, int C,
                          int precision) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    real* o = out + int64_t{n} * C;
    LayerNormRow(inp + int64_t{n} * C, w, b, o, mean != nullptr ? mean + n : nullptr, rstd + n, C);
    for (int i = 0; i < C; ++i) o[i] = RoundTo(o[i], precision);
  }
}

template <typename Values>
void LayerNormBackwardRows(real* dinp, real* dw, real* db, const real* dout, Values inp, const real* w,
                           const real* mean, const real* rstd, int N, int C, int precision) {
  std::vector<real> partial(static_cast<size_t>(kChunks) * 2 * C, real(0));
#pragma omp parallel for
  for (int c = 0; c < kChunks; ++c) {
    real* pdw = partial.data() + static_cast<size_t>(c) * 2 * C;
    for (int n = c; n < N; n += kChunks) {
      real* dx = dinp + int64_t{n} * C;
      LayerNormRowBackward(inp + int64_t{n} * C, w, mean != nullptr ? mean[n] : real(0), rstd[n],
                           dout + int64_t{n} * C, dx, pdw, pdw + C, C, mean != nullptr);
      for (int i = 0; i < C; ++i) dx[i] = RoundTo(dx[i], precision);
    }
  }
  for (int c = 0; c < kChunks; ++c) {
    const real* pdw = partial.data() + static_cast<size_t>(c) * 2 * C;
    for (int i = 0; i < C; ++i) {
      dw[i] += pdw[i];
      if (db != nullptr) db[i] += pdw[C + i];
    }
  }
}

}  // namespace

void LayerNormForward(real* out, real* mean, real* rstd, const real* inp, const real* w, const real* b, int N,
                      int C, int precision) {
  LayerNormForwardRows(out, mean, rstd, inp, w, b, N, C, precision);
}

// The 16-bit forms of the row ops with several outputs or reductions run the real-held ops on
// widened copies (host scratch, exact both ways: every value is on the grid), so they equal them
// bit for bit: the same instantiation, so the same code, whatever the compiler contracts into
// fused multiply-adds (a form reading the 16-bit numbers in place compiled to other code, and
// rstd came out an ulp apart on an AVX-512 machine); the GPU's kernels read and write the
// 16-bit numbers in place.
void LayerNormForward16(uint16_t* out, real* mean, real* rstd, const uint16_t* inp, const real* w, const real* b,
                        int N, int C, int precision) {
  const std::vector<real> x = FromSixteenBits(inp, int64_t{N} * C, precision);
  std::vector<real> normed(static_cast<size_t>(N) * C);
  LayerNormForwardRows(normed.data(), mean, rstd, x.data(), w, b, N, C, precision);
  To16Bit(out, normed.data(), int64_t{N} * C, precision);
}

void LayerNormBackward(real* dinp, real* dw, real* db, const real* dout, const real* inp, const real* w,
                       const real* mean, const real* rstd, int N, int C, int precision) {
  LayerNormBackwardRows(dinp, dw, db, dout, inp, w, mean, rstd, N, C, precision);
}

void LayerNormBackward16(uint16_t* dinp, real* dw, real* db, const real* dout, const uint16_t* inp, const real* w,
                         const real* mean, const real* rstd, int N, int C, int precision) {
  std::vector<real> d = FromSixteenBits(dinp, int64_t{N} * C, precision);
  const std::vector<real> x = FromSixteenBits(inp, int64_t{N} * C, precision);
  LayerNormBackwardRows(d.data(), dw, db, dout, x.data(), w, mean, rstd, N, C, precision);
  To16Bit(dinp, d.data(), int64_t{N} * C, precision);
}

void GeluForward(real* out, const real* inp, int64_t n, int precision) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = RoundTo(Gelu(inp[i]), precision);
}

void GeluBackward(real* dinp, const real* inp, const real* dout, int64_t n, int precision) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) dinp[i] = RoundTo(GeluGrad(inp[i]) * dout[i], precision);
}

void GeluForward16(uint16_t* out, const uint16_t* inp, int64_t n, int precision) {
  const SixteenBitOutputs o{out, precision};
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) o.Set(i, Gelu(From16BitValue(inp[i], precision)));
}

void GeluBackward16(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, int64_t n, int precision) {
  const SixteenBitOutputs d{dinp, precision};
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    d.Set(i, GeluGrad(From16BitValue(inp[i], precision)) * From16BitValue(dout[i], precision));
  }
}

namespace {

template <typename Values, typename Outputs>
void SwigluForwardOf(Outputs out, Values inp, int N, int Fl) {
  const int64_t n = int64_t{N} * Fl;
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = SwigluGateIndex(i, Fl);
    out.Set(i, Swiglu(inp[at], inp[at + Fl]));
  }
}

template <typename Values, typename Outputs>
void SwigluBackwardOf(Outputs dinp, Values inp, Values dout, int N, int Fl) {
  const int64_t n = int64_t{N} * Fl;
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = SwigluGateIndex(i, Fl);
    const real a = inp[at], u = inp[at + Fl], d = dout[i];
    dinp.Set(at, d * SwigluGateGrad(a, u));
    dinp.Set(at + Fl, d * SwigluUpGrad(a));
  }
}

template <typename Outputs>
void RotaryOf(Outputs x, int N, int T, int rotated, int ld, int hs, bool inverse, int position0) {
  const int64_t pairs = int64_t{N} * (rotated / 2);
#pragma omp parallel for
  for (int64_t i = 0; i < pairs; ++i) RotatePair(x, i, rotated, ld, T, hs, inverse, position0);
}

}  // namespace

void SwigluForward(real* out, const real* inp, int N, int Fl, int precision) {
  SwigluForwardOf(RealOutputs{out, precision}, inp, N, Fl);
}
void SwigluBackward(real* dinp, const real* inp, const real* dout, int N, int Fl, int precision) {
  SwigluBackwardOf(RealOutputs{dinp, precision}, inp, dout, N, Fl);
}
void SwigluForward16(uint16_t* out, const uint16_t* inp, int N, int Fl, int precision) {
  SwigluForwardOf(SixteenBitOutputs{out, precision}, SixteenBitValues{inp, precision}, N, Fl);
}
void SwigluBackward16(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, int N, int Fl, int precision) {
  SwigluBackwardOf(SixteenBitOutputs{dinp, precision}, SixteenBitValues{inp, precision},
                   SixteenBitValues{dout, precision}, N, Fl);
}
void Rotary(real* qkv, int N, int T, int rotated, int ld, int hs, bool inverse, int precision, int position0) {
  RotaryOf(RealOutputs{qkv, precision}, N, T, rotated, ld, hs, inverse, position0);
}
void Rotary16(uint16_t* qkv, int N, int T, int rotated, int ld, int hs, bool inverse, int precision, int position0) {
  RotaryOf(SixteenBitOutputs{qkv, precision}, N, T, rotated, ld, hs, inverse, position0);
}

void BiasBackward16(real* dbias, const uint16_t* dout, int N, int OC, int precision) {
  const std::vector<real> d = FromSixteenBits(dout, int64_t{N} * OC, precision);
  BiasBackward(dbias, d.data(), N, OC);
}

namespace {
// The token embedding of every (b, t): wte_at(row, i) for the rows held here.
template <typename Entry>
void EncoderForwardOf(real* out, const int* tokens, Entry wte_at, const real* wpe, int v0, int Vl, int B, int T,
                      int C) {
#pragma omp parallel for
  for (int bt = 0; bt < B * T; ++bt) {
    real* o = out + int64_t{bt} * C;
    const int row = tokens[bt] - v0;
    const real* p = wpe == nullptr ? nullptr : wpe + int64_t{bt % T} * C;
    for (int i = 0; i < C; ++i) {
      const real e = (row >= 0 && row < Vl) ? wte_at(row, i) : real(0);
      o[i] = e + (p == nullptr ? real(0) : p[i]);
    }
  }
}
}  // namespace

void EncoderForward(real* out, const int* tokens, const real* wte, const real* wpe, int v0, int Vl, int B,
                    int T, int C) {
  EncoderForwardOf(
      out, tokens, [=](int row, int i) { return wte[int64_t{row} * C + i]; }, wpe, v0, Vl, B, T, C);
}

void EncoderForward16(real* out, const int* tokens, const uint16_t* wte, const real* wpe, int v0, int Vl, int B,
                      int T, int C, int precision) {
  EncoderForwardOf(
      out, tokens, [=](int row, int i) { return static_cast<real>(From16BitValue(wte[int64_t{row} * C + i], precision)); },
      wpe, v0, Vl, B, T, C);
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

void EncoderBackward16(real* dwte, real* dwpe, const uint16_t* dout, const int* tokens, int v0, int Vl, int B,
                       int T, int C, int precision) {
  const std::vector<real> d = FromSixteenBits(dout, int64_t{B} * T * C, precision);
  EncoderBackward(dwte, dwpe, d.data(), tokens, v0, Vl, B, T, C);
}

void CrossEntropyStats(real* row_max, real* row_sum, real* target_logit, const real* logits,
                       const int* targets, const real* global_max, int v0, int N, int Vl, int precision) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    CrossEntropyStatsRow(row_max, row_sum, target_logit, RoundedValues{logits, precision}, targets, global_max, v0,
                         n, Vl);
  }
}

void CrossEntropyLoss(real* row_max, const real* row_sum, const real* target_logit, int N, double* loss) {
  double sum = 0;
  for (int n = 0; n < N; ++n) {
    const real log_sum = Log(row_sum[n]) + row_max[n];
    sum += static_cast<double>(log_sum) - target_logit[n];
    row_max[n] = log_sum;
  }
  *loss = sum;
}

void CrossEntropyBackward(real* dlogits, const real* logits, const real* log_sum, const int* targets, int v0,
                          real scale, int N, int Vl, int precision) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    real* d = dlogits + int64_t{n} * Vl;
    CrossEntropyRowBackward(RoundedValues{logits, precision} + int64_t{n} * Vl, log_sum[n], targets[n], v0, d, scale,
                            Vl);
    for (int i = 0; i < Vl; ++i) d[i] = RoundTo(d[i], precision);
  }
}

void CrossEntropyBackward16(uint16_t* dlogits, const real* logits, const real* log_sum, const int* targets, int v0,
                            real scale, int N, int Vl, int precision) {
#pragma omp parallel
  {
    std::vector<real> row(static_cast<size_t>(Vl));
#pragma omp for
    for (int n = 0; n < N; ++n) {
      CrossEntropyRowBackward(RoundedValues{logits, precision} + int64_t{n} * Vl, log_sum[n], targets[n], v0,
                              row.data(), scale, Vl);
      for (int i = 0; i < Vl; ++i) {
        dlogits[int64_t{n} * Vl + i] = To16BitValue(static_cast<float>(RoundTo(row[i], precision)), precision);
      }
    }
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

double SumOfSquares(const std::vector<DeviceRange>& ranges) {
  double s = 0;
  for (const DeviceRange& r : ranges) s += SumOfSquares(r.p, r.n);
  return s;
}

int64_t CountNonFinite(const real* p, int64_t n) {
  int64_t count = 0;
#pragma omp parallel for reduction(+ : count)
  for (int64_t i = 0; i < n; ++i) count += std::isfinite(p[i]) ? 0 : 1;
  return count;
}

}  // namespace tunepar::core
