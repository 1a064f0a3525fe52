// CudaContext: what every CUDA op of one backend shares — the device, the compute stream, the
// cuBLAS and cuDNN handles bound to that stream, the precision policy and one workspace.
// Ops enqueue on `stream` only; nothing in an iteration waits on the host.
#pragma once
#include <cublas_v2.h>         // cublasHandle_t
#include <cuda_runtime_api.h>  // cudaStream_t
#include <cudnn.h>             // cudnnHandle_t

#include <cstddef>  // size_t
#include <string>

#include "core/tensor.h"  // Allocator, Tensor

namespace dtrain::cuda {

class CudaContext {
 public:
  CudaContext(int device, bool allow_tf32);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  const std::string& device_name() const { return device_name_; }
  // The GPU's compute capability as major·10 + minor (80: Ampere, 90: Hopper).
  int compute_capability() const { return compute_capability_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  // fp32 GEMMs and convolutions may use TF32 tensor cores (cluster.tf32): off by default so
  // that results match the CPU reference and PyTorch's fp32 defaults for matmul.
  bool allow_tf32() const { return allow_tf32_; }
  // DEFAULT lets cuDNN use TF32 tensor cores for fp32 (never a down-conversion to fp16, which
  // ..._ALLOW_CONVERSION would permit); FMA forbids tensor cores.
  cudnnMathType_t conv_math() const { return allow_tf32_ ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH; }
  Allocator& allocator() const;

  // The one scratch buffer of cuDNN calls: ops run one after another on the stream, so they
  // can share it. Ops reserve their need when they are built; the buffer grows then (between
  // iterations, after the stream drained) and never inside an iteration.
  void reserve_workspace(size_t bytes);
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  // A device vector of `n` ones (bias gradients as a GEMV), grown like the workspace.
  const float* ones(int64_t n);

 private:
  int device_ = 0;
  std::string device_name_;
  int compute_capability_ = 0;
  bool allow_tf32_ = false;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  Tensor ones_;
};

// Makes `device` current on the calling thread (the runtime's current device is per thread:
// the comm thread and the loader call this before touching the device).
void set_device(int device);

}  // namespace dtrain::cuda
