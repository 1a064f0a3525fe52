// A model's weights as named host tensors (safetensors.h), and back: what model.safetensors
// holds, what model.init_from and `dtrain eval` load. The names are WeightSlot's ("fc1.weight",
// "bn1.running_var"); the flat buffers stay the only place the weights live (decision 1).
#pragma once
#include <string>
#include <vector>

#include "backend/backend.h"  // Backend: copies to and from the device
#include "core/tensor.h"      // Tensor
#include "nn/model.h"         // Model, WeightSlot
#include "nn/safetensors.h"   // NamedTensors

namespace dtrain {

// Copies each slot's tensor out of the flat `parameters` and `buffers` (on `backend`'s device
// or the host) into host memory, in the order of `slots`.
NamedTensors download_weights(const std::vector<WeightSlot>& slots, const Tensor& parameters,
                              const Tensor& buffers, Backend& backend);
// Copies each slot's tensor of `tensors` (found by name) into the flat buffers. Tensors no
// slot names are skipped: a pipeline stage takes its part of the whole model's. InputError
// naming `origin` and the tensor when a slot's tensor is missing or has another shape.
void upload_weights(const std::vector<WeightSlot>& slots, const NamedTensors& tensors,
                    const Tensor& parameters, const Tensor& buffers, Backend& backend,
                    const std::string& origin);
// InputError naming `origin` and the first tensor at fault, in the model's order: a weight of
// the model that `tensors` lacks (with the first name `tensors` has that the model does not,
// usually the same tensor misnamed), one with another shape, then a name the model lacks.
void check_weights(const std::vector<WeightSlot>& slots, const NamedTensors& tensors,
                   const std::string& origin);

// The model's weights (its current parameters() and buffers()).
NamedTensors model_weights(Model& model);
// check_weights, then the model computes with `tensors` from now on.
void load_model_weights(Model& model, const NamedTensors& tensors, const std::string& origin);

}  // namespace dtrain
