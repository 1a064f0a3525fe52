// Check macros for the CUDA runtime, cuBLAS, cuDNN: a failed call throws dtrain::Error naming
// the call, its file:line and the library's own error string (docs/architecture.md, decision 7).
#pragma once
#include <cublas_v2.h>         // cublasStatus_t
#include <cuda_runtime_api.h>  // cudaError_t, cudaGetErrorString
#include <cudnn.h>             // cudnnStatus_t, cudnnGetErrorString

#include "core/error.h"  // Error, CheckFailure

namespace dtrain::cuda {
const char* cublas_status_name(cublasStatus_t status);
}  // namespace dtrain::cuda

#define DTRAIN_CUDA_CHECK(call)                                                             \
  if (const cudaError_t dtrain_cuda_status_ = (call); dtrain_cuda_status_ == cudaSuccess) { \
  } else                                                                                    \
    ::dtrain::detail::CheckFailure<::dtrain::Error>(__FILE__, __LINE__, nullptr)            \
        << __FILE__ << ":" << __LINE__ << ": " << #call                                     \
        << " failed: " << cudaGetErrorString(dtrain_cuda_status_)

#define DTRAIN_CUBLAS_CHECK(call)                                                \
  if (const cublasStatus_t dtrain_cublas_status_ = (call);                       \
      dtrain_cublas_status_ == CUBLAS_STATUS_SUCCESS) {                          \
  } else                                                                         \
    ::dtrain::detail::CheckFailure<::dtrain::Error>(__FILE__, __LINE__, nullptr) \
        << __FILE__ << ":" << __LINE__ << ": " << #call                          \
        << " failed: " << ::dtrain::cuda::cublas_status_name(dtrain_cublas_status_)

#define DTRAIN_CUDNN_CHECK(call)                                                 \
  if (const cudnnStatus_t dtrain_cudnn_status_ = (call);                         \
      dtrain_cudnn_status_ == CUDNN_STATUS_SUCCESS) {                            \
  } else                                                                         \
    ::dtrain::detail::CheckFailure<::dtrain::Error>(__FILE__, __LINE__, nullptr) \
        << __FILE__ << ":" << __LINE__ << ": " << #call                          \
        << " failed: " << cudnnGetErrorString(dtrain_cudnn_status_)

// After a kernel launch: reports bad launch configurations at the launch site (asynchronous
// faults surface at the next synchronising call).
#define DTRAIN_CUDA_CHECK_LAUNCH() DTRAIN_CUDA_CHECK(cudaGetLastError())
