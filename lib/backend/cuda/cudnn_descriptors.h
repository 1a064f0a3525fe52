// Owning handles of cuDNN descriptors and the NCHW tensor descriptor every cuDNN op needs.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <limits>
#include <memory>  // unique_ptr: descriptors destroyed with the op that made them

#include "backend/cuda/cuda_check.h"  // DTRAIN_CUDNN_CHECK

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

// A dense NCHW f32 tensor descriptor.
inline TensorDesc nchw_desc(int64_t n, int64_t c, int64_t h, int64_t w, const char* op) {
  TensorDesc d = new_tensor_desc();
  DTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                dnn_int(n, op), dnn_int(c, op), dnn_int(h, op),
                                                dnn_int(w, op)));
  return d;
}

}  // namespace dtrain::cuda
