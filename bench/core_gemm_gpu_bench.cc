// The core's GEMMs on the GPU against the vendor BLAS alone: the linear layers of a GPT step
// as the trainer runs them (block.cc's linear layers over gemm_layers.cc: Gemm in BLAS terms,
// gemm_gpu.cc: cublasGemmEx on the core's stream): fp32 through MatmulForward / MatmulBackward;
// bf16 through MatmulForward16 / MatmulBackward16 with 16-bit storage throughout, each layer in
// the form block.cc gives it (LayerRole): layer inputs, weights and output gradients are 16-bit
// numbers read as they are; qkv and fc write their outputs as 16-bit numbers and their inputs'
// gradients (TP partial sums) in fp32; attproj and fcproj write their outputs (partial sums) in
// fp32 and their inputs' gradients as 16-bit numbers; the LM head writes fp32 logits, its GEMM's
// sums and nothing more (the cross-entropy rounds each to the bf16 grid as it reads it, so the
// trainer makes no rounding pass; its output gradient comes from the cross-entropy in 16 bits)
// and writes its input's gradient in fp32; dW accumulates in fp32. The 16-bit outputs (qkv, fc)
// come from cublasLt (ops.h Gemm16Bias, a heuristic-chosen algorithm per shape); those layers also run a
// pass "forward + bias" with the trainer's bias in cublasLt's epilogue (a bias of zeros, so the
// product, and the check against cuBLAS, is unchanged: the row shows what the epilogue costs);
// the other passes have no bias. Against cublasGemmEx
// called directly with the same shapes and types: fp32 inputs with CUBLAS_COMPUTE_32F (no TF32,
// on both sides); bf16 inputs already in bf16, C in bf16 where the core writes bf16 and in fp32
// where it writes fp32, CUBLAS_COMPUTE_32F. Prints TFLOP/s per pass, the ratio core/cuBLAS (of
// the rates), and the overall ratio over all passes' time; and checks that both sides computed
// the same product: max |core - cuBLAS| / max |cuBLAS|, bf16 outputs read back as floats. Where
// an output is bf16 up to one bf16 step, 2^-7 = 7.8e-3, is the same sum rounded differently; more
// is a different product. Last, the bf16 figures a goal is set on: the LM head's forward (0.55x
// on an H200 while the trainer followed its GEMM with a pass rounding the logits to the grid;
// goal >= 0.95x) and the 16-bit-output forwards.
//   core_gemm_gpu_bench [--tokens N] [--hidden C] [--vocab V] [--precision fp32|bf16|both] [--csv FILE]
//   (defaults: GPT-2 small's step, 8192 tokens, C 768, V 50304, both precisions)
// Exit codes: 0 ok, 1 a device or library call failed, 2 bad flags, 4 no device ("no device").
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner/core/ops.h"

namespace {

namespace core = tunepar::core;
using core::real;

struct BenchOptions {
  int tokens = 8192;    // N = B T of GPT-2 small's step (8 sequences of 1024)
  int hidden = 768;     // C
  int vocab = 50304;    // V, GPT-2's vocabulary padded to a multiple of 128
  std::vector<int> precisions = {0, 2};  // 0 fp32, 2 bf16 (ops.h's precision codes)
  std::string csv;      // per-pass rows written here when not empty
};

void CheckCuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}
void CheckBlas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(status)));
  }
}

// Device memory freed at scope exit.
struct DeviceFreer {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceArray = std::unique_ptr<void, DeviceFreer>;

DeviceArray Allocate(size_t bytes) {
  void* p = nullptr;
  CheckCuda(cudaMalloc(&p, bytes), "cudaMalloc");
  return DeviceArray(p);
}

DeviceArray Zeros(size_t bytes) {
  DeviceArray p = Allocate(bytes);
  CheckCuda(cudaMemset(p.get(), 0, bytes), "cudaMemset");
  return p;
}

// A layer's passes: the forward, the forward with the layer's bias (16-bit outputs only), the
// backward (dx and dW).
enum class Pass { kForward, kForwardBias, kBackward };

// Values uniform in [-1, 1) on the bf16 grid (low 16 bits zero), so that the bf16 copies (and
// the LM head's conversion of its fp32 output gradient) are exact and both sides multiply the
// same numbers; a cheap LCG: the big arrays (N x V) have 4e8 values.
std::vector<float> Bf16GridValues(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t state = seed * 2654435761u + 1;
  for (float& x : v) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
    uint32_t bits;
    std::memcpy(&bits, &u, 4);
    bits &= 0xFFFF0000u;
    std::memcpy(&x, &bits, 4);
  }
  return v;
}

// An operand on the device in fp32 and, exactly, in bf16 (its top 16 bits).
struct Operand {
  DeviceArray fp32, bf16;
};

Operand Upload(const std::vector<float>& host) {
  Operand op{Allocate(host.size() * 4), Allocate(host.size() * 2)};
  CheckCuda(cudaMemcpy(op.fp32.get(), host.data(), host.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  std::vector<uint16_t> top(host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &host[i], 4);
    top[i] = static_cast<uint16_t>(bits >> 16);
  }
  CheckCuda(cudaMemcpy(op.bf16.get(), top.data(), top.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  return op;
}

// What the trainer stores in 16 bits around a linear layer with 16-bit storage (block.cc). A
// column-parallel block layer (qkv, fc) stores its output; its input's gradient is a partial sum
// over TP, all-reduced in fp32 before it is rounded. A row-parallel one (attproj, fcproj) leaves
// its output, a partial sum, in fp32 and stores its input's gradient. The LM head writes fp32
// logits unrounded (the cross-entropy reads each rounded to the grid), reads their gradient in
// 16 bits and, column-parallel, leaves its input's gradient in fp32.
enum class LayerRole { kColumnParallel, kRowParallel, kLmHead };

// One linear layer's arrays: inp (N, in), w (out, in), dout (N, out) and the outputs.
struct LayerArrays {
  int N, in, out;
  LayerRole role;
  Operand inp, w, dout;
  // y (N, out), dinp (N, in), dw (out, in): fp32, 4 bytes a value; y and dinp hold 16-bit
  // numbers (in their first half) where the pass stores them so. bias (out): fp32 zeros.
  DeviceArray y, dinp, dw, bias;

  bool Output16(int precision) const { return precision != 0 && role == LayerRole::kColumnParallel; }
  bool InputGradient16(int precision) const { return precision != 0 && role == LayerRole::kRowParallel; }
};

LayerArrays MakeLayer(int N, int in, int out, LayerRole role) {
  const size_t n_inp = size_t(N) * in, n_w = size_t(out) * in, n_out = size_t(N) * out;
  return {N,
          in,
          out,
          role,
          Upload(Bf16GridValues(n_inp, 1)),
          Upload(Bf16GridValues(n_w, 2)),
          Upload(Bf16GridValues(n_out, 3)),
          Allocate(n_out * 4),
          Allocate(n_inp * 4),
          Allocate(n_w * 4),
          Zeros(size_t(out) * 4)};
}

// cublasGemmEx on its own handle and stream: the calls of gemm_layers.cc, spelled out.
class VendorGemm {
 public:
  VendorGemm() {
    CheckBlas(cublasCreate(&handle_), "cublasCreate");
    CheckCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    CheckBlas(cublasSetStream(handle_, stream_), "cublasSetStream");
  }
  ~VendorGemm() {
    cublasDestroy(handle_);
    cudaStreamDestroy(stream_);
  }
  VendorGemm(const VendorGemm&) = delete;
  VendorGemm& operator=(const VendorGemm&) = delete;

  void Synchronize() { CheckCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  // y^T (out, N) = w (out, in) inp^T (in, N), column-major.
  void Forward(LayerArrays& l, int precision) {
    Gemm(CUBLAS_OP_T, CUBLAS_OP_N, l.out, l.N, l.in, l.w, l.in, l.inp, l.in, 0.0f, l.y.get(),
         l.Output16(precision), l.out, precision);
  }
  // dinp^T (in, N) = w^T dout^T; dw^T (in, out) += inp^T (in, N) dout (N, out).
  void Backward(LayerArrays& l, int precision) {
    Gemm(CUBLAS_OP_N, CUBLAS_OP_N, l.in, l.N, l.out, l.w, l.in, l.dout, l.out, 0.0f, l.dinp.get(),
         l.InputGradient16(precision), l.in, precision);
    Gemm(CUBLAS_OP_N, CUBLAS_OP_T, l.in, l.out, l.N, l.inp, l.in, l.dout, l.out, 1.0f, l.dw.get(), false,
         l.in, precision);
  }

 private:
  // A and B in bf16 at precision 2 (fp32 otherwise); C in bf16 where `c_bf16`.
  void Gemm(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, const Operand& a, int lda,
            const Operand& b, int ldb, float beta, void* c, bool c_bf16, int ldc, int precision) {
    const float alpha = 1.0f;
    const bool bf16 = precision == 2;
    const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    CheckBlas(cublasGemmEx(handle_, op_a, op_b, m, n, k, &alpha, bf16 ? a.bf16.get() : a.fp32.get(), type,
                           lda, bf16 ? b.bf16.get() : b.fp32.get(), type, ldb, &beta, c,
                           c_bf16 ? CUDA_R_16BF : CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
  }

  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

const uint16_t* Bits16(const Operand& x) {
  return static_cast<const uint16_t*>(x.bf16.get());
}
uint16_t* Bits16(const DeviceArray& x) {
  return static_cast<uint16_t*>(x.get());
}
real* Reals(const DeviceArray& x) {
  return static_cast<real*>(x.get());
}

// The calls of block.cc's Linear / LinearInto (forward) and LinearGradient /
// LinearGradientPartial / the head's backward, by the layer's role.
void CoreForward(LayerArrays& l, int precision, bool with_bias = false) {
  if (precision == 0) {
    core::MatmulForward(Reals(l.y), static_cast<const real*>(l.inp.fp32.get()),
                        static_cast<const real*>(l.w.fp32.get()), nullptr, l.N, l.in, l.out, precision);
  } else if (l.Output16(precision)) {
    core::MatmulForward16(Bits16(l.y), Bits16(l.inp), Bits16(l.w), with_bias ? Reals(l.bias) : nullptr, l.N, l.in,
                          l.out, precision);
  } else {  // fp32 sums: a partial sum is rounded after its all-reduce, the logits as they are read
    core::MatmulForward16(Reals(l.y), Bits16(l.inp), Bits16(l.w), nullptr, l.N, l.in, l.out, precision, 0);
  }
}
void CoreBackward(LayerArrays& l, int precision) {
  if (precision == 0) {
    core::MatmulBackward(Reals(l.dinp), Reals(l.dw), nullptr, static_cast<const real*>(l.dout.fp32.get()),
                         static_cast<const real*>(l.inp.fp32.get()), static_cast<const real*>(l.w.fp32.get()),
                         l.N, l.in, l.out, precision);
    return;
  }
  switch (l.role) {
    case LayerRole::kRowParallel:
      core::MatmulBackward16(Bits16(l.dinp), Reals(l.dw), nullptr, Bits16(l.dout), Bits16(l.inp), Bits16(l.w),
                             l.N, l.in, l.out, precision);
      return;
    case LayerRole::kColumnParallel:
    case LayerRole::kLmHead:
      core::MatmulBackward16(Reals(l.dinp), Reals(l.dw), nullptr, Bits16(l.dout), Bits16(l.inp), Bits16(l.w),
                             l.N, l.in, l.out, precision);
      return;
  }
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Seconds per call of `run` (asynchronous GPU work; `sync` waits for it): calls are issued
// back to back in batches of ~20 ms, so launch latency overlaps; the median of 5 batches.
template <typename Run, typename Sync>
double SecondsPerCall(Run run, Sync sync) {
  run();
  sync();
  auto start = std::chrono::steady_clock::now();
  run();
  sync();
  const double once = Seconds(start);
  const int calls = static_cast<int>(std::clamp(0.02 / std::max(once, 1e-6), 1.0, 1000.0));
  std::vector<double> per_call;
  for (int batch = 0; batch < 5; ++batch) {
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) run();
    sync();
    per_call.push_back(Seconds(start) / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

// n values of a device array as floats: fp32, or bf16 numbers widened (exactly).
std::vector<float> Download(const DeviceArray& p, size_t n, bool bf16) {
  std::vector<float> host(n);
  if (!bf16) {
    CheckCuda(cudaMemcpy(host.data(), p.get(), n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return host;
  }
  std::vector<uint16_t> bits(n);
  CheckCuda(cudaMemcpy(bits.data(), p.get(), n * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (size_t i = 0; i < n; ++i) {
    const uint32_t wide = uint32_t{bits[i]} << 16;
    std::memcpy(&host[i], &wide, 4);
  }
  return host;
}

// max |a - b| / max |b|: 0 when both sides computed the same product.
double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// One call of the pass on either side (cublasGemmEx has no bias: the core's is zeros).
void RunPass(LayerArrays& l, Pass pass, bool vendor_side, int precision, VendorGemm& vendor) {
  if (vendor_side) {
    pass == Pass::kBackward ? vendor.Backward(l, precision) : vendor.Forward(l, precision);
  } else {
    pass == Pass::kBackward ? CoreBackward(l, precision) : CoreForward(l, precision, pass == Pass::kForwardBias);
  }
}

// The outputs of one call of the pass (dw zeroed first: it accumulates).
std::vector<float> PassOutputs(LayerArrays& l, Pass pass, bool vendor_side, int precision, VendorGemm& vendor) {
  CheckCuda(cudaMemset(l.dw.get(), 0, size_t(l.out) * l.in * 4), "cudaMemset");
  CheckCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  RunPass(l, pass, vendor_side, precision, vendor);
  CheckCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  if (pass != Pass::kBackward) return Download(l.y, size_t(l.N) * l.out, l.Output16(precision));
  std::vector<float> both = Download(l.dinp, size_t(l.N) * l.in, l.InputGradient16(precision));
  const std::vector<float> dw = Download(l.dw, size_t(l.out) * l.in, false);
  both.insert(both.end(), dw.begin(), dw.end());
  return both;
}

struct PassResult {
  std::string precision, layer, pass;
  int m, n, k;  // the row-major product (N, out) x in; backward's k is 2 in (dinp and dw)
  double core_s, vendor_s, difference;
  double Flops() const { return 2.0 * m * n * k; }
};

PassResult MeasurePass(LayerArrays& l, const char* layer, Pass pass, int precision, VendorGemm& vendor) {
  const double core_s =
      SecondsPerCall([&] { RunPass(l, pass, false, precision, vendor); }, [] { core::Synchronize(); });
  const double vendor_s =
      SecondsPerCall([&] { RunPass(l, pass, true, precision, vendor); }, [&] { vendor.Synchronize(); });
  const double difference = RelativeDifference(PassOutputs(l, pass, false, precision, vendor),
                                               PassOutputs(l, pass, true, precision, vendor));
  const char* name = pass == Pass::kForward ? "forward" : pass == Pass::kForwardBias ? "forward + bias" : "backward (dx + dW)";
  return {precision == 2 ? "bf16" : "fp32", layer, name, l.N, l.out, pass == Pass::kBackward ? 2 * l.in : l.in,
          core_s, vendor_s, difference};
}

void PrintPass(const PassResult& r) {
  char dims[64];
  std::snprintf(dims, sizeof(dims), "%s %dx%dx%d", r.pass.c_str(), r.m, r.n, r.k);
  std::printf("%-5s %-8s %-36s %11.1f %11.1f %7.2f %9.1e\n", r.precision.c_str(), r.layer.c_str(), dims,
              r.Flops() / r.core_s / 1e12, r.Flops() / r.vendor_s / 1e12, r.vendor_s / r.core_s, r.difference);
}

// Every pass of the step's linear layers in one precision; prints a row per pass and a summary.
std::vector<PassResult> MeasurePrecision(const BenchOptions& o, int precision, VendorGemm& vendor) {
  struct Layer {
    const char* name;
    int in, out;
    LayerRole role;
  };
  const int C = o.hidden;
  const Layer layers[] = {{"qkv", C, 3 * C, LayerRole::kColumnParallel},
                          {"attproj", C, C, LayerRole::kRowParallel},
                          {"fc", C, 4 * C, LayerRole::kColumnParallel},
                          {"fcproj", 4 * C, C, LayerRole::kRowParallel},
                          {"lm_head", C, o.vocab, LayerRole::kLmHead}};
  std::vector<PassResult> results;
  double core_total = 0, vendor_total = 0, flops = 0;
  for (const Layer& layer : layers) {
    LayerArrays arrays = MakeLayer(o.tokens, layer.in, layer.out, layer.role);
    for (const Pass pass : {Pass::kForward, Pass::kForwardBias, Pass::kBackward}) {
      if (pass == Pass::kForwardBias && !arrays.Output16(precision)) continue;
      results.push_back(MeasurePass(arrays, layer.name, pass, precision, vendor));
      PrintPass(results.back());
      if (pass == Pass::kForwardBias) continue;  // the step runs one forward per layer
      core_total += results.back().core_s;
      vendor_total += results.back().vendor_s;
      flops += results.back().Flops();
    }
  }
  std::printf("summary %s: all linear-layer GEMMs of the step: core %.3f ms (%.1f TFLOP/s), cuBLAS %.3f ms "
              "(%.1f TFLOP/s): core/cuBLAS %.2f\n",
              precision == 2 ? "bf16" : "fp32", core_total * 1e3, flops / core_total / 1e12, vendor_total * 1e3,
              flops / vendor_total / 1e12, vendor_total / core_total);
  return results;
}

// The bf16 figures a goal is set on (ratio = cuBLAS time / core time).
void PrintGoals(const std::vector<PassResult>& results) {
  for (const PassResult& r : results) {
    if (r.precision != "bf16") continue;
    if (r.layer == "lm_head" && r.pass == "forward") {
      const double ratio = r.vendor_s / r.core_s;
      std::printf("goal bf16 lm_head forward (fp32 logits, the trainer's one GEMM call): core/cuBLAS %.2f "
                  "(goal >= 0.95): %s\n", ratio, ratio >= 0.95 ? "met" : "not met");
    } else if (r.pass == "forward" || r.pass == "forward + bias") {
      if (r.layer != "qkv" && r.layer != "fc") continue;  // the 16-bit outputs (cublasLt)
      std::printf("goal bf16 %s %s (16-bit output, cublasLt): core/cuBLAS %.2f (goal >= 0.95): %s\n",
                  r.layer.c_str(), r.pass.c_str(), r.vendor_s / r.core_s, r.vendor_s / r.core_s >= 0.95 ? "met"
                                                                                                    : "not met");
    }
  }
}

void WriteCsv(const std::string& path, const std::vector<PassResult>& results) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  std::fprintf(f, "precision,layer,pass,m,n,k,core_s,cublas_s,core_tflops,cublas_tflops,core_over_cublas,"
                  "max_rel_difference\n");
  for (const PassResult& r : results) {
    std::fprintf(f, "%s,%s,%s,%d,%d,%d,%.6e,%.6e,%.3f,%.3f,%.4f,%.3e\n", r.precision.c_str(), r.layer.c_str(),
                 r.pass.c_str(), r.m, r.n, r.k, r.core_s, r.vendor_s, r.Flops() / r.core_s / 1e12,
                 r.Flops() / r.vendor_s / 1e12, r.vendor_s / r.core_s, r.difference);
  }
  std::fclose(f);
}

// Fills `o` from argv; false (after one line on stderr) on a bad flag.
bool ParseFlags(int argc, char** argv, BenchOptions& o) {
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "core_gemm_gpu_bench: %s needs a value\n", flag.c_str());
      return false;
    }
    const std::string value = argv[i + 1];
    int* number = flag == "--tokens" ? &o.tokens : flag == "--hidden" ? &o.hidden : flag == "--vocab" ? &o.vocab
                                                                                                      : nullptr;
    if (number != nullptr) {
      *number = std::atoi(value.c_str());
      if (*number <= 0) {
        std::fprintf(stderr, "core_gemm_gpu_bench: %s must be a positive integer, not '%s'\n", flag.c_str(),
                     value.c_str());
        return false;
      }
    } else if (flag == "--precision" && (value == "fp32" || value == "bf16" || value == "both")) {
      o.precisions = value == "fp32" ? std::vector<int>{0} : value == "bf16" ? std::vector<int>{2}
                                                                             : std::vector<int>{0, 2};
    } else if (flag == "--csv") {
      o.csv = value;
    } else {
      std::fprintf(stderr, "core_gemm_gpu_bench: unknown flag or value '%s %s' (flags: --tokens --hidden --vocab "
                   "--precision fp32|bf16|both --csv)\n", flag.c_str(), value.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions o;
  if (!ParseFlags(argc, argv, o)) return 2;
  if (core::DeviceCount() == 0) {
    std::puts("no device");
    return 4;
  }
  try {
    const std::string device = core::UseDevice(0);
    std::printf("GEMMs of the linear layers of a step, %d tokens, C %d, V %d, on %s: core (tunepar::core::Gemm) "
                "vs cublasGemmEx\n", o.tokens, o.hidden, o.vocab, device.c_str());
    std::printf("%-5s %-8s %-36s %11s %11s %7s %9s\n", "prec", "layer", "pass (M x N x K)", "core TF/s",
                "cuBLAS TF/s", "ratio", "max diff");
    VendorGemm vendor;
    std::vector<PassResult> all;
    for (const int precision : o.precisions) {
      const std::vector<PassResult> results = MeasurePrecision(o, precision, vendor);
      all.insert(all.end(), results.begin(), results.end());
    }
    double core_total = 0, vendor_total = 0;
    for (const PassResult& r : all) {
      if (r.pass == "forward + bias") continue;
      core_total += r.core_s;
      vendor_total += r.vendor_s;
    }
    std::printf("summary overall: core/cuBLAS %.2f (ratio: cuBLAS time / core time; max diff: max |core - "
                "cuBLAS| / max |cuBLAS|)\n", vendor_total / core_total);
    PrintGoals(all);
    if (!o.csv.empty()) WriteCsv(o.csv, all);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "core_gemm_gpu_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
