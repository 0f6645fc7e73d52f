// Gemm (ops.h) on the GPU through the vendor BLAS (cuBLAS under nvcc, hipBLAS under hipcc; the
// names are HIP's, gpu_vendor.h): GemmEx / GemmStridedBatchedEx with fp32 accumulation. fp32
// inputs multiply in fp32 (CUBLAS_COMPUTE_32F: no TF32, as PyTorch's default for fp32). Inputs on
// a 16-bit grid are converted to 16-bit copies (exact: they are 16-bit values) and multiply on
// tensor/matrix cores, as a framework's bf16/fp16 GEMMs do; Gemm16's operands are 16-bit numbers
// already (16-bit storage) and go to the BLAS as they are.
#include <fmt/format.h>

#include <cstdint>

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

}  // namespace tunepar::core
