#include "sched/scheduler_state.h"

#include "core/error.h"

namespace dtrain {

void SchedulerState::put(const std::string& name, const Tensor& flat, Backend& backend) {
  DTRAIN_CHECK(flat.dtype() == DType::f32) << "scheduler state '" << name << "' is not f32";
  std::vector<float> host(static_cast<size_t>(flat.numel()));
  if (!host.empty()) {
    backend.copy(Tensor::borrow(host.data(), Shape{flat.numel()}), flat);
    backend.synchronize();
  }
  for (auto& [key, values] : buffers_)
    if (key == name) {
      values = std::move(host);
      return;
    }
  buffers_.emplace_back(name, std::move(host));
}

void SchedulerState::get(const std::string& name, const Tensor& flat, Backend& backend) const {
  for (const auto& [key, values] : buffers_) {
    if (key != name) continue;
    DTRAIN_CHECK(static_cast<int64_t>(values.size()) == flat.numel())
        << "scheduler state '" << name << "' holds " << values.size() << " values, the model "
        << flat.numel();
    if (!values.empty()) {
      backend.copy(flat, Tensor::borrow(const_cast<float*>(values.data()), Shape{flat.numel()}));
      backend.synchronize();
    }
    return;
  }
  DTRAIN_CHECK(false) << "scheduler state has no buffer '" << name << "'";
}

void SchedulerState::set_counter(const std::string& name, int64_t value) {
  for (auto& [key, v] : counters_)
    if (key == name) {
      v = value;
      return;
    }
  counters_.emplace_back(name, value);
}

int64_t SchedulerState::counter(const std::string& name) const {
  for (const auto& [key, v] : counters_)
    if (key == name) return v;
  DTRAIN_CHECK(false) << "scheduler state has no counter '" << name << "'";
  return 0;
}

void SchedulerState::put_values(const std::string& name, std::vector<float> values) {
  for (auto& [key, v] : buffers_)
    if (key == name) {
      v = std::move(values);
      return;
    }
  buffers_.emplace_back(name, std::move(values));
}

void SchedulerState::set_text(const std::string& name, std::string value) {
  for (auto& [key, v] : texts_)
    if (key == name) {
      v = std::move(value);
      return;
    }
  texts_.emplace_back(name, std::move(value));
}

const std::string& SchedulerState::text(const std::string& name) const {
  for (const auto& [key, v] : texts_)
    if (key == name) return v;
  throw Error("scheduler state has no text '" + name + "'");
}

bool SchedulerState::has(const std::string& name) const {
  for (const auto& [key, v] : buffers_)
    if (key == name) return true;
  for (const auto& [key, v] : counters_)
    if (key == name) return true;
  for (const auto& [key, v] : texts_)
    if (key == name) return true;
  return false;
}

}  // namespace dtrain
