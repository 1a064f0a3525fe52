// Causal attention of a short sequence (T ≤ kShortSeq, head size ≤ kShortDim), one (sequence,
// head) pair at a time, without the online softmax: a head's keys and values fit in L1, so a
// block of 16 query rows is scored against all the keys it sees at once (a 16 × T block) and
// its softmax is exact in one pass. What the profile of the tiled kernels showed at T = 64,
// and what replaced it here:
//  - per-row softmax reductions (a tree per row for the maximum and the sum): the 16 rows'
//    maxima and sums are reduced together, four rounds of permutes that transpose as they
//    reduce (lane_reductions: 30 permutes for 16 rows, not 64);
//  - libm log2f for each row's log-sum-exp, whose calls spilled every vector register: one
//    vectorised log2 per 16 rows; 2^x a degree-5 minimax polynomial with roundscale/scalef;
//  - small, latency-bound tiles (4 rows × 1 vector at the diagonal) and per-tile dispatch:
//    every product runs on register tiles of sixteen accumulators (4 rows × 4 vectors, 8 × 2
//    or 16 × 1), the broadcast rows at constant offsets (rows copied at a fixed stride, no
//    transposition of the queries);
//  - the backward's per-head gradient buffers (cleared, accumulated tile by tile, copied out):
//    the backward keeps the head's weights P̃ and score gradients dS whole (T × 64 floats each),
//    then takes dV = P̃ᵀ·dy, dK = dSᵀ·q and dQ = dS·k as products whose accumulators go
//    straight to dqkv; key rows and the values are read in place where they are whole vectors.
// What was measured, and what was tried and left out:
// bench/results/2026-11-26-cpu-attention-short.md.
#include "backend/cpu/attention_short.h"

#include <algorithm>    // min
#include <cmath>        // sqrt, log2
#include <limits>       // infinity
#include <type_traits>  // is_same_v

namespace dtrain::cpu::attention {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Rows of the score, weight and gradient blocks are kShortSeq floats apart whatever T, and
// the rows of the copied queries and output gradients kShortDim: constant strides make a
// tile's rows constant offsets from one pointer (runtime strides took a register per row, more
// than there are), and rows copied as rows cost no transposition.
constexpr int64_t kLds = kShortSeq;

// s[r·kLds + j] = scale·Σ_{d < depth} a[r·Lda + d]·bt[d·ldb + j] for r < R, j < 16·NV: R
// rows of a against 16·NV columns of bt.
template <int64_t Lda, int R, int NV>
inline void score_tile(const float* a, const float* bt, int64_t ldb, int64_t depth, float* s,
                       Vec scale) {
  Vec acc[R][NV] = {};
  for (int64_t d = 0; d < depth; ++d) {
    Vec b[NV];
    for (int v = 0; v < NV; ++v) b[v] = simd::load(bt + d * ldb + v * L);
    for (int r = 0; r < R; ++r) {
      const Vec ar = splat(a[r * Lda + d]);
      for (int v = 0; v < NV; ++v) acc[r][v] = fma(ar, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) simd::store(s + r * kLds + v * L, acc[r][v] * scale);
}

// s[r][0, 16·vectors) = scale·a[r]·bt[:, …] for the 16 rows r of a against bt [depth, ldb], in
// tiles of sixteen accumulators.
template <int64_t Lda>
void block_scores(const float* a, const float* bt, int64_t ldb, int64_t depth, float* s,
                  int64_t vectors, Vec scale) {
  int64_t j = 0;
  for (; j + 4 <= vectors; j += 4)
    for (int r = 0; r < L; r += 4)
      score_tile<Lda, 4, 4>(a + r * Lda, bt + j * L, ldb, depth, s + r * kLds + j * L, scale);
  for (; j + 2 <= vectors; j += 2)
    for (int r = 0; r < L; r += 8)
      score_tile<Lda, 8, 2>(a + r * Lda, bt + j * L, ldb, depth, s + r * kLds + j * L, scale);
  if (j < vectors) score_tile<Lda, 16, 1>(a, bt + j * L, ldb, depth, s + j * L, scale);
}

// body.template operator()<R, NV>(d) for the columns [d, d + 16·NV) that cover [0, Dp): four
// vectors by four rows while they fit, then two by eight, then one by sixteen (R divides 16).
template <class Body>
void column_chunks(int64_t Dp, const Body& body) {
  int64_t d = 0;
  for (; d + 4 * L <= Dp; d += 4 * L) body.template operator()<4, 4>(d);
  if (d + 2 * L <= Dp) {
    body.template operator()<8, 2>(d);
    d += 2 * L;
  }
  if (d < Dp) body.template operator()<16, 1>(d);
}

// acc[i][v] = Σ_{k ∈ [begin, end)} a[i·ARS + k·ACS]·x[k·ldx + 16·v + …]: R rows of a block
// (kLds, 1: as stored; 1, kLds: transposed) times rows of x.
template <int R, int NV, int64_t ARS, int64_t ACS>
inline void product_tile(const float* a, const float* x, int64_t ldx, int64_t begin, int64_t end,
                         Vec (&acc)[R][NV]) {
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = Vec{};
  for (int64_t k = begin; k < end; ++k) {
    Vec xv[NV];
    for (int v = 0; v < NV; ++v) xv[v] = simd::load(x + k * ldx + v * L);
    for (int r = 0; r < R; ++r) {
      const Vec ar = splat(a[r * ARS + k * ACS]);
      for (int v = 0; v < NV; ++v) acc[r][v] = fma(ar, xv[v], acc[r][v]);
    }
  }
}

// out[i·ldo + j] = acc[i][j]·scale_of(i) for rows i < min(R, rows) and columns j < width, out
// f32 or bf16 (rounded once, here).
template <int R, int NV, class E, class ScaleOf>
inline void store_tile(const Vec (&acc)[R][NV], E* out, int64_t ldo, int64_t rows, int64_t width,
                       const ScaleOf& scale_of) {
  for (int r = 0; r < R && r < rows; ++r) {
    const Vec scale = scale_of(r);
    for (int v = 0; v < NV; ++v)
      simd::store_part_from_f32(out + r * ldo + v * L, acc[r][v] * scale,
                                std::min<int64_t>(L, width - v * L));
  }
}

uint64_t first_weight(const HeadShape& g, int64_t n, int64_t h, int64_t t) {
  return static_cast<uint64_t>(((n * g.H + h) * g.T + t) * g.T);
}

// The stride of the copied query and output-gradient rows: 32 floats for heads up to 32 (the
// rows of a head take 8 KB, not 16: at T = 64 the backward's data then nearly fits in L1).
int64_t row_stride(const HeadShape& g) {
  return g.Dp <= 32 ? 32 : kShortDim;
}

// Rows of f32 activations that the products may read where they lie; bf16 ones are widened into
// the workspace's copies first (the products multiply f32 tiles: bf16 inputs, f32 accumulation).
template <class E>
const float* in_place(const E* p) {
  if constexpr (std::is_same_v<E, float>)
    return p;
  else
    return nullptr;
}

template <int64_t Lda, class E>
void forward_head(const HeadShape& g, int64_t n, int64_t h, const E* qkv, E* y, float* lse,
                  float* ws, const DropoutDraw& drop) {
  const int64_t T = g.T, D = g.D, C = g.C, Dp = g.Dp, Tp = g.Tp, stride = 3 * C;
  const E* base = qkv + n * T * stride + h * D;
  float* q = ws;             // [Tp, Lda]
  float* kt = q + Tp * Lda;  // [Dp, Tp]
  float* v = kt + Dp * Tp;   // [Tp, Dp]: the values, unless read in place
  float* s = v + Tp * Dp;    // [16, kLds]: a block's scores (base 2), then its weights
  copy_rows(q, Lda, base, stride, T, Tp, D, 1.0f);
  copy_transposed(kt, Tp, base + C, stride, T, D);
  // f32 rows of whole vectors are read where they lie; others are copied, padded with zeros.
  const bool direct = std::is_same_v<E, float> && D % L == 0;
  if (!direct) copy_rows(v, Dp, base + 2 * C, stride, T, Tp, D, 1.0f);
  const float* vrows = direct ? in_place(base + 2 * C) : v;
  const int64_t ldv = direct ? stride : Dp;

  const Vec score_scale = splat(kLog2e / std::sqrt(static_cast<float>(D)));
  const Vec minus_inf = splat(-std::numeric_limits<float>::infinity());
  alignas(64) float row_max[L], row_sum[L], row_scale[L];
  Vec part[L];
  // Query rows q0 … q0 + 15 see keys 0 … q0 + 15: the vectors before q0's whole, q0's own up
  // to the row's lane (rows past T compute on zero padding and are not written).
  for (int64_t q0 = 0; q0 < T; q0 += L) {
    const int64_t rows = std::min<int64_t>(L, T - q0);
    block_scores<Lda>(q + q0 * Lda, kt, Tp, D, s, q0 / L + 1, score_scale);
    for (int r = 0; r < L; ++r) {
      const float* row = s + r * kLds;
      Vec m = first_lanes_or(simd::load(row + q0), r + 1, minus_inf);
      for (int64_t j = 0; j < q0; j += L) m = max(m, simd::load(row + j));
      part[r] = m;
    }
    lane_reductions(
        part, [](Vec a, Vec b) { return max(a, b); }, row_max);
    for (int r = 0; r < L; ++r) {
      float* row = s + r * kLds;
      const Vec m = splat(row_max[r]);
      const uint64_t first = first_weight(g, n, h, q0 + r);
      Vec sum{};
      for (int64_t j = 0; j <= q0; j += L) {
        Vec e = exp2_scaled(simd::load(row + j) - m);
        if (j == q0) e = first_lanes(e, r + 1);
        sum += e;
        if (drop.on) e = select(kept_lanes(drop.key, first + j, drop.threshold), e);
        simd::store(row + j, e);
      }
      part[r] = sum;
    }
    lane_reductions(
        part, [](Vec a, Vec b) { return a + b; }, row_sum);
    const Vec sums = simd::load(row_sum);
    simd::store(row_scale, splat(drop.keep_scale) / sums);
    simd::store_part(lse + (n * g.H + h) * T + q0,
                     (simd::load(row_max) + log2_positive(sums)) * kLn2, rows);
    // y = weights · values / sum; rows r0 … r0 + R − 1 see keys below q0 + r0 + R.
    E* out = y + (n * T + q0) * C + h * D;
    column_chunks(Dp, [&]<int R, int NV>(int64_t d) {
      for (int64_t r0 = 0; r0 < rows; r0 += R) {
        Vec acc[R][NV];
        product_tile<R, NV, kLds, 1>(s + r0 * kLds, vrows + d, ldv, 0, std::min(q0 + r0 + R, T),
                                     acc);
        store_tile<R, NV>(acc, out + r0 * C + d, C, rows - r0, D - d,
                          [&](int i) { return splat(row_scale[r0 + i]); });
      }
    });
  }
}

template <int64_t Lda, class E>
void backward_head(const HeadShape& g, int64_t n, int64_t h, const E* qkv, const E* y, const E* dy,
                   const float* lse, float* ws, const DropoutDraw& drop, E* dqkv) {
  const int64_t T = g.T, D = g.D, C = g.C, Dp = g.Dp, Tp = g.Tp, stride = 3 * C;
  const E* base = qkv + n * T * stride + h * D;
  const E* dy_base = dy + n * T * C + h * D;
  float* q = ws;                 // [Tp, Lda]
  float* dout = q + Tp * Lda;    // [Tp, Lda]: dy of this head
  float* k = dout + Tp * Lda;    // [Tp, Dp]: the keys, unless read in place
  float* kt = k + Tp * Dp;       // [Dp, Tp]
  float* vt = kt + Dp * Tp;      // [Dp, Tp]
  float* p = vt + Dp * Tp;       // [Tp, kLds]: scores, then the dropped-out weights P̃
  float* ds = p + Tp * kLds;     // [Tp, kLds]: the weights' gradients dy·v, then the scores'
  float* lse2 = ds + Tp * kLds;  // [Tp]: log-sum-exp in base 2 (0 past T)
  float* rowdot = lse2 + Tp;     // [Tp]: dy_t·y_t (0 past T)
  copy_rows(q, Lda, base, stride, T, Tp, D, 1.0f);
  copy_rows(dout, Lda, dy_base, C, T, Tp, D, 1.0f);
  copy_transposed(kt, Tp, base + C, stride, T, D);
  copy_transposed(vt, Tp, base + 2 * C, stride, T, D);
  // f32 key rows of whole vectors are read where they lie, others copied, padded with zeros.
  const bool direct = std::is_same_v<E, float> && D % L == 0;
  if (!direct) copy_rows(k, Dp, base + C, stride, T, Tp, D, 1.0f);
  const float* krows = direct ? in_place(base + C) : k;
  const int64_t ldk = direct ? stride : Dp;

  // P̃ and dS = P∘(dP − dy·y), dP the gradient of the weights before dropout, block by block.
  const float rsqrt_d = 1.0f / std::sqrt(static_cast<float>(D));
  const Vec score_scale = splat(kLog2e * rsqrt_d), one = splat(1.0f);
  const Vec keep_scale = splat(drop.keep_scale);
  Vec part[L];
  for (int64_t q0 = 0; q0 < T; q0 += L) {
    // dy_t·y_t and the log-sum-exp in base 2 of the block's rows (0 past T).
    const int64_t rows = std::min<int64_t>(L, T - q0);
    for (int r = 0; r < L; ++r) {
      Vec dot{};
      if (r < rows) {
        const E* yt = y + (n * T + q0 + r) * C + h * D;
        const float* dt_row = dout + (q0 + r) * Lda;
        for (int64_t d = 0; d < D; d += L) {
          const int64_t width = std::min<int64_t>(L, D - d);
          dot = fma(simd::load_part_as_f32(yt + d, width), simd::load_part(dt_row + d, width), dot);
        }
      }
      part[r] = dot;
    }
    lane_reductions(
        part, [](Vec a, Vec b) { return a + b; }, rowdot + q0);
    simd::store(lse2 + q0, simd::load_part(lse + (n * g.H + h) * T + q0, rows) * kLog2e);

    block_scores<Lda>(q + q0 * Lda, kt, Tp, D, p + q0 * kLds, q0 / L + 1, score_scale);
    block_scores<Lda>(dout + q0 * Lda, vt, Tp, D, ds + q0 * kLds, q0 / L + 1, one);
    for (int r = 0; r < L; ++r) {
      const int64_t t = q0 + r;
      float* prow = p + t * kLds;
      float* dsrow = ds + t * kLds;
      const Vec m = splat(lse2[t]), dot = splat(rowdot[t]);
      const uint64_t first = first_weight(g, n, h, t);
      for (int64_t j = 0; j <= q0; j += L) {
        Vec w = exp2_scaled(simd::load(prow + j) - m);
        if (j == q0) w = first_lanes(w, r + 1);
        Vec dw = simd::load(dsrow + j);
        Vec kept_w = w;
        if (drop.on) {
          const IVec kept = kept_lanes(drop.key, first + j, drop.threshold);
          dw = select(kept, dw * keep_scale);
          kept_w = select(kept, w * keep_scale);
        }
        Vec grad = w * (dw - dot);
        if (j == q0) grad = first_lanes(grad, r + 1);
        simd::store(prow + j, kept_w);
        simd::store(dsrow + j, grad);
      }
    }
  }

  // dV[s] = Σ_{t ≥ s} P̃[t, s]·dy[t], dK[s] = Σ_{t ≥ s} dS[t, s]·q[t] and dQ[t] = Σ_{s ≤ t}
  // dS[t, s]·k[s] (both times log2(e)/√D·ln 2 = 1/√D: the scores were base 2), tile by tile
  // straight into dqkv. A tile's keys s0 … s0 + R − 1 (or rows) lie in one 16-block, whose
  // stored vectors hold the zeros above the diagonal.
  E* out = dqkv + n * T * stride + h * D;
  const Vec d_scale = splat(rsqrt_d);
  column_chunks(Dp, [&]<int R, int NV>(int64_t d) {
    for (int64_t s0 = 0; s0 < T; s0 += R) {
      E* dst = out + s0 * stride + d;
      Vec acc[R][NV];
      product_tile<R, NV, kLds, 1>(ds + s0 * kLds, krows + d, ldk, 0, std::min(s0 + R, T), acc);
      store_tile<R, NV>(acc, dst, stride, T - s0, D - d, [&](int) { return d_scale; });
      product_tile<R, NV, 1, kLds>(ds + s0, q + d, Lda, s0, T, acc);
      store_tile<R, NV>(acc, dst + C, stride, T - s0, D - d, [&](int) { return d_scale; });
      product_tile<R, NV, 1, kLds>(p + s0, dout + d, Lda, s0, T, acc);
      store_tile<R, NV>(acc, dst + 2 * C, stride, T - s0, D - d, [&](int) { return one; });
    }
  });
}

}  // namespace

int64_t short_workspace_floats(const HeadShape& g) {
  const int64_t lda = row_stride(g);
  const int64_t forward = g.Tp * lda + 2 * g.Tp * g.Dp + L * kLds;
  const int64_t backward = 2 * g.Tp * lda + 3 * g.Tp * g.Dp + 2 * g.Tp * kLds + 2 * g.Tp;
  return (std::max(forward, backward) + L - 1) / L * L;
}

template <class E>
void short_forward_head(const HeadShape& g, int64_t n, int64_t h, const E* qkv, E* y, float* lse,
                        float* ws, const DropoutDraw& drop) {
  if (row_stride(g) == 32)
    forward_head<32>(g, n, h, qkv, y, lse, ws, drop);
  else
    forward_head<kShortDim>(g, n, h, qkv, y, lse, ws, drop);
}

template <class E>
void short_backward_head(const HeadShape& g, int64_t n, int64_t h, const E* qkv, const E* y,
                         const E* dy, const float* lse, float* ws, const DropoutDraw& drop,
                         E* dqkv) {
  if (row_stride(g) == 32)
    backward_head<32>(g, n, h, qkv, y, dy, lse, ws, drop, dqkv);
  else
    backward_head<kShortDim>(g, n, h, qkv, y, dy, lse, ws, drop, dqkv);
}

template void short_forward_head(const HeadShape&, int64_t, int64_t, const float*, float*, float*,
                                 float*, const DropoutDraw&);
template void short_forward_head(const HeadShape&, int64_t, int64_t, const uint16_t*, uint16_t*,
                                 float*, float*, const DropoutDraw&);
template void short_backward_head(const HeadShape&, int64_t, int64_t, const float*, const float*,
                                  const float*, const float*, float*, const DropoutDraw&, float*);
template void short_backward_head(const HeadShape&, int64_t, int64_t, const uint16_t*,
                                  const uint16_t*, const uint16_t*, const float*, float*,
                                  const DropoutDraw&, uint16_t*);

}  // namespace dtrain::cpu::attention
