// Launchers of the sequence-model kernels (rows.cu, embedding.cu, layer_norm.cu, attention.cu),
// callable from plain C++: each enqueues on `stream` and returns at once. Every sum is taken in
// an order fixed by the shapes (no atomics), so equal inputs give equal bits on every call.
#pragma once
#include <cuda_runtime_api.h>  // cudaStream_t

#include <cstddef>  // size_t
#include <cstdint>

namespace dtrain::cuda {

// ---- rows of a position table (rows.cu) ----
// y[n·row_len + i] += row[i] for n < rows.
void add_to_rows_f32(float* y, const float* row, int64_t rows, int64_t row_len,
                     cudaStream_t stream);
// out[i] = Σ_n x[n·row_len + i], n in increasing order.
void sum_rows_f32(const float* x, float* out, int64_t rows, int64_t row_len, cudaStream_t stream);

// ---- embedding (embedding.cu) ----
// y[r, :] = table[ids[r], :]; a row whose id is not an integer-valued float in [0, vocab) gets
// NaN (callers check ids; the kernel never reads outside the table).
void embedding_forward_f32(const float* ids, const float* table, float* y, int64_t rows,
                           int64_t vocab, int64_t dim, cudaStream_t stream);
// Bytes of scratch embedding_backward_f32 needs for `rows` ids of a `vocab`-row table.
size_t embedding_backward_scratch_bytes(int64_t rows, int64_t vocab);
// dtable[v, :] (+)= Σ over r with ids[r] = v of dy[r, :], in increasing r: the ids are sorted
// (a stable radix sort) and each run of equal ids is summed by one thread per column. Without
// `accumulate` the rows no id names are zeroed. Invalid ids are skipped.
void embedding_backward_f32(const float* ids, const float* dy, float* dtable, int64_t rows,
                            int64_t vocab, int64_t dim, bool accumulate, void* scratch,
                            size_t scratch_bytes, cudaStream_t stream);

// ---- layer normalisation (layer_norm.cu) ----
// One warp per row: mean, then the biased variance around it (two passes over the row).
// `beta` may be null (no bias).
void layer_norm_forward_f32(const float* x, const float* gamma, const float* beta, float* y,
                            float* mean, float* rstd, int64_t rows, int64_t features, float epsilon,
                            cudaStream_t stream);
// Rows summed per chunk of layer_norm_rows_per_chunk(max_rows) rows, then the chunks in order:
// the partial sums need 2 · chunks · features floats of scratch.
int64_t layer_norm_rows_per_chunk(int64_t max_rows);
// dx per row (one warp each); dgamma and (when dbeta is not null) dbeta as column sums over
// the rows, in chunks of `rows_per_chunk` rows, then over the chunks in order.
void layer_norm_backward_f32(const float* x, const float* dy, const float* gamma, const float* mean,
                             const float* rstd, float* dx, float* dgamma, float* dbeta,
                             int64_t rows, int64_t features, int64_t rows_per_chunk,
                             float* partials, cudaStream_t stream);

// ---- causal multi-head attention (attention.cu), ops.h AttentionSpec's layouts ----
struct AttentionShape {
  int64_t batch, seq, heads, head_dim;  // head_dim ≤ kMaxAttentionHeadDim
};
constexpr int64_t kMaxAttentionHeadDim = 128;
// Flash-attention forward: y [N, T, C] and lse [N, heads, T] (natural log of the row sums of
// exp(q·k/√D)). dropout > 0 drops weight (n, h, t, s) when random_uniform(seed, rng_stream,
// ((n·heads + h)·T + t)·T + s) < dropout and scales the kept ones by 1/(1 − dropout).
void attention_forward_f32(const float* qkv, float* y, float* lse, const AttentionShape& shape,
                           float dropout, uint64_t seed, uint64_t rng_stream, cudaStream_t stream);
// Floats of scratch the backward needs (rowsum(dy ∘ y) per row of every head).
int64_t attention_backward_scratch_floats(const AttentionShape& shape);
// dqkv [N, T, 3C], every element written: one pass per key block for dk and dv, one per
// query block for dq, both recomputing the weights tile by tile from qkv and lse.
void attention_backward_f32(const float* qkv, const float* y, const float* dy, const float* lse,
                            float* dqkv, float* scratch, const AttentionShape& shape, float dropout,
                            uint64_t seed, uint64_t rng_stream, cudaStream_t stream);
// The same on bf16 qkv, y, dy and dqkv (raw 16-bit patterns; lse and scratch f32): widened
// exactly as the tiles are loaded, everything computed in f32, y and dqkv rounded once.
void attention_forward_bf16(const uint16_t* qkv, uint16_t* y, float* lse,
                            const AttentionShape& shape, float dropout, uint64_t seed,
                            uint64_t rng_stream, cudaStream_t stream);
void attention_backward_bf16(const uint16_t* qkv, const uint16_t* y, const uint16_t* dy,
                             const float* lse, uint16_t* dqkv, float* scratch,
                             const AttentionShape& shape, float dropout, uint64_t seed,
                             uint64_t rng_stream, cudaStream_t stream);

}  // namespace dtrain::cuda
