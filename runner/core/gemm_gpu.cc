// Gemm (ops.h) on the GPU through the vendor BLAS (cuBLAS under nvcc, hipBLAS under hipcc; the
// names are HIP's, gpu_vendor.h): GemmEx / GemmStridedBatchedEx with fp32 accumulation. fp32
// inputs multiply in fp32 (CUBLAS_COMPUTE_32F: no TF32, as PyTorch's default for fp32). Inputs on
// a 16-bit grid are converted to 16-bit copies (exact: they are 16-bit values) and multiply on
// tensor/matrix cores, as a framework's bf16/fp16 GEMMs do; Gemm16's operands are 16-bit numbers
// already (16-bit storage) and go to the BLAS as they are. Gemm16Bias (a linear layer's 16-bit
// output and its bias) goes through cublasLt with the bias in the epilogue under nvcc; elsewhere
// the fp32 sums go to scratch and one kernel adds the bias and rounds.
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <map>

#include "runner/core/gpu_runtime.h"
#include "runner/core/gpu_vendor.h"
#include "runner/core/kernels.h"
#include "runner/core/memory.h"

namespace tunepar::core {

static_assert(sizeof(real) == 4, "the GPU build computes in fp32");

namespace {

void CheckBlas(hipblasStatus_t status, const char* what) {
  if (status == HIPBLAS_STATUS_ALLOC_FAILED) {
    throw OutOfMemory(MemoryCategory::kWorkspace,
                      fmt::format("out of memory on the device: {}: the BLAS library could not allocate", what));
  }
  if (status != HIPBLAS_STATUS_SUCCESS) {
    throw DeviceError(fmt::format("{}: BLAS status {}", what, static_cast<int>(status)));
  }
}

hipblasHandle_t Handle() {
  static hipblasHandle_t handle = [] {
    hipblasHandle_t h;
    CheckBlas(hipblasCreate(&h), "hipblasCreate");
    CheckBlas(hipblasSetStream(h, gpu::ComputeStream()), "hipblasSetStream");
    return h;
  }();
  return handle;
}

const void* As16Bit(const real* p, int64_t span, int precision, gpu::ScratchSlot slot) {
  auto* out = static_cast<uint16_t*>(gpu::Scratch(slot, static_cast<size_t>(span) * 2));
  To16Bit(out, p, span, precision);
  return out;
}

hipblasOperation_t OpOf(Op op) {
  return op == Op::kT ? HIPBLAS_OP_T : HIPBLAS_OP_N;
}

}  // namespace

namespace {

// C = alpha op(A) op(B) + beta C on the BLAS, A and B of `type`, C of `c_type` (fp32, or the
// 16-bit type: the BLAS rounds the fp32 sums as it writes them).
void VendorGemm(Op op_a, Op op_b, int m, int n, int k, real alpha, const void* a, int lda, const void* b, int ldb,
                real beta, void* C, int ldc, const GemmBatch& batch, hipDataType type, hipDataType c_type = HIP_R_32F) {
  const bool wide = type == HIP_R_32F;
  gpu::ProfiledRegion profiled(wide ? (batch.count == 1 ? "GEMM fp32" : "GEMM fp32 batched (attention)")
                                    : (batch.count == 1 ? "GEMM 16-bit" : "GEMM 16-bit batched (attention)"));
  if (batch.count == 1) {
    CheckBlas(hipblasGemmEx(Handle(), OpOf(op_a), OpOf(op_b), m, n, k, &alpha, a, type, lda, b, type, ldb, &beta,
                            C, c_type, ldc, HIPBLAS_COMPUTE_32F, HIPBLAS_GEMM_DEFAULT),
              "GemmEx");
    return;
  }
  CheckBlas(hipblasGemmStridedBatchedEx(Handle(), OpOf(op_a), OpOf(op_b), m, n, k, &alpha, a, type, lda,
                                        batch.stride_a, b, type, ldb, batch.stride_b, &beta, C, c_type, ldc,
                                        batch.stride_c, batch.count, HIPBLAS_COMPUTE_32F, HIPBLAS_GEMM_DEFAULT),
            "GemmStridedBatchedEx");
}

hipDataType SixteenBitType(int precision) {
  return precision == 2 ? HIP_R_16BF : HIP_R_16F;
}

#if TUNEPAR_BLASLT
// ---- cublasLt for Gemm16Bias: CUBLASLT_EPILOGUE_BIAS adds the bias to the fp32 sums before the
// one conversion to the output's 16-bit type.

// What cuBLAS reserves per handle by default on Hopper: room for the split-K and stream-K
// kernels the heuristic may pick (long K, or too few output tiles to fill the GPU).
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

cublasLtHandle_t LtHandle() {
  static cublasLtHandle_t handle = [] {
    cublasLtHandle_t h;
    CheckBlas(cublasLtCreate(&h), "cublasLtCreate");
    return h;
  }();
  return handle;
}

template <typename Value>
void SetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const Value& value,
                  const char* what) {
  CheckBlas(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)), what);
}

// The largest power of two up to 256 that divides the address: the heuristic assumes 256-byte
// aligned operands unless it is told less, and an algorithm chosen so fails on others.
uint32_t AlignmentOf(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 2 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// One shape's matmul descriptor, operand layouts and algorithm (the heuristic's first choice),
// made on the shape's first call and kept for the process's life, as the BLAS handle is: the
// heuristic query is not paid per call. The bias pointer is set on `desc` per call.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // false: cublasLt has no algorithm for it (the scratch path runs it)
};

// Shape, operand alignments, precision and whether there is a bias.
using LtKey = std::array<int64_t, 12>;

LtPlan MakeLtPlan(const LtKey& key, Op op_a, Op op_b, int m, int n, int k, int lda, int ldb, bool bias,
                  hipDataType type) {
  LtPlan plan;
  CheckBlas(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  SetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, OpOf(op_a), "cublasLt TRANSA");
  SetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, OpOf(op_b), "cublasLt TRANSB");
  SetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT,
               "cublasLt EPILOGUE");
  // The bias in the output's type (bf16 or fp16), the only type cublasLt's 16-bit-output
  // kernels read it in; its values lie on that grid, so the 16-bit copy is exact.
  if (bias) SetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t{type}, "cublasLt BIAS_DATA_TYPE");
  // Column-major: op(A) m x k, op(B) k x n, stored transposed where op is kT; C = D, m x n, ld m.
  const bool a_n = op_a == Op::kN, b_n = op_b == Op::kN;
  CheckBlas(cublasLtMatrixLayoutCreate(&plan.a, type, a_n ? m : k, a_n ? k : m, lda), "cublasLtMatrixLayoutCreate A");
  CheckBlas(cublasLtMatrixLayoutCreate(&plan.b, type, b_n ? k : n, b_n ? n : k, ldb), "cublasLtMatrixLayoutCreate B");
  CheckBlas(cublasLtMatrixLayoutCreate(&plan.c, type, m, n, m), "cublasLtMatrixLayoutCreate C");

  cublasLtMatmulPreference_t preference;
  CheckBlas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  const auto set_preference = [&](cublasLtMatmulPreferenceAttributes_t attribute, auto value) {
    CheckBlas(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)),
              "cublasLtMatmulPreferenceSetAttribute");
  };
  set_preference(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{kLtWorkspaceBytes});
  set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(key[9]));
  set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(key[10]));
  set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(key[11]));
  set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(key[11]));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(LtHandle(), plan.desc, plan.a, plan.b, plan.c,
                                                               plan.c, preference, 1, &result, &found);
  CheckBlas(cublasLtMatmulPreferenceDestroy(preference), "cublasLtMatmulPreferenceDestroy");
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) return plan;
  CheckBlas(status, "cublasLtMatmulAlgoGetHeuristic");
  CheckBlas(result.state, "cublasLtMatmulAlgoGetHeuristic (its algorithm)");
  plan.algo = result.algo;
  plan.found = true;
  return plan;
}

// C = round(op(A) op(B) + bias) through cublasLt; false (nothing queued) when it has no
// algorithm for the shape.
bool LtGemm16Bias(Op op_a, Op op_b, int m, int n, int k, const uint16_t* A, int lda, const uint16_t* B, int ldb,
                  const real* bias, uint16_t* C, int precision) {
  static std::map<LtKey, LtPlan> plans;
  const LtKey key{static_cast<int64_t>(op_a), static_cast<int64_t>(op_b), m, n, k, lda, ldb, precision,
                  bias != nullptr, AlignmentOf(A), AlignmentOf(B), AlignmentOf(C)};
  auto at = plans.find(key);
  if (at == plans.end()) {
    at = plans.emplace(key, MakeLtPlan(key, op_a, op_b, m, n, k, lda, ldb, bias != nullptr,
                                       SixteenBitType(precision))).first;
  }
  const LtPlan& plan = at->second;
  if (!plan.found) return false;
  if (bias != nullptr) {
    auto* bias16 = static_cast<uint16_t*>(gpu::Scratch(gpu::ScratchSlot::kGemmBias, size_t(m) * sizeof(uint16_t)));
    To16Bit(bias16, bias, m, precision);
    SetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias16),
                 "cublasLt BIAS_POINTER");
  }
  void* workspace = gpu::Scratch(gpu::ScratchSlot::kGemmWorkspace, kLtWorkspaceBytes);
  const float alpha = 1, beta = 0;
  gpu::ProfiledRegion profiled(bias != nullptr ? "GEMM 16-bit out, bias epilogue (cublasLt)"
                                               : "GEMM 16-bit out (cublasLt)");
  CheckBlas(cublasLtMatmul(LtHandle(), plan.desc, &alpha, A, plan.a, B, plan.b, &beta, C, plan.c, C, plan.c,
                           &plan.algo, workspace, kLtWorkspaceBytes, gpu::ComputeStream()),
            "cublasLtMatmul");
  return true;
}
#endif

}  // namespace

void Gemm(Op op_a, Op op_b, int m, int n, int k, real alpha, const real* A, int lda, const real* B, int ldb,
          real beta, real* C, int ldc, const GemmBatch& batch, int precision) {
  if (m == 0 || n == 0 || batch.count == 0) return;
  if (precision == 0 || k == 0) {
    VendorGemm(op_a, op_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, batch, HIP_R_32F);
    return;
  }
  const void* a = As16Bit(A, OperandSpan(op_a, m, k, lda, batch.count, batch.stride_a),
                          precision, gpu::ScratchSlot::kGemmA);
  const void* b = As16Bit(B, OperandSpan(op_b, k, n, ldb, batch.count, batch.stride_b),
                          precision, gpu::ScratchSlot::kGemmB);
  VendorGemm(op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, C, ldc, batch, SixteenBitType(precision));
}

void Gemm16(Op op_a, Op op_b, int m, int n, int k, real alpha, const uint16_t* A, int lda, const uint16_t* B,
            int ldb, real beta, real* C, int ldc, const GemmBatch& batch, int precision) {
  if (m == 0 || n == 0 || batch.count == 0) return;
  VendorGemm(op_a, op_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, batch, SixteenBitType(precision));
}

void Gemm16(Op op_a, Op op_b, int m, int n, int k, real alpha, const uint16_t* A, int lda, const uint16_t* B,
            int ldb, real beta, uint16_t* C, int ldc, const GemmBatch& batch, int precision) {
  if (m == 0 || n == 0 || batch.count == 0) return;
  VendorGemm(op_a, op_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, batch, SixteenBitType(precision),
             SixteenBitType(precision));
}

void Gemm16Bias(Op op_a, Op op_b, int m, int n, int k, const uint16_t* A, int lda, const uint16_t* B, int ldb,
                const real* bias, uint16_t* C, int precision) {
  if (m == 0 || n == 0) return;
#if TUNEPAR_BLASLT
  if (k > 0 && LtGemm16Bias(op_a, op_b, m, n, k, A, lda, B, ldb, bias, C, precision)) return;
#endif
  // The fp32 sums in scratch, then the bias added and each value rounded once.
  auto* sums = static_cast<real*>(gpu::Scratch(gpu::ScratchSlot::kGemmSums, size_t(m) * n * sizeof(real)));
  VendorGemm(op_a, op_b, m, n, k, real(1), A, lda, B, ldb, real(0), sums, m, {}, SixteenBitType(precision));
  AddBiasTo16Bit(C, sums, bias, n, m, precision);
}

}  // namespace tunepar::core
