// StageModel: one pipeline stage on one rank (PipeDream): the stage's slice of the
// layer graph (split_model) built once per minibatch the stage may hold in flight — the graphs
// share parameters, gradients and BatchNorm statistics and differ in activations and per-batch
// layer state — and, on the output stage, the softmax cross-entropy loss. The interpreter of a
// pipeline schedule drives it: forward of a slot from the images or the previous stage's
// activation, backward of a slot from the loss or the next stage's gradient, returning the
// gradient for the previous stage.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"  // Backend
#include "core/tensor.h"
#include "nn/graph.h"        // Graph
#include "nn/model.h"        // StageSlice, ModelInput, LossStats
#include "nn/safetensors.h"  // NamedTensors

namespace dtrain {

class SoftmaxCrossEntropy;

class StageModel {
 public:
  // `input`: the dataset's classes and the build batch (the minibatch, or microbatch, size).
  // `slots` >= 1 graphs; parameters initialised from `seed` exactly as the same layers of the
  // whole model. `first`: reads images (no input gradient); `last`: computes the loss.
  StageModel(Backend& backend, const StageSlice& stage, const ModelInput& input, uint64_t seed,
             int slots, bool first, bool last);
  ~StageModel();

  int slots() const { return static_cast<int>(graphs_.size()); }
  Backend& backend() { return backend_; }
  bool first() const { return first_; }
  bool last() const { return last_; }
  int64_t num_parameters() const;
  // The latest weights (what set_parameters gave, or the first graph's own), the gradients and
  // the statistics: flat buffers shared by the slots.
  const Tensor& parameters() const;
  const Tensor& gradients() const;
  const Tensor& buffers() const;
  const Shape& input_shape() const;   // [batch, ...] at the build batch
  const Shape& output_shape() const;  // at the build batch
  // What crosses the link (StageSlice::input_dtype, output_dtype): bf16 between stages of a bf16
  // model where the model has the crossing tensor in bf16, else f32.
  DType input_dtype() const;
  DType output_dtype() const;
  // The slot's output of its last forward, and d(loss)/d(input) of its last backward: they
  // stay until the slot's next forward, respectively backward.
  const Tensor& output(int slot);
  // Makes every slot compute with `flat`, now the latest weights; or one slot with a stashed
  // version (parameters() stays).
  void set_parameters(const Tensor& flat);
  void set_slot_parameters(int slot, const Tensor& flat);
  void set_gradients(const Tensor& flat);
  void set_training(bool training);
  // A weight tie the stages separate (StageSlice::ties): this stage's copy of the shared weight,
  // a range of parameters() and gradients(), and the stage holding the other copy.
  struct TiedCopy {
    int64_t offset = 0, count = 0;
    int peer_stage = 0;
    bool lender = true;  // the embedding's own weight, else the borrower's copy of it
  };
  const std::vector<TiedCopy>& tied_copies() const { return tied_; }
  // The stage's weights by name (the latest ones and the statistics), on the host; a borrower's
  // copy of a tied weight is left out (the lender's stage holds it under its name).
  NamedTensors weights();
  // Where each of the stage's tensors lies in its flat buffers (AdamW's decay per tensor).
  std::vector<WeightSlot> weight_slots() const;
  // Takes the stage's tensors of `tensors` (a whole model's: the others are skipped) as its
  // latest weights and statistics; InputError naming `origin` for a missing one or a shape.
  void load_weights(const NamedTensors& tensors, const std::string& origin);

  // Forward of minibatch `step` (its dropout masks) in `slot` on `input`; the output stage also
  // computes the loss against `labels`. Returns the output (the logits on the output stage).
  const Tensor& forward(int slot, uint64_t step, const Tensor& input, const Tensor& labels = {});
  // Backward of `slot`: from the loss scaled by `grad_scale` on the output stage, else from
  // `output_gradient` (the next stage's). Overwrites the parameter gradients; returns
  // d(loss)/d(input) for the previous stage (undefined on the first stage).
  Tensor backward(int slot, const Tensor& output_gradient, float grad_scale = 1.0f);
  LossStats last_stats(int slot);  // the output stage's loss of the slot's last forward

 private:
  Backend& backend_;
  bool first_, last_;
  std::vector<std::unique_ptr<Graph>> graphs_;
  std::vector<std::unique_ptr<SoftmaxCrossEntropy>> losses_;  // output stage, one per slot
  std::vector<Tensor> outputs_;                               // per slot, of its last forward
  Tensor master_;                                             // the latest weights
  std::vector<TiedCopy> tied_;
  void find_tied_copies(const StageSlice& stage);
  // The weights by name as a whole model's file holds them: a borrower's copy goes by its
  // lender's name (listed after the others when `with_copies`, else left out).
  std::vector<WeightSlot> named_slots(bool with_copies) const;
  std::vector<std::string> copy_names_;    // the borrowers' own names of their copies
  std::vector<std::string> lender_names_;  // by copy: the lender's name of the weight
};

}  // namespace dtrain
