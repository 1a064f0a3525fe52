// Layer: one node's computation, expressed only in Backend ops. A layer is configured from its
// options, learns its input shapes once (infer), declares its parameters and non-trainable
// buffers (views into the model's flat buffers are bound later), creates its op plans per batch
// size (prepare: at build time, and once for a smaller last batch), then runs forward/backward
// every iteration without allocating. The Graph owns activations and gradient buffers; a layer
// keeps only what its own backward needs (pool indices, dropout masks, batch statistics).
#pragma once
#include <cstdint>   // int64_t, uint64_t
#include <memory>    // unique_ptr: op plans
#include <optional>  // weight_tie
#include <span>      // span: input lists
#include <string>
#include <string_view>
#include <utility>  // pair
#include <vector>

#include "backend/backend.h"  // Backend, op specs
#include "core/error.h"       // DTRAIN_CHECK, InputError
#include "core/shape.h"       // Shape
#include "core/tensor.h"      // Tensor

namespace dtrain {

// How a parameter tensor starts: U(-a, a), N(0, a²) or the constant a.
struct ParamInit {
  enum class Kind { uniform, normal, constant } kind = Kind::constant;
  float a = 0.0f;
};

struct ParamDecl {
  std::string name;  // "weight", "bias", "running_mean"
  Shape shape;
  ParamInit init;
};

// Per-call state shared by every layer of one forward/backward.
struct RunContext {
  Backend* backend = nullptr;
  bool training = true;
  uint64_t seed = 0;  // dropout masks
  uint64_t step = 0;  // training forwards so far: a fresh dropout mask each step
  int node = 0;       // index of the running node in the graph: its dropout stream
  // A training forward run again before its block's backward (model.recompute: blocks): `step`
  // is the original forward's, so it must give the same outputs and per-batch state, and it
  // must not update anything that outlives the step a second time (BatchNorm's running
  // statistics).
  bool recompute = false;
};

// The producers of a layer's inputs, for shape inference and its messages.
struct InputInfo {
  std::string name;  // producer node ("input" for the graph input)
  Shape shape;       // [batch, ...] at the build batch
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string_view type() const = 0;
  virtual int num_inputs() const { return 1; }

  // Output shape for the given inputs; throws InputError naming `self`, the producers and
  // the shapes when they do not fit. Called once, before anything else.
  virtual Shape infer(const std::string& self, std::span<const InputInfo> inputs) = 0;
  // The shape in which the layer reads input k (Linear and Flatten see [batch, features]).
  virtual Shape input_view(int k, const Shape& produced) const { return produced; }
  // The output is a view of input 0 (no computation, no memory of its own).
  virtual bool output_is_view() const { return false; }
  // d(loss)/d(input k) equals d(loss)/d(output) element for element (Add, Flatten): the graph
  // may let the producer share this node's gradient buffer and skip the copy.
  virtual bool gradient_passes_through(int k) const { return false; }

  // ---- ReLU fusion (graph build, after infer, before prepare) ----
  // An element-wise ReLU, which a producer may absorb.
  virtual bool is_relu() const { return false; }
  // Absorbs a ReLU that reads only this layer's output: from now on the layer outputs
  // max(y, 0) and masks its output gradient by that output itself (ops.h, fused ReLU).
  // Returns false when the layer cannot.
  virtual bool absorb_relu() { return false; }
  // Its backward would mask its output gradient in place (Add: the inputs share that buffer
  // and must read the masked values), so the graph lets it absorb only a ReLU whose gradient
  // is not the caller's.
  virtual bool absorbed_relu_masks_gradient_in_place() const { return false; }
  // The ReLU's producer absorbed it: it becomes a view of its input whose gradient passes
  // straight through, and does no work.
  virtual void mark_absorbed() {}
  // relu(f(x)) = f(relu(x)) (max pooling): a ReLU after it may be absorbed by its producer.
  virtual bool commutes_with_relu() const { return false; }
  virtual bool absorbed() const { return false; }

  // ---- activation layouts (graph build, after fusion, before prepare; ops.h ChannelBlock) ----
  // How the layer's output layout relates to its inputs':
  //   plain:   it reads and writes plain tensors only (the default);
  //   follows: its output has its inputs' layout, which they all share (element-wise layers,
  //            batch norm, pooling: they run on whatever layout their chain has);
  //   chooses: it reads any layout and picks its output's (Conv2d, Flatten).
  enum class LayoutRule { plain, follows, chooses };
  virtual LayoutRule layout_rule() const { return LayoutRule::plain; }
  // `chooses`: the block the layer wants for its output.
  virtual ChannelBlock preferred_output_block(const Backend&) const { return 1; }
  // The layouts the graph settled on for the inputs and the output; once, before prepare().
  virtual void set_layouts(std::span<const ChannelBlock> in, ChannelBlock out) {}

  // ---- precision (graph build, after layouts, before prepare; layer_table.h Precision) ----
  // The dtype of the layer's inputs, output and their gradients: f32, or bf16 where the model
  // trains in bf16 and the layer table's row says the layer computes in it. The layer puts it in
  // its op specs; layers whose row says f32 are never given bf16.
  virtual void set_dtype(DType dtype) {}

  // ---- memory plan (the graph reuses an activation's memory once nothing needs it) ----
  // What the backward pass reads besides its output gradient: input k, the output. Defaults
  // are the safe answer.
  virtual bool backward_reads_input(int k) const { return true; }
  virtual bool backward_reads_output() const { return true; }
  // The output may overwrite input 0 (element-wise layers whose backward reads neither their
  // input nor, through it, anything the producer needs); the graph decides when it does.
  virtual bool can_run_in_place() const { return false; }
  // Nothing reads this layer's output gradient after its backward (the graph's plan says so
  // before prepare): the backward may overwrite it.
  virtual void set_output_gradient_writable(bool) {}
  // What the training forward saves for the backward besides the output, in bytes at the build
  // batch (a dropout mask, attention's row log-sum-exps, layer norm's statistics): the graph
  // plans it in its arena like an activation, alive from the layer's forward to its backward
  // (two spans when its block is recomputed), and hands the layer its memory (64-byte aligned)
  // in bind_saved, before prepare. Known from the shapes alone (infer), so that the estimate
  // without a backend counts it. 0: nothing, or state too small or op-dependent to plan (op
  // workspaces), which the layer allocates itself.
  virtual int64_t saved_bytes() const { return 0; }
  virtual void bind_saved(const Tensor& bytes) {}

  // ---- weight tying (a linear output head computing with an embedding's table) ----
  // The layer whose parameter 0 this layer uses as its own weight, of shape `shape` (it
  // declares no parameter for it); the graph checks the lender and binds its views here.
  struct WeightTie {
    std::string layer;  // an earlier layer that lends_weight()
    std::string key;    // the option that named it, for messages
    Shape shape;        // the weight as this layer reads it
  };
  virtual std::optional<WeightTie> weight_tie() const { return std::nullopt; }
  // Tied: the views of the lender's weight and gradient, at every bind (set_parameters,
  // set_gradients rebind them).
  virtual void bind_tied(const Tensor& weight, const Tensor& gradient) {}
  // May lend parameter 0 to a later layer (an embedding's table to the output head).
  virtual bool lends_weight() const { return false; }
  // A later layer lends this weight and writes its gradient first (its backward runs
  // earlier): this layer's backward adds its part to what is there instead of overwriting.
  virtual void set_weight_gradient_accumulates() {}

  // The dataset's class count (a vocabulary), for layers whose size defaults to it (an
  // embedding's rows); called before infer when the model is built for a dataset.
  virtual void set_dataset_classes(int64_t classes) {}

  virtual std::vector<ParamDecl> params() const { return {}; }
  virtual std::vector<ParamDecl> buffers() const { return {}; }  // non-trainable state
  // Views of the flat buffers, in the order of params() / buffers().
  virtual void bind(std::span<const Tensor> params, std::span<const Tensor> grads,
                    std::span<const Tensor> buffers) {}

  // Creates the op plans for `batch` rows. The first call is the build batch and allocates
  // saved state; later calls (a smaller batch) reuse it through views.
  virtual void prepare(Backend& backend, int64_t batch) = 0;
  // x: inputs as input_view() shapes them; y: the output (both at the current batch).
  virtual void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) = 0;
  // dx[k] undefined: input k needs no gradient. `weights`: write this layer's parameter
  // gradients (overwrite); otherwise leave them untouched (frozen).
  virtual void backward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y,
                        const Tensor& dy, std::span<const Tensor> dx, bool weights) = 0;

  // Forward FLOPs per sample (a multiply-add counts 2) for the inferred shapes.
  virtual int64_t flops() const { return 0; }
};

// A layer's per-batch-size state (op plans and views of saved buffers): usually one entry, two
// with a smaller last batch. A linear search over a vector does not allocate.
template <typename T>
class PerBatch {
 public:
  bool has(int64_t batch) const {
    for (const auto& e : entries_)
      if (e.first == batch) return true;
    return false;
  }
  T& add(int64_t batch, T value) {
    DTRAIN_CHECK(!has(batch)) << "plans for batch " << batch << " created twice";
    entries_.emplace_back(batch, std::move(value));
    return entries_.back().second;
  }
  T& at(int64_t batch) {
    for (auto& e : entries_)
      if (e.first == batch) return e.second;
    DTRAIN_CHECK(false) << "no plan prepared for batch " << batch;
    return entries_.front().second;  // unreachable
  }
  bool empty() const { return entries_.empty(); }
  // The build batch's entry (the first one).
  T& first() { return entries_.front().second; }

 private:
  std::vector<std::pair<int64_t, T>> entries_;
};

// Per-batch plans of an op that needs per-forward scratch for its backward (PoolOp, LrnOp:
// forward(x, y, workspace, training), backward(x, y, dy, workspace, dx)). The plans share one
// workspace buffer sized for the largest batch prepared first (the build batch).
template <typename Op>
class WorkspacePlans {
 public:
  void add(Backend& backend, int64_t batch, std::unique_ptr<Op> op) {
    Plan plan{std::move(op), {}};
    const auto bytes = static_cast<int64_t>(plan.op->workspace_bytes());
    if (bytes > 0) {
      if (workspace_.numel() < bytes) workspace_ = backend.empty({bytes}, DType::u8);
      plan.workspace = workspace_.slice(0, {bytes});
    }
    plans_.add(batch, std::move(plan));
  }
  void forward(const Tensor& x, const Tensor& y, bool training) {
    Plan& p = plans_.at(y.shape()[0]);
    p.op->forward(x, y, p.workspace, training);
  }
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx) {
    Plan& p = plans_.at(y.shape()[0]);
    p.op->backward(x, y, dy, p.workspace, dx);
  }

 private:
  struct Plan {
    std::unique_ptr<Op> op;
    Tensor workspace;
  };
  Tensor workspace_;
  PerBatch<Plan> plans_;
};

}  // namespace dtrain
