// Graph: a DAG of named layers with one input and one output, run in topological order.
// Built in two phases: the constructor resolves names, orders the nodes, infers every shape
// and lays out the parameters (no device memory: parameter counts and summaries of huge
// models are free); materialize() then allocates the flat parameter, gradient and buffer
// tensors (docs/architecture.md, decision 1: one contiguous buffer each, in forward order, layers
// hold views), the activations and gradients for the build batch, the op plans, and initialises the
// parameters. After that forward/backward allocate nothing and create no ops; a smaller batch (the
// last evaluation batch) gets its own plans once, on first use.
#pragma once
#include <cstdint>     // int64_t
#include <functional>  // function: gradient-ready callback
#include <map>         // dtypes_under
#include <memory>      // unique_ptr
#include <string>
#include <utility>  // pair: weight ranges
#include <vector>

#include "backend/backend.h"  // Backend
#include "core/tensor.h"      // Tensor
#include "nn/layer.h"         // Layer
#include "nn/model_input.h"   // LayerRange, WeightSlot

namespace dtrain {

struct GraphNode {
  std::string name;
  std::unique_ptr<Layer> layer;
  // Producer names: earlier nodes, or "input" for the graph input. Empty: the previous node
  // (the graph input for the first node).
  std::vector<std::string> inputs;
  // The block it belongs to (a `layers:` entry's `block`; the zoo's transformer and residual
  // blocks), empty for none: what model.recompute: blocks recomputes as one.
  std::string block;
};

class Graph {
 public:
  // The name by which nodes refer to the graph input.
  static constexpr const char* kInputName = "input";

  // `input_shape`: [batch, ...] at the build batch. The last node is the output; every other
  // node must be read by some node. Throws InputError naming the layers and shapes at fault.
  // `fuse_relus`: fold each ReLU into its producing Linear/Conv2d when nothing else reads that
  // producer (same results up to rounding; the summary marks them "relu (fused)").
  Graph(std::vector<GraphNode> nodes, const Shape& input_shape, bool fuse_relus = true);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Allocates everything on `backend` and initialises the parameters from `seed` (generated on
  // the host with the counter RNG, stream = parameter index, so any thread count and any
  // device give the same values). `input_gradient`: also compute d(loss)/d(input) (tests).
  // `first_param_stream`: the parameter index this graph's first parameter has in the whole
  // model (a pipeline stage), so that a stage starts as the same layers of the whole model.
  void materialize(Backend& backend, uint64_t seed, bool input_gradient = false,
                   uint64_t first_param_stream = 0);
  // Channel-blocked activations where the backend prefers them (default); false keeps every
  // activation plain NCHW (tests compare the two). Before materialize.
  void use_blocked_layouts(bool blocked) { blocked_layouts_ = blocked; }
  // Mixed precision (cluster.precision): with bf16, the layers the layer table marks compute in
  // bf16 and store their activations in it, with casts inserted between dtypes
  // (graph_precision.cpp); the parameters and their gradients stay f32. Before materialize.
  // A pipeline stage's graph may take its input in bf16 (`input`: the dtype the tensor crossing
  // into it has in the whole model) and, unless it is the last stage, keep its output's dtype
  // (`f32_output` false): its activations and gradients then cross the link in bf16.
  void use_precision(DType precision, DType input = DType::f32, bool f32_output = true) {
    precision_ = precision;
    input_dtype_ = input;
    f32_output_ = f32_output;
  }
  DType precision() const { return precision_; }
  // The dtype every layer's output has under `precision` (by name; "input" is f32), before
  // materialize: where a pipeline cut is, which dtype crosses it.
  std::map<std::string, DType> dtypes_under(DType precision) const;
  // The dtypes of the input and the output after materialize.
  DType input_dtype() const;
  DType output_dtype() const;
  // The same for a graph of the same layers that computes with `other`'s parameters, gradients
  // and statistics (a pipeline stage's graph per minibatch in flight): its own activations and
  // per-batch state only, nothing initialised twice.
  void materialize_sharing(const Graph& other, bool input_gradient = false);

  // A cut before layer `name` (pipeline stages, docs/architecture.md, decision 8): the tensors made
  // before it and read at or after it. Valid when exactly one crosses and the layer is not a
  // ReLU fused into the layer before it. A tied weight (Layer::weight_tie) used across it does not
  // invalidate it: the later stage holds a copy of the weight (split_model's StageSlice::ties).
  struct Cut {
    std::vector<std::string> crossing;  // producer names ("input" for the graph input)
    std::string fused_into;             // the producer a fused ReLU belongs to, or empty
    Shape shape;                        // of the crossing tensor, at the build batch (valid cuts)
    int64_t parameters_before = 0;      // elements of the flat buffer before the cut
    uint64_t param_streams_before = 0;  // parameter tensors before the cut (initialisation)
    bool valid() const { return crossing.size() == 1 && fused_into.empty(); }
  };
  // InputError when no layer has that name.
  Cut cut_before(const std::string& name) const;
  // The layers (in order) before which the graph can be cut: every valid cut but the first.
  std::vector<std::string> cut_points() const;

  // ---- structure (available right after construction) ----
  int64_t num_parameters() const { return num_params_; }
  int64_t num_buffer_elements() const { return num_buffers_; }
  const std::vector<LayerRange>& layer_ranges() const { return ranges_; }
  // Every parameter and buffer by name, in forward order (each layer's parameters, then its
  // buffers, in the order it declares them): where it lives in the flat buffers.
  std::vector<WeightSlot> weight_slots() const;
  const Shape& input_shape() const;
  const Shape& output_shape() const;  // at the build batch
  const std::string& output_name() const;
  int64_t forward_flops() const;  // per sample
  // Bytes the activations and their gradients would take for a training step at the build
  // batch, without allocating anything (--dry-run's memory table, the start-up memory check):
  // the arena materialize plans, under the precision given to use_precision, with (`recompute`,
  // model.recompute: blocks; the same as without for a graph without blocks) or without
  // activation recomputation. Equals activation_bytes() after materialize.
  int64_t estimate_activation_bytes(bool recompute) const;
  // Table of layer, type, output shape, parameters, FLOPs; once materialized, a line with the
  // planned activation memory; the last line is "parameters: N".
  std::string summary() const;
  // Bytes of the activations and their gradients at the build batch, as planned (reuse by
  // lifetime) and as they would take each in memory of its own; 0 before materialize.
  int64_t activation_bytes() const { return arena_bytes_; }
  int64_t unplanned_activation_bytes() const { return unshared_bytes_; }
  // Activation recomputation (model.recompute: blocks; Megatron-LM's full recompute). The
  // layers of a block (GraphNode::block) run their training forward as usual, but the graph
  // keeps only what leaves the block (its output, read by later layers): the block's interior
  // activations share memory with the other blocks' (graph_plan.cpp), and just before the
  // block's backward the graph runs the block's forward again from its saved input, at the
  // original step (the same dropout masks; BatchNorm does not update its running statistics
  // twice: RunContext::recompute). Results are bit for bit those without it. Before materialize.
  void recompute_blocks(bool on) { recompute_ = on; }
  bool recomputes_blocks() const { return recompute_; }
  int num_blocks() const { return static_cast<int>(block_names_.size()); }

  // The layout of a node's output (ops.h ChannelBlock), after materialize.
  ChannelBlock output_block(const std::string& name) const;
  // The dtype of a node's output (f32 unless the graph trains in bf16), after materialize;
  // casts are nodes named after the tensor they cast ("fc1.bf16", "logits.f32").
  DType output_dtype(const std::string& name) const;

  // ---- running (after materialize) ----
  Backend& backend();
  const Tensor& parameters() const { return params_; }
  const Tensor& gradients() const { return grads_; }
  const Tensor& buffers() const { return buffers_; }
  // Points the layers' gradient views at another flat buffer of the same size and device, so a
  // scheduler can keep several iterations' gradients in flight without copying (Pipe-SGD).
  // Backward then writes there; frozen layers' ranges are neither read nor written.
  void set_gradients(const Tensor& flat);
  // Points the layers' parameter views at another flat buffer of the same size and device:
  // forward and backward then use those weights (weight prediction, stashed versions, an
  // averaged model) without a copy. The optimizer keeps stepping the buffer it was given.
  void set_parameters(const Tensor& flat);
  // Same for the non-trainable state (BatchNorm's running statistics). With set_parameters and
  // set_gradients, several graphs of one stage share everything but their activations and
  // their layers' per-batch state: one graph per minibatch in flight (PipeDream's 1F1B, where
  // a forward runs while earlier minibatches still wait for their backward).
  void set_buffers(const Tensor& flat);
  // Calls `hook` in every training forward just before the layer `name` runs (SAPipe's
  // pre-forward hook: the layers before it may run on parameters the hook then updates).
  // Each layer has at most one hook (SAPipe's profile hooks every parameterised layer); an
  // empty hook removes that layer's. InputError when no layer has that name.
  void set_forward_hook(const std::string& name, std::function<void()> hook);
  using WeightRanges = dtrain::WeightRanges;  // model_input.h
  // Calls `need(ranges, backward)` before every computation that reads parameters: each
  // parameterised layer's forward (training and evaluation; a tied layer reads its lender's
  // range too), a recomputed block's forward (once, with every range of the block), and each
  // parameterised layer's backward (`backward` true for the last two). A sharded run gathers the
  // weights a layer is about to use there (algorithm.shard: parameters). Empty: none.
  void set_weight_hook(std::function<void(const WeightRanges& ranges, bool backward)> need);
  // The ranges forward reads, in forward order, one entry per parameterised layer: what a
  // weight hook will be asked for (a sharded run's prefetch looks ahead in it).
  std::vector<WeightRanges> forward_weight_ranges() const;
  void set_training(bool training) { training_ = training; }
  bool training() const { return training_; }
  void set_dropout_seed(uint64_t seed) { seed_ = seed; }
  // Training forwards so far; the dropout masks of a step depend on it. Setting it replays a
  // step's masks (recomputation, gradient checks).
  uint64_t step() const { return step_; }
  void set_step(uint64_t step) { step_ = step; }

  // Runs every layer on `input` ([b, ...], b ≤ build batch, f32 or input_dtype(), on the host or
  // the device; device memory is used in place and must stay valid until backward). Returns the
  // output.
  const Tensor& forward(const Tensor& input);
  // The gradient of the output for the last forward's batch: fill it, then call backward.
  const Tensor& output_gradient();
  // Backpropagates output_gradient(). Overwrites the gradients of trainable layers; calls
  // on_ready(offset) when gradients[offset, P) are final (decreasing; last = trainable_offset).
  void backward(const std::function<void(int64_t)>& on_ready = {});
  // d(loss)/d(input) of the last backward (materialize with input_gradient = true).
  const Tensor& input_gradient();

  // Per-layer timing (--profile-layers): with it on, training forwards and backwards synchronise
  // the backend around each layer and add up its time, so that a run slows a little and the table
  // says where the time of an iteration goes. The table: layer, type, layout (block), forward and
  // backward ms per call, share of the total, GFLOP/s of the training step.
  void profile_layers(bool on) { profiling_ = on; }
  std::string layer_profile() const;

  // The first `layers` parameterised layers get no gradient and backward stops before them.
  void freeze_first(int layers);
  int frozen_layers() const { return frozen_; }
  int64_t trainable_offset() const;

 private:
  enum class Route { write, accumulate, shared };
  struct Node;
  struct Plan;
  struct MemoryNode;
  struct MemoryPlan;

  Plan& plan_for(int64_t batch);
  std::unique_ptr<Plan> make_plan(int64_t batch);
  void bind_input(Plan& plan, const Tensor& input);
  void refresh_input_views(Plan& plan);
  void fuse_activations();
  size_t name_width() const;  // of the layer column of the summary and the profile
  void resolve_ties();
  void choose_layouts();
  void assign_precision();
  // The planner's view of the nodes: as they are (materialized), or as assign_precision would
  // make them under `precision` (casts it would insert are made into `casts`).
  std::vector<MemoryNode> memory_nodes() const;
  std::vector<MemoryNode> memory_nodes_under(DType precision,
                                             std::vector<std::unique_ptr<Layer>>& casts) const;
  // Who owns which activation and gradient, how gradients reach producers, and the arena
  // (graph_plan.cpp): one function for materialize and the estimate.
  static MemoryPlan plan_activations(const std::vector<MemoryNode>& nodes, bool input_gradient,
                                     bool recompute);
  void apply_memory_plan(const MemoryPlan& plan);
  void recompute_block(Plan& plan, int block);
  void update_needs();
  void update_targets(Plan& plan);
  void initialise(uint64_t seed, uint64_t first_param_stream);
  void bind_layers();
  // Binds the layers to the flat buffers and allocates activations, gradients and plans.
  void allocate_activations();

  std::vector<Node> nodes_;  // topological order; nodes_[0] is the graph input
  std::vector<LayerRange> ranges_;
  int64_t num_params_ = 0, num_buffers_ = 0;
  Backend* backend_ = nullptr;
  Tensor params_, grads_, buffers_;
  Tensor staging_;  // the input, when it arrives on another device
  Tensor scratch_;  // gradients of multi-consumer nodes before accumulation
  Tensor arena_;    // every activation and activation gradient (graph_plan.cpp)
  int64_t arena_bytes_ = 0, unshared_bytes_ = 0;
  bool blocked_layouts_ = true;
  DType precision_ = DType::f32, input_dtype_ = DType::f32;
  bool f32_output_ = true;
  std::vector<std::unique_ptr<Plan>> plans_;
  Plan* current_ = nullptr;  // plan of the last forward
  bool input_gradient_ = false;
  bool training_ = true;
  uint64_t seed_ = 0, step_ = 0;
  int frozen_ = 0;
  bool recompute_ = false;
  std::vector<std::string> block_names_;           // by block id (Node::block)
  std::vector<std::vector<int>> recompute_nodes_;  // per block: the nodes it re-runs, in order
  std::vector<int> recompute_at_;  // per node: the block recomputed before its backward, or -1
  uint64_t forward_step_ = 0;      // the step of the last training forward
  std::vector<std::function<void()>> hooks_;  // by node; empty: none
  std::function<void(const WeightRanges&, bool)> weight_hook_;
  std::vector<WeightRanges> node_weights_;   // by node: the ranges it reads (weight hook)
  std::vector<WeightRanges> block_weights_;  // by block: its nodes' ranges
  WeightRanges weight_ranges_of(const Node& node) const;
  bool profiling_ = false;
  struct LayerTime {
    double forward_s = 0, backward_s = 0;
    int64_t forwards = 0, backwards = 0, samples = 0;
  };
  std::vector<LayerTime> times_;  // by node, when profiling
};

}  // namespace dtrain
