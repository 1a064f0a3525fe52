// Model: the network the schedulers train — a layer Graph on a Backend, its flat parameter and
// gradient buffers, and the softmax cross-entropy loss on its last layer (per position for a
// sequence model's [N, T, classes]). Built by name from the zoo (mlp, lenet, cifar_cnn, alexnet,
// vgg16, resnet18, resnet50, resnet20, gpt, gpt2) or from a YAML `layers:` list; both go through
// the same builder (the zoo writes the list).
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node: the `model:` section of an experiment

#include <cstdint>     // int64_t, uint64_t
#include <functional>  // function: gradient-ready callback
#include <memory>      // unique_ptr
#include <string>
#include <vector>

#include "backend/backend.h"  // Backend
#include "core/shape.h"       // Shape
#include "core/tensor.h"      // Tensor
#include "nn/model_input.h"   // ModelInput, LayerRange, WeightSlot

namespace dtrain {

struct LossStats {
  double loss_sum = 0;
  double correct = 0;
  int64_t count = 0;
};

class Graph;
class SoftmaxCrossEntropy;

// How many positions the loss scores per sample for a model whose last layer `name` gives
// `out` (at the build batch): 1 for [batch, classes] logits, T for a sequence model's
// [batch, T, classes] (the mean per-position cross-entropy, layers/softmax_xent.h). InputError
// for any other shape.
int64_t loss_positions(const Shape& out, const std::string& name, const ModelInput& input);

class Model {
 public:
  Model(std::unique_ptr<Graph> graph, const ModelInput& input);
  virtual ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  int64_t num_parameters() const;
  // Flat [P], device memory: the weights the layers compute with. After set_parameters this is
  // that buffer, while the optimizer keeps stepping the one it was built with.
  const Tensor& parameters() const;
  const Tensor& gradients() const;  // flat [P]: where backward writes
  // Makes backward write into `flat` (same size and device as gradients()) from now on; a
  // pipelined scheduler rotates several buffers this way instead of copying gradients.
  void set_gradients(const Tensor& flat);
  // Makes forward and backward use the weights in `flat` (same size and device as
  // parameters()) from now on, without a copy (see Graph::set_parameters).
  void set_parameters(const Tensor& flat);
  // Calls `hook` in every training forward just before layer `name` (Graph::set_forward_hook).
  void set_forward_hook(const std::string& name, std::function<void()> hook);
  const Tensor& buffers() const;  // flat non-trainable state (BN running stats), may be empty
  const std::vector<LayerRange>& layer_ranges() const;  // parameterised layers, forward order
  std::vector<WeightSlot> weight_slots() const;         // every weight by name, forward order
  void set_training(bool training);
  bool training() const;
  // images [b, C, H, W] f32 and labels [b] i32, on the host or on the device; b ≤ build batch.
  // A sequence model reads token ids [b, T] (f32) and labels [b, T] (i32, the next tokens).
  // Device tensors are used in place: keep them unchanged until backward has run.
  void forward(const Tensor& images, const Tensor& labels);
  // Backward of the loss scaled by grad_scale (1/b for the batch mean; schedulers pass other
  // values; a sequence model's loss is already the mean over its positions). Overwrites the
  // gradients of trainable layers. If given, on_ready(offset) is called each time gradients[offset,
  // P) are final (offsets decrease; the last call is trainable_offset()). On asynchronous backends
  // the work is only enqueued at that point.
  void backward(float grad_scale, const std::function<void(int64_t)>& on_ready = {});
  // Of the last forward (and the held ones); copies 2 floats to the host (synchronises).
  LossStats last_stats();
  // Keeps the last forward's loss statistics (on the device, no synchronisation) so that the
  // next last_stats() reports them summed with the forwards after it: the micro-batches of one
  // gradient-accumulation step read as the step's batch.
  void hold_stats();
  void freeze_first(int layers);
  int64_t trainable_offset() const;
  int64_t forward_flops() const;  // per sample
  std::string summary() const;
  Backend& backend();

  // Dropout masks are drawn from (seed, layer, step); data-parallel ranks may want distinct
  // masks (PyTorch draws them from each rank's own generator).
  void set_dropout_seed(uint64_t seed);
  // The logits of the last forward ([b, classes] or [b, T, classes], device memory).
  const Tensor& logits() const;
  Graph& graph() { return *graph_; }

 private:
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<SoftmaxCrossEntropy> loss_;
  const Tensor* logits_ = nullptr;
};

// Validates and fills defaults of a `model:` YAML map (zoo `name` + options, or `layers:`);
// appends one message per problem: "model.hidden[1]: must be > 0 (line 4)" (line from
// YAML::Node::Mark().line+1 when known). Returns the completed copy (the input is not changed).
YAML::Node check_model_spec(const YAML::Node& model, std::vector<std::string>& problems);
// Builds a model from a checked spec for the dataset's input and the build (largest) batch.
// Throws InputError for shape problems (and for an unchecked spec with problems).
std::unique_ptr<Model> build_model(Backend& backend, const YAML::Node& model,
                                   const ModelInput& input, uint64_t seed);
std::vector<std::string> zoo_names();

// A weight tie (a layer's `tie_weight`) that stages separate, as Megatron-LM separates a GPT's
// token embedding (first stage) from its tied output head (last stage): the borrower's stage
// holds a copy of the lender's weight as the borrower's own (its `tie_weight` dropped from the
// stage's list), both copies start equal, and the two stages sum their gradients of it every step.
struct StageTie {
  std::string lender, borrower;  // layer names: the embedding and the layer computing with it
  int lender_stage = 0, borrower_stage = 0;
};

// The description of a pipeline stage: a contiguous slice of the model's layers, built by the
// same builder from its own `layers:` list (the first layer reads "input"). Data only: the
// pipeline's StageModel is the stage built from it.
struct StageSlice {
  YAML::Node layers;
  Shape sample_shape;  // what the stage reads, per sample
  std::string first_layer, last_layer;
  int64_t first_parameter = 0, parameters = 0;  // its range of the whole model's flat buffer
  // The whole model's parameter index of the stage's first parameter tensor: materialize with
  // it, and the stage starts exactly as those layers of the whole model.
  uint64_t first_param_stream = 0;
  // The ties this stage takes part in whose lender and borrower are in different stages (the
  // borrower's copy is not in `parameters`, the whole model's range).
  std::vector<StageTie> ties;
  // Under bf16 (ModelInput::precision) the dtype of the tensor crossing into the stage and of the
  // one leaving it, as the whole model has them: what crosses the link between stages.
  DType input_dtype = DType::f32, output_dtype = DType::f32;
};
// Cuts the model before each layer of `starts` (in order): starts.size() + 1 stages. InputError
// naming `key` for a name that is not a layer, starts out of order or repeated (an empty
// stage), or a cut where more than one tensor crosses (naming them) or a fused ReLU would be
// split from its layer. A cut between a tied weight's lender and borrower gives a StageTie.
std::vector<StageSlice> split_model(const YAML::Node& model, const ModelInput& input,
                                    const std::vector<std::string>& starts,
                                    const std::string& key = "algorithm.stages");
// The layers the model can be cut before, in order.
std::vector<std::string> model_cut_points(const YAML::Node& model, const ModelInput& input);
// The cut points a planner chooses among: those of a zoo model that names its stage boundaries
// (the GPT: between transformer blocks, so that the embeddings go with the first block and
// ln_f and the head with the last), else every cut point.
std::vector<std::string> model_stage_boundaries(const YAML::Node& model, const ModelInput& input);
// Whether the first and last stages of a pipeline cut at every stage boundary share a tied
// weight (a GPT's embedding and head): a planner then keeps their steps paired.
bool chain_ends_tied(const YAML::Node& model, const ModelInput& input);
// The layer that lends that weight (the embedding), "" when the ends share none.
std::string chain_ends_tie_lender(const YAML::Node& model, const ModelInput& input);

// Without allocating anything on a device: the number of parameters, and the summary table.
int64_t count_parameters(const YAML::Node& model, const ModelInput& input);
// The activation arena build_model would plan for `input` (its batch, its precision: bf16's
// casts included), with (`recompute`: model.recompute: blocks) or without recomputation,
// whatever the spec's own model.recompute says: the same planner on shapes alone, without
// allocating anything (Graph::estimate_activation_bytes).
int64_t estimate_activation_bytes(const YAML::Node& model, const ModelInput& input, bool recompute);
// The weights the model has, by name (what a weights file for it must hold).
std::vector<WeightSlot> model_weight_slots(const YAML::Node& model, const ModelInput& input);
// What each parameterised layer reads, in forward order (Graph::forward_weight_ranges): the
// memory table's gathered weights and gradients in flight when sharding them.
std::vector<WeightRanges> model_weight_reads(const YAML::Node& model, const ModelInput& input);
std::string describe_model(const YAML::Node& model, const ModelInput& input);
// The `layers:` list a zoo model expands to (zoo specs only; custom specs are returned as is).
YAML::Node expand_model_spec(const YAML::Node& model, const ModelInput& input);

}  // namespace dtrain
