#include "backend/cuda/cuda_context.h"

#include "backend/cuda/cuda_allocator.h"  // device_allocator
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"  // fill_f32

namespace dtrain::cuda {

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED (out of GPU memory)";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "unknown cuBLAS status";
  }
}

void set_device(int device) {
  int current = -1;
  DTRAIN_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) {
    DTRAIN_CUDA_CHECK(cudaSetDevice(device));
  }
}

CudaContext::CudaContext(int device, bool allow_tf32) : device_(device), allow_tf32_(allow_tf32) {
  set_device(device);
  cudaDeviceProp prop{};
  DTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  device_name_ = prop.name;
  compute_capability_ = prop.major * 10 + prop.minor;
  DTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  DTRAIN_CUBLAS_CHECK(cublasCreate(&cublas_));
  DTRAIN_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  DTRAIN_CUBLAS_CHECK(
      cublasSetMathMode(cublas_, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  // cuBLAS takes scalars (alpha, beta) from the host.
  DTRAIN_CUBLAS_CHECK(cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_HOST));
  DTRAIN_CUDNN_CHECK(cudnnCreate(&cudnn_));
  DTRAIN_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
}

CudaContext::~CudaContext() {
  cudaStreamSynchronize(stream_);
  if (workspace_) cudaFree(workspace_);
  ones_ = Tensor();
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

Allocator& CudaContext::allocator() const {
  return device_allocator(device_);
}

void CudaContext::reserve_workspace(size_t bytes) {
  if (bytes <= workspace_bytes_) return;
  // The old buffer may still be read by enqueued work (a plan built lazily for a smaller last
  // batch): drain the stream before freeing it.
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (workspace_) {
    DTRAIN_CUDA_CHECK(cudaFree(workspace_));
  }
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  workspace_ = allocator().allocate(bytes);
  workspace_bytes_ = bytes;
}

const float* CudaContext::ones(int64_t n) {
  if (ones_.numel() < n) {
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ones_ = Tensor::empty({n}, DType::f32, allocator());
    fill_f32(ones_.data<float>(), n, 1.0f, stream_);
  }
  return ones_.data<float>();
}

}  // namespace dtrain::cuda
