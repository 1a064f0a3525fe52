#include "backend/cpu/bf16_widened.h"

#include <dnnl.h>  // dnnl_get_effective_cpu_isa

#include <algorithm>    // min, max
#include <cstdlib>      // getenv: DTRAIN_BF16_PRODUCTS
#include <map>          // Casts
#include <string_view>  // the variable's values
#include <utility>      // pair

#include "backend/cpu/bf16.h"       // bf16_t
#include "backend/cpu/relu_mask.h"  // relu_mask: masks and widens dy in one pass
#include "core/error.h"

namespace dtrain::cpu {

Bf16Products bf16_products() {
  const char* forced = std::getenv("DTRAIN_BF16_PRODUCTS");
  if (forced == nullptr || *forced == '\0')
    return dnnl_get_effective_cpu_isa() == dnnl_cpu_isa_avx512_core_amx ? Bf16Products::native
                                                                        : Bf16Products::widened;
  const std::string_view v(forced);
  if (v == "native") return Bf16Products::native;
  if (v == "widened") return Bf16Products::widened;
  DTRAIN_INPUT_CHECK(false) << "DTRAIN_BF16_PRODUCTS=" << v
                            << ": expected native (oneDNN's bf16 primitives) or widened (the f32 "
                               "kernels on widened operands), or unset (native only with AMX)";
  return Bf16Products::native;
}

namespace {

using namespace dnnl;

// f32 ↔ bf16 conversions of flat buffers on oneDNN reorder primitives (one pass, round to
// nearest even), built on first use per count and direction, with memories whose data
// pointers are set per call.
class Casts {
 public:
  explicit Casts(DnnlContext& ctx) : ctx_(&ctx) {}
  void widen(const void* from, float* to, int64_t n) { run(from, to, n, /*to_bf16=*/false); }
  void round(const float* from, void* to, int64_t n) { run(from, to, n, /*to_bf16=*/true); }

 private:
  struct Entry {
    reorder primitive;
    memory from, to;
  };
  void run(const void* from, void* to, int64_t n, bool to_bf16) {
    auto it = cache_.find({n, to_bf16});
    if (it == cache_.end()) {
      const auto f32 = memory::desc({n}, memory::data_type::f32, memory::format_tag::a);
      const auto bf16 = memory::desc({n}, memory::data_type::bf16, memory::format_tag::a);
      memory src(to_bf16 ? f32 : bf16, ctx_->engine, DNNL_MEMORY_NONE);
      memory dst(to_bf16 ? bf16 : f32, ctx_->engine, DNNL_MEMORY_NONE);
      it = cache_.emplace(std::pair{n, to_bf16}, Entry{reorder(src, dst), src, dst}).first;
    }
    Entry& e = it->second;
    e.from.set_data_handle(const_cast<void*>(from));
    e.to.set_data_handle(to);
    e.primitive.execute(ctx_->stream, e.from, e.to);
  }

  DnnlContext* ctx_;
  std::map<std::pair<int64_t, bool>, Entry> cache_;
};

// dst += src over n floats: the weight gradient of a chunk after the first.
void accumulate(float* dst, const float* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

template <class Op>
class Widened final : public Op {
 public:
  using Wide = DnnlContext::Wide;

  Widened(DnnlContext& ctx, const WidenedShape& s,
          const std::function<std::unique_ptr<Op>(int64_t)>& make_f32)
      : ctx_(ctx), s_(s), weights_(s.weights.numel()), casts_(ctx) {
    DTRAIN_CHECK(s.batch > 0 && s.x_per_sample > 0 && s.y_per_sample > 0)
        << s.name << ": empty shape";
    const int64_t per_sample = (s.x_per_sample + s.y_per_sample) * int64_t{sizeof(float)};
    const int64_t fits = std::max<int64_t>(1, kWideChunkBytes / per_sample);
    const int64_t chunks = (s.batch + fits - 1) / fits;
    chunk_ = (s.batch + chunks - 1) / chunks;  // even chunks: no tiny last one
    last_ = s.batch - (ceil_div(s.batch, chunk_) - 1) * chunk_;
    f32_ = make_f32(chunk_);
    if (last_ != chunk_) f32_last_ = make_f32(last_);
  }

  void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override {
    check_bf16(x, s_.x_per_sample, "x");
    check_bf16(y, s_.y_per_sample, "y");
    const Tensor wr = rounded_weights(w);
    for (int64_t n0 = 0; n0 < s_.batch; n0 += chunk_) {
      const int64_t n = std::min(chunk_, s_.batch - n0);
      const Tensor xw = widened(Wide::input, x, n0, n, s_.x_per_sample);
      const Tensor yw = wide(Wide::output, n * s_.y_per_sample);
      op(n).forward(xw, wr, b, yw);
      casts_.round(yw.data<float>(), at(y, n0 * s_.y_per_sample), yw.numel());
    }
  }

  void backward_data(const Tensor& y, const Tensor& dy, const Tensor& w,
                     const Tensor& dx) override {
    check_bf16(dy, s_.y_per_sample, "dy");
    check_bf16(dx, s_.x_per_sample, "dx");
    const Tensor wr = rounded_weights(w);
    for (int64_t n0 = 0; n0 < s_.batch; n0 += chunk_) {
      const int64_t n = std::min(chunk_, s_.batch - n0);
      const Tensor dyw = widened_dy(y, dy, n0, n);
      const Tensor dxw = wide(Wide::input, n * s_.x_per_sample);
      op(n).backward_data(Tensor(), dyw, wr, dxw);
      casts_.round(dxw.data<float>(), at(dx, n0 * s_.x_per_sample), dxw.numel());
    }
  }

  // The weight gradient of each chunk after the first is summed into dw and db from f32
  // scratch (only in layers whose activations exceed one chunk).
  void backward_weights(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dw,
                        const Tensor& db) override {
    check_bf16(x, s_.x_per_sample, "x");
    check_bf16(dy, s_.y_per_sample, "dy");
    check_f32(dw, "dw");
    Tensor part_w, part_b;
    if (s_.batch > chunk_) {
      auto* grad = static_cast<float*>(
          ctx_.wide(Wide::weights, (weights_ + s_.bias) * int64_t{sizeof(float)}));
      part_w = Tensor::borrow(grad, {weights_});
      if (s_.bias > 0) part_b = Tensor::borrow(grad + weights_, {s_.bias});
    }
    for (int64_t n0 = 0; n0 < s_.batch; n0 += chunk_) {
      const int64_t n = std::min(chunk_, s_.batch - n0);
      const Tensor xw = widened(Wide::input, x, n0, n, s_.x_per_sample);
      const Tensor dyw = widened_dy(y, dy, n0, n);
      if (n0 == 0) {
        op(n).backward_weights(xw, Tensor(), dyw, dw, db);
        continue;
      }
      op(n).backward_weights(xw, Tensor(), dyw, part_w, part_b);
      accumulate(dw.data<float>(), part_w.data<float>(), weights_);
      if (s_.bias > 0) accumulate(db.data<float>(), part_b.data<float>(), s_.bias);
    }
  }

 private:
  static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

  Op& op(int64_t n) { return n == chunk_ ? *f32_ : *f32_last_; }

  // Element `offset` of a bf16 tensor.
  static void* at(const Tensor& t, int64_t offset) {
    return static_cast<bf16_t*>(t.raw()) + offset;
  }
  // f32 scratch of `numel` elements for `role`.
  Tensor wide(Wide role, int64_t numel) {
    return Tensor::borrow(ctx_.wide(role, numel * int64_t{sizeof(float)}), {numel});
  }
  // Samples [n0, n0 + n) of a bf16 activation, widened into the scratch of `role`.
  Tensor widened(Wide role, const Tensor& t, int64_t n0, int64_t n, int64_t per_sample) {
    Tensor f = wide(role, n * per_sample);
    casts_.widen(at(t, n0 * per_sample), f.data<float>(), f.numel());
    return f;
  }
  // dy's samples [n0, n0 + n) widened, masked by the fused ReLU's bf16 output in the same pass.
  Tensor widened_dy(const Tensor& y, const Tensor& dy, int64_t n0, int64_t n) {
    if (!s_.relu) return widened(Wide::output, dy, n0, n, s_.y_per_sample);
    check_bf16(y, s_.y_per_sample, "y");
    Tensor f = wide(Wide::output, n * s_.y_per_sample);
    const int64_t offset = n0 * s_.y_per_sample;
    relu_mask(static_cast<const bf16_t*>(at(y, offset)), static_cast<const bf16_t*>(at(dy, offset)),
              f.data<float>(), f.numel());
    return f;
  }
  // The f32 master weights rounded to bf16 values, held in f32: what a bf16 product reads.
  Tensor rounded_weights(const Tensor& w) {
    check_f32(w, "w");
    void* half = ctx_.wide(Wide::weights_bf16, weights_ * int64_t{sizeof(bf16_t)});
    Tensor f = wide(Wide::weights, weights_);
    casts_.round(w.data<float>(), half, weights_);
    casts_.widen(half, f.data<float>(), weights_);
    return f;
  }
  // The weights and their gradient: f32 in any precision.
  void check_f32(const Tensor& t, const char* what) const {
    DTRAIN_CHECK(t.dtype() == DType::f32 && t.numel() == weights_)
        << s_.name << " " << what << ": " << t.shape().str() << " " << dtype_name(t.dtype())
        << ", expected " << s_.weights.str() << " f32";
  }
  void check_bf16(const Tensor& t, int64_t per_sample, const char* what) const {
    DTRAIN_CHECK(t.dtype() == DType::bf16 && t.numel() == s_.batch * per_sample)
        << s_.name << " " << what << ": " << t.shape().str() << " " << dtype_name(t.dtype())
        << ", expected " << s_.batch * per_sample << " bf16";
  }

  DnnlContext& ctx_;
  WidenedShape s_;
  int64_t weights_;  // elements of the weights
  Casts casts_;
  int64_t chunk_ = 0, last_ = 0;        // samples per chunk, and in the last one
  std::unique_ptr<Op> f32_, f32_last_;  // the f32 op for a chunk (the last: when it differs)
};

}  // namespace

std::unique_ptr<LinearOp> widen_linear(
    DnnlContext& ctx, const WidenedShape& shape,
    const std::function<std::unique_ptr<LinearOp>(int64_t)>& make_f32) {
  return std::make_unique<Widened<LinearOp>>(ctx, shape, make_f32);
}

std::unique_ptr<ConvOp> widen_conv(
    DnnlContext& ctx, const WidenedShape& shape,
    const std::function<std::unique_ptr<ConvOp>(int64_t)>& make_f32) {
  return std::make_unique<Widened<ConvOp>>(ctx, shape, make_f32);
}

}  // namespace dtrain::cpu
