// The operations layers need, as objects created once per shape ("plans").
// A backend builds each op from a spec at graph-build time; the op keeps whatever it needs to
// run fast (oneDNN primitives and memory descriptors, cuDNN descriptors, chosen algorithms and
// workspaces) and is then executed every iteration without re-creating anything.
// Ops hold no per-sample state: anything the backward pass needs (max-pool indices, LRN
// scratch, batch statistics) is passed in by the caller, so that several micro-batches can be
// in flight at once (pipeline schedules).
// All tensors are dense, on the backend's device: activations NCHW or [N, F], Linear weights
// [out, in], Conv2d weights [out, in, kh, kw] (the PyTorch layouts). A 4-D activation may
// instead be channel-blocked (`block` in the specs, see ChannelBlock) where the backend prefers
// it; weights and gradients of parameters are always in the PyTorch layouts.
// Linear and Conv2d may carry a fused ReLU (spec `relu`): the forward writes max(y, 0), and
// the backward passes take dy with respect to that activated output together with the output
// itself and apply the ReLU's mask (y > 0) on their own. This saves the ReLU's pass over the
// activation, its buffer, and on the CPU a reorder per pass.
// Mixed precision (cluster.precision: bf16): an op whose spec has a `dtype` reads and writes its
// activations and their gradients (x, y, dy, dx, qkv) in that type, f32 or bf16. Weights, biases,
// their gradients, statistics, lse and workspaces stay f32 on every backend: a bf16 op converts
// the f32 master weights it reads and writes f32 weight gradients. Products (linear, convolution,
// attention) take bf16 inputs and accumulate in f32; element-wise maths runs in f32 on the
// converted values and rounds once when it stores bf16.
// On asynchronous backends (CUDA) every call only enqueues work on the compute stream.
#pragma once
#include <cstddef>  // size_t
#include <cstdint>  // int64_t

#include "core/dtype.h"   // DType: the activations' type
#include "core/shape.h"   // Shape
#include "core/tensor.h"  // Tensor

namespace dtrain {

// How a 4-D activation [N, C, H, W] lies in memory: block 1 is plain NCHW; block B is oneDNN's
// nChw{B}c: the channels in groups of B, each group an [H, W, B] array, so the B channels of a
// pixel sit in one vector register. Used only where B divides C, so a blocked tensor holds
// exactly the plain one's elements in another order, with the batch outermost (a smaller batch
// is a prefix). Index of element (n, c, h, w): ((n·C/B + c/B)·H + h)·W·B + w·B + c%B.
using ChannelBlock = int;
inline int64_t blocked_index(int64_t n, int64_t c, int64_t h, int64_t w, int64_t channels,
                             int64_t height, int64_t width, ChannelBlock block) {
  return (((n * (channels / block) + c / block) * height + h) * width + w) * block + c % block;
}

// ---- Linear: y = x·wᵀ + b -----------------------------------------------------------------
struct LinearSpec {
  int64_t batch = 0, in_features = 0, out_features = 0;
  bool bias = true;
  bool relu = false;         // fused activation: y = max(x·wᵀ + b, 0)
  DType dtype = DType::f32;  // of x, y, dy, dx
};
class LinearOp {
 public:
  virtual ~LinearOp() = default;
  // `b` is ignored (may be undefined) without bias.
  virtual void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) = 0;
  // `y`: the forward's output, read only with a fused ReLU (may be undefined otherwise).
  virtual void backward_data(const Tensor& y, const Tensor& dy, const Tensor& w,
                             const Tensor& dx) = 0;
  // Overwrites dw (and db when the op has a bias).
  virtual void backward_weights(const Tensor& x, const Tensor& y, const Tensor& dy,
                                const Tensor& dw, const Tensor& db) = 0;
};

// ---- Conv2d (groups = 1) -----------------------------------------------------------------
struct ConvSpec {
  int64_t batch = 0, in_channels = 0, height = 0, width = 0;
  int64_t out_channels = 0, kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool bias = true;
  bool relu = false;                          // fused activation: y = max(conv(x) + b, 0)
  ChannelBlock src_block = 1, dst_block = 1;  // layouts of x and dx, of y and dy
  // The backward passes may overwrite dy (a fused ReLU masks it in place instead of into
  // scratch): the caller reads dy no more after them.
  bool dy_writable = false;
  DType dtype = DType::f32;  // of x, y, dy, dx
  int64_t out_height() const { return (height + 2 * pad_h - kernel_h) / stride_h + 1; }
  int64_t out_width() const { return (width + 2 * pad_w - kernel_w) / stride_w + 1; }
  Shape input_shape() const { return {batch, in_channels, height, width}; }
  Shape output_shape() const { return {batch, out_channels, out_height(), out_width()}; }
  Shape weight_shape() const { return {out_channels, in_channels, kernel_h, kernel_w}; }
};
class ConvOp {
 public:
  virtual ~ConvOp() = default;
  virtual void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) = 0;
  // `y`: the forward's output, read only with a fused ReLU (may be undefined otherwise).
  virtual void backward_data(const Tensor& y, const Tensor& dy, const Tensor& w,
                             const Tensor& dx) = 0;
  // Overwrites dw (and db when the op has a bias).
  virtual void backward_weights(const Tensor& x, const Tensor& y, const Tensor& dy,
                                const Tensor& dw, const Tensor& db) = 0;
};

// ---- Pooling -----------------------------------------------------------------------------
enum class PoolKind { max, avg };
struct PoolSpec {
  PoolKind kind = PoolKind::max;
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  int64_t kernel_h = 2, kernel_w = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0;
  bool ceil_mode = false;           // Caffe-style output size (cuda-convnet / cifar nets)
  bool avg_include_padding = true;  // PyTorch's count_include_pad default
  ChannelBlock block = 1;           // of x, y, dy and dx
  DType dtype = DType::f32;         // of x, y, dy and dx
  int64_t out_height() const;
  int64_t out_width() const;
  Shape input_shape() const { return {batch, channels, height, width}; }
  Shape output_shape() const { return {batch, channels, out_height(), out_width()}; }
};
class PoolOp {
 public:
  virtual ~PoolOp() = default;
  // Bytes of per-forward scratch (max indices) that backward needs; 0 if none.
  virtual size_t workspace_bytes() const = 0;
  // `training` false may skip writing the workspace.
  virtual void forward(const Tensor& x, const Tensor& y, const Tensor& workspace,
                       bool training) = 0;
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace,
                        const Tensor& dx) = 0;
};

// ---- ReLU --------------------------------------------------------------------------------
class ReluOp {
 public:
  virtual ~ReluOp() = default;
  virtual void forward(const Tensor& x, const Tensor& y) = 0;
  // dx = dy where y > 0, else 0. Implementations may read x or y.
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx) = 0;
};

// ---- GELU: x·Φ(x), as PyTorch's nn.GELU ---------------------------------------------------
// none: Φ(x) = ½(1 + erf(x/√2)); tanh: Φ(x) ≈ ½(1 + tanh(√(2/π)(x + 0.044715x³))).
enum class GeluApproximation { none, tanh };
struct GeluSpec {
  Shape shape;  // element-wise: the count is what matters, so any layout
  GeluApproximation approximate;
  DType dtype = DType::f32;  // of x, y, dy, dx
};
class GeluOp {
 public:
  virtual ~GeluOp() = default;
  virtual void forward(const Tensor& x, const Tensor& y) = 0;
  // dx = dy·gelu'(x).
  virtual void backward(const Tensor& x, const Tensor& dy, const Tensor& dx) = 0;
};

// ---- Local response normalisation across channels (AlexNet) ------------------------------
struct LrnSpec {
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  // PyTorch LocalResponseNorm semantics; the defaults are the layer's (nn/layers/lrn.cpp).
  int64_t size = 0;
  float alpha = 0, beta = 0, k = 0;
  ChannelBlock block = 1;
  Shape shape() const { return {batch, channels, height, width}; }
};
class LrnOp {
 public:
  virtual ~LrnOp() = default;
  virtual size_t workspace_bytes() const = 0;
  virtual void forward(const Tensor& x, const Tensor& y, const Tensor& workspace,
                       bool training) = 0;
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace,
                        const Tensor& dx) = 0;
};

// ---- Batch normalisation over N, H, W per channel ---------------------------------------
struct BatchNormSpec {
  int64_t batch = 0, channels = 0, height = 1, width = 1;  // [N, C] inputs use height=width=1
  float epsilon = 0;  // the default is the layer's (nn/layers/batchnorm2d.cpp)
  bool relu = false;  // fused activation: y = max(bn(x), 0), and the backward masks dy
  ChannelBlock block = 1;
  DType dtype = DType::f32;  // of x, y, dy, dx (scale, shift, statistics: f32)
  Shape shape() const { return {batch, channels, height, width}; }
};
class BatchNormOp {
 public:
  virtual ~BatchNormOp() = default;
  // Bytes of per-forward state the backward needs (a fused ReLU's mask); 0 if none.
  virtual size_t workspace_bytes() const = 0;
  // Uses batch statistics; writes the batch mean and biased variance ([C] each).
  virtual void forward_training(const Tensor& x, const Tensor& scale, const Tensor& shift,
                                const Tensor& y, const Tensor& mean, const Tensor& variance,
                                const Tensor& workspace) = 0;
  // Uses the given (running) statistics.
  virtual void forward_inference(const Tensor& x, const Tensor& scale, const Tensor& shift,
                                 const Tensor& mean, const Tensor& variance, const Tensor& y) = 0;
  // Backward of forward_training; overwrites dx, dscale, dshift. `y`: the forward's output,
  // read only with a fused ReLU (by backends that mask with it rather than the workspace).
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& scale,
                        const Tensor& mean, const Tensor& variance, const Tensor& workspace,
                        const Tensor& dx, const Tensor& dscale, const Tensor& dshift) = 0;
};

// ---- Softmax + cross-entropy over [batch, classes] logits with i32 labels ----------------
struct SoftmaxXentSpec {
  int64_t batch = 0, classes = 0;
};
class SoftmaxXentOp {
 public:
  virtual ~SoftmaxXentOp() = default;
  // probs = softmax(logits); stats (2 floats on the device) = {sum of losses, correct count}.
  virtual void forward(const Tensor& logits, const Tensor& labels, const Tensor& probs,
                       const Tensor& stats) = 0;
  // dlogits = (probs − onehot(labels)) · grad_scale  (grad_scale = 1/batch gives the mean).
  virtual void backward(const Tensor& probs, const Tensor& labels, const Tensor& dlogits,
                        float grad_scale) = 0;
};

// ---- Dropout (inverted: kept values are scaled by 1/(1−p)) -------------------------------
struct DropoutSpec {
  Shape shape;  // at the largest batch
  ChannelBlock block = 1;
  DType dtype = DType::f32;  // of x, y, dy, dx
};
class DropoutOp {
 public:
  virtual ~DropoutOp() = default;
  // mask: u8, one per element; drawn from random_uniform(seed, stream, index) with the
  // element's plain (NCHW) index, so that a blocked tensor drops the same elements.
  virtual void forward(const Tensor& x, const Tensor& y, const Tensor& mask, float p, uint64_t seed,
                       uint64_t stream) = 0;
  virtual void backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) = 0;
};

// ---- Sequence models (tensors [N, T, C]: a batch of N sequences of T positions) ----------
// Token ids travel as f32 holding integers (exact below 2^24, far above any vocabulary), so
// that the loader's batches, a pipeline stage's input and its transfers stay plain f32 tensors.

// ---- Embedding: y[r] = table[ids[r]] ------------------------------------------------------
struct EmbeddingSpec {
  int64_t rows = 0;   // N·T ids
  int64_t vocab = 0;  // rows of the table
  int64_t dim = 0;    // columns of the table and of y
};
class EmbeddingOp {
 public:
  virtual ~EmbeddingOp() = default;
  // ids f32 [rows] (integers in [0, vocab); callers check them), table [vocab, dim],
  // y [rows, dim].
  virtual void forward(const Tensor& ids, const Tensor& table, const Tensor& y) = 0;
  // dtable[v] = Σ over r with ids[r] = v of dy[r] (rows no id names get 0); with `accumulate`
  // the sums are added to what dtable holds (a tied output head wrote its part first).
  // Deterministic: the same ids and dy give the same bits on every call.
  virtual void backward(const Tensor& ids, const Tensor& dy, const Tensor& dtable,
                        bool accumulate) = 0;
};

// ---- Layer normalisation over the last axis -----------------------------------------------
struct LayerNormSpec {
  int64_t rows = 0, features = 0;
  float epsilon = 0;  // the default is the layer's (nn/layers/layer_norm.cpp)
  bool bias = true;   // without bias there is no beta (nanoGPT's bias=False)
};
class LayerNormOp {
 public:
  virtual ~LayerNormOp() = default;
  // y = (x − mean)·rstd·gamma + beta per row of x [rows, features]; mean and rstd
  // (1/√(var + ε), biased variance) f32 [rows] are kept for the backward. `beta` is ignored
  // (may be undefined) without bias.
  virtual void forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd) = 0;
  // Overwrites dx, dgamma and (with bias) dbeta.
  virtual void backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dgamma,
                        const Tensor& dbeta) = 0;
};

// ---- Causal multi-head self-attention -----------------------------------------------------
// qkv [N, T, 3C] (C = heads·head_dim) as one linear layer makes it: columns [0, C) the
// queries, [C, 2C) the keys, [2C, 3C) the values, head h at columns h·D … h·D + D − 1 of each
// (PyTorch's qkv.split(C, dim=2) then view(N, T, heads, D)). y [N, T, C], head h at columns
// h·D (PyTorch's y.transpose(1, 2).view(N, T, C)). y_t = Σ_{s ≤ t} softmax_s(q_t·k_s/√D)·v_s.
// Dropout (training only, inverted) drops attention weight (n, h, t, s) when
// random_uniform(seed, stream, ((n·heads + h)·T + t)·T + s) < dropout (core/rng.h), the same
// elements on every backend. No T×T matrix is kept between forward and backward: the forward
// keeps each row's log-sum-exp of the scaled scores, and the backward recomputes the scores
// tile by tile from qkv (flash attention).
struct AttentionSpec {
  int64_t batch = 0, seq = 0, heads = 0, head_dim = 0;
  float dropout = 0;
  DType dtype = DType::f32;  // of qkv, y, dy, dqkv (lse and workspace: f32)
  int64_t channels() const { return heads * head_dim; }
};
class AttentionOp {
 public:
  virtual ~AttentionOp() = default;
  // Bytes of scratch one forward or backward call uses (tiles, row sums); not kept between
  // calls, so one buffer serves every call of a layer.
  virtual size_t workspace_bytes() const = 0;
  // lse: f32 [N, heads, T], written for the backward.
  virtual void forward(const Tensor& qkv, const Tensor& y, const Tensor& lse,
                       const Tensor& workspace, bool training, uint64_t seed, uint64_t stream) = 0;
  // Overwrites dqkv [N, T, 3C]; `y` and `lse` are the forward's (training) outputs, and seed
  // and stream its dropout's.
  virtual void backward(const Tensor& qkv, const Tensor& y, const Tensor& dy, const Tensor& lse,
                        const Tensor& workspace, uint64_t seed, uint64_t stream,
                        const Tensor& dqkv) = 0;
};

}  // namespace dtrain
