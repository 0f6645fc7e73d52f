// The vendor libraries of the GPU build under one set of names, HIP's (as device_alias.h does for
// the runtime): hipBLAS (its v2 API, which mirrors cuBLAS) maps to cuBLAS under nvcc; RCCL has
// NCCL's API and names, so NCCL needs no aliases. Only the code that calls these libraries
// (gemm_gpu.cc, the NCCL collectives) includes this header: the rest of the device code builds
// with the runtime alone (hipcc without ROCm's libraries compiles it as a check).
#pragma once

#include "runner/core/device_alias.h"

#if defined(__HIPCC__)
#ifndef HIPBLAS_V2
#define HIPBLAS_V2
#endif
#include <hipblas/hipblas.h>
#include <rccl/rccl.h>
// hipBLASLt (ROCm's cublasLt) is not wired in: the GEMMs with a bias epilogue sum into fp32
// scratch and round with a kernel (gemm_gpu.cc).
#define TUNEPAR_BLASLT 0
#elif defined(__CUDACC__)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <nccl.h>
#define TUNEPAR_BLASLT 1
#define hipblasHandle_t cublasHandle_t
#define hipblasStatus_t cublasStatus_t
#define HIPBLAS_STATUS_SUCCESS CUBLAS_STATUS_SUCCESS
#define HIPBLAS_STATUS_ALLOC_FAILED CUBLAS_STATUS_ALLOC_FAILED
#define hipblasCreate cublasCreate
#define hipblasDestroy cublasDestroy
#define hipblasSetStream cublasSetStream
#define hipblasSetWorkspace cublasSetWorkspace
#define hipblasOperation_t cublasOperation_t
#define HIPBLAS_OP_N CUBLAS_OP_N
#define HIPBLAS_OP_T CUBLAS_OP_T
#define hipblasGemmEx cublasGemmEx
#define hipblasGemmStridedBatchedEx cublasGemmStridedBatchedEx
#define hipblasComputeType_t cublasComputeType_t
#define HIPBLAS_COMPUTE_32F CUBLAS_COMPUTE_32F
#define HIPBLAS_COMPUTE_32F_PEDANTIC CUBLAS_COMPUTE_32F_PEDANTIC
#define HIPBLAS_GEMM_DEFAULT CUBLAS_GEMM_DEFAULT
#define hipDataType cudaDataType
#define HIP_R_32F CUDA_R_32F
#define HIP_R_16F CUDA_R_16F
#define HIP_R_16BF CUDA_R_16BF
#endif
