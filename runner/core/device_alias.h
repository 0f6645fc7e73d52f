// One spelling for host/device functions and the runtime API across the CPU build (plain C++),
// hipcc (AMD) and nvcc (NVIDIA), so the kernels in kernels.h and the GPU build's *_gpu.cc files
// are written once (the ggml way): the GPU code uses HIP's names, mapped to CUDA's under nvcc.
#pragma once

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define TP_HOST_DEVICE __host__ __device__
#define TP_GPU 1
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#define TP_HOST_DEVICE __host__ __device__
#define TP_GPU 1
#define hipError_t cudaError_t
#define hipSuccess cudaSuccess
#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceGetPCIBusId cudaDeviceGetPCIBusId
#define hipDeviceProp_t cudaDeviceProp
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemset cudaMemset
#define hipMemcpy cudaMemcpy
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipGetErrorString cudaGetErrorString
#define hipRuntimeGetVersion cudaRuntimeGetVersion
#define hipStream_t cudaStream_t
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipStreamCreateWithPriority cudaStreamCreateWithPriority
#define hipDeviceGetStreamPriorityRange cudaDeviceGetStreamPriorityRange
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamQuery cudaStreamQuery
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipEvent_t cudaEvent_t
#define hipEventCreate cudaEventCreate
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDisableTiming cudaEventDisableTiming
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventDestroy cudaEventDestroy
#define hipEventQuery cudaEventQuery
#define hipErrorNotReady cudaErrorNotReady
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpyAsync cudaMemcpyAsync
#define hipGetLastError cudaGetLastError
#define hipHostMalloc(p, bytes, flags) cudaHostAlloc(p, bytes, flags)
#define hipHostMallocDefault cudaHostAllocDefault
#define hipHostFree cudaFreeHost
#define hipMemGetInfo cudaMemGetInfo
#else
#define TP_HOST_DEVICE
#define TP_GPU 0
#endif
