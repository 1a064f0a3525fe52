// Causal multi-head self-attention on the CPU, flash-style: one thread takes a whole (sequence,
// head) pair, copies its queries, keys and values into padded per-thread buffers, and walks
// tiles of kQueryBlock queries × kKeyBlock keys below the diagonal. The forward keeps a running
// maximum and sum per query (the online softmax) and writes only y and the log-sum-exp; the
// backward recomputes each tile's weights from the scores and the log-sum-exp. Scores are
// computed in base 2 (queries scaled by log2(e)/√D) so that the exponentials are 2^x; the
// results are the natural ones. Each pair's arithmetic is the same whichever thread runs it,
// so the output does not depend on the thread count. The workspace holds one slice per thread
// of the OpenMP team size at the op's making (the backend's thread count); a call never runs
// more threads than that.
//
// Sequences up to 64 positions with heads up to 64 channels take the whole-head kernels of
// attention_short.cpp instead (no online softmax, 16 query rows against all their keys at
// once; see there): about 1.4× the tiled kernels' speed at the small GPT's shape
// (dtrain_attention_bench --batch 12 --seq 64 --heads 4 --head-dim 32). Longer sequences stay
// on the tiled kernels. The measurements: bench/results/2026-11-26-cpu-attention-short.md.
//
// bf16 activations (AttentionSpec::dtype) take the same kernels: the per-head copies widen them
// to f32 exactly, y and dqkv are rounded once as they are stored (CpuAttention::forward_all).
// The score products stay f32 FMAs: AVX512-BF16's vdpbf16ps, tried in their place, was slower
// (bench/results/2026-11-27-cpu-attention-bf16.md).
#include <omp.h>  // omp_get_max_threads, omp_get_thread_num

#include <algorithm>         // min, max, fill
#include <cmath>             // sqrt, exp2, log2, ceil
#include <initializer_list>  // check_dtypes
#include <limits>            // infinity
#include <utility>           // pair

#include "backend/cpu/attention_short.h"
#include "backend/cpu/attention_tiles.h"
#include "backend/cpu/bf16.h"  // bf16_t
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/rng.h"  // mix64

namespace dtrain::cpu {
namespace {

using namespace attention;

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 128;  // a multiple of 16: a tile's keys are whole vectors
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

// ---- drivers of the register tiles (attention_tiles.h) ----------------------------------

template <int R>
void score_rows(const float* a, int64_t lda, const float* bt, int64_t ldb, int64_t depth, float* s,
                int64_t lds, int64_t keys) {
  for (int64_t j = 0; j < keys; j += 4 * L) {
    switch (std::min<int64_t>(4, (keys - j + L - 1) / L)) {
      case 4:
        dot_tile<R, 4>(a, lda, bt + j, ldb, depth, s + j, lds);
        break;
      case 3:
        dot_tile<R, 3>(a, lda, bt + j, ldb, depth, s + j, lds);
        break;
      case 2:
        dot_tile<R, 2>(a, lda, bt + j, ldb, depth, s + j, lds);
        break;
      default:
        dot_tile<R, 1>(a, lda, bt + j, ldb, depth, s + j, lds);
    }
  }
}

// s[r][j] = a[r]·bt[:, j] for r < rows and j < keys_of(last row of r's block of four), rounded
// up to whole vectors: what the causal mask leaves of a tile, at the granularity of 4 × 16.
template <class KeysOf>
void scores(const float* a, int64_t lda, int64_t rows, const float* bt, int64_t ldb, int64_t depth,
            float* s, int64_t lds, const KeysOf& keys_of) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4)
    score_rows<4>(a + r * lda, lda, bt, ldb, depth, s + r * lds, lds, keys_of(r + 3));
  for (; r < rows; ++r)
    score_rows<1>(a + r * lda, lda, bt, ldb, depth, s + r * lds, lds, keys_of(r));
}

template <int NV, class RangeOf>
void accumulate_columns(float* out, int64_t ldo, int64_t rows, const float* a, int64_t ars,
                        int64_t acs, const float* x, int64_t ldx, const RangeOf& range_of) {
  // Sixteen accumulators whatever the width: eight rows of one or two vectors, four of more.
  constexpr int R = NV <= 2 ? 8 : 4;
  int64_t r = 0;
  for (; r + R <= rows; r += R) {
    const auto [begin, end] = range_of(r, r + R - 1);
    if (begin < end)
      accumulate_tile<R, NV>(out + r * ldo, ldo, a + r * ars, ars, acs, x, ldx, begin, end);
  }
  for (; r < rows; ++r) {
    const auto [begin, end] = range_of(r, r);
    if (begin < end)
      accumulate_tile<1, NV>(out + r * ldo, ldo, a + r * ars, ars, acs, x, ldx, begin, end);
  }
}

// out[r][0, width) += Σ_{k ∈ range_of(block of r)} a(r, k)·x[k][0, width), a(r, k) at
// a[r·ars + k·acs]; width is a multiple of 16, and range_of(first, last) gives the k range
// of rows first … last (coefficients outside a row's own range must be 0).
template <class RangeOf>
void accumulate(float* out, int64_t ldo, int64_t rows, const float* a, int64_t ars, int64_t acs,
                const float* x, int64_t ldx, int64_t width, const RangeOf& range_of) {
  for (int64_t d = 0; d < width; d += 4 * L) {
    switch (std::min<int64_t>(4, (width - d) / L)) {
      case 4:
        accumulate_columns<4>(out + d, ldo, rows, a, ars, acs, x + d, ldx, range_of);
        break;
      case 3:
        accumulate_columns<3>(out + d, ldo, rows, a, ars, acs, x + d, ldx, range_of);
        break;
      case 2:
        accumulate_columns<2>(out + d, ldo, rows, a, ars, acs, x + d, ldx, range_of);
        break;
      default:
        accumulate_columns<1>(out + d, ldo, rows, a, ars, acs, x + d, ldx, range_of);
    }
  }
}

// ---- the op ------------------------------------------------------------------------------

class CpuAttention final : public AttentionOp {
 public:
  explicit CpuAttention(const AttentionSpec& s)
      : spec_(s),
        T_(s.seq),
        H_(s.heads),
        D_(s.head_dim),
        C_(s.channels()),
        Dp_(round_up(s.head_dim, L)),
        Tp_(round_up(s.seq, L)),
        slots_(std::max(1, omp_get_max_threads())) {
    const int64_t tile = kQueryBlock * kKeyBlock;
    const int64_t forward = 2 * T_ * Dp_ + Dp_ * Tp_ + tile + kQueryBlock * Dp_ + 2 * kQueryBlock;
    const int64_t backward = 6 * T_ * Dp_ + 2 * Dp_ * Tp_ + 2 * tile + 2 * T_;
    // Whole cache lines per thread.
    per_thread_ = round_up(std::max({forward, backward, short_workspace_floats(shape())}), L);
  }

  size_t workspace_bytes() const override {
    return static_cast<size_t>(slots_ * per_thread_) * sizeof(float);
  }

  void forward(const Tensor& qkv, const Tensor& y, const Tensor& lse, const Tensor& workspace,
               bool training, uint64_t seed, uint64_t stream) override {
    const int64_t N = batch_of(qkv);
    DTRAIN_CHECK(y.numel() == N * T_ * C_ && lse.numel() >= N * H_ * T_)
        << "attention: y or lse of the wrong size";
    check_dtypes({&qkv, &y});
    check_workspace(workspace);
    const DropoutDraw drop(training, spec_.dropout, seed, stream);
    if (spec_.dtype == DType::bf16)
      forward_all<bf16_t>(N, qkv, y, lse, workspace, drop);
    else
      forward_all<float>(N, qkv, y, lse, workspace, drop);
  }

  void backward(const Tensor& qkv, const Tensor& y, const Tensor& dy, const Tensor& lse,
                const Tensor& workspace, uint64_t seed, uint64_t stream,
                const Tensor& dqkv) override {
    const int64_t N = batch_of(qkv);
    DTRAIN_CHECK(y.numel() == N * T_ * C_ && dy.numel() == y.numel() &&
                 lse.numel() >= N * H_ * T_ && dqkv.numel() == qkv.numel())
        << "attention: y, dy, lse or dqkv of the wrong size";
    check_dtypes({&qkv, &y, &dy, &dqkv});
    check_workspace(workspace);
    const DropoutDraw drop(true, spec_.dropout, seed, stream);
    if (spec_.dtype == DType::bf16)
      backward_all<bf16_t>(N, qkv, y, dy, lse, workspace, drop, dqkv);
    else
      backward_all<float>(N, qkv, y, dy, lse, workspace, drop, dqkv);
  }

 private:
  HeadShape shape() const { return {T_, H_, D_, C_, Dp_, Tp_}; }
  bool short_path() const { return T_ <= kShortSeq && Dp_ <= kShortDim; }
  int64_t batch_of(const Tensor& qkv) const {
    const int64_t N = qkv.numel() / (T_ * 3 * C_);
    DTRAIN_CHECK(N * T_ * 3 * C_ == qkv.numel() && N <= spec_.batch)
        << "attention: qkv " << qkv.shape().str() << " is not up to " << spec_.batch
        << " sequences of " << T_ << " × " << 3 * C_;
    return N;
  }
  void check_dtypes(std::initializer_list<const Tensor*> activations) const {
    for (const Tensor* t : activations)
      DTRAIN_CHECK(t->dtype() == spec_.dtype)
          << "attention: a " << dtype_name(t->dtype()) << " activation for a "
          << dtype_name(spec_.dtype) << " op";
  }
  void check_workspace(const Tensor& workspace) const {
    DTRAIN_CHECK(workspace.bytes() >= workspace_bytes())
        << "attention: workspace of " << workspace.bytes() << " bytes, needs " << workspace_bytes();
  }

  // The activations are E: float, or bf16 (bf16_t), which the per-head copies widen to f32 as they
  // read it (exactly) and the final stores of y and dqkv round once: the products then take
  // bf16 inputs and accumulate in f32, as PyTorch's autocast attention does; the weights P (and
  // their gradients) stay f32 between the softmax and the products with v (dy). The workspace is
  // the same for both: every bf16 row read goes through a copy the f32 path makes too.
  template <class E>
  void forward_all(int64_t N, const Tensor& qkv, const Tensor& y, const Tensor& lse,
                   const Tensor& workspace, const DropoutDraw& drop) const {
    const E* x = qkv.data<E>();
    E* out = y.data<E>();
    if (short_path()) {
      for_each_head(N, workspace, [&](int64_t n, int64_t h, float* ws) {
        short_forward_head(shape(), n, h, x, out, lse.data<float>(), ws, drop);
      });
      return;
    }
    // No software prefetch of the next head here: at T = 64 it cost more than it saved.
    for_each_head(N, workspace, [&](int64_t n, int64_t h, float* ws) {
      forward_head(n, h, x, out, lse.data<float>(), ws, drop);
    });
  }

  template <class E>
  void backward_all(int64_t N, const Tensor& qkv, const Tensor& y, const Tensor& dy,
                    const Tensor& lse, const Tensor& workspace, const DropoutDraw& drop,
                    const Tensor& dqkv) const {
    const E* x = qkv.data<E>();
    const E* out = y.data<E>();
    const E* dout = dy.data<E>();
    E* dx = dqkv.data<E>();
    if (short_path()) {
      for_each_head(N, workspace, [&](int64_t n, int64_t h, float* ws) {
        short_backward_head(shape(), n, h, x, out, dout, lse.data<float>(), ws, drop, dx);
      });
      return;
    }
    for_each_head(N, workspace, [&](int64_t n, int64_t h, float* ws) {
      const Slices<E> nx = next_head<E>(N, n, h, {x, out});
      const Slices<E> nd = next_head<E>(N, n, h, {dx, dout});
      backward_head(n, h, x, out, dout, lse.data<float>(), ws, drop, dx, nx, nd);
    });
  }

  // body(n, h, the thread's workspace) for every (sequence, head) pair, the pairs shared
  // among at most slots_ threads.
  template <class Body>
  void for_each_head(int64_t N, const Tensor& workspace, const Body& body) const {
    float* base = workspace.data<float>();
    const int64_t pairs = N * H_;
    if (pairs == 0) return;
    const int team = static_cast<int>(
        std::min<int64_t>({static_cast<int64_t>(omp_get_max_threads()), slots_, pairs}));
    if (team == 1) {  // a plain loop: the runtime's dynamic schedule cost 2% at T = 64
      for (int64_t pair = 0; pair < pairs; ++pair) body(pair / H_, pair % H_, base);
      return;
    }
#pragma omp parallel num_threads(team)
    {
      float* ws = base + omp_get_thread_num() * per_thread_;
#pragma omp for schedule(dynamic, 1)
      for (int64_t pair = 0; pair < pairs; ++pair) body(pair / H_, pair % H_, ws);
    }
  }

  // The next (sequence, head) pair's first column in a [.., T, 3C] and a [.., T, C] tensor (or
  // nulls): while a head's backward computes, each of its query rows asks for one row of the
  // next head's slices to come into L2. A head's slice of a row is 1/heads of it, rows apart,
  // which the hardware prefetchers do not foresee; one row per query row spreads the requests
  // over the head's arithmetic (all at once, they were slower than none).
  template <class E>
  struct Slices {
    const E* qkv = nullptr;
    const E* rows = nullptr;
  };
  template <class E>
  Slices<E> next_head(int64_t N, int64_t n, int64_t h, Slices<E> base) const {
    const int64_t next = n * H_ + h + 1;
    if (next >= N * H_) return {};
    const int64_t nn = next / H_, nh = next % H_;
    return {base.qkv + nn * T_ * 3 * C_ + nh * D_, base.rows + nn * T_ * C_ + nh * D_};
  }
  template <class E>
  void prefetch_row(const E* first, int parts, bool for_writing) const {
    for (int part = 0; part < parts; ++part)
      for (int64_t d = 0; d < D_; d += L) {
        if (for_writing)
          __builtin_prefetch(first + part * C_ + d, 1, 2);
        else
          __builtin_prefetch(first + part * C_ + d, 0, 2);
      }
  }

  // rows[t][0, D) ← src[t·stride + …]·factor, columns D … Dp−1 zero.
  template <class E>
  void copy_rows(float* rows, const E* src, int64_t stride, float factor) const {
    attention::copy_rows(rows, Dp_, src, stride, T_, T_, D_, factor);
  }
  // cols[d][t] ← src[t·stride + d] ([Dp, Tp], padding zero).
  template <class E>
  void copy_transposed(float* cols, const E* src, int64_t stride) const {
    attention::copy_transposed(cols, Tp_, src, stride, T_, D_);
  }

  uint64_t weight_index(int64_t n, int64_t h, int64_t t, int64_t s) const {
    return static_cast<uint64_t>(((n * H_ + h) * T_ + t) * T_ + s);
  }

  template <class E>
  void forward_head(int64_t n, int64_t h, const E* qkv, E* y, float* lse, float* ws,
                    const DropoutDraw& drop) const {
    const int64_t stride = 3 * C_;
    const E* base = qkv + n * T_ * stride + h * D_;
    float* q = ws;                           // [T, Dp], scaled by log2(e)/√D
    float* v = q + T_ * Dp_;                 // [T, Dp]
    float* kt = v + T_ * Dp_;                // [Dp, Tp]
    float* s = kt + Dp_ * Tp_;               // [kQueryBlock, kKeyBlock]: scores, then weights
    float* o = s + kQueryBlock * kKeyBlock;  // [kQueryBlock, Dp]: unnormalised outputs
    float* row_max = o + kQueryBlock * Dp_;
    float* row_sum = row_max + kQueryBlock;
    copy_rows(q, base, stride, kLog2e / std::sqrt(static_cast<float>(D_)));
    copy_transposed(kt, base + C_, stride);
    copy_rows(v, base + 2 * C_, stride, 1.0f);

    for (int64_t q0 = 0; q0 < T_; q0 += kQueryBlock) {
      const int64_t bq = std::min(kQueryBlock, T_ - q0);
      std::fill(row_max, row_max + bq, -std::numeric_limits<float>::infinity());
      std::fill(row_sum, row_sum + bq, 0.0f);
      std::fill(o, o + bq * Dp_, 0.0f);
      for (int64_t k0 = 0; k0 < q0 + bq; k0 += kKeyBlock) {
        const int64_t bk = std::min(kKeyBlock, q0 + bq - k0);
        // Keys of the tile that query row r sees (≤ 0: none).
        auto keys_of = [&](int64_t r) { return std::min(bk, q0 + r - k0 + 1); };
        scores(q + q0 * Dp_, Dp_, bq, kt + k0, Tp_, Dp_, s, kKeyBlock, keys_of);
        for (int64_t r = 0; r < bq; ++r)
          softmax_step(s + r * kKeyBlock, keys_of(r), bk, row_max[r], row_sum[r], o + r * Dp_, drop,
                       weight_index(n, h, q0 + r, k0));
        accumulate(o, Dp_, bq, s, kKeyBlock, 1, v + k0 * Dp_, Dp_, Dp_, [&](int64_t, int64_t last) {
          return std::pair<int64_t, int64_t>{0, std::max<int64_t>(0, keys_of(last))};
        });
      }
      for (int64_t r = 0; r < bq; ++r) {
        const int64_t t = q0 + r;
        const Vec scale = splat(drop.keep_scale / row_sum[r]);
        E* out = y + (n * T_ + t) * C_ + h * D_;
        for (int64_t d = 0; d < D_; d += L)
          simd::store_part_from_f32(out + d, simd::load(o + r * Dp_ + d) * scale,
                                    std::min<int64_t>(L, D_ - d));
        lse[(n * H_ + h) * T_ + t] = (row_max[r] + std::log2(row_sum[r])) * kLn2;
      }
    }
  }

  // One key tile of one query row in the online softmax: the row's running maximum and sum
  // take in its `keys` visible scores (base 2), its output row is rescaled to the new
  // maximum, and the scores become the (dropped-out) weights; the tile's other columns up to
  // `width` become 0.
  void softmax_step(float* row, int64_t keys, int64_t width, float& row_max, float& row_sum,
                    float* out, const DropoutDraw& drop, uint64_t first_index) const {
    const int64_t padded = round_up(width, L);
    if (keys <= 0) {
      std::fill(row, row + padded, 0.0f);
      return;
    }
    Vec vmax = splat(-std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < keys; j += L) {
      const Vec x = simd::load(row + j);
      vmax = max(vmax, keys - j >= L ? x : first_lanes_or(x, keys - j, vmax));
    }
    const float new_max = std::max(row_max, lane_max(vmax));
    const Vec m = splat(new_max);
    Vec sum{};
    for (int64_t j = 0; j < padded; j += L) {
      if (j >= keys) {
        simd::store(row + j, Vec{});
        continue;
      }
      Vec e = exp2(simd::load(row + j) - m);
      if (keys - j < L) e = first_lanes(e, keys - j);
      sum += e;
      if (drop.on) e = select(kept_lanes(drop.key, first_index + j, drop.threshold), e);
      simd::store(row + j, e);
    }
    // 0 on the row's first tile (its maximum still −∞), the only tile of a short sequence:
    // the libm call costs as much as the rest of a short row.
    const float alpha =
        row_max == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp2(row_max - new_max);
    row_sum = row_sum * alpha + lane_sum(sum);
    row_max = new_max;
    if (alpha != 1.0f && alpha != 0.0f)  // 0: the row's first tile, whose output is still 0
      for (int64_t d = 0; d < Dp_; ++d) out[d] *= alpha;
  }

  template <class E>
  void backward_head(int64_t n, int64_t h, const E* qkv, const E* y, const E* dy, const float* lse,
                     float* ws, const DropoutDraw& drop, E* dqkv, const Slices<E>& nx,
                     const Slices<E>& nd) const {
    const int64_t stride = 3 * C_;
    const E* base = qkv + n * T_ * stride + h * D_;
    float* q = ws;               // [T, Dp], scaled by log2(e)/√D
    float* k = q + T_ * Dp_;     // [T, Dp]
    float* dout = k + T_ * Dp_;  // [T, Dp]: dy of this head
    float* dq = dout + T_ * Dp_;
    float* dk = dq + T_ * Dp_;
    float* dv = dk + T_ * Dp_;
    float* kt = dv + T_ * Dp_;                   // [Dp, Tp]
    float* vt = kt + Dp_ * Tp_;                  // [Dp, Tp]
    float* p = vt + Dp_ * Tp_;                   // [kQueryBlock, kKeyBlock]: scores, then weights
    float* dp = p + kQueryBlock * kKeyBlock;     // weights' gradients, then scores'
    float* lse2 = dp + kQueryBlock * kKeyBlock;  // [T]: log-sum-exp in base 2
    float* rowdot = lse2 + T_;                   // [T]: dy_t·y_t
    copy_rows(q, base, stride, kLog2e / std::sqrt(static_cast<float>(D_)));
    copy_rows(k, base + C_, stride, 1.0f);
    copy_transposed(kt, base + C_, stride);
    copy_transposed(vt, base + 2 * C_, stride);
    copy_rows(dout, dy + n * T_ * C_ + h * D_, C_, 1.0f);
    std::fill(dq, dq + 3 * T_ * Dp_, 0.0f);
    for (int64_t t = 0; t < T_; ++t) {
      const E* yt = y + (n * T_ + t) * C_ + h * D_;
      Vec dot{};
      for (int64_t d = 0; d < D_; d += L)
        dot = fma(simd::load_part_as_f32(yt + d, std::min<int64_t>(L, D_ - d)),
                  simd::load(dout + t * Dp_ + d), dot);
      rowdot[t] = lane_sum(dot);
      lse2[t] = lse[(n * H_ + h) * T_ + t] * kLog2e;
    }

    for (int64_t q0 = 0; q0 < T_; q0 += kQueryBlock) {
      const int64_t bq = std::min(kQueryBlock, T_ - q0);
      for (int64_t k0 = 0; k0 < q0 + bq; k0 += kKeyBlock) {
        const int64_t bk = std::min(kKeyBlock, q0 + bq - k0);
        auto keys_of = [&](int64_t r) { return std::min(bk, q0 + r - k0 + 1); };
        scores(q + q0 * Dp_, Dp_, bq, kt + k0, Tp_, Dp_, p, kKeyBlock, keys_of);
        scores(dout + q0 * Dp_, Dp_, bq, vt + k0, Tp_, Dp_, dp, kKeyBlock, keys_of);
        for (int64_t r = 0; r < bq; ++r) {
          if (k0 == 0 && nx.qkv) {
            prefetch_row(nx.qkv + (q0 + r) * 3 * C_, 3, false);
            prefetch_row(nx.rows + (q0 + r) * C_, 1, false);
            prefetch_row(nd.qkv + (q0 + r) * 3 * C_, 3, true);
            prefetch_row(nd.rows + (q0 + r) * C_, 1, false);
          }
          weight_gradients(p + r * kKeyBlock, dp + r * kKeyBlock, keys_of(r), bk, lse2[q0 + r],
                           rowdot[q0 + r], drop, weight_index(n, h, q0 + r, k0));
        }
        // dV[s] += Σ_t P̃[t, s]·dy[t] and dK[s] += Σ_t dS[t, s]·q[t] over the tile's queries
        // t ≥ s: the rows are keys, the coefficients the tile read transposed.
        auto queries_of = [&](int64_t first, int64_t) {
          return std::pair<int64_t, int64_t>{std::max<int64_t>(0, k0 + first - q0), bq};
        };
        accumulate(dv + k0 * Dp_, Dp_, bk, p, 1, kKeyBlock, dout + q0 * Dp_, Dp_, Dp_, queries_of);
        accumulate(dk + k0 * Dp_, Dp_, bk, dp, 1, kKeyBlock, q + q0 * Dp_, Dp_, Dp_, queries_of);
        // dQ[t] += Σ_s dS[t, s]·k[s] over the keys s ≤ t.
        accumulate(dq + q0 * Dp_, Dp_, bq, dp, kKeyBlock, 1, k + k0 * Dp_, Dp_, Dp_,
                   [&](int64_t, int64_t last) {
                     return std::pair<int64_t, int64_t>{0, std::max<int64_t>(0, keys_of(last))};
                   });
      }
    }
    // The scores were q·k·log2(e)/√D with q pre-scaled: dQ needs 1/√D, dK (taken against the
    // pre-scaled q) ln 2.
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(D_));
    const Vec dq_scale = splat(q_scale), dk_scale = splat(kLn2);
    for (int64_t t = 0; t < T_; ++t) {
      E* out = dqkv + (n * T_ + t) * stride + h * D_;
      for (int64_t d = 0; d < D_; d += L) {
        const int64_t width = std::min<int64_t>(L, D_ - d);
        simd::store_part_from_f32(out + d, simd::load(dq + t * Dp_ + d) * dq_scale, width);
        simd::store_part_from_f32(out + C_ + d, simd::load(dk + t * Dp_ + d) * dk_scale, width);
        simd::store_part_from_f32(out + 2 * C_ + d, simd::load(dv + t * Dp_ + d), width);
      }
    }
  }

  // One query row of a backward tile: from the scores (base 2) and the weights' output
  // gradients dy·v, the (dropped-out) weights P̃ into `row` and the scores' gradients
  // dS = P∘(dP − dy·y) into `grad`, with dP the gradient of the weights before dropout;
  // columns past `keys` up to `width` become 0.
  void weight_gradients(float* row, float* grad, int64_t keys, int64_t width, float lse2,
                        float rowdot, const DropoutDraw& drop, uint64_t first_index) const {
    const int64_t padded = round_up(width, L);
    const Vec m = splat(lse2), dot = splat(rowdot), keep_scale = splat(drop.keep_scale);
    for (int64_t j = 0; j < padded; j += L) {
      if (j >= keys) {
        simd::store(row + j, Vec{});
        simd::store(grad + j, Vec{});
        continue;
      }
      Vec w = exp2(simd::load(row + j) - m);
      Vec dw = simd::load(grad + j);
      if (drop.on) {
        const IVec kept = kept_lanes(drop.key, first_index + j, drop.threshold);
        dw = select(kept, dw * keep_scale);
        simd::store(row + j, first_lanes(select(kept, w * keep_scale), keys - j));
      }
      Vec ds = w * (dw - dot);
      if (keys - j < L) {
        w = first_lanes(w, keys - j);
        ds = first_lanes(ds, keys - j);
      }
      if (!drop.on) simd::store(row + j, w);
      simd::store(grad + j, ds);
    }
  }

  AttentionSpec spec_;
  int64_t T_, H_, D_, C_;
  int64_t Dp_, Tp_;         // head_dim and seq rounded up to whole vectors
  int64_t slots_;           // threads the workspace has room for
  int64_t per_thread_ = 0;  // floats of workspace per thread
};

}  // namespace

std::unique_ptr<AttentionOp> make_attention(const AttentionSpec& spec) {
  DTRAIN_CHECK(spec.seq > 0 && spec.heads > 0 && spec.head_dim > 0 && spec.batch >= 0 &&
               spec.dropout >= 0.0f && spec.dropout <= 1.0f &&
               (spec.dtype == DType::f32 || spec.dtype == DType::bf16))
      << "attention: bad spec";
  return std::make_unique<CpuAttention>(spec);
}

}  // namespace dtrain::cpu
