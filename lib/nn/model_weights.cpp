#include "nn/model_weights.h"

#include <algorithm>  // copy
#include <unordered_map>

#include "core/error.h"

namespace dtrain {

namespace {

// The f32 host copy of a flat buffer.
std::vector<float> to_host(const Tensor& flat, Backend& backend) {
  std::vector<float> host(static_cast<size_t>(flat.numel()));
  if (!host.empty()) {
    backend.copy(Tensor::borrow(host.data(), Shape{flat.numel()}), flat);
    backend.synchronize();
  }
  return host;
}

void to_device(const Tensor& flat, std::vector<float>& host, Backend& backend) {
  if (host.empty()) return;
  backend.copy(flat, Tensor::borrow(host.data(), Shape{flat.numel()}));
  backend.synchronize();
}

std::unordered_map<std::string, const NamedTensor*> by_name(const NamedTensors& tensors) {
  std::unordered_map<std::string, const NamedTensor*> index;
  for (const NamedTensor& t : tensors) index.emplace(t.name, &t);
  return index;
}

}  // namespace

NamedTensors download_weights(const std::vector<WeightSlot>& slots, const Tensor& parameters,
                              const Tensor& buffers, Backend& backend) {
  // Host buffers are read where they are; device ones through one host copy each.
  std::vector<float> params_copy, stats_copy;
  auto host_view = [&](const Tensor& flat, std::vector<float>& copy) -> const float* {
    if (flat.numel() == 0) return nullptr;
    if (flat.device() == Device::cpu) return flat.data<float>();
    copy = to_host(flat, backend);
    return copy.data();
  };
  const float* params = host_view(parameters, params_copy);
  const float* stats = host_view(buffers, stats_copy);
  NamedTensors tensors;
  tensors.reserve(slots.size());
  for (const WeightSlot& s : slots) {
    const int64_t size = s.buffer ? buffers.numel() : parameters.numel();
    DTRAIN_CHECK(s.offset + s.shape.numel() <= size)
        << "weight '" << s.name << "' lies beyond its flat buffer";
    const float* first = (s.buffer ? stats : params) + s.offset;
    tensors.push_back({s.name, s.shape, std::vector<float>(first, first + s.shape.numel())});
  }
  return tensors;
}

void upload_weights(const std::vector<WeightSlot>& slots, const NamedTensors& tensors,
                    const Tensor& parameters, const Tensor& buffers, Backend& backend,
                    const std::string& origin) {
  // From the current values: whatever no slot covers keeps them.
  std::vector<float> params = to_host(parameters, backend);
  std::vector<float> stats = to_host(buffers, backend);
  const auto index = by_name(tensors);
  for (const WeightSlot& s : slots) {
    const auto found = index.find(s.name);
    DTRAIN_INPUT_CHECK(found != index.end())
        << origin << ": has no tensor '" << s.name << "' (shape " << s.shape.str() << ")";
    const NamedTensor& t = *found->second;
    DTRAIN_INPUT_CHECK(t.shape == s.shape) << origin << ": tensor '" << s.name << "' has shape "
                                           << t.shape.str() << ", the model's is " << s.shape.str();
    std::vector<float>& flat = s.buffer ? stats : params;
    std::copy(t.values.begin(), t.values.end(), flat.begin() + s.offset);
  }
  to_device(parameters, params, backend);
  to_device(buffers, stats, backend);
}

void check_weights(const std::vector<WeightSlot>& slots, const NamedTensors& tensors,
                   const std::string& origin) {
  const auto index = by_name(tensors);
  std::unordered_map<std::string, const WeightSlot*> wanted;
  for (const WeightSlot& s : slots) wanted.emplace(s.name, &s);
  // A tied weight's other name (PyTorch's state_dict holds both) is accepted when its tensor
  // equals the one under the slot's own name, which is what the model loads.
  for (const WeightSlot& s : slots)
    for (const std::string& alias : s.aliases) {
      const auto copy = index.find(alias);
      const auto own = index.find(s.name);
      if (copy == index.end() || own == index.end()) continue;
      DTRAIN_INPUT_CHECK(copy->second->shape == own->second->shape &&
                         copy->second->values == own->second->values)
          << origin << ": tensor '" << alias << "' is tied to '" << s.name
          << "' in the model but differs from it in the file";
      wanted.emplace(alias, &s);
    }
  std::string unknown;  // the first name of the file the model does not have
  for (const NamedTensor& t : tensors)
    if (unknown.empty() && !wanted.count(t.name)) unknown = t.name;
  for (const WeightSlot& s : slots) {
    const auto found = index.find(s.name);
    DTRAIN_INPUT_CHECK(found != index.end())
        << origin << ": has no tensor '" << s.name << "' (shape " << s.shape.str() << ")"
        << (unknown.empty() ? std::string()
                            : "; it has '" + unknown + "', which the model does not have");
    DTRAIN_INPUT_CHECK(found->second->shape == s.shape)
        << origin << ": tensor '" << s.name << "' has shape " << found->second->shape.str()
        << ", the model's is " << s.shape.str();
  }
  DTRAIN_INPUT_CHECK(unknown.empty())
      << origin << ": tensor '" << unknown << "' is not a weight of the model";
}

NamedTensors model_weights(Model& model) {
  return download_weights(model.weight_slots(), model.parameters(), model.buffers(),
                          model.backend());
}

void load_model_weights(Model& model, const NamedTensors& tensors, const std::string& origin) {
  const std::vector<WeightSlot> slots = model.weight_slots();
  check_weights(slots, tensors, origin);
  upload_weights(slots, tensors, model.parameters(), model.buffers(), model.backend(), origin);
}

}  // namespace dtrain
