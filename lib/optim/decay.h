// Which parts of the flat buffers a decoupled weight decay (AdamW's) applies to: as nanoGPT's
// configure_optimizers groups them, parameters of two or more dimensions (matrices, convolution
// kernels, embeddings) decay; biases, LayerNorm weights and other 1-D tensors do not. The
// schedulers say which ranges hold which (sched/scheduler.h: decay_ranges).
#pragma once
#include <cstdint>
#include <vector>

namespace dtrain {

// A run of the flat parameter buffer and whether weight decay applies to it.
struct DecayRange {
  int64_t offset = 0, count = 0;
  bool decay = true;
};

// `ranges` sorted, the gaps filled with decayed runs, neighbours of equal decay merged: the whole
// buffer [0, size) in as few passes as the model's layout allows. A range inside one already
// covered (a tied weight's second view) is skipped; overlapping ranges are a programming error.
std::vector<DecayRange> cover(std::vector<DecayRange> ranges, int64_t size);

}  // namespace dtrain
