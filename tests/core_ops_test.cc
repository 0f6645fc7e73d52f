// Every op of ops.h on the backend this test is linked with — the CPU backend (core_ops_test)
// and the CUDA backend (core_ops_cuda_test: the same source, run where a GPU is present, skipped
// otherwise) — against plain double-precision loops written here. The GEMM cases cover every
// transpose pair, leading dimensions wider than the matrix, batch strides, alpha and beta
// (beta 0 never reads C), and 16-bit inputs, so the calls the linear layers and attention make
// (gemm_layers.cc) are pinned on the CPU before a GPU runs them.
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runner/core/flash_attention.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"
#include "runner/core/parallel.h"

namespace tunepar::core {
namespace {

using Values = std::vector<real>;

Values Zeros(int64_t n) {
  return Values(static_cast<size_t>(n), real(0));
}
Values Filled(int64_t n, real value) {
  return Values(static_cast<size_t>(n), value);
}

// Device memory holding `host`, read back with Get().
class DeviceArray {
 public:
  explicit DeviceArray(const Values& host) : size_(host.size()) {
    p_ = static_cast<real*>(DeviceAllocate(size_ * sizeof(real)));
    Upload(p_, host.data(), size_ * sizeof(real));
  }
  DeviceArray(const std::vector<int>& host) : size_(host.size()) {
    p_ = static_cast<real*>(DeviceAllocate(size_ * sizeof(int)));
    Upload(p_, host.data(), size_ * sizeof(int));
  }
  ~DeviceArray() { DeviceFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  real* get() { return p_; }
  int* ints() { return reinterpret_cast<int*>(p_); }
  Values Get() const {
    Synchronize();
    Values host(size_);
    Download(host.data(), p_, size_ * sizeof(real));
    return host;
  }

 private:
  size_t size_;
  real* p_ = nullptr;
};

class Ops : public ::testing::Test {
 public:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no " << BackendName() << " device: the " << BackendName() << " ops are not run";
    UseDevice(0);
  }
  Values Random(size_t n, double scale = 1.0, int precision = 0) {
    std::normal_distribution<double> d(0.0, scale);
    Values v(n);
    for (real& x : v) x = RoundTo(static_cast<real>(d(rng_)), precision);
    return v;
  }
  std::mt19937_64 rng_{20261126};
};

// |got - want| <= tol (max |want| + 1e-30) element-wise, reporting the first mismatch.
void ExpectClose(const Values& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * scale + 1e-30) << what << " at " << i;
  }
}

// 16-bit numbers on the device (the values of `grid`, which lie on the precision's grid), and
// their values read back.
class DeviceSixteenBit {
 public:
  DeviceSixteenBit(const Values& grid, int precision) : size_(grid.size()), precision_(precision) {
    std::vector<uint16_t> bits(size_);
    for (size_t k = 0; k < size_; ++k) bits[k] = To16BitValue(static_cast<float>(grid[k]), precision);
    p_ = static_cast<uint16_t*>(DeviceAllocate(size_ * sizeof(uint16_t)));
    Upload(p_, bits.data(), size_ * sizeof(uint16_t));
  }
  ~DeviceSixteenBit() { DeviceFree(p_); }
  DeviceSixteenBit(const DeviceSixteenBit&) = delete;
  DeviceSixteenBit& operator=(const DeviceSixteenBit&) = delete;
  uint16_t* get() { return p_; }
  std::vector<double> Get() const {
    Synchronize();
    std::vector<uint16_t> bits(size_);
    Download(bits.data(), p_, size_ * sizeof(uint16_t));
    std::vector<double> values(size_);
    for (size_t k = 0; k < size_; ++k) values[k] = From16BitValue(bits[k], precision_);
    return values;
  }

 private:
  size_t size_;
  int precision_;
  uint16_t* p_ = nullptr;
};

std::vector<double> AsDoubles(const Values& v) {
  return std::vector<double>(v.begin(), v.end());
}
Values AsValues(const std::vector<double>& v) {
  return Values(v.begin(), v.end());
}

// One step of the 16-bit grid at |x| (the spacing of values of its magnitude).
double GridStep(double x, int precision) {
  const int mantissa_bits = precision == 2 ? 7 : 10;
  const double magnitude = std::max(std::abs(x), precision == 2 ? 1e-38 : 6.103515625e-05);
  return std::ldexp(1.0, std::ilogb(magnitude) - mantissa_bits);
}

// got == want on the CPU backend (which rounds its own fp32 sums, in the order the real-held op
// sums them); within one grid step on a GPU, whose BLAS rounds a 16-bit output from a sum it may
// order differently than for an fp32 output.
void ExpectSameRounding(const std::vector<double>& got, const std::vector<double>& want, int precision,
                        const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const bool exact = BackendName() == "cpu";
  for (size_t i = 0; i < want.size(); ++i) {
    if (exact) {
      ASSERT_EQ(got[i], want[i]) << what << " at " << i;
    } else {
      ASSERT_LE(std::abs(got[i] - want[i]), GridStep(want[i], precision)) << what << " at " << i;
    }
  }
}

// Column-major reference: C_i = alpha op(A_i) op(B_i) + beta C_i.
std::vector<double> ReferenceGemm(Op op_a, Op op_b, int m, int n, int k, double alpha, const Values& A, int lda,
                                  const Values& B, int ldb, double beta, const Values& C, int ldc,
                                  const GemmBatch& batch) {
  std::vector<double> out(C.begin(), C.end());
  for (int i = 0; i < batch.count; ++i) {
    const real* a = A.data() + i * batch.stride_a;
    const real* b = B.data() + i * batch.stride_b;
    for (int col = 0; col < n; ++col) {
      for (int row = 0; row < m; ++row) {
        double s = 0;
        for (int x = 0; x < k; ++x) {
          const double av = op_a == Op::kT ? a[row * int64_t{lda} + x] : a[x * int64_t{lda} + row];
          const double bv = op_b == Op::kT ? b[x * int64_t{ldb} + col] : b[col * int64_t{ldb} + x];
          s += av * bv;
        }
        double& c = out[i * batch.stride_c + col * int64_t{ldc} + row];
        c = alpha * s + (beta == 0 ? 0.0 : beta * c);
      }
    }
  }
  return out;
}

struct GemmCase {
  Op op_a, op_b;
  int m, n, k;
  int pad;  // extra rows in each leading dimension
  int batch;
  double alpha, beta;
  int precision;
};

void RunGemm(Ops& t, const GemmCase& g, Values (Ops::*random)(size_t, double, int)) {
  const int a_rows = g.op_a == Op::kT ? g.k : g.m, a_cols = g.op_a == Op::kT ? g.m : g.k;
  const int b_rows = g.op_b == Op::kT ? g.n : g.k, b_cols = g.op_b == Op::kT ? g.k : g.n;
  const int lda = a_rows + g.pad, ldb = b_rows + g.pad, ldc = g.m + g.pad;
  const GemmBatch batch{g.batch, int64_t{lda} * a_cols + 3, int64_t{ldb} * b_cols + 5, int64_t{ldc} * g.n + 7};
  const Values A = (t.*random)(batch.stride_a * g.batch, 1.0, g.precision);
  const Values B = (t.*random)(batch.stride_b * g.batch, 1.0, g.precision);
  Values C = (t.*random)(batch.stride_c * g.batch, 1.0, 0);
  if (g.beta == 0) {
    for (real& c : C) c = std::numeric_limits<real>::quiet_NaN();  // beta 0 must not read C
  }
  DeviceArray a(A), b(B), c(C);
  Gemm(g.op_a, g.op_b, g.m, g.n, g.k, static_cast<real>(g.alpha), a.get(), lda, b.get(), ldb,
       static_cast<real>(g.beta), c.get(), ldc, batch, g.precision);
  std::vector<double> want = ReferenceGemm(g.op_a, g.op_b, g.m, g.n, g.k, g.alpha, A, lda, B, ldb, g.beta, C, ldc, batch);
  Values got = c.Get();
  // Entries outside the matrices (padding, gaps between problems) keep their values.
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << "Gemm wrote outside C at " << i;
      got[i] = 0;
      want[i] = 0;
    }
  }
  ExpectClose(got, want, 2e-6 * std::sqrt(static_cast<double>(g.k)), "Gemm");
}

TEST_F(Ops, GemmEveryTransposePairWithPaddedLeadingDimensions) {
  for (Op a : {Op::kN, Op::kT}) {
    for (Op b : {Op::kN, Op::kT}) {
      SCOPED_TRACE(::testing::Message() << "op_a " << (a == Op::kT) << " op_b " << (b == Op::kT));
      RunGemm(*this, {a, b, 37, 29, 41, 3, 1, 1.0, 0.0, 0}, &Ops::Random);
    }
  }
}

TEST_F(Ops, GemmAlphaBetaAndStridedBatches) {
  RunGemm(*this, {Op::kT, Op::kN, 16, 24, 8, 0, 5, 0.125, 0.0, 0}, &Ops::Random);  // attention scores
  RunGemm(*this, {Op::kN, Op::kT, 8, 24, 24, 2, 3, 1.0, 1.0, 0}, &Ops::Random);    // accumulate
  RunGemm(*this, {Op::kN, Op::kN, 12, 7, 30, 1, 4, -0.5, 2.0, 0}, &Ops::Random);
}

TEST_F(Ops, GemmOnSixteenBitInputsIsExactInFp32Accumulation) {
  RunGemm(*this, {Op::kT, Op::kN, 64, 48, 96, 0, 1, 1.0, 0.0, 2}, &Ops::Random);  // bf16
  RunGemm(*this, {Op::kN, Op::kT, 33, 17, 70, 1, 2, 1.0, 1.0, 1}, &Ops::Random);  // fp16
}

TEST_F(Ops, SixteenBitOperandsRoundTripAndMultiplyLikeTheirValues) {
  // bf16 is fp32's top half; fp16 bits of normal, subnormal, the largest, inf and nan.
  EXPECT_EQ(To16BitValue(1.0f, 2), 0x3f80);
  EXPECT_EQ(To16BitValue(-2.0f, 1), 0xc000);
  EXPECT_EQ(To16BitValue(65504.0f, 1), 0x7bff);
  EXPECT_EQ(To16BitValue(std::ldexp(1.0f, -24), 1), 0x0001);
  EXPECT_EQ(To16BitValue(std::ldexp(1.0f, -14), 1), 0x0400);
  EXPECT_EQ(To16BitValue(INFINITY, 1), 0x7c00);
  EXPECT_TRUE(std::isnan(From16BitValue(To16BitValue(NAN, 1), 1)));
  for (int precision : {1, 2}) {
    const Values v = Random(4096, 100.0, precision), tiny = Random(512, 1e-6, precision);
    for (const Values* values : {&v, &tiny}) {
      for (real x : *values) ASSERT_EQ(From16BitValue(To16BitValue(x, precision), precision), x) << x;
    }
  }
  // Gemm16 on the 16-bit copies = Gemm on the values.
  const int m = 20, n = 12, k = 33;
  const Values A = Random(k * m, 1.0, 2), B = Random(k * n, 1.0, 2);
  DeviceArray a(A), b(B), c(Zeros(m * n)), c16(Zeros(m * n));
  auto* a16 = static_cast<uint16_t*>(DeviceAllocate(A.size() * 2));
  auto* b16 = static_cast<uint16_t*>(DeviceAllocate(B.size() * 2));
  To16Bit(a16, a.get(), static_cast<int64_t>(A.size()), 2);
  To16Bit(b16, b.get(), static_cast<int64_t>(B.size()), 2);
  Gemm(Op::kT, Op::kN, m, n, k, real(1), a.get(), k, b.get(), k, real(0), c.get(), m, {}, 2);
  Gemm16(Op::kT, Op::kN, m, n, k, real(1), a16, k, b16, k, real(0), c16.get(), m, {}, 2);
  const Values want = c.Get();
  ExpectClose(c16.Get(), std::vector<double>(want.begin(), want.end()), 1e-6, "Gemm16");
  DeviceFree(a16);
  DeviceFree(b16);
}

TEST_F(Ops, BiasForwardAndBackward) {
  const int N = 37, OC = 45;
  const Values out = Random(N * OC), bias = Random(OC), dbias0 = Random(OC);
  DeviceArray o(out), b(bias), db(dbias0);
  AddBias(o.get(), b.get(), N, OC);
  BiasBackward(db.get(), o.get(), N, OC);
  std::vector<double> want_out(out.begin(), out.end()), want_db(dbias0.begin(), dbias0.end());
  for (int n = 0; n < N; ++n) {
    for (int j = 0; j < OC; ++j) {
      want_out[n * OC + j] += bias[j];
      want_db[j] += want_out[n * OC + j];
    }
  }
  ExpectClose(o.Get(), want_out, 1e-6, "AddBias");
  ExpectClose(db.Get(), want_db, 1e-5, "BiasBackward");
}

TEST_F(Ops, CausalSoftmaxForwardAndBackwardByRow) {
  const int T = 70, heads = 3;
  const int64_t rows = int64_t{heads} * T;
  for (int precision : {0, 2}) {
    const Values s = Random(rows * T, 2.0), dp = Random(rows * T);
    DeviceArray att(s), d(dp);
    CausalSoftmaxForward(att.get(), rows, T, precision);
    const Values p = att.Get();
    DeviceArray pd(p);
    CausalSoftmaxBackward(d.get(), pd.get(), rows, T, real(0.25), precision);
    std::vector<double> want_p(rows * T, 0.0), want_d(rows * T, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const int t = static_cast<int>(r % T);
      double max = -INFINITY, sum = 0, dot = 0;
      for (int i = 0; i <= t; ++i) max = std::max(max, double(s[r * T + i]));
      for (int i = 0; i <= t; ++i) sum += std::exp(s[r * T + i] - max);
      for (int i = 0; i <= t; ++i) want_p[r * T + i] = RoundTo(static_cast<real>(std::exp(s[r * T + i] - max) / sum), precision);
      for (int i = 0; i <= t; ++i) dot += p[r * T + i] * double(dp[r * T + i]);
      for (int i = 0; i <= t; ++i)
        want_d[r * T + i] = RoundTo(static_cast<real>(p[r * T + i] * (dp[r * T + i] - dot) * 0.25), precision);
    }
    const double tol = precision == 0 ? 1e-5 : 8e-3;  // bf16: one rounding of the result (2^-8 relative)
    ExpectClose(p, want_p, tol, "CausalSoftmaxForward");
    ExpectClose(d.Get(), want_d, tol, "CausalSoftmaxBackward");
  }
}

TEST_F(Ops, LayerNormForwardAndBackward) {
  const int N = 19, C = 300;
  const Values x = Random(N * C, 3.0), w = Random(C), b = Random(C), dout = Random(N * C), dx0 = Random(N * C);
  DeviceArray dx_(x), dw_(w), db_(b), out(Zeros(N * C)), mean(Zeros(N)), rstd(Zeros(N));
  LayerNormForward(out.get(), mean.get(), rstd.get(), dx_.get(), dw_.get(), db_.get(), N, C);
  std::vector<double> want(N * C), want_dx(dx0.begin(), dx0.end()), want_dw(C, 0.0), want_db(C, 0.0);
  for (int n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int i = 0; i < C; ++i) m += x[n * C + i];
    m /= C;
    for (int i = 0; i < C; ++i) v += (x[n * C + i] - m) * (x[n * C + i] - m);
    const double r = 1 / std::sqrt(v / C + 1e-5);
    double a = 0, bsum = 0;
    for (int i = 0; i < C; ++i) {
      const double norm = (x[n * C + i] - m) * r;
      want[n * C + i] = norm * w[i] + b[i];
      a += w[i] * dout[n * C + i];
      bsum += w[i] * dout[n * C + i] * norm;
      want_db[i] += dout[n * C + i];
      want_dw[i] += norm * dout[n * C + i];
    }
    for (int i = 0; i < C; ++i) {
      const double norm = (x[n * C + i] - m) * r;
      want_dx[n * C + i] += (w[i] * dout[n * C + i] - a / C - norm * bsum / C) * r;
    }
  }
  ExpectClose(out.Get(), want, 1e-5, "LayerNormForward");
  DeviceArray d(dout), dx(dx0), gw(Zeros(C)), gb(Zeros(C));
  LayerNormBackward(dx.get(), gw.get(), gb.get(), d.get(), dx_.get(), dw_.get(), mean.get(), rstd.get(), N, C);
  ExpectClose(dx.Get(), want_dx, 1e-5, "LayerNormBackward dx");
  ExpectClose(gw.Get(), want_dw, 1e-5, "LayerNormBackward dw");
  ExpectClose(gb.Get(), want_db, 1e-5, "LayerNormBackward db");
}

// Row-major reference of causal attention: y, and dqkv from dy.
void ReferenceAttention(const Values& qkv, const Values& dy, int B, int T, int Cl, int NH, std::vector<double>& y,
                        std::vector<double>& dqkv) {
  const int hs = Cl / NH;
  const double scale = 1 / std::sqrt(double(hs));
  y.assign(int64_t{B} * T * Cl, 0.0);
  dqkv.assign(int64_t{B} * T * 3 * Cl, 0.0);
  auto at = [&](int b, int t, int part, int h, int i) { return (int64_t{b} * T + t) * 3 * Cl + part * Cl + h * hs + i; };
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t <= T - 1; ++t) {
        std::vector<double> p(t + 1), dp(t + 1);
        double max = -INFINITY, sum = 0, dot = 0;
        for (int u = 0; u <= t; ++u) {
          double s = 0;
          for (int i = 0; i < hs; ++i) s += double(qkv[at(b, t, 0, h, i)]) * qkv[at(b, u, 1, h, i)];
          p[u] = s * scale;
          max = std::max(max, p[u]);
        }
        for (int u = 0; u <= t; ++u) sum += (p[u] = std::exp(p[u] - max));
        for (int u = 0; u <= t; ++u) p[u] /= sum;
        const real* dyr = dy.data() + (int64_t{b} * T + t) * Cl + h * hs;
        for (int u = 0; u <= t; ++u) {
          for (int i = 0; i < hs; ++i) {
            y[(int64_t{b} * T + t) * Cl + h * hs + i] += p[u] * qkv[at(b, u, 2, h, i)];
            dp[u] += dyr[i] * double(qkv[at(b, u, 2, h, i)]);
            dqkv[at(b, u, 2, h, i)] += p[u] * dyr[i];
          }
          dot += p[u] * dp[u];
        }
        for (int u = 0; u <= t; ++u) {
          const double ds = p[u] * (dp[u] - dot) * scale;
          for (int i = 0; i < hs; ++i) {
            dqkv[at(b, t, 0, h, i)] += ds * qkv[at(b, u, 1, h, i)];
            dqkv[at(b, u, 1, h, i)] += ds * qkv[at(b, t, 0, h, i)];
          }
        }
      }
    }
  }
}

TEST_F(Ops, AttentionAsBatchedGemmsMatchesTheLoops) {
  const int B = 2, T = 33, NH = 3, Cl = 3 * 16;
  const Values qkv = Random(int64_t{B} * T * 3 * Cl), dy = Random(int64_t{B} * T * Cl);
  DeviceArray q(qkv), d(dy), y(Zeros(int64_t{B} * T * Cl)), att(Zeros(int64_t{B} * NH * T * T)),
      dqkv(Filled(int64_t{B} * T * 3 * Cl, real(7)));  // overwritten, not accumulated
  AttentionForward(y.get(), att.get(), q.get(), B, T, Cl, NH);
  AttentionBackward(dqkv.get(), d.get(), q.get(), att.get(), B, T, Cl, NH);
  std::vector<double> want_y, want_dqkv;
  ReferenceAttention(qkv, dy, B, T, Cl, NH, want_y, want_dqkv);
  ExpectClose(y.Get(), want_y, 1e-5, "AttentionForward");
  ExpectClose(dqkv.Get(), want_dqkv, 1e-5, "AttentionBackward");
}

// bf16 storage: the 16-bit path (one conversion of qkv and dy, probabilities and score gradients
// straight out of the softmax kernels) against the loops on the same 16-bit inputs. Tolerance:
// the probabilities and score gradients are rounded to bf16 (2^-8 relative) before their
// products, which the loops do not do.
TEST_F(Ops, AttentionOnSixteenBitStorage) {
  const int B = 2, T = 40, NH = 2, Cl = 2 * 16;
  for (int precision : {1, 2}) {
    SCOPED_TRACE(precision);
    const Values qkv = Random(int64_t{B} * T * 3 * Cl, 1.0, precision);
    const Values dy = Random(int64_t{B} * T * Cl, 1.0, precision);
    DeviceArray q(qkv), d(dy), y(Zeros(int64_t{B} * T * Cl)), att(Zeros(int64_t{B} * NH * T * T)),
        dqkv(Zeros(int64_t{B} * T * 3 * Cl));
    AttentionForward(y.get(), att.get(), q.get(), B, T, Cl, NH, precision);
    AttentionBackward(dqkv.get(), d.get(), q.get(), att.get(), B, T, Cl, NH, precision);
    std::vector<double> want_y, want_dqkv;
    ReferenceAttention(qkv, dy, B, T, Cl, NH, want_y, want_dqkv);
    ExpectClose(y.Get(), want_y, 2e-2, "AttentionForward 16-bit");
    ExpectClose(dqkv.Get(), want_dqkv, 2e-2, "AttentionBackward 16-bit");
    // Stored probabilities, y and dqkv on the grid (written as 16-bit numbers).
    for (const Values& stored : {att.Get(), y.Get(), dqkv.Get()}) {
      for (real v : stored) ASSERT_EQ(v, RoundTo(v, precision));
    }

    // The 16-bit forms themselves (what block.cc calls): the same values, read and written as
    // 16-bit numbers.
    DeviceSixteenBit q16(qkv, precision), d16(dy, precision), att16(Zeros(int64_t{B} * NH * T * T), precision);
    DeviceSixteenBit y16(Zeros(int64_t{B} * T * Cl), precision), dqkv16(Zeros(int64_t{B} * T * 3 * Cl), precision);
    AttentionForward16(y16.get(), att16.get(), q16.get(), B, T, Cl, NH, precision);
    AttentionBackward16(dqkv16.get(), d16.get(), q16.get(), att16.get(), B, T, Cl, NH, precision);
    ExpectClose(AsValues(y16.Get()), AsDoubles(y.Get()), 0, "AttentionForward16 y");
    ExpectClose(AsValues(att16.Get()), AsDoubles(att.Get()), 0, "AttentionForward16 probabilities");
    ExpectClose(AsValues(dqkv16.Get()), AsDoubles(dqkv.Get()), 0, "AttentionBackward16 dqkv");
  }
}

// The log-sum-exp of each causal row of scaled scores, (B, NH, T), in double.
std::vector<double> ReferenceLogSumExp(const Values& qkv, int B, int T, int Cl, int NH) {
  const int hs = Cl / NH;
  const double scale = 1 / std::sqrt(double(hs));
  std::vector<double> lse;
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        std::vector<double> s(t + 1);
        double max = -INFINITY, sum = 0;
        for (int u = 0; u <= t; ++u) {
          double dot = 0;
          for (int i = 0; i < hs; ++i)
            dot += double(qkv[(int64_t{b} * T + t) * 3 * Cl + h * hs + i]) * qkv[(int64_t{b} * T + u) * 3 * Cl + Cl + h * hs + i];
          max = std::max(max, s[u] = dot * scale);
        }
        for (double x : s) sum += std::exp(x - max);
        lse.push_back(max + std::log(sum));
      }
    }
  }
  return lse;
}

// The largest |got - want| over the largest |want| (what ExpectClose bounds), as text for
// RecordProperty (the measured errors land in --gtest_output=xml).
std::string ScaledError(const Values& got, const std::vector<double>& want) {
  double scale = 0, error = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    error = std::max(error, std::abs(got[i] - want[i]));
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.2e", error / scale);
  return text;
}

// Shapes of the fused attention tests: T = 70 and 130 end inside a 64-row tile (the causal tiles
// past the diagonal skipped, the last one partial); head sizes 16, 24 (not a multiple of the
// tensor cores' 16: the GPU's CUDA-core kernel) and 64 (GPT-2's, two values per lane).
struct FlashCase {
  int T, NH, hs;
};
std::string Name(const FlashCase& c) {
  return "T" + std::to_string(c.T) + "_NH" + std::to_string(c.NH) + "_hs" + std::to_string(c.hs);
}
const FlashCase kFlashCases[] = {{70, 3, 16}, {130, 2, 64}, {130, 2, 24}};

// Fused attention against the loops in fp32, two sequences of each shape above. Tolerance
// 1e-5 of each output's largest, as for the unfused ops: only the order of fp32 sums differs
// (the online softmax rescales partial sums; D = dO . O replaces sum_j P dP).
TEST_F(Ops, FlashAttentionMatchesTheLoopsInFp32) {
  for (const FlashCase& c : kFlashCases) {
    SCOPED_TRACE(Name(c));
    const int B = 2, T = c.T, NH = c.NH, Cl = c.NH * c.hs;
    const Values qkv = Random(int64_t{B} * T * 3 * Cl), dy = Random(int64_t{B} * T * Cl);
    DeviceArray q(qkv), d(dy), y(Zeros(int64_t{B} * T * Cl)), lse(Zeros(int64_t{B} * NH * T)),
        dqkv(Filled(int64_t{B} * T * 3 * Cl, real(7)));  // overwritten, not accumulated
    FlashAttentionForward(y.get(), lse.get(), q.get(), B, T, Cl, NH);
    FlashAttentionBackward(dqkv.get(), d.get(), q.get(), y.get(), lse.get(), B, T, Cl, NH);
    std::vector<double> want_y, want_dqkv;
    ReferenceAttention(qkv, dy, B, T, Cl, NH, want_y, want_dqkv);
    const std::vector<double> want_lse = ReferenceLogSumExp(qkv, B, T, Cl, NH);
    ExpectClose(y.Get(), want_y, 1e-5, "FlashAttentionForward y");
    ExpectClose(lse.Get(), want_lse, 1e-5, "FlashAttentionForward lse");
    ExpectClose(dqkv.Get(), want_dqkv, 1e-5, "FlashAttentionBackward");
    RecordProperty("fp32_" + Name(c) + "_y", ScaledError(y.Get(), want_y));
    RecordProperty("fp32_" + Name(c) + "_dqkv", ScaledError(dqkv.Get(), want_dqkv));

    // The unfused ops on the same inputs agree to the same fp32 rounding.
    DeviceArray y0(Zeros(int64_t{B} * T * Cl)), att(Zeros(int64_t{B} * NH * T * T)),
        dqkv0(Zeros(int64_t{B} * T * 3 * Cl));
    AttentionForward(y0.get(), att.get(), q.get(), B, T, Cl, NH);
    AttentionBackward(dqkv0.get(), d.get(), q.get(), att.get(), B, T, Cl, NH);
    ExpectClose(y.Get(), AsDoubles(y0.Get()), 1e-5, "flash y against AttentionForward");
    ExpectClose(dqkv.Get(), AsDoubles(dqkv0.Get()), 1e-5, "flash dqkv against AttentionBackward");
  }
}

// fp16 and bf16 storage: the 16-bit forms (what block.cc calls) give the real-held forms' values,
// exactly on the CPU (one loop, two readers); on a GPU the 16-bit forward runs on tensor cores and
// the real-held one on CUDA cores, whose fp32 sums differ in order, so there within the bound
// below. Outputs on the grid; against the loops and against the unfused
// 16-bit ops within 1e-2 of each output's largest: both round the softmax weights and score
// gradients to the 16-bit grid (2^-9 relative in bf16) before their products, the fused op the
// running, not yet normalised, weights e^(s - m). Measured against the loops (CPU): y 1.5e-3,
// dqkv 2.8e-3 (bf16); 2.2e-4, 3.9e-4 (fp16).
TEST_F(Ops, FlashAttentionOnSixteenBitStorage) {
  for (const FlashCase& c : kFlashCases) {
    for (int precision : {1, 2}) {
      SCOPED_TRACE(Name(c) + (precision == 1 ? " fp16" : " bf16"));
      const int B = 2, T = c.T, NH = c.NH, Cl = c.NH * c.hs;
      const Values qkv = Random(int64_t{B} * T * 3 * Cl, 1.0, precision);
      const Values dy = Random(int64_t{B} * T * Cl, 1.0, precision);
      DeviceArray q(qkv), d(dy), y(Zeros(int64_t{B} * T * Cl)), lse(Zeros(int64_t{B} * NH * T)),
          dqkv(Zeros(int64_t{B} * T * 3 * Cl));
      FlashAttentionForward(y.get(), lse.get(), q.get(), B, T, Cl, NH, precision);
      FlashAttentionBackward(dqkv.get(), d.get(), q.get(), y.get(), lse.get(), B, T, Cl, NH, precision);
      std::vector<double> want_y, want_dqkv;
      ReferenceAttention(qkv, dy, B, T, Cl, NH, want_y, want_dqkv);
      ExpectClose(y.Get(), want_y, 1e-2, "FlashAttentionForward 16-bit");
      ExpectClose(lse.Get(), ReferenceLogSumExp(qkv, B, T, Cl, NH), 1e-5, "FlashAttentionForward 16-bit lse");
      ExpectClose(dqkv.Get(), want_dqkv, 1e-2, "FlashAttentionBackward 16-bit");
      const std::string name = (precision == 1 ? "fp16_" : "bf16_") + Name(c);
      RecordProperty(name + "_y", ScaledError(y.Get(), want_y));
      RecordProperty(name + "_dqkv", ScaledError(dqkv.Get(), want_dqkv));
      for (const Values& stored : {y.Get(), dqkv.Get()}) {
        for (real v : stored) ASSERT_EQ(v, RoundTo(v, precision));
      }

      DeviceArray y0(Zeros(int64_t{B} * T * Cl)), att(Zeros(int64_t{B} * NH * T * T)),
          dqkv0(Zeros(int64_t{B} * T * 3 * Cl));
      AttentionForward(y0.get(), att.get(), q.get(), B, T, Cl, NH, precision);
      AttentionBackward(dqkv0.get(), d.get(), q.get(), att.get(), B, T, Cl, NH, precision);
      ExpectClose(y.Get(), AsDoubles(y0.Get()), 1e-2, "flash y against the unfused 16-bit op");
      ExpectClose(dqkv.Get(), AsDoubles(dqkv0.Get()), 1e-2, "flash dqkv against the unfused 16-bit op");

      DeviceSixteenBit q16(qkv, precision), d16(dy, precision), y16(Zeros(int64_t{B} * T * Cl), precision),
          dqkv16(Zeros(int64_t{B} * T * 3 * Cl), precision);
      DeviceArray lse16(Zeros(int64_t{B} * NH * T));
      FlashAttentionForward16(y16.get(), lse16.get(), q16.get(), B, T, Cl, NH, precision);
      FlashAttentionBackward16(dqkv16.get(), d16.get(), q16.get(), y16.get(), lse16.get(), B, T, Cl, NH,
                               precision);
      const bool cpu = BackendName() == "cpu";
      ExpectClose(AsValues(y16.Get()), AsDoubles(y.Get()), cpu ? 0 : 1e-2, "FlashAttentionForward16 y");
      ExpectClose(lse16.Get(), AsDoubles(lse.Get()), cpu ? 0 : 1e-5, "FlashAttentionForward16 lse");
      ExpectClose(AsValues(dqkv16.Get()), AsDoubles(dqkv.Get()), cpu ? 0 : 1e-2,
                  "FlashAttentionBackward16 dqkv");
    }
  }
}

// Rank r's rows of a (B, cp T, width) array of the whole sequence: its local row t is row
// SequencePosition(t, T, cp, r) (flash_attention.h: chunks r and 2 cp - 1 - r of 2 cp).
template <typename V>
V RankRows(const V& whole, int B, int T, int cp, int r, int width) {
  V local(static_cast<size_t>(B) * T * width);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const int64_t from = (int64_t{b} * cp * T + SequencePosition(t, T, cp, r)) * width;
      std::copy_n(whole.begin() + from, width, local.begin() + (int64_t{b} * T + t) * width);
    }
  }
  return local;
}
// Rank r's entries of a (B, NH, cp T) log-sum-exp of the whole sequence.
std::vector<double> RankLse(const std::vector<double>& whole, int B, int NH, int T, int cp, int r) {
  std::vector<double> local;
  for (int bh = 0; bh < B * NH; ++bh) {
    for (int t = 0; t < T; ++t) local.push_back(whole[int64_t{bh} * cp * T + SequencePosition(t, T, cp, r)]);
  }
  return local;
}
// Columns [first, first + width) of a (rows, ld) array.
std::vector<double> Columns(const std::vector<double>& a, int ld, int first, int width) {
  std::vector<double> out;
  for (size_t row = 0; row < a.size() / ld; ++row) {
    out.insert(out.end(), a.begin() + row * ld + first, a.begin() + row * ld + first + width);
  }
  return out;
}

// Ring attention's block kernels on one process (context_parallel.cc's ring without the
// transfers): each rank's queries meet every rank's K/V block (packed by CopyColumns) in the
// ring's order, in fp32; the merged output and lse, each rank's dQ, and each block's dK/dV summed
// over every rank's queries, against the causal loops over the whole sequence at the global
// positions (1e-5, as the fused op). cp 2 with 70 rows a rank (two tiles, the chunk boundary
// inside the first; rows of rank 0's first chunk see none of rank 1's keys) and cp 3.
TEST_F(Ops, RingAttentionBlocksMatchTheLoopsInFp32) {
  struct RingCase {
    int cp, T, NH, hs;
  };
  for (const RingCase& c : {RingCase{2, 70, 2, 24}, RingCase{3, 40, 3, 16}}) {
    SCOPED_TRACE("cp" + std::to_string(c.cp) + "_T" + std::to_string(c.T));
    const int B = 2, T = c.T, cp = c.cp, NH = c.NH, Cl = NH * c.hs;
    const Values qkv = Random(int64_t{B} * cp * T * 3 * Cl), dy = Random(int64_t{B} * cp * T * Cl);
    std::vector<double> want_y, want_dqkv;
    ReferenceAttention(qkv, dy, B, cp * T, Cl, NH, want_y, want_dqkv);
    const std::vector<double> want_lse = ReferenceLogSumExp(qkv, B, cp * T, Cl, NH);
    std::vector<std::unique_ptr<DeviceArray>> q, kv, acc, lse, d, dq, dkv;
    for (int r = 0; r < cp; ++r) {
      q.push_back(std::make_unique<DeviceArray>(RankRows(qkv, B, T, cp, r, 3 * Cl)));
      kv.push_back(std::make_unique<DeviceArray>(Zeros(int64_t{B} * T * 2 * Cl)));
      CopyColumns(kv[r]->get(), q[r]->get(), int64_t{B} * T, 3 * Cl, Cl, 2 * Cl, sizeof(real));
      acc.push_back(std::make_unique<DeviceArray>(Zeros(int64_t{B} * T * Cl)));
      lse.push_back(std::make_unique<DeviceArray>(Filled(int64_t{B} * NH * T, -INFINITY)));
      d.push_back(std::make_unique<DeviceArray>(RankRows(dy, B, T, cp, r, Cl)));
      dq.push_back(std::make_unique<DeviceArray>(Zeros(int64_t{B} * T * Cl)));
      dkv.push_back(std::make_unique<DeviceArray>(Zeros(int64_t{B} * T * 2 * Cl)));
    }
    for (int r = 0; r < cp; ++r) {
      for (int step = 0; step < cp; ++step) {
        const int k = (r - step + cp) % cp;
        FlashAttentionBlockForward(acc[r]->get(), lse[r]->get(), q[r]->get(), kv[k]->get(), cp, r, k, B, T, Cl, NH, 0, NH);
      }
      ExpectClose(acc[r]->Get(), RankRows(want_y, B, T, cp, r, Cl), 1e-5, "ring forward y");
      ExpectClose(lse[r]->Get(), RankLse(want_lse, B, NH, T, cp, r), 1e-5, "ring forward lse");
    }
    for (int r = 0; r < cp; ++r) {
      for (int step = 0; step < cp; ++step) {
        const int k = (r - step + cp) % cp;
        FlashAttentionBlockBackward(dq[r]->get(), dkv[k]->get(), d[r]->get(), q[r]->get(), kv[k]->get(), acc[r]->get(),
                                    lse[r]->get(), cp, r, k, B, T, Cl, NH, 0, NH);
      }
    }
    for (int r = 0; r < cp; ++r) {
      const std::vector<double> want = RankRows(want_dqkv, B, T, cp, r, 3 * Cl);
      ExpectClose(dq[r]->Get(), Columns(want, 3 * Cl, 0, Cl), 1e-5, "ring dQ");
      ExpectClose(dkv[r]->Get(), Columns(want, 3 * Cl, Cl, 2 * Cl), 1e-5, "ring dK, dV");
    }
  }
}

// StoreColumns (rounded to the grid, as reals or 16-bit numbers) and CopyColumns of 16-bit
// elements: the ring's column moves.
TEST_F(Ops, RingColumnMovesPlaceTheColumns) {
  const int64_t rows = 5;
  const int ld = 7, first = 2, width = 3, precision = 2;
  const Values src = Random(rows * width);
  DeviceArray to(Zeros(rows * ld));
  DeviceSixteenBit to16(Zeros(rows * ld), precision), packed16(Zeros(rows * width), precision);
  DeviceArray from(src);
  StoreColumns(to.get(), from.get(), rows, ld, first, width, precision);
  StoreColumns16(to16.get(), from.get(), rows, ld, first, width, precision);
  CopyColumns(packed16.get(), to16.get(), rows, ld, first, width, sizeof(uint16_t));
  std::vector<double> want(rows * ld, 0.0), want_packed;
  for (int64_t r = 0; r < rows; ++r) {
    for (int i = 0; i < width; ++i) {
      want[r * ld + first + i] = RoundTo(src[r * width + i], precision);
      want_packed.push_back(want[r * ld + first + i]);
    }
  }
  ExpectClose(to.Get(), want, 0, "StoreColumns");
  ExpectClose(AsValues(to16.Get()), want, 0, "StoreColumns16");
  ExpectClose(AsValues(packed16.Get()), want_packed, 0, "CopyColumns (16-bit)");
}

TEST_F(Ops, LinearLayerForwardAndBackward) {
  const int N = 23, C = 40, OC = 56;
  const Values inp = Random(N * C), w = Random(OC * C), bias = Random(OC), dout = Random(N * OC), dw0 = Random(OC * C);
  DeviceArray i(inp), wt(w), bs(bias), out(Zeros(N * OC)), d(dout), dinp(Zeros(N * C)), dw(dw0), db(Zeros(OC));
  MatmulForward(out.get(), i.get(), wt.get(), bs.get(), N, C, OC);
  MatmulBackward(dinp.get(), dw.get(), db.get(), d.get(), i.get(), wt.get(), N, C, OC);
  std::vector<double> want_out(N * OC), want_dinp(N * C, 0.0), want_dw(dw0.begin(), dw0.end()), want_db(OC, 0.0);
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      double s = bias[o];
      for (int c = 0; c < C; ++c) {
        s += double(inp[n * C + c]) * w[o * C + c];
        want_dinp[n * C + c] += double(dout[n * OC + o]) * w[o * C + c];
        want_dw[o * C + c] += double(dout[n * OC + o]) * inp[n * C + c];
      }
      want_out[n * OC + o] = s;
      want_db[o] += dout[n * OC + o];
    }
  }
  ExpectClose(out.Get(), want_out, 1e-5, "MatmulForward");
  ExpectClose(dinp.Get(), want_dinp, 1e-5, "MatmulBackward dinp");
  ExpectClose(dw.Get(), want_dw, 1e-5, "MatmulBackward dw");
  ExpectClose(db.Get(), want_db, 1e-5, "MatmulBackward dbias");
}

// A linear layer whose input and weights are held in 16-bit storage gives what the same layer
// gives on the same values held as reals: outputs, input and weight gradients, rounded alike.
TEST_F(Ops, LinearLayerOnASixteenBitInputMatchesTheSameValuesAsReals) {
  const int N = 23, C = 40, OC = 56;
  for (int precision : {1, 2}) {
    SCOPED_TRACE(precision);
    const Values inp = Random(N * C, 1.0, precision), w = Random(OC * C, 1.0, precision), bias = Random(OC, 1.0, precision);
    const Values dout = Random(N * OC, 1.0, precision), dw0 = Random(OC * C);
    std::vector<uint16_t> inp16(inp.size()), w16(w.size());
    for (size_t k = 0; k < inp.size(); ++k) inp16[k] = To16BitValue(static_cast<float>(inp[k]), precision);
    for (size_t k = 0; k < w.size(); ++k) w16[k] = To16BitValue(static_cast<float>(w[k]), precision);
    DeviceArray i(inp), wt(w), bs(bias), d(dout);
    DeviceArray out(Zeros(N * OC)), dinp(Zeros(N * C)), dw(dw0), db(Zeros(OC));
    DeviceArray out16(Zeros(N * OC));
    auto* i16 = static_cast<uint16_t*>(DeviceAllocate(inp16.size() * sizeof(uint16_t)));
    auto* wt16 = static_cast<uint16_t*>(DeviceAllocate(w16.size() * sizeof(uint16_t)));
    Upload(i16, inp16.data(), inp16.size() * sizeof(uint16_t));
    Upload(wt16, w16.data(), w16.size() * sizeof(uint16_t));
    MatmulForward(out.get(), i.get(), wt.get(), bs.get(), N, C, OC, precision, precision);
    MatmulForward16(out16.get(), i16, wt16, bs.get(), N, C, OC, precision, precision);
    MatmulBackward(dinp.get(), dw.get(), db.get(), d.get(), i.get(), wt.get(), N, C, OC, precision, precision);
    const Values want_out = out.Get(), want_dinp = dinp.Get(), want_dw = dw.Get();
    ExpectClose(out16.Get(), std::vector<double>(want_out.begin(), want_out.end()), 0, "MatmulForward16");
    for (real v : out16.Get()) ASSERT_EQ(v, RoundTo(v, precision));  // rounded to the storage grid

    // With 16-bit storage throughout (block.cc): the output and the input gradient written as
    // 16-bit numbers, the output gradient read as one; a column-parallel layer's partial sum
    // (real dinp) left unrounded.
    DeviceSixteenBit y16(Zeros(N * OC), precision), d16(dout, precision), dx16(Zeros(N * C), precision);
    DeviceArray dw_all16(dw0), db_all16(Zeros(OC)), partial(Zeros(N * C)), dw_partial(dw0);
    DeviceArray dinp_unrounded(Zeros(N * C)), dw_unrounded(dw0);
    MatmulForward16(y16.get(), i16, wt16, bs.get(), N, C, OC, precision);
    MatmulBackward16(dx16.get(), dw_all16.get(), db_all16.get(), d16.get(), i16, wt16, N, C, OC, precision);
    MatmulBackward16(partial.get(), dw_partial.get(), nullptr, d16.get(), i16, wt16, N, C, OC, precision);
    MatmulBackward(dinp_unrounded.get(), dw_unrounded.get(), nullptr, d.get(), i.get(), wt.get(), N, C, OC,
                   precision, 0);
    ExpectSameRounding(y16.Get(), AsDoubles(want_out), precision, "MatmulForward16 (16-bit output)");
    // Exactly one rounding: this backend's fp32 sums (Gemm16 into reals, not rounded) plus the
    // bias in fp32, rounded once. Rounding the product and then its sum with the bias (the bias
    // written into the output first and added by the GEMM) gives other numbers here, by more than
    // a step where the bias cancels most of the product (checked, so that neither the CPU's
    // equality nor a GPU's one-step allowance, for sums its kernels order differently, passes it).
    DeviceArray sums(Zeros(N * OC));
    Gemm16(Op::kT, Op::kN, OC, N, C, real(1), wt16, C, i16, C, real(0), sums.get(), OC, {}, precision);
    const Values s = sums.Get();
    std::vector<double> once(s.size()), twice(s.size());
    double most_steps_apart = 0;
    for (size_t k = 0; k < s.size(); ++k) {
      once[k] = RoundTo(s[k] + bias[k % OC], precision);
      twice[k] = RoundTo(RoundTo(s[k], precision) + bias[k % OC], precision);
      most_steps_apart = std::max(most_steps_apart, std::abs(once[k] - twice[k]) / GridStep(once[k], precision));
    }
    ASSERT_GT(most_steps_apart, 1.0) << "no output here tells one rounding from two";
    ExpectSameRounding(y16.Get(), once, precision, "MatmulForward16 (16-bit output): fp32 sum + bias, rounded once");
    ExpectSameRounding(dx16.Get(), AsDoubles(want_dinp), precision, "MatmulBackward16 (16-bit dinp)");
    ExpectClose(dw_all16.Get(), AsDoubles(want_dw), 0, "MatmulBackward16 (16-bit dout) dw");
    ExpectClose(db_all16.Get(), AsDoubles(db.Get()), 0, "MatmulBackward16 (16-bit dout) dbias");
    ExpectClose(partial.Get(), AsDoubles(dinp_unrounded.Get()), 0, "MatmulBackward16 (partial sum)");
    ExpectClose(dw_partial.Get(), AsDoubles(want_dw), 0, "MatmulBackward16 (partial sum) dw");
    DeviceFree(i16);
    DeviceFree(wt16);
  }
}

// The residual stream and the GeLU input held as 16-bit numbers (block.cc with 16-bit storage):
// each row op reading them gives exactly what it gives on the same values held in reals.
TEST_F(Ops, RowOpsOnTheSixteenBitResidualStreamMatchTheSameValuesAsReals) {
  const int N = 17, C = 96;
  const int64_t n = int64_t{N} * C;
  for (int precision : {1, 2}) {
    SCOPED_TRACE(precision);
    const Values x = Random(n, 3.0, precision), branch = Random(n, 0.5), w = Random(C, 1.0, precision);
    const Values b = Random(C, 1.0, precision), dout = Random(n, 1.0, precision), dx0 = Random(n, 1.0, precision);
    DeviceArray xr(x), br(branch), wr(w), bb(b), d(dout);
    DeviceSixteenBit x16(x, precision);

    DeviceArray sum(Zeros(n));
    DeviceSixteenBit sum16(Zeros(n), precision);
    ResidualAdd(sum.get(), xr.get(), br.get(), n, precision);
    ResidualAdd16(sum16.get(), x16.get(), br.get(), n, precision);
    ExpectClose(AsValues(sum16.Get()), AsDoubles(sum.Get()), 0, "ResidualAdd16");

    DeviceArray out(Zeros(n)), mean(Zeros(N)), rstd(Zeros(N)), mean16(Zeros(N)), rstd16(Zeros(N));
    DeviceSixteenBit out16(Zeros(n), precision);
    LayerNormForward(out.get(), mean.get(), rstd.get(), xr.get(), wr.get(), bb.get(), N, C, precision);
    LayerNormForward16(out16.get(), mean16.get(), rstd16.get(), x16.get(), wr.get(), bb.get(), N, C, precision);
    ExpectClose(AsValues(out16.Get()), AsDoubles(out.Get()), 0, "LayerNormForward16");
    ExpectClose(mean16.Get(), AsDoubles(mean.Get()), 0, "LayerNormForward16 mean");
    ExpectClose(rstd16.Get(), AsDoubles(rstd.Get()), 0, "LayerNormForward16 rstd");

    DeviceArray dx(dx0), dw(Zeros(C)), db(Zeros(C)), dw16(Zeros(C)), db16(Zeros(C));
    DeviceSixteenBit dx16(dx0, precision);  // accumulated into: read, added to, rounded
    LayerNormBackward(dx.get(), dw.get(), db.get(), d.get(), xr.get(), wr.get(), mean.get(), rstd.get(), N, C,
                      precision);
    LayerNormBackward16(dx16.get(), dw16.get(), db16.get(), d.get(), x16.get(), wr.get(), mean.get(), rstd.get(), N,
                        C, precision);
    ExpectClose(AsValues(dx16.Get()), AsDoubles(dx.Get()), 0, "LayerNormBackward16 dx");
    ExpectClose(dw16.Get(), AsDoubles(dw.Get()), 0, "LayerNormBackward16 dw");
    ExpectClose(db16.Get(), AsDoubles(db.Get()), 0, "LayerNormBackward16 db");

    DeviceArray gelu(Zeros(n)), dgelu(Zeros(n));
    DeviceSixteenBit gelu16(Zeros(n), precision), dgelu16(Zeros(n), precision), d16(dout, precision);
    GeluForward(gelu.get(), xr.get(), n, precision);
    GeluForward16(gelu16.get(), x16.get(), n, precision);
    ExpectClose(AsValues(gelu16.Get()), AsDoubles(gelu.Get()), 0, "GeluForward16");
    GeluBackward(dgelu.get(), xr.get(), d.get(), n, precision);
    GeluBackward16(dgelu16.get(), x16.get(), d16.get(), n, precision);
    ExpectClose(AsValues(dgelu16.Get()), AsDoubles(dgelu.Get()), 0, "GeluBackward16");

    // Bias and embedding gradients from a 16-bit output gradient (N rows of C here).
    DeviceArray dbias(Zeros(C)), dbias16(Zeros(C));
    BiasBackward(dbias.get(), d.get(), N, C);
    BiasBackward16(dbias16.get(), d16.get(), N, C, precision);
    ExpectClose(dbias16.Get(), AsDoubles(dbias.Get()), 0, "BiasBackward16");
    const int T = N, Vl = 5, v0 = 3;
    std::vector<int> tokens(N);
    for (int k = 0; k < N; ++k) tokens[k] = (k * 5) % 11;  // some not held here, repeats
    DeviceArray tk(tokens), dwte(Zeros(Vl * C)), dwpe(Zeros(T * C)), dwte16(Zeros(Vl * C)), dwpe16(Zeros(T * C));
    EncoderBackward(dwte.get(), dwpe.get(), d.get(), tk.ints(), v0, Vl, 1, T, C);
    EncoderBackward16(dwte16.get(), dwpe16.get(), d16.get(), tk.ints(), v0, Vl, 1, T, C, precision);
    ExpectClose(dwte16.Get(), AsDoubles(dwte.Get()), 1e-6, "EncoderBackward16 dwte");  // GPU: atomics' order
    ExpectClose(dwpe16.Get(), AsDoubles(dwpe.Get()), 0, "EncoderBackward16 dwpe");

    // Moves of 16-bit numbers.
    DeviceSixteenBit copy(Zeros(n), precision);
    Copy16(copy.get(), x16.get(), n);
    EXPECT_EQ(copy.Get(), x16.Get());
    Zero16(copy.get(), n);
    EXPECT_EQ(copy.Get(), std::vector<double>(n, 0.0));
  }
}

// Gemm16 writing 16-bit outputs: each C value an fp32 sum rounded once: within one grid step of
// the exact sum, plus the fp32 sum's own error (4 sqrt(k) 2^-24 of the sum of |a b|, which is
// what lets a long sum near zero land a few 16-bit steps off); beta reading C; the entries
// outside the matrices (padding, gaps between problems) untouched. A sum whose pieces were added
// in 16 bits (a split k reduced in the output type) is off by steps of the pieces' magnitude.
void RunGemm16(Ops& t, int m, int n, int k, int count, int precision, double beta) {
  const int lda = k + 2, ldb = k + 1, ldc = m + 3;
  const GemmBatch batch{count, int64_t{lda} * m + 3, int64_t{ldb} * n + 5, int64_t{ldc} * n + 7};
  const Values A = t.Random(batch.stride_a * count, 1.0, precision), B = t.Random(batch.stride_b * count, 1.0, precision);
  const Values C = t.Random(batch.stride_c * count, 1.0, precision);
  DeviceSixteenBit a(A, precision), b(B, precision), c(C, precision);
  Gemm16(Op::kT, Op::kN, m, n, k, real(1), a.get(), lda, b.get(), ldb, static_cast<real>(beta), c.get(), ldc, batch,
         precision);
  const std::vector<double> got = c.Get();
  const std::vector<double> exact = ReferenceGemm(Op::kT, Op::kN, m, n, k, 1.0, A, lda, B, ldb, beta, C, ldc, batch);
  auto magnitudes = [](const Values& v) {
    Values out(v);
    for (real& x : out) x = std::abs(x);
    return out;
  };
  const std::vector<double> sum_of_magnitudes = ReferenceGemm(
      Op::kT, Op::kN, m, n, k, 1.0, magnitudes(A), lda, magnitudes(B), ldb, beta, magnitudes(C), ldc, batch);
  std::vector<bool> inside(C.size(), false);
  for (int i = 0; i < count; ++i) {
    for (int col = 0; col < n; ++col) {
      for (int row = 0; row < m; ++row) inside[i * batch.stride_c + int64_t{col} * ldc + row] = true;
    }
  }
  for (size_t i = 0; i < C.size(); ++i) {
    if (!inside[i]) {
      ASSERT_EQ(got[i], C[i]) << "Gemm16 wrote outside C at " << i;
      continue;
    }
    ASSERT_EQ(got[i], RoundTo(static_cast<real>(got[i]), precision)) << "not on the grid at " << i;
    const double fp32_error = 4 * std::sqrt(double(k)) * std::ldexp(1.0, -24) * sum_of_magnitudes[i];
    ASSERT_LE(std::abs(got[i] - exact[i]), GridStep(exact[i], precision) + fp32_error) << "at " << i;
  }
}

TEST_F(Ops, GemmWithSixteenBitOutputsRoundsEachSumOnce) {
  struct Shape {
    int m, n, k, count;
  };
  // Small; and few outputs over a long sum (where a BLAS may split k and would have to add the
  // pieces in fp32, not in the 16-bit output).
  for (const Shape shape : {Shape{24, 13, 57, 3}, Shape{64, 64, 8192, 1}, Shape{32, 16, 4096, 2}}) {
    for (int precision : {1, 2}) {
      for (double beta : {0.0, 1.0}) {
        SCOPED_TRACE(::testing::Message() << "m " << shape.m << " k " << shape.k << " precision " << precision
                                          << " beta " << beta);
        RunGemm16(*this, shape.m, shape.n, shape.k, shape.count, precision, beta);
      }
    }
  }
}

TEST_F(Ops, EmbeddingForwardAndBackwardOfTheTokensHeldHere) {
  const int B = 3, T = 9, C = 20, v0 = 4, Vl = 6;
  std::vector<int> tokens(B * T);
  for (int i = 0; i < B * T; ++i) tokens[i] = (i * 7) % 13;  // some below v0, some past v0 + Vl, repeats
  const Values wte = Random(Vl * C), wpe = Random(T * C), dout = Random(B * T * C);
  DeviceArray tk(tokens), te(wte), pe(wpe), out(Zeros(B * T * C)), d(dout), dte(Zeros(Vl * C)), dpe(Zeros(T * C));
  EncoderForward(out.get(), tk.ints(), te.get(), pe.get(), v0, Vl, B, T, C);
  EncoderBackward(dte.get(), dpe.get(), d.get(), tk.ints(), v0, Vl, B, T, C);
  std::vector<double> want(B * T * C), want_dte(Vl * C, 0.0), want_dpe(T * C, 0.0);
  for (int bt = 0; bt < B * T; ++bt) {
    const int row = tokens[bt] - v0;
    for (int i = 0; i < C; ++i) {
      const bool here = row >= 0 && row < Vl;
      want[bt * C + i] = (here ? wte[row * C + i] : 0.0) + wpe[(bt % T) * C + i];
      if (here) want_dte[row * C + i] += dout[bt * C + i];
      want_dpe[(bt % T) * C + i] += dout[bt * C + i];
    }
  }
  ExpectClose(out.Get(), want, 1e-6, "EncoderForward");
  ExpectClose(dte.Get(), want_dte, 1e-5, "EncoderBackward dwte");
  ExpectClose(dpe.Get(), want_dpe, 1e-5, "EncoderBackward dwpe");
}

TEST_F(Ops, VocabularyParallelCrossEntropyPieces) {
  const int N = 5, Vl = 1000, v0 = 500;
  const Values logits = Random(N * Vl, 3.0);
  const std::vector<int> targets = {3, 600, 1499, 500, 0};
  DeviceArray l(logits), t(targets), stats(Zeros(3 * N)), dl(Zeros(N * Vl));
  real* row_max = stats.get();
  CrossEntropyStats(row_max, nullptr, nullptr, l.get(), t.ints(), nullptr, v0, N, Vl);
  CrossEntropyStats(nullptr, row_max + N, row_max + 2 * N, l.get(), t.ints(), row_max, v0, N, Vl);
  const Values got = stats.Get();
  std::vector<double> want(3 * N), log_sum(N);
  for (int n = 0; n < N; ++n) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < Vl; ++i) m = std::max(m, double(logits[n * Vl + i]));
    for (int i = 0; i < Vl; ++i) s += std::exp(logits[n * Vl + i] - m);
    const int local = targets[n] - v0;
    want[n] = m;
    want[N + n] = s;
    want[2 * N + n] = local >= 0 && local < Vl ? logits[n * Vl + local] : 0.0;
    log_sum[n] = std::log(s) + m;
  }
  for (int n = 0; n < N; ++n) EXPECT_NEAR(got[N + n], want[N + n], 1e-5 * want[N + n]);
  EXPECT_EQ(Values(got.begin(), got.begin() + N), Values(want.begin(), want.begin() + N));
  for (int n = 0; n < N; ++n) EXPECT_EQ(got[2 * N + n], want[2 * N + n]);
  DeviceArray ls(Values(log_sum.begin(), log_sum.end()));
  CrossEntropyBackward(dl.get(), l.get(), ls.get(), t.ints(), v0, real(0.5), N, Vl);
  std::vector<double> want_d(N * Vl);
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < Vl; ++i)
      want_d[n * Vl + i] = (std::exp(logits[n * Vl + i] - log_sum[n]) - (i + v0 == targets[n] ? 1 : 0)) * 0.5;
  }
  ExpectClose(dl.Get(), want_d, 1e-5, "CrossEntropyBackward");
  for (int precision : {1, 2}) {  // straight into 16 bits: what the real form gives, rounded alike
    DeviceArray rounded(Zeros(N * Vl));
    DeviceSixteenBit d16(Zeros(N * Vl), precision);
    CrossEntropyBackward(rounded.get(), l.get(), ls.get(), t.ints(), v0, real(0.5), N, Vl, precision);
    CrossEntropyBackward16(d16.get(), l.get(), ls.get(), t.ints(), v0, real(0.5), N, Vl, precision);
    ExpectClose(AsValues(d16.Get()), AsDoubles(rounded.Get()), 0, "CrossEntropyBackward16");
  }
}

// With 16-bit storage the LM head leaves its logits as fp32 sums and the cross-entropy rounds
// each to the grid as it reads it: its statistics and gradients on the unrounded logits are,
// bit for bit, those on the same logits rounded beforehand (and read as they are). The logits'
// scale puts most of them off the grid, so reading them unrounded would show.
TEST_F(Ops, CrossEntropyReadsTheLogitsRoundedToTheSixteenBitGrid) {
  const int N = 5, Vl = 1000, v0 = 500;
  const Values logits = Random(N * Vl, 3.0);
  const std::vector<int> targets = {3, 600, 1499, 500, 0};
  for (int precision : {1, 2}) {
    SCOPED_TRACE(precision);
    Values grid(logits);
    for (real& x : grid) x = RoundTo(x, precision);
    int off_grid = 0;
    for (int k = 0; k < N * Vl; ++k) off_grid += grid[k] != logits[k];
    ASSERT_GT(off_grid, N * Vl / 2);
    DeviceArray raw(logits), rounded(grid), t(targets);
    // As the head runs them: max, then sum and target logit against it, then the gradient.
    auto statistics = [&](real* l, int read_as) {
      DeviceArray stats(Zeros(3 * N));
      real* row_max = stats.get();
      CrossEntropyStats(row_max, nullptr, nullptr, l, t.ints(), nullptr, v0, N, Vl, read_as);
      CrossEntropyStats(nullptr, row_max + N, row_max + 2 * N, l, t.ints(), row_max, v0, N, Vl, read_as);
      return stats.Get();
    };
    const Values got = statistics(raw.get(), precision), want = statistics(rounded.get(), 0);
    EXPECT_EQ(got, want) << "row max, sum of exponentials and target logit";
    std::vector<double> log_sum(N);
    for (int n = 0; n < N; ++n) log_sum[n] = std::log(double(want[N + n])) + want[n];
    DeviceArray ls(Values(log_sum.begin(), log_sum.end()));
    DeviceSixteenBit d16_raw(Zeros(N * Vl), precision), d16_grid(Zeros(N * Vl), precision);
    CrossEntropyBackward16(d16_raw.get(), raw.get(), ls.get(), t.ints(), v0, real(0.5), N, Vl, precision);
    CrossEntropyBackward16(d16_grid.get(), rounded.get(), ls.get(), t.ints(), v0, real(0.5), N, Vl, precision);
    EXPECT_EQ(d16_raw.Get(), d16_grid.Get()) << "CrossEntropyBackward16";
    DeviceArray d_raw(Zeros(N * Vl)), d_rounded(Zeros(N * Vl));
    CrossEntropyBackward(d_raw.get(), raw.get(), ls.get(), t.ints(), v0, real(0.5), N, Vl, precision);
    CrossEntropyBackward(d_rounded.get(), rounded.get(), ls.get(), t.ints(), v0, real(0.5), N, Vl, precision);
    EXPECT_EQ(d_raw.Get(), d_rounded.Get()) << "CrossEntropyBackward";
  }
}

// The loss from the all-reduced statistics, on the device: log_sum over row_max, and the rows'
// losses summed in double into one device double (more rows than a GPU block has threads).
TEST_F(Ops, CrossEntropyLossStaysOnTheDevice) {
  for (int N : {1031, 5, 0}) {
    SCOPED_TRACE(N);
    Values row_max = Random(N + 1, 4.0), row_sum(N + 1), target_logit = Random(N + 1, 4.0);
    for (int n = 0; n <= N; ++n) row_sum[n] = real(1) + std::abs(Random(1, 50.0)[0]);
    DeviceArray m(row_max), s(row_sum), t(target_logit), loss(Filled(2, real(7)));  // one double
    CrossEntropyLoss(m.get(), s.get(), t.get(), N, reinterpret_cast<double*>(loss.get()));
    double want = 0;
    std::vector<double> log_sum(row_max.begin(), row_max.end());  // row N is not touched
    for (int n = 0; n < N; ++n) {
      log_sum[n] = std::log(double(row_sum[n])) + row_max[n];
      want += log_sum[n] - target_logit[n];
    }
    ExpectClose(m.Get(), log_sum, 1e-6, "CrossEntropyLoss log_sum");
    const Values bits = loss.Get();
    double got;
    std::memcpy(&got, bits.data(), sizeof(got));
    EXPECT_NEAR(got, want, 1e-6 * std::abs(want) + 1e-6);
  }
}

// UploadAsync: the host buffer is reused at once (more uploads than the GPU keeps staging
// buffers), and each device array still gets what the host held at its call.
TEST_F(Ops, UploadAsyncLetsTheHostReuseItsMemoryAtOnce) {
  const int uploads = 100, n = 1000;
  std::vector<std::unique_ptr<DeviceArray>> arrays;
  for (int u = 0; u < uploads; ++u) arrays.push_back(std::make_unique<DeviceArray>(Zeros(n)));
  // Work queued ahead of the copies (on a GPU they are still pending while the host goes on).
  const int m = 1024;
  DeviceArray a(Random(m * m)), b(Random(m * m)), c(Zeros(m * m));
  for (int r = 0; r < 8; ++r) Gemm(Op::kN, Op::kN, m, m, m, real(1), a.get(), m, b.get(), m, real(0), c.get(), m);
  Values host(n);
  for (int u = 0; u < uploads; ++u) {
    for (int i = 0; i < n; ++i) host[i] = real(u * n + i);
    UploadAsync(arrays[u]->get(), host.data(), n * sizeof(real));
  }
  std::fill(host.begin(), host.end(), real(-1));
  for (int u = 0; u < uploads; ++u) {
    const Values got = arrays[u]->Get();
    for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], real(u * n + i)) << "upload " << u << " at " << i;
  }
}

TEST_F(Ops, ElementwiseOpsAdamWAndReductions) {
  const int64_t n = 100003;
  const Values a = Random(n, 2.0), b = Random(n), g = Random(n, 0.1);
  DeviceArray x(a), y(b), out(Zeros(n)), gelu(Zeros(n)), dgelu(Zeros(n)), rounded(a);
  Add(out.get(), x.get(), y.get(), n);
  GeluForward(gelu.get(), x.get(), n);
  GeluBackward(dgelu.get(), x.get(), y.get(), n);
  RoundStorage(rounded.get(), n, 2);
  std::vector<double> want_add(n), want_gelu(n), want_dgelu(n), want_round(n);
  double squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    want_add[i] = double(a[i]) + b[i];
    want_gelu[i] = Gelu(a[i]);
    want_dgelu[i] = GeluGrad(a[i]) * double(b[i]);
    want_round[i] = RoundBf16(a[i]);
    squares += double(a[i]) * a[i];
  }
  ExpectClose(out.Get(), want_add, 1e-7, "Add");
  ExpectClose(gelu.Get(), want_gelu, 1e-6, "GeluForward");
  ExpectClose(dgelu.Get(), want_dgelu, 1e-6, "GeluBackward");
  ExpectClose(rounded.Get(), want_round, 0, "RoundStorage");
  EXPECT_NEAR(SumOfSquares(x.get(), n), squares, 1e-9 * squares);
  Values with_inf = a;
  with_inf[5] = INFINITY;
  with_inf[n - 1] = NAN;
  DeviceArray bad(with_inf);
  EXPECT_EQ(CountNonFinite(bad.get(), n), 2);

  DeviceArray p(a), grad(g), m(Zeros(n)), v(Zeros(n));
  AdamWUpdate(p.get(), grad.get(), m.get(), v.get(), n, real(1e-2), real(0.9), real(0.95), real(1e-8), real(0.1),
              real(0.1), real(0.05));
  std::vector<double> want_p(n);
  for (int64_t i = 0; i < n; ++i) {
    const double mm = 0.1 * g[i], vv = 0.05 * double(g[i]) * g[i];
    want_p[i] = a[i] - 1e-2 * ((mm / 0.1) / (std::sqrt(vv / 0.05) + 1e-8) + 0.1 * a[i]);
  }
  ExpectClose(p.Get(), want_p, 1e-6, "AdamWUpdate");
}

// Work enough that the device (or the host) takes measurable time over it.
void BusyWork(real* p, int64_t n) {
  for (int i = 0; i < 20; ++i) Scale(p, n, real(1.0001));
}

TEST_F(Ops, EventsMarkTheStreamsWorkAndTimeIt) {
  const int64_t n = 1 << 22;
  DeviceArray x(Filled(n, 1));
  DeviceEvent never;
  EXPECT_TRUE(never.Done());  // never recorded: nothing to wait for
  DeviceEvent start, stop;
  start.Record(Stream::kCompute);
  BusyWork(x.get(), n);
  stop.Record(Stream::kCompute);
  stop.Await(Stream::kComm);  // the communication stream's later work waits for it
  const double seconds = SecondsBetween(start, stop);
  EXPECT_TRUE(stop.Done());
  EXPECT_GT(seconds, 0);
  EXPECT_NEAR(SecondsBetween(stop, start), -seconds, 1e-6);
  EXPECT_NEAR(x.Get()[n - 1], std::pow(1.0001, 20), 1e-5);
  // An event is recorded again for the next step.
  start.Record(Stream::kCompute);
  stop.Record(Stream::kCompute);
  EXPECT_GE(SecondsBetween(start, stop), 0);
  EXPECT_LT(SecondsBetween(start, stop), seconds);
}

TEST_F(Ops, PhaseClockAddsEachSpanToItsPhaseOnce) {
  const int64_t n = 1 << 22;
  DeviceArray x(Filled(n, 1));
  PhaseClock clock;
  {
    TimedScope timed(clock, Phase::kTpComm);
    BusyWork(x.get(), n);
  }
  BusyWork(x.get(), n);  // outside every span: compute, which the step works out as the rest
  {
    TimedScope timed(clock, Phase::kOptimizer);
    BusyWork(x.get(), n);
  }
  Synchronize();
  clock.Settle();
  const double tp = clock.Get(Phase::kTpComm), optimizer = clock.Get(Phase::kOptimizer);
  EXPECT_GT(tp, 0);
  EXPECT_GT(optimizer, 0);
  EXPECT_EQ(clock.Get(Phase::kDpComm), 0);
  EXPECT_EQ(clock.Get(Phase::kCompute), 0);
  clock.Settle();  // nothing new: nothing added twice
  EXPECT_EQ(clock.Get(Phase::kTpComm), tp);
  clock.Reset();
  EXPECT_EQ(clock.Get(Phase::kTpComm), 0);
  {
    TimedScope timed(clock, Phase::kDpComm);
    BusyWork(x.get(), n);
  }
  clock.Settle();
  EXPECT_GT(clock.Get(Phase::kDpComm), 0);
  EXPECT_EQ(clock.Get(Phase::kTpComm), 0);  // the reused span counts for its new phase only
  EXPECT_EQ(clock.Get(Phase::kOptimizer), 0);
}

}  // namespace
}  // namespace tunepar::core
