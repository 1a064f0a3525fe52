// The defaults of the fused flat-buffer ops (the same arithmetic composed of simpler ops, a pass
// each, for backends without kernels of their own), and the checks every fused pass makes of its
// buffers.
#include <string>

#include "backend/backend.h"
#include "core/error.h"  // DTRAIN_CHECK

namespace dtrain {

double Backend::axpby_dot(float alpha, const Tensor& x, float beta, const Tensor& y,
                          const Tensor& z) {
  axpby(alpha, x, beta, y);
  return dot(y, z);
}

void Backend::scale_copy(const Tensor& dst, const Tensor& src, float alpha) {
  copy(dst, src);
  scale(dst, alpha);
}

PassBuffers pass_buffers(const std::string& pass, int count, Device device,
                         const std::vector<Tensor>& tensors) {
  DTRAIN_CHECK(static_cast<int>(tensors.size()) == count && count <= kMaxPassBuffers)
      << pass << ": " << tensors.size() << " buffers for a pass of " << count;
  PassBuffers b;
  b.n = tensors.front().numel();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) continue;
    DTRAIN_CHECK(t.dtype() == DType::f32 && t.device() == device)
        << pass << ": buffer " << i << " is not f32 on the backend's device";
    DTRAIN_CHECK(t.numel() == b.n)
        << pass << ": buffer " << i << " has " << t.numel() << " elements, buffer 0 has " << b.n;
    b.data[i] = t.data<float>();
  }
  return b;
}

}  // namespace dtrain
