#include "optim/optimizer.h"

#include <algorithm>  // max, min

#include "core/error.h"

namespace dtrain {

Optimizer::Optimizer(Backend& backend, Tensor parameters, Tensor gradients,
                     int64_t trainable_offset)
    : backend_(backend),
      parameters_(std::move(parameters)),
      gradients_(std::move(gradients)),
      trainable_offset_(trainable_offset) {
  DTRAIN_CHECK(parameters_.numel() == gradients_.numel())
      << "parameters and gradients differ in size";
  DTRAIN_CHECK(trainable_offset_ >= 0 && trainable_offset_ <= parameters_.numel())
      << "trainable offset " << trainable_offset_ << " outside the buffer";
}

void Optimizer::load_counter(const std::string& name, int64_t) {
  DTRAIN_CHECK(false) << name << ": the " << this->name() << " optimizer keeps no such counter";
}

int64_t Optimizer::owned_elements() const {
  if (pieces_.empty()) return parameters_.numel() - trainable_offset_;
  return pieces_.back().compact + pieces_.back().count;
}

std::pair<int64_t, int64_t> Optimizer::clipped_range(const Tensor& parameters,
                                                     const Tensor& gradients, int64_t offset,
                                                     int64_t count, const char* what) const {
  auto fits = [&](const Tensor& t) {
    return t.numel() == parameters_.numel() || (!pieces_.empty() && t.numel() == owned_elements());
  };
  DTRAIN_CHECK(fits(parameters) && fits(gradients)) << what << " with buffers of another size";
  return {std::max(offset, trainable_offset_), std::min(offset + count, parameters_.numel())};
}

}  // namespace dtrain
