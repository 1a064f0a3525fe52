// Causal attention of a short sequence (T ≤ kShortSeq), one (sequence, head) pair at a time,
// without the online softmax: a head's keys and values fit in L1, so a block of 16 query rows
// is scored against all the keys it sees at once (a 16 × T block), and its softmax is exact
// in one pass. The 16 rows' maxima and sums are reduced together, four rounds of permutes
// that transpose as they reduce (lane_reductions), not one reduction tree per row; 2^x uses
// AVX-512's roundscale and scalef. The backward keeps the head's weights P̃ and score
// gradients dS whole (T × T each, 16 KB at T = 64), then takes dV = P̃ᵀ·dy, dK = dSᵀ·q and
// dQ = dS·k as three products whose accumulators go straight to dqkv (no per-head gradient
// buffers to clear and copy out). Every product runs on register tiles of sixteen
// accumulators (4 rows × 4 vectors, 8 × 2 or 16 × 1).
//
// Measured with `dtrain_attention_bench --batch 12 --seq 64 --heads 4 --head-dim 32
// --repeats 200` (one thread, best CPU time, old and new binaries interleaved on the shared
// machine): see the numbers in cpu_attention.cpp's header.
#include "backend/cpu/attention_short.h"

#include <algorithm>  // min
#include <cmath>      // sqrt, log2
#include <limits>     // infinity

namespace dtrain::cpu::attention {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// s[r][0, 16·vectors) = a[r]·bt[:, …] for the 16 rows r of a (lda apart) against bt [depth,
// ldb], in tiles of sixteen accumulators.
void block_scores(const float* a, int64_t lda, const float* bt, int64_t ldb, int64_t depth,
                  float* s, int64_t lds, int64_t vectors) {
  int64_t j = 0;
  for (; j + 4 <= vectors; j += 4)
    for (int r = 0; r < L; r += 4)
      dot_tile<4, 4>(a + r * lda, lda, bt + j * L, ldb, depth, s + r * lds + j * L, lds);
  for (; j + 2 <= vectors; j += 2)
    for (int r = 0; r < L; r += 8)
      dot_tile<8, 2>(a + r * lda, lda, bt + j * L, ldb, depth, s + r * lds + j * L, lds);
  if (j < vectors) dot_tile<16, 1>(a, lda, bt + j * L, ldb, depth, s + j * L, lds);
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

// acc[i][v] = Σ_{k ∈ [begin, end)} a[i·ars + k·acs]·x[k·ldx + 16·v + …]: R rows of a
// coefficient matrix (any strides, so also transposed) times rows of x.
template <int R, int NV>
inline void product_tile(const float* a, int64_t ars, int64_t acs, const float* x, int64_t ldx,
                         int64_t begin, int64_t end, Vec (&acc)[R][NV]) {
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = Vec{};
  for (int64_t k = begin; k < end; ++k) {
    Vec xv[NV];
    for (int v = 0; v < NV; ++v) xv[v] = simd::load(x + k * ldx + v * L);
    for (int r = 0; r < R; ++r) {
      const Vec ar = splat(a[r * ars + k * acs]);
      for (int v = 0; v < NV; ++v) acc[r][v] = fma(ar, xv[v], acc[r][v]);
    }
  }
}

// out[i·ldo + j] = acc[i][j]·scale_of(i) for rows i < min(R, rows) and columns j < width.
template <int R, int NV, class ScaleOf>
inline void store_tile(const Vec (&acc)[R][NV], float* out, int64_t ldo, int64_t rows,
                       int64_t width, const ScaleOf& scale_of) {
  for (int r = 0; r < R && r < rows; ++r) {
    const Vec scale = scale_of(r);
    for (int v = 0; v < NV; ++v)
      simd::store_part(out + r * ldo + v * L, acc[r][v] * scale,
                       std::min<int64_t>(L, width - v * L));
  }
}

uint64_t first_weight(const HeadShape& g, int64_t n, int64_t h, int64_t t) {
  return static_cast<uint64_t>(((n * g.H + h) * g.T + t) * g.T);
}

}  // namespace

int64_t short_workspace_floats(const HeadShape& g) {
  const int64_t forward = 3 * g.Tp * g.Dp + L * g.Tp;
  const int64_t backward = 5 * g.Tp * g.Dp + 2 * g.Tp * g.Tp + 2 * g.Tp;
  return (std::max(forward, backward) + L - 1) / L * L;
}

void short_forward_head(const HeadShape& g, int64_t n, int64_t h, const float* qkv, float* y,
                        float* lse, float* ws, const DropoutDraw& drop) {
  const int64_t T = g.T, D = g.D, C = g.C, Dp = g.Dp, Tp = g.Tp, stride = 3 * C;
  const float* base = qkv + n * T * stride + h * D;
  float* q = ws;            // [Tp, Dp], scaled by log2(e)/√D: scores in base 2
  float* kt = q + Tp * Dp;  // [Dp, Tp]
  float* v = kt + Dp * Tp;  // [Tp, Dp]
  float* s = v + Tp * Dp;   // [16, Tp]: a block's scores, then its weights
  copy_rows(q, Dp, base, stride, T, Tp, D, kLog2e / std::sqrt(static_cast<float>(D)));
  copy_transposed(kt, Tp, base + C, stride, T, D);
  copy_rows(v, Dp, base + 2 * C, stride, T, Tp, D, 1.0f);

  const Vec minus_inf = splat(-std::numeric_limits<float>::infinity());
  alignas(64) float row_max[L], row_sum[L], row_scale[L];
  Vec part[L];
  // Query rows q0 … q0 + 15 see keys 0 … q0 + 15: the vectors before q0's whole, q0's own up
  // to the row's lane (rows past T compute on zero padding and are not written).
  for (int64_t q0 = 0; q0 < T; q0 += L) {
    const int64_t rows = std::min<int64_t>(L, T - q0);
    block_scores(q + q0 * Dp, Dp, kt, Tp, D, s, Tp, q0 / L + 1);
    for (int r = 0; r < L; ++r) {
      const float* row = s + r * Tp;
      Vec m = first_lanes_or(simd::load(row + q0), r + 1, minus_inf);
      for (int64_t j = 0; j < q0; j += L) m = max(m, simd::load(row + j));
      part[r] = m;
    }
    simd::store(row_max, lane_reductions(part, [](Vec a, Vec b) { return max(a, b); }));
    for (int r = 0; r < L; ++r) {
      float* row = s + r * Tp;
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
    const Vec sums = lane_reductions(part, [](Vec a, Vec b) { return a + b; });
    simd::store(row_sum, sums);
    simd::store(row_scale, splat(drop.keep_scale) / sums);
    for (int64_t r = 0; r < rows; ++r)
      lse[(n * g.H + h) * T + q0 + r] = (row_max[r] + std::log2(row_sum[r])) * kLn2;
    // y = weights · values / sum; rows r0 … r0 + R − 1 see keys below q0 + r0 + R.
    float* out = y + (n * T + q0) * C + h * D;
    column_chunks(Dp, [&]<int R, int NV>(int64_t d) {
      for (int64_t r0 = 0; r0 < rows; r0 += R) {
        Vec acc[R][NV];
        product_tile<R, NV>(s + r0 * Tp, Tp, 1, v + d, Dp, 0, q0 + r0 + R, acc);
        store_tile<R, NV>(acc, out + r0 * C + d, C, rows - r0, D - d,
                          [&](int i) { return splat(row_scale[r0 + i]); });
      }
    });
  }
}

void short_backward_head(const HeadShape& g, int64_t n, int64_t h, const float* qkv, const float* y,
                         const float* dy, const float* lse, float* ws, const DropoutDraw& drop,
                         float* dqkv) {
  const int64_t T = g.T, D = g.D, C = g.C, Dp = g.Dp, Tp = g.Tp, stride = 3 * C;
  const float* base = qkv + n * T * stride + h * D;
  float* q = ws;               // [Tp, Dp], scaled by log2(e)/√D
  float* k = q + Tp * Dp;      // [Tp, Dp]
  float* dout = k + Tp * Dp;   // [Tp, Dp]: dy of this head
  float* kt = dout + Tp * Dp;  // [Dp, Tp]
  float* vt = kt + Dp * Tp;    // [Dp, Tp]
  float* p = vt + Dp * Tp;     // [Tp, Tp]: scores, then the dropped-out weights P̃
  float* ds = p + Tp * Tp;     // [Tp, Tp]: the weights' gradients dy·v, then the scores'
  float* lse2 = ds + Tp * Tp;  // [Tp]: log-sum-exp in base 2 (0 past T)
  float* rowdot = lse2 + Tp;   // [Tp]: dy_t·y_t (0 past T)
  copy_rows(q, Dp, base, stride, T, Tp, D, kLog2e / std::sqrt(static_cast<float>(D)));
  copy_rows(k, Dp, base + C, stride, T, Tp, D, 1.0f);
  copy_rows(dout, Dp, dy + n * T * C + h * D, C, T, Tp, D, 1.0f);
  copy_transposed(kt, Tp, base + C, stride, T, D);
  copy_transposed(vt, Tp, base + 2 * C, stride, T, D);
  for (int64_t t = 0; t < Tp; ++t) {
    if (t >= T) {
      rowdot[t] = lse2[t] = 0.0f;
      continue;
    }
    const float* yt = y + (n * T + t) * C + h * D;
    Vec dot{};
    for (int64_t d = 0; d < D; d += L)
      dot = fma(simd::load_part(yt + d, std::min<int64_t>(L, D - d)), simd::load(dout + t * Dp + d),
                dot);
    rowdot[t] = lane_sum(dot);
    lse2[t] = lse[(n * g.H + h) * T + t] * kLog2e;
  }

  // P̃ and dS = P∘(dP − dy·y), dP the gradient of the weights before dropout, block by block.
  const Vec keep_scale = splat(drop.keep_scale);
  for (int64_t q0 = 0; q0 < T; q0 += L) {
    block_scores(q + q0 * Dp, Dp, kt, Tp, D, p + q0 * Tp, Tp, q0 / L + 1);
    block_scores(dout + q0 * Dp, Dp, vt, Tp, D, ds + q0 * Tp, Tp, q0 / L + 1);
    for (int r = 0; r < L; ++r) {
      const int64_t t = q0 + r;
      float* prow = p + t * Tp;
      float* dsrow = ds + t * Tp;
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

  // dV[s] = Σ_{t ≥ s} P̃[t, s]·dy[t], dK[s] = Σ_{t ≥ s} dS[t, s]·q[t] (against the pre-scaled
  // q: times ln 2) and dQ[t] = Σ_{s ≤ t} dS[t, s]·k[s] (times 1/√D), tile by tile straight into
  // dqkv. A tile's keys s0 … s0 + R − 1 (or rows) lie in one 16-block, whose stored vectors
  // hold the zeros above the diagonal.
  float* out = dqkv + n * T * stride + h * D;
  const Vec one = splat(1.0f), dk_scale = splat(kLn2);
  const Vec dq_scale = splat(1.0f / std::sqrt(static_cast<float>(D)));
  column_chunks(Dp, [&]<int R, int NV>(int64_t d) {
    for (int64_t s0 = 0; s0 < T; s0 += R) {
      float* dst = out + s0 * stride + d;
      Vec acc[R][NV];
      product_tile<R, NV>(ds + s0 * Tp, Tp, 1, k + d, Dp, 0, std::min(s0 + R, T), acc);
      store_tile<R, NV>(acc, dst, stride, T - s0, D - d, [&](int) { return dq_scale; });
      product_tile<R, NV>(ds + s0, 1, Tp, q + d, Dp, s0, T, acc);
      store_tile<R, NV>(acc, dst + C, stride, T - s0, D - d, [&](int) { return dk_scale; });
      product_tile<R, NV>(p + s0, 1, Tp, dout + d, Dp, s0, T, acc);
      store_tile<R, NV>(acc, dst + 2 * C, stride, T - s0, D - d, [&](int) { return one; });
    }
  });
}

}  // namespace dtrain::cpu::attention
