#include "sched/pipeline/stage_model.h"

#include <algorithm>  // ranges::any_of, ranges::find

#include "core/error.h"
#include "nn/layers/softmax_xent.h"  // SoftmaxCrossEntropy
#include "nn/model_weights.h"        // download_weights, upload_weights
#include "nn/spec.h"                 // make_nodes

namespace dtrain {

StageModel::StageModel(Backend& backend, const StageSlice& stage, const ModelInput& input,
                       uint64_t seed, int slots, bool first, bool last)
    : backend_(backend), first_(first), last_(last) {
  DTRAIN_CHECK(slots >= 1) << "a stage needs a slot";
  std::vector<int64_t> dims{input.batch};
  for (int64_t d : stage.sample_shape.dims()) dims.push_back(d);
  for (int s = 0; s < slots; ++s) {
    auto graph = std::make_unique<Graph>(make_nodes(stage.layers, input.classes), Shape(dims));
    graph->use_precision(input.precision, stage.input_dtype, /*f32_output=*/last);
    if (s == 0)
      graph->materialize(backend, seed, /*input_gradient=*/!first, stage.first_param_stream);
    else  // the first slot's weights, gradients and statistics; its own activations
      graph->materialize_sharing(*graphs_[0], /*input_gradient=*/!first);
    if (last) {
      const int64_t positions = loss_positions(graph->output_shape(), graph->output_name(), input);
      losses_.push_back(
          std::make_unique<SoftmaxCrossEntropy>(backend, input.batch, input.classes, positions));
    }
    graphs_.push_back(std::move(graph));
  }
  outputs_.resize(graphs_.size());
  master_ = graphs_[0]->parameters();
  find_tied_copies(stage);
}

void StageModel::find_tied_copies(const StageSlice& stage) {
  // The tied weight is the lender's first parameter (an embedding's table, Graph::resolve_ties)
  // and the borrower's own weight once untied: each "<layer>.weight" in the stage's slots.
  const std::vector<WeightSlot> slots = graphs_[0]->weight_slots();
  auto slot_of = [&](const std::string& layer) -> const WeightSlot& {
    for (const WeightSlot& w : slots)
      if (w.name == layer + ".weight" && !w.buffer) return w;
    throw Error("pipeline: no weight '" + layer + ".weight' on the stage of its tie");
  };
  for (const StageTie& tie : stage.ties) {
    const bool lender = std::ranges::any_of(
        graphs_[0]->layer_ranges(), [&](const LayerRange& r) { return r.name == tie.lender; });
    const WeightSlot& w = slot_of(lender ? tie.lender : tie.borrower);
    tied_.push_back(
        {w.offset, w.shape.numel(), lender ? tie.borrower_stage : tie.lender_stage, lender});
    if (!lender) {
      copy_names_.push_back(w.name);
      lender_names_.push_back(tie.lender + ".weight");
    }
  }
}

std::vector<WeightSlot> StageModel::named_slots(bool with_copies) const {
  std::vector<WeightSlot> slots = graphs_[0]->weight_slots();
  std::vector<WeightSlot> copies;
  std::erase_if(slots, [&](WeightSlot& w) {
    const auto it = std::ranges::find(copy_names_, w.name);
    if (it == copy_names_.end()) return false;
    w.aliases = {w.name};
    w.name = lender_names_[static_cast<size_t>(it - copy_names_.begin())];
    copies.push_back(w);
    return true;
  });
  if (with_copies) slots.insert(slots.end(), copies.begin(), copies.end());
  return slots;
}

StageModel::~StageModel() = default;

int64_t StageModel::num_parameters() const {
  return graphs_[0]->num_parameters();
}
const Tensor& StageModel::parameters() const {
  return master_;
}
const Tensor& StageModel::gradients() const {
  return graphs_[0]->gradients();
}
const Tensor& StageModel::buffers() const {
  return graphs_[0]->buffers();
}
const Shape& StageModel::output_shape() const {
  return graphs_[0]->output_shape();
}
DType StageModel::input_dtype() const {
  return graphs_.front()->input_dtype();
}
DType StageModel::output_dtype() const {
  return graphs_.front()->output_dtype();
}

const Shape& StageModel::input_shape() const {
  return graphs_[0]->input_shape();
}
const Tensor& StageModel::output(int slot) {
  return outputs_.at(static_cast<size_t>(slot));
}

void StageModel::set_parameters(const Tensor& flat) {
  master_ = flat;
  for (auto& g : graphs_) g->set_parameters(flat);
}
void StageModel::set_slot_parameters(int slot, const Tensor& flat) {
  graphs_.at(static_cast<size_t>(slot))->set_parameters(flat);
}
void StageModel::set_gradients(const Tensor& flat) {
  for (auto& g : graphs_) g->set_gradients(flat);
}
void StageModel::set_training(bool training) {
  for (auto& g : graphs_) g->set_training(training);
}

NamedTensors StageModel::weights() {
  return download_weights(named_slots(false), parameters(), buffers(), backend_);
}

std::vector<WeightSlot> StageModel::weight_slots() const {
  return graphs_[0]->weight_slots();
}

void StageModel::load_weights(const NamedTensors& tensors, const std::string& origin) {
  upload_weights(named_slots(true), tensors, parameters(), buffers(), backend_, origin);
}

const Tensor& StageModel::forward(int slot, uint64_t step, const Tensor& input,
                                  const Tensor& labels) {
  Graph& g = *graphs_.at(static_cast<size_t>(slot));
  g.set_step(step);
  const Tensor& out = g.forward(input);
  if (last_) losses_[static_cast<size_t>(slot)]->forward(out, labels);
  outputs_[static_cast<size_t>(slot)] = out;
  return out;
}

Tensor StageModel::backward(int slot, const Tensor& output_gradient, float grad_scale) {
  Graph& g = *graphs_.at(static_cast<size_t>(slot));
  if (last_)
    losses_[static_cast<size_t>(slot)]->backward(g.output_gradient(), grad_scale);
  else
    backend_.copy(g.output_gradient(), output_gradient);
  g.backward();
  return first_ ? Tensor() : g.input_gradient();
}

LossStats StageModel::last_stats(int slot) {
  DTRAIN_CHECK(last_) << "loss statistics on a stage without the loss";
  auto& loss = *losses_.at(static_cast<size_t>(slot));
  auto [sum, correct] = loss.stats();
  return {sum, correct, loss.last_batch()};
}

}  // namespace dtrain
