// Owning handles of cuDNN descriptors and the NCHW tensor descriptor every cuDNN op needs.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <limits>
#include <memory>  // unique_ptr: descriptors destroyed with the op that made them

#include "backend/cuda/cuda_check.h"  // DTRAIN_CUDNN_CHECK
#include "core/dtype.h"               // DType, dtype_name

namespace dtrain::cuda {

template <typename T, cudnnStatus_t (*Destroy)(T*)>
struct CudnnDeleter {
  void operator()(T* desc) const { Destroy(desc); }
};
using TensorDesc = std::unique_ptr<cudnnTensorStruct,
                                   CudnnDeleter<cudnnTensorStruct, cudnnDestroyTensorDescriptor>>;
using FilterDesc = std::unique_ptr<cudnnFilterStruct,
                                   CudnnDeleter<cudnnFilterStruct, cudnnDestroyFilterDescriptor>>;
using ConvDesc =
    std::unique_ptr<cudnnConvolutionStruct,
                    CudnnDeleter<cudnnConvolutionStruct, cudnnDestroyConvolutionDescriptor>>;
using PoolDesc = std::unique_ptr<cudnnPoolingStruct,
                                 CudnnDeleter<cudnnPoolingStruct, cudnnDestroyPoolingDescriptor>>;
using LrnDesc =
    std::unique_ptr<cudnnLRNStruct, CudnnDeleter<cudnnLRNStruct, cudnnDestroyLRNDescriptor>>;

// A size as cuDNN's int; `op` names the caller in the error.
inline int dnn_int(int64_t v, const char* op) {
  DTRAIN_CHECK(v >= 0 && v <= std::numeric_limits<int>::max())
      << op << ": size " << v << " does not fit cuDNN's int sizes";
  return static_cast<int>(v);
}

// An unset tensor descriptor (to be derived, e.g. batch-norm statistics).
inline TensorDesc new_tensor_desc() {
  cudnnTensorDescriptor_t d = nullptr;
  DTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  return TensorDesc(d);
}

// A dense NCHW tensor descriptor, f32 unless `type` says otherwise.
inline TensorDesc nchw_desc(int64_t n, int64_t c, int64_t h, int64_t w, const char* op,
                            cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  TensorDesc d = new_tensor_desc();
  DTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NCHW, type, dnn_int(n, op),
                                                dnn_int(c, op), dnn_int(h, op), dnn_int(w, op)));
  return d;
}

// cuDNN's element type for an activation dtype (f32 or bf16).
inline cudnnDataType_t cudnn_type(DType t, const char* op) {
  DTRAIN_CHECK(t == DType::f32 || t == DType::bf16)
      << op << ": cuDNN ops take f32 or bf16, not " << dtype_name(t);
  return t == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

// A dense OIHW (PyTorch's [out, in, kh, kw]) filter descriptor of element type `type`.
inline FilterDesc oihw_filter_desc(int64_t o, int64_t i, int64_t kh, int64_t kw, const char* op,
                                   cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  cudnnFilterDescriptor_t raw = nullptr;
  DTRAIN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&raw));
  FilterDesc d(raw);
  DTRAIN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(raw, type, CUDNN_TENSOR_NCHW, dnn_int(o, op),
                                                dnn_int(i, op), dnn_int(kh, op), dnn_int(kw, op)));
  return d;
}

}  // namespace dtrain::cuda
