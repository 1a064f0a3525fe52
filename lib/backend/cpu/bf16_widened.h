// bf16 matrix products (Linear, Conv2d) on the f32 kernels. A bf16 product takes bf16 inputs,
// forms exact products in f32, accumulates in f32 and rounds its stored output once. Widening
// the bf16 operands to f32 (exact), rounding the f32 master weights to bf16 values held in
// f32 (exact bf16 values), running the f32 op and rounding its output once to bf16 gives the
// same arithmetic up to the order of the sums. Where the CPU's bf16 instructions are no faster
// than its f32 FMAs (AVX512-BF16 without AMX: oneDNN 2.6's bf16 kernels run at about half its
// f32 rate, 167 against 310 GFLOP/s on a 1024³ product, one thread), that is the faster way:
// the f32 op keeps all its kernels (Winograd, the direct kernels, the blocked weight gradient,
// the bias and fused ReLU in f32).
//
// Memory: the widened copies live only during one call, in the context's shared buffers
// (DnnlContext::wide), and the batch runs in chunks whose widened input and output take at most
// kWideChunkBytes, so that they add a constant to the peak, not bytes per sample (bf16's point
// is to halve the activation memory). Weights are rounded on every call that reads them, never
// cached: the caller may bind other weights between calls (stashed or predicted versions).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "backend/cpu/dnnl_context.h"  // DnnlContext
#include "backend/ops.h"               // LinearOp, ConvOp
#include "core/shape.h"

namespace dtrain::cpu {

// How the bf16 products compute: oneDNN's bf16 primitives, or the f32 ops on widened operands.
enum class Bf16Products { native, widened };

// DTRAIN_BF16_PRODUCTS=native|widened forces one (tests, benchmarks); unset or empty, native
// where oneDNN runs on AMX tiles and widened elsewhere. Any other value is an InputError.
Bf16Products bf16_products();

// The most bytes of widened input plus output (f32) one chunk of the batch takes.
constexpr int64_t kWideChunkBytes = int64_t{4} << 20;

// What the widened op needs to know of the f32 op it runs: per sample of the batch, the
// elements of x and of y; the weights' shape and the bias's elements (bias 0 without one); the
// fused ReLU (the widened op masks dy itself while widening it, so the f32 op must not read y).
struct WidenedShape {
  const char* name = "";  // in messages: "conv", "linear"
  int64_t batch = 0, x_per_sample = 0, y_per_sample = 0;
  Shape weights;
  int64_t bias = 0;
  bool relu = false;
};

// `make_f32(batch)`: the f32 op for a chunk of `batch` samples, whose backward passes take dy
// masked already (and no y). It is called at construction, once or twice (the last chunk).
std::unique_ptr<LinearOp> widen_linear(
    DnnlContext& ctx, const WidenedShape& shape,
    const std::function<std::unique_ptr<LinearOp>(int64_t)>& make_f32);
std::unique_ptr<ConvOp> widen_conv(DnnlContext& ctx, const WidenedShape& shape,
                                   const std::function<std::unique_ptr<ConvOp>(int64_t)>& make_f32);

}  // namespace dtrain::cpu
