// Causal multi-head attention as tiled flash attention in fp32 (FlashAttention-2's structure):
// no T×T matrix is ever stored. Tiles of kBlock queries × kBlock keys; each block of 256
// threads is a 16 × 16 grid in which thread (ty, tx) owns score rows ty + 16i and score columns
// tx + 16j of every tile, and output columns in groups of 4 (dim_of). Shared-memory tiles are
// read as float4 (along the head dimension for scores, along the outputs for products), with
// rows padded so that those reads spread over all banks. Head dimensions up to 64 run on
// 64-wide tiles, up to 128 on 128-wide ones (zeros past D).
//  - forward, one block per (n, head, query block): scores of the query tile against each key
//    tile up to the diagonal, an online softmax (running max and sum per row), the output
//    accumulated in registers, then y = acc / sum and lse = max + log(sum) per row;
//  - backward: rowdot = Σ_d dy·y per row first; then one block per (n, head, key block) runs
//    over the query tiles from the diagonal on and accumulates dk and dv, and one block per
//    (n, head, query block) runs over the key tiles up to the diagonal and accumulates dq. Both
//    recompute the weights from qkv and lse, so every gradient is summed in registers in a
//    fixed order: no atomics, the same bits on every call.
// Dropout drops weight (n, h, t, s) by random_uniform of core/rng.h at index
// ((n·heads + h)·T + t)·T + s, the same draw in the forward and in both backward passes. The
// softmax sums are taken before dropout (PyTorch drops the normalised weights).
// Exponentials are base 2 with log2(e) folded into the score scale; products are explicit
// fmaf (the folder compiles with -fmad=false).
// qkv, y, dy and dqkv are f32 or bf16 (E, mixed precision): bf16 values are widened exactly as
// the tiles are loaded into shared memory (every product, sum and the softmax in f32, as the
// CPU's bf16 attention) and rounded once as y and dqkv are stored; lse and rowdot stay f32.
#include <math_constants.h>  // CUDART_INF_F

#include "backend/cuda/bf16.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/sequence_kernels.h"
#include "core/error.h"
#include "core/rng.h"  // random_uniform (constexpr: usable in device code)

namespace dtrain::cuda {
namespace {

constexpr int kBlock = 64;  // queries and keys per tile
constexpr int kGrid = 16;   // threads per tile side
constexpr int kTileThreads = kGrid * kGrid;
// The kernels ask for two resident blocks per SM on 64-wide tiles (128 registers a thread; the
// shared memory allows three) and one on 128-wide tiles, whose shared memory allows one or two.
constexpr int kSub = kBlock / kGrid;      // tile rows (and score columns) per thread
constexpr int kScoreStride = kBlock + 4;  // rows of score tiles: 16-byte aligned, banks staggered
constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kLn2 = 0.69314718055994530942f;

struct Geometry {
  int64_t batch, seq, heads, head_dim, channels;
  float scale;       // 1/√D
  float scale_log2;  // log2(e)/√D: scores in base-2 units
  float dropout, keep_scale;
  uint64_t seed, rng_stream;
};

// Tiles of q, k, v, dy are [kBlock][KD + 4] in shared memory: rows 16-byte aligned for float4
// reads along d, and consecutive rows 4 banks apart, so that 16 threads reading 16 rows' float4
// hit every bank once per 8 rows.
template <int KD>
constexpr int tile_stride() {
  return KD + 4;
}

// Rows [first, first + kBlock) of one head's D columns, from src (row t at src + t·stride),
// into a tile; zeros past the sequence and past D, so that the padding adds nothing.
template <int KD, typename E>
__device__ void load_tile(float* tile, const E* src, int64_t stride, int64_t first, int64_t seq,
                          int64_t head_dim) {
  for (int idx = threadIdx.x; idx < kBlock * KD; idx += kTileThreads) {
    const int r = idx / KD, d = idx % KD;
    const int64_t t = first + r;
    tile[r * tile_stride<KD>() + d] =
        (t < seq && d < head_dim) ? load_f32(src, t * stride + d) : 0.0f;
  }
}

__device__ inline float4 load4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}
__device__ inline float part(const float4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}
__device__ inline float dot4(const float4& a, const float4& b, float acc) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}

// Output columns (head dimensions) of thread tx: groups of 4 consecutive dimensions, tx·4 +
// 64·g, so that a row of 16 threads reads 64 consecutive floats as float4.
__device__ inline int dim_of(int tx, int c) {
  return (c / 4) * 64 + tx * 4 + c % 4;
}

// acc[i][c] += Σ_k a[row_i][k] · b[k][dim_of(tx, c)] over a kBlock-long k: a is a score tile
// (rows ty + 16i, stride kScoreStride), b a [kBlock][KD] tile.
template <int KD>
__device__ inline void accumulate_product(float (&acc)[kSub][KD / kGrid], const float* a,
                                          const float* b, int tx, int ty) {
  constexpr int kCols = KD / kGrid;
#pragma unroll 2
  for (int k = 0; k < kBlock; k += 4) {
    float4 ar[kSub];
#pragma unroll
    for (int i = 0; i < kSub; ++i) ar[i] = load4(a + (ty + kGrid * i) * kScoreStride + k);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      float br[kCols];
#pragma unroll
      for (int g = 0; g < kCols / 4; ++g) {
        const float4 v = load4(b + (k + kk) * tile_stride<KD>() + g * 64 + tx * 4);
        br[4 * g] = v.x, br[4 * g + 1] = v.y, br[4 * g + 2] = v.z, br[4 * g + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < kSub; ++i)
#pragma unroll
        for (int c = 0; c < kCols; ++c) acc[i][c] = fmaf(part(ar[i], kk), br[c], acc[i][c]);
    }
  }
}

// s[i][j] = a[ty + 16i] · b[tx + 16j] over KD for [kBlock][KD] tiles a and b.
template <int KD>
__device__ inline void tile_scores(float (&s)[kSub][kSub], const float* a, const float* b, int tx,
                                   int ty) {
#pragma unroll
  for (int i = 0; i < kSub; ++i)
#pragma unroll
    for (int j = 0; j < kSub; ++j) s[i][j] = 0.0f;
#pragma unroll 1
  for (int d = 0; d < KD; d += 4) {
    float4 ar[kSub], br[kSub];
#pragma unroll
    for (int i = 0; i < kSub; ++i) ar[i] = load4(a + (ty + kGrid * i) * tile_stride<KD>() + d);
#pragma unroll
    for (int j = 0; j < kSub; ++j) br[j] = load4(b + (tx + kGrid * j) * tile_stride<KD>() + d);
#pragma unroll
    for (int i = 0; i < kSub; ++i)
#pragma unroll
      for (int j = 0; j < kSub; ++j) s[i][j] = dot4(ar[i], br[j], s[i][j]);
  }
}

// Reductions over the 16 lanes of a tile row (tx = lane % 16): every lane gets the same bits.
__device__ inline float row_max(float v) {
  for (int offset = kGrid / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ inline float row_sum(float v) {
  for (int offset = kGrid / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline bool keep_weight(const Geometry& g, int64_t nh, int64_t t, int64_t s) {
  const uint64_t index = static_cast<uint64_t>((nh * g.seq + t) * g.seq + s);
  return random_uniform(g.seed, g.rng_stream, index) >= g.dropout;
}

template <int KD>
constexpr int forward_smem_floats() {
  return 3 * kBlock * tile_stride<KD>() + kBlock * kScoreStride;
}
template <int KD>
constexpr int dkdv_smem_floats() {
  return 4 * kBlock * tile_stride<KD>() + 2 * kBlock * kScoreStride + 2 * kBlock;
}
template <int KD>
constexpr int dq_smem_floats() {
  return 4 * kBlock * tile_stride<KD>() + kBlock * kScoreStride + 2 * kBlock;
}

template <int KD, typename E>
__global__ void __launch_bounds__(kTileThreads, KD <= 64 ? 2 : 1)
    attention_forward_kernel(const E* qkv, E* y, float* lse, Geometry g, int64_t query_blocks) {
  constexpr int kStride = tile_stride<KD>(), kCols = KD / kGrid;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  float* qs = smem;
  float* ks = qs + kBlock * kStride;
  float* vs = ks + kBlock * kStride;
  float* ps = vs + kBlock * kStride;  // weights, queries × keys

  const int64_t heads_total = g.batch * g.heads;
  const int64_t nh = blockIdx.x % heads_total;
  const int64_t qb = query_blocks - 1 - blockIdx.x / heads_total;  // the longest rows first
  const int64_t n = nh / g.heads, h = nh % g.heads;
  const int64_t q0 = qb * kBlock, width = 3 * g.channels;
  const E* base = qkv + n * g.seq * width + h * g.head_dim;
  const int tx = threadIdx.x % kGrid, ty = threadIdx.x / kGrid;

  load_tile<KD>(qs, base, width, q0, g.seq, g.head_dim);
  float acc[kSub][kCols] = {};
  float m[kSub], l[kSub];
#pragma unroll
  for (int i = 0; i < kSub; ++i) m[i] = -CUDART_INF_F, l[i] = 0.0f;

  const int64_t last_row = (q0 + kBlock < g.seq ? q0 + kBlock : g.seq) - 1;
  const int64_t key_blocks = last_row / kBlock + 1;
  for (int64_t kb = 0; kb < key_blocks; ++kb) {
    const int64_t k0 = kb * kBlock;
    __syncthreads();  // the previous tile's readers are done
    load_tile<KD>(ks, base + g.channels, width, k0, g.seq, g.head_dim);
    load_tile<KD>(vs, base + 2 * g.channels, width, k0, g.seq, g.head_dim);
    __syncthreads();

    float s[kSub][kSub];
    tile_scores<KD>(s, qs, ks, tx, ty);
#pragma unroll
    for (int i = 0; i < kSub; ++i) {
      const int64_t t = q0 + ty + kGrid * i;
      float tile_max = -CUDART_INF_F;
#pragma unroll
      for (int j = 0; j < kSub; ++j) {
        const int64_t key = k0 + tx + kGrid * j;
        s[i][j] = (key <= t && t < g.seq) ? s[i][j] * g.scale_log2 : -CUDART_INF_F;
        tile_max = fmaxf(tile_max, s[i][j]);
      }
      const float m_new = fmaxf(m[i], row_max(tile_max));
      const float m_use = m_new == -CUDART_INF_F ? 0.0f : m_new;  // a row with nothing yet
      const float alpha = exp2f(m[i] - m_use);
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kSub; ++j) {
        s[i][j] = exp2f(s[i][j] - m_use);
        tile_sum += s[i][j];
      }
      l[i] = l[i] * alpha + row_sum(tile_sum);
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[i][c] *= alpha;
      if (g.dropout > 0.0f) {
#pragma unroll
        for (int j = 0; j < kSub; ++j) {
          const int64_t key = k0 + tx + kGrid * j;
          if (key <= t && t < g.seq)
            s[i][j] = keep_weight(g, nh, t, key) ? s[i][j] * g.keep_scale : 0.0f;
        }
      }
#pragma unroll
      for (int j = 0; j < kSub; ++j) ps[(ty + kGrid * i) * kScoreStride + tx + kGrid * j] = s[i][j];
    }
    __syncthreads();
    accumulate_product<KD>(acc, ps, vs, tx, ty);
  }

#pragma unroll
  for (int i = 0; i < kSub; ++i) {
    const int64_t t = q0 + ty + kGrid * i;
    if (t >= g.seq) continue;
    const float inv = 1.0f / l[i];
    E* yr = y + (n * g.seq + t) * g.channels + h * g.head_dim;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int d = dim_of(tx, c);
      if (d < g.head_dim) store_f32(yr, d, acc[i][c] * inv);
    }
    if (tx == 0) lse[nh * g.seq + t] = (m[i] + log2f(l[i])) * kLn2;
  }
}

// rowdot[(n·heads + h)·T + t] = Σ_d dy·y over head h's columns of position t: one warp per row.
template <typename E>
__global__ void attention_rowdot_kernel(const E* y, const E* dy, float* rowdot, Geometry g) {
  constexpr int kWarps = kTileThreads / 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= g.batch * g.heads * g.seq) return;
  const int64_t t = row % g.seq, nh = row / g.seq;
  const int64_t n = nh / g.heads, h = nh % g.heads;
  const int64_t offset = (n * g.seq + t) * g.channels + h * g.head_dim;
  float sum = 0.0f;
  for (int64_t d = lane; d < g.head_dim; d += 32)
    sum = fmaf(load_f32(dy, offset + d), load_f32(y, offset + d), sum);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) rowdot[row] = sum;
}

// Per-row values of a query tile (lse in base-2 units, rowdot) into shared memory.
__device__ inline void load_row_values(float* lse_s, float* dot_s, const float* lse,
                                       const float* rowdot, int64_t nh, int64_t q0,
                                       const Geometry& g) {
  for (int i = threadIdx.x; i < kBlock; i += kTileThreads) {
    const int64_t t = q0 + i;
    lse_s[i] = t < g.seq ? lse[nh * g.seq + t] * kLog2e : 0.0f;
    dot_s[i] = t < g.seq ? rowdot[nh * g.seq + t] : 0.0f;
  }
}

// One block per (n, head, key block): dk and dv of its keys, over the query tiles from the
// diagonal on. Tiles are oriented keys × queries, so a thread's score rows are its dk/dv rows.
template <int KD, typename E>
__global__ void __launch_bounds__(kTileThreads, KD <= 64 ? 2 : 1)
    attention_dkdv_kernel(const E* qkv, const E* dy, const float* lse, const float* rowdot, E* dqkv,
                          Geometry g, int64_t query_blocks) {
  constexpr int kStride = tile_stride<KD>(), kCols = KD / kGrid;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  float* ks = smem;
  float* vs = ks + kBlock * kStride;
  float* qs = vs + kBlock * kStride;
  float* dos = qs + kBlock * kStride;
  float* zs = dos + kBlock * kStride;  // dropped weights, keys × queries
  float* dss = zs + kBlock * kScoreStride;
  float* lse_s = dss + kBlock * kScoreStride;
  float* dot_s = lse_s + kBlock;

  const int64_t heads_total = g.batch * g.heads;
  const int64_t nh = blockIdx.x % heads_total;
  const int64_t kb = blockIdx.x / heads_total;  // the first key blocks have the most work
  const int64_t n = nh / g.heads, h = nh % g.heads;
  const int64_t k0 = kb * kBlock, width = 3 * g.channels;
  const E* base = qkv + n * g.seq * width + h * g.head_dim;
  const E* dbase = dy + n * g.seq * g.channels + h * g.head_dim;
  const int tx = threadIdx.x % kGrid, ty = threadIdx.x / kGrid;

  load_tile<KD>(ks, base + g.channels, width, k0, g.seq, g.head_dim);
  load_tile<KD>(vs, base + 2 * g.channels, width, k0, g.seq, g.head_dim);
  float dk[kSub][kCols] = {}, dv[kSub][kCols] = {};

  for (int64_t qb = kb; qb < query_blocks; ++qb) {
    const int64_t q0 = qb * kBlock;
    __syncthreads();
    load_tile<KD>(qs, base, width, q0, g.seq, g.head_dim);
    load_tile<KD>(dos, dbase, g.channels, q0, g.seq, g.head_dim);
    load_row_values(lse_s, dot_s, lse, rowdot, nh, q0, g);
    __syncthreads();

    float s[kSub][kSub], dp[kSub][kSub];
    tile_scores<KD>(s, ks, qs, tx, ty);
    tile_scores<KD>(dp, vs, dos, tx, ty);
#pragma unroll
    for (int i = 0; i < kSub; ++i) {
      const int64_t key = k0 + ty + kGrid * i;
#pragma unroll
      for (int j = 0; j < kSub; ++j) {
        const int q = tx + kGrid * j;
        const int64_t t = q0 + q;
        float z = 0.0f, ds = 0.0f;
        if (key <= t && t < g.seq) {
          const float p = exp2f(s[i][j] * g.scale_log2 - lse_s[q]);
          float dpv = dp[i][j];
          z = p;
          if (g.dropout > 0.0f) {
            const bool keep = keep_weight(g, nh, t, key);
            z = keep ? p * g.keep_scale : 0.0f;
            dpv = keep ? dpv * g.keep_scale : 0.0f;
          }
          ds = p * (dpv - dot_s[q]);
        }
        zs[(ty + kGrid * i) * kScoreStride + q] = z;
        dss[(ty + kGrid * i) * kScoreStride + q] = ds;
      }
    }
    __syncthreads();
    accumulate_product<KD>(dv, zs, dos, tx, ty);
    accumulate_product<KD>(dk, dss, qs, tx, ty);
  }

#pragma unroll
  for (int i = 0; i < kSub; ++i) {
    const int64_t key = k0 + ty + kGrid * i;
    if (key >= g.seq) continue;
    E* row = dqkv + (n * g.seq + key) * width + h * g.head_dim;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int d = dim_of(tx, c);
      if (d >= g.head_dim) continue;
      store_f32(row, g.channels + d, dk[i][c] * g.scale);
      store_f32(row, 2 * g.channels + d, dv[i][c]);
    }
  }
}

// One block per (n, head, query block): dq of its queries, over the key tiles up to the
// diagonal.
template <int KD, typename E>
__global__ void __launch_bounds__(kTileThreads, KD <= 64 ? 2 : 1)
    attention_dq_kernel(const E* qkv, const E* dy, const float* lse, const float* rowdot, E* dqkv,
                        Geometry g, int64_t query_blocks) {
  constexpr int kStride = tile_stride<KD>(), kCols = KD / kGrid;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  float* qs = smem;
  float* dos = qs + kBlock * kStride;
  float* ks = dos + kBlock * kStride;
  float* vs = ks + kBlock * kStride;
  float* dss = vs + kBlock * kStride;  // score gradients, queries × keys
  float* lse_s = dss + kBlock * kScoreStride;
  float* dot_s = lse_s + kBlock;

  const int64_t heads_total = g.batch * g.heads;
  const int64_t nh = blockIdx.x % heads_total;
  const int64_t qb = query_blocks - 1 - blockIdx.x / heads_total;  // the longest rows first
  const int64_t n = nh / g.heads, h = nh % g.heads;
  const int64_t q0 = qb * kBlock, width = 3 * g.channels;
  const E* base = qkv + n * g.seq * width + h * g.head_dim;
  const E* dbase = dy + n * g.seq * g.channels + h * g.head_dim;
  const int tx = threadIdx.x % kGrid, ty = threadIdx.x / kGrid;

  load_tile<KD>(qs, base, width, q0, g.seq, g.head_dim);
  load_tile<KD>(dos, dbase, g.channels, q0, g.seq, g.head_dim);
  load_row_values(lse_s, dot_s, lse, rowdot, nh, q0, g);
  float dq[kSub][kCols] = {};

  const int64_t last_row = (q0 + kBlock < g.seq ? q0 + kBlock : g.seq) - 1;
  const int64_t key_blocks = last_row / kBlock + 1;
  for (int64_t kb = 0; kb < key_blocks; ++kb) {
    const int64_t k0 = kb * kBlock;
    __syncthreads();
    load_tile<KD>(ks, base + g.channels, width, k0, g.seq, g.head_dim);
    load_tile<KD>(vs, base + 2 * g.channels, width, k0, g.seq, g.head_dim);
    __syncthreads();

    float s[kSub][kSub], dp[kSub][kSub];
    tile_scores<KD>(s, qs, ks, tx, ty);
    tile_scores<KD>(dp, dos, vs, tx, ty);
#pragma unroll
    for (int i = 0; i < kSub; ++i) {
      const int r = ty + kGrid * i;
      const int64_t t = q0 + r;
#pragma unroll
      for (int j = 0; j < kSub; ++j) {
        const int64_t key = k0 + tx + kGrid * j;
        float ds = 0.0f;
        if (key <= t && t < g.seq) {
          const float p = exp2f(s[i][j] * g.scale_log2 - lse_s[r]);
          float dpv = dp[i][j];
          if (g.dropout > 0.0f) dpv = keep_weight(g, nh, t, key) ? dpv * g.keep_scale : 0.0f;
          ds = p * (dpv - dot_s[r]);
        }
        dss[r * kScoreStride + tx + kGrid * j] = ds;
      }
    }
    __syncthreads();
    accumulate_product<KD>(dq, dss, ks, tx, ty);
  }

#pragma unroll
  for (int i = 0; i < kSub; ++i) {
    const int64_t t = q0 + ty + kGrid * i;
    if (t >= g.seq) continue;
    E* row = dqkv + (n * g.seq + t) * width + h * g.head_dim;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int d = dim_of(tx, c);
      if (d < g.head_dim) store_f32(row, d, dq[i][c] * g.scale);
    }
  }
}

Geometry geometry_of(const AttentionShape& s, float dropout, uint64_t seed, uint64_t rng_stream) {
  DTRAIN_CHECK(s.batch > 0 && s.seq > 0 && s.heads > 0 && s.head_dim > 0 &&
               s.head_dim <= kMaxAttentionHeadDim)
      << "attention: batch " << s.batch << ", sequence " << s.seq << ", " << s.heads
      << " heads of dimension " << s.head_dim << " (the CUDA kernels take up to "
      << kMaxAttentionHeadDim << ")";
  DTRAIN_CHECK(dropout >= 0.0f && dropout < 1.0f) << "attention: dropout " << dropout;
  Geometry g;
  g.batch = s.batch;
  g.seq = s.seq;
  g.heads = s.heads;
  g.head_dim = s.head_dim;
  g.channels = s.heads * s.head_dim;
  g.scale = 1.0f / sqrtf(static_cast<float>(s.head_dim));
  g.scale_log2 = g.scale * kLog2e;
  g.dropout = dropout;
  g.keep_scale = 1.0f / (1.0f - dropout);
  g.seed = seed;
  g.rng_stream = rng_stream;
  return g;
}

unsigned tile_blocks(const Geometry& g, int64_t tiles) {
  const int64_t blocks = g.batch * g.heads * tiles;
  DTRAIN_CHECK(blocks < (int64_t{1} << 31)) << "attention: " << blocks << " blocks are too many";
  return static_cast<unsigned>(blocks);
}

template <typename Kernel>
void allow_smem(Kernel kernel, int floats) {
  DTRAIN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         floats * static_cast<int>(sizeof(float))));
}

template <int KD, typename E>
void forward_with(const E* qkv, E* y, float* lse, const Geometry& g, cudaStream_t stream) {
  const int64_t tiles = (g.seq + kBlock - 1) / kBlock;
  constexpr int floats = forward_smem_floats<KD>();
  allow_smem(attention_forward_kernel<KD, E>, floats);
  attention_forward_kernel<KD, E>
      <<<tile_blocks(g, tiles), kTileThreads, floats * sizeof(float), stream>>>(qkv, y, lse, g,
                                                                                tiles);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

template <int KD, typename E>
void backward_with(const E* qkv, const E* dy, const float* lse, const float* rowdot, E* dqkv,
                   const Geometry& g, cudaStream_t stream) {
  const int64_t tiles = (g.seq + kBlock - 1) / kBlock;
  constexpr int dkdv_floats = dkdv_smem_floats<KD>();
  allow_smem(attention_dkdv_kernel<KD, E>, dkdv_floats);
  attention_dkdv_kernel<KD, E>
      <<<tile_blocks(g, tiles), kTileThreads, dkdv_floats * sizeof(float), stream>>>(
          qkv, dy, lse, rowdot, dqkv, g, tiles);
  DTRAIN_CUDA_CHECK_LAUNCH();
  constexpr int dq_floats = dq_smem_floats<KD>();
  allow_smem(attention_dq_kernel<KD, E>, dq_floats);
  attention_dq_kernel<KD, E>
      <<<tile_blocks(g, tiles), kTileThreads, dq_floats * sizeof(float), stream>>>(
          qkv, dy, lse, rowdot, dqkv, g, tiles);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

template <typename E>
void attention_forward(const E* qkv, E* y, float* lse, const AttentionShape& shape, float dropout,
                       uint64_t seed, uint64_t rng_stream, cudaStream_t stream) {
  const Geometry g = geometry_of(shape, dropout, seed, rng_stream);
  if (g.head_dim <= 64)
    forward_with<64>(qkv, y, lse, g, stream);
  else
    forward_with<128>(qkv, y, lse, g, stream);
}

template <typename E>
void attention_backward(const E* qkv, const E* y, const E* dy, const float* lse, E* dqkv,
                        float* scratch, const AttentionShape& shape, float dropout, uint64_t seed,
                        uint64_t rng_stream, cudaStream_t stream) {
  const Geometry g = geometry_of(shape, dropout, seed, rng_stream);
  const int64_t rows = g.batch * g.heads * g.seq;
  constexpr int kWarps = kTileThreads / 32;
  attention_rowdot_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kTileThreads, 0,
                            stream>>>(y, dy, scratch, g);
  DTRAIN_CUDA_CHECK_LAUNCH();
  if (g.head_dim <= 64)
    backward_with<64>(qkv, dy, lse, scratch, dqkv, g, stream);
  else
    backward_with<128>(qkv, dy, lse, scratch, dqkv, g, stream);
}

}  // namespace

void attention_forward_f32(const float* qkv, float* y, float* lse, const AttentionShape& shape,
                           float dropout, uint64_t seed, uint64_t rng_stream, cudaStream_t stream) {
  attention_forward(qkv, y, lse, shape, dropout, seed, rng_stream, stream);
}

void attention_forward_bf16(const uint16_t* qkv, uint16_t* y, float* lse,
                            const AttentionShape& shape, float dropout, uint64_t seed,
                            uint64_t rng_stream, cudaStream_t stream) {
  attention_forward(as_bf16(qkv), as_bf16(y), lse, shape, dropout, seed, rng_stream, stream);
}

int64_t attention_backward_scratch_floats(const AttentionShape& shape) {
  return shape.batch * shape.heads * shape.seq;
}

void attention_backward_f32(const float* qkv, const float* y, const float* dy, const float* lse,
                            float* dqkv, float* scratch, const AttentionShape& shape, float dropout,
                            uint64_t seed, uint64_t rng_stream, cudaStream_t stream) {
  attention_backward(qkv, y, dy, lse, dqkv, scratch, shape, dropout, seed, rng_stream, stream);
}

void attention_backward_bf16(const uint16_t* qkv, const uint16_t* y, const uint16_t* dy,
                             const float* lse, uint16_t* dqkv, float* scratch,
                             const AttentionShape& shape, float dropout, uint64_t seed,
                             uint64_t rng_stream, cudaStream_t stream) {
  attention_backward(as_bf16(qkv), as_bf16(y), as_bf16(dy), lse, as_bf16(dqkv), scratch, shape,
                     dropout, seed, rng_stream, stream);
}

}  // namespace dtrain::cuda
