// Shared oneDNN state of the CPU backend and helpers that keep oneDNN boilerplate out of the
// op files: plain memory descriptors and "bound" memories whose data pointer is set per call.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>  // engine, stream, memory, primitives

#include <optional>       // optional reorder
#include <unordered_map>  // primitive arguments

#include "core/shape.h"
#include "core/tensor.h"

namespace dtrain::cpu {

struct DnnlContext {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};

  // Scratch of `numel` floats that lives only during one op call (a masked gradient): one
  // buffer for all ops, grown to the largest request, instead of one per op and per sample.
  // Ops run on the backend's one compute thread, so calls never overlap.
  Tensor scratch(int64_t numel) {
    ++generation_;
    if (scratch_.numel() < numel) scratch_ = Tensor::empty({numel});
    return scratch_.slice(0, {numel});
  }
  // Changes with every scratch() call: an op can tell that its last contents are still there.
  uint64_t scratch_generation() const { return generation_; }

  // The bf16 products that run on the f32 kernels (bf16_widened.h) widen their operands into
  // these: one buffer per role, shared by all ops and grown to the largest need, like
  // scratch(), but apart from it (the f32 op they call may take scratch() for itself).
  // `weights` holds the rounded weights in the forward and data-gradient passes, and a chunk's
  // weight gradient in the weight-gradient pass (which reads no weights): one buffer for both,
  // so that no second weight-sized buffer grows once the batch splits into chunks.
  enum class Wide { input, output, weights, weights_bf16, count };
  void* wide(Wide role, size_t bytes) {
    Tensor& t = wide_[static_cast<int>(role)];
    if (static_cast<size_t>(t.numel()) < bytes)
      t = Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8);
    return t.raw();
  }

  // oneDNN's scratchpad for the primitives created with scratchpad_mode::user (ScratchpadArg):
  // one buffer for all, grown to the largest need. In oneDNN's own mode every primitive keeps
  // a scratchpad of its own from its creation on: 25 MB for each bf16 inner product of a wide
  // GPT, more than its activations.
  void* scratchpad(size_t bytes) {
    if (static_cast<size_t>(scratchpad_.numel()) < bytes)
      scratchpad_ = Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8);
    return scratchpad_.raw();
  }

 private:
  Tensor scratch_, scratchpad_;
  Tensor wide_[static_cast<int>(Wide::count)];
  uint64_t generation_ = 0;
};

using dnnl_tag = dnnl::memory::format_tag;
// A primitive's arguments. Ops build theirs once and only change the memories' data pointers
// per call: a map built per call costs a heap allocation per node.
using DnnlArgs = std::unordered_map<int, dnnl::memory>;
using dnnl_dims = dnnl::memory::dims;

inline dnnl_dims to_dims(const Shape& s) {
  return dnnl_dims(s.dims().begin(), s.dims().end());
}

// Row-major f32 descriptor for a 1-, 2- or 4-D shape (x, nc/oi, nchw/oihw).
dnnl::memory::desc plain_desc(const Shape& shape,
                              dnnl::memory::data_type type = dnnl::memory::data_type::f32);

// A 4-D activation in channel blocks of `block` (1: plain NCHW; 8: nChw8c; 16: nChw16c); other
// ranks must have block 1.
dnnl::memory::desc activation_desc(const Shape& shape, int block);

// oneDNN's element type for a tensor dtype (f32, bf16: the activations of mixed precision).
dnnl::memory::data_type dnnl_data_type(DType dtype);
// activation_desc with elements of `dtype`.
dnnl::memory::desc activation_desc(const Shape& shape, int block, DType dtype);

// Primitive attributes that take the scratchpad from the context (DnnlContext::scratchpad).
inline dnnl::primitive_attr user_scratchpad(dnnl::primitive_attr attr = {}) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}
// The scratchpad argument of one primitive created with user_scratchpad: added to its argument
// map once, pointed at the context's shared buffer before each execution (bind).
class ScratchpadArg {
 public:
  ScratchpadArg() = default;
  ScratchpadArg(DnnlContext& ctx, const dnnl::memory::desc& desc, DnnlArgs& args)
      : ctx_(&ctx), bytes_(desc.get_size()), memory_(desc, ctx.engine, DNNL_MEMORY_NONE) {
    if (bytes_ > 0) args.emplace(DNNL_ARG_SCRATCHPAD, memory_);
  }
  void bind() {
    if (bytes_ > 0) memory_.set_data_handle(ctx_->scratchpad(bytes_));
  }

 private:
  DnnlContext* ctx_ = nullptr;
  size_t bytes_ = 0;
  dnnl::memory memory_;
};

// A primitive argument as the caller sees it (a plain tensor) and as the primitive wants it
// (possibly a blocked layout chosen by oneDNN for speed). When the two differ, a scratch buffer
// and the reorders between them are created once, here, and run on every call.
class BoundArg {
 public:
  BoundArg() = default;
  BoundArg(DnnlContext& ctx, const dnnl::memory::desc& user, const dnnl::memory::desc& internal);
  bool reorders() const { return to_internal_.has_value(); }
  // The memory to pass to the primitive for an input `t` (reordered into scratch if needed).
  dnnl::memory& input(const Tensor& t);
  // The memory to pass for an output; call finish_output() after the primitive ran.
  dnnl::memory& output(const Tensor& t);
  void finish_output();
  // The memory the primitive sees, for argument maps built once: input() and output() only
  // change its contents or data pointer.
  const dnnl::memory& internal() const { return internal_; }

 private:
  DnnlContext* ctx_ = nullptr;
  dnnl::memory user_, internal_;
  std::optional<dnnl::reorder> to_internal_, to_user_;
  DnnlArgs to_internal_args_, to_user_args_;
  Tensor scratch_;
};

// An element-wise oneDNN primitive and its backward over `numel` floats (1-D: the shape and
// layout do not matter, only the count): ReLU, GELU. Its backward reads the forward's input,
// or (`from_output`, an algorithm of the *_use_dst_for_bwd kind) its output.
class DnnlEltwise {
 public:
  // `dtype`: of every tensor the primitives read and write (f32, or bf16 activations).
  DnnlEltwise(DnnlContext& ctx, dnnl::algorithm algorithm, bool from_output, int64_t numel,
              const char* what, DType dtype = DType::f32);
  void forward(const Tensor& x, const Tensor& y);
  // `data`: the forward's input, or its output with `from_output`.
  void backward(const Tensor& data, const Tensor& dy, const Tensor& dx);

 private:
  void check(const Tensor& t, const char* what) const;
  DnnlContext& ctx_;
  int64_t numel_;
  const char* what_;
  DType dtype_;
  dnnl::eltwise_forward fwd_;
  dnnl::eltwise_backward bwd_;
  dnnl::memory a_, b_, c_;
  DnnlArgs fwd_args_, bwd_args_;
};

}  // namespace dtrain::cpu
