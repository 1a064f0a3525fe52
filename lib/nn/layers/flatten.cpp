// Flatten: [N, ...] → [N, features] as a view of its input; no memory, no work in forward.
// The graph lets the producer share this node's gradient buffer when it has no other
// consumer, so the backward is free too; otherwise it is a copy.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

class Flatten final : public Layer {
 public:
  std::string_view type() const override { return "flatten"; }
  Shape infer(const std::string&, std::span<const InputInfo> in) override {
    const Shape& s = in[0].shape;
    return s.rank() == 0 ? Shape{1} : Shape{s[0], s.numel() / s[0]};
  }
  Shape input_view(int, const Shape& s) const override { return {s[0], s.numel() / s[0]}; }
  bool output_is_view() const override { return true; }
  bool gradient_passes_through(int) const override { return true; }
  void prepare(Backend&, int64_t) override {}
  void forward(const RunContext&, std::span<const Tensor>, const Tensor&) override {}
  void backward(const RunContext& ctx, std::span<const Tensor>, const Tensor&, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    if (dx[0].defined()) ctx.backend->copy(dx[0], dy);
  }
};

}  // namespace

std::unique_ptr<Layer> make_flatten() {
  return std::make_unique<Flatten>();
}

}  // namespace dtrain
