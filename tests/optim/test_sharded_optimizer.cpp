// A sharded optimizer (Optimizer::shard, ZeRO's stages): every row of the optimizer table steps
// the pieces it owns exactly as the unsharded optimizer steps them — with its weights and
// gradients in the model's layout or in the compact layout of the pieces — touches nothing else,
// and keeps state for its pieces only.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>  // memcmp
#include <vector>

#include "optim/optimizer_table.h"
#include "optim/weight_prediction.h"  // WeightPrediction: refused when sharded

using namespace dtrain;

namespace {

constexpr int64_t kSize = 40;

float initial(int64_t i) {
  return std::sin(0.3f * static_cast<float>(i)) - 0.1f;
}
float gradient(int64_t i, int step) {
  return std::cos(0.7f * static_cast<float>(i) + static_cast<float>(step)) * 0.2f;
}

struct Buffers {
  std::unique_ptr<Backend> backend = make_backend({DeviceChoice::cpu, 1, 0});
  Tensor w = backend->empty({kSize}), g = backend->empty({kSize});
  Buffers() {
    for (int64_t i = 0; i < kSize; ++i) w.data<float>()[i] = initial(i);
  }
};

// Matrices decay, the bias-like runs do not: the pieces cut across both kinds.
const std::vector<DecayRange> kDecay{{0, 24, true}, {24, 6, false}, {30, 10, true}};

}  // namespace

TEST_CASE("a sharded optimizer steps its pieces as the whole optimizer does, and only them") {
  // Pieces that cut decay runs, start at the trainable offset (4) and end at the buffer's end.
  const std::vector<ShardPiece> pieces{{4, 9, 0}, {20, 7, 9}, {33, 7, 16}};
  const int64_t owned = 23;
  for (const std::string name : {"sgd", "adamw", "lion"}) {
    for (const bool compact : {false, true}) {
      CAPTURE(name);
      CAPTURE(compact);
      OptimizerChoice choice(name);
      Buffers whole, mine;
      auto reference = make_optimizer(choice, *whole.backend, whole.w, whole.g, kDecay, 4);
      auto sharded = make_optimizer(choice, *mine.backend, mine.w, mine.g, kDecay, 4);
      sharded->shard(pieces);
      CHECK(sharded->owned_elements() == owned);
      // Compact gradients: the pieces' elements end to end (ZeRO-2's gradient shard).
      Tensor compact_g = mine.backend->empty({owned});
      for (int step = 0; step < 4; ++step) {
        for (int64_t i = 0; i < kSize; ++i) {
          whole.g.data<float>()[i] = gradient(i, step);
          mine.g.data<float>()[i] = gradient(i, step);
        }
        for (const ShardPiece& p : pieces)
          for (int64_t k = 0; k < p.count; ++k)
            compact_g.data<float>()[p.compact + k] = gradient(p.offset + k, step);
        reference->step(0.01f);
        sharded->begin_step();
        for (const ShardPiece& p : pieces)
          sharded->step_range(0.01f, mine.w, compact ? compact_g : mine.g, p.offset, p.count);
      }
      int64_t wrong = 0, touched = 0;
      for (int64_t i = 0; i < kSize; ++i) {
        bool in_piece = false;
        for (const ShardPiece& p : pieces) in_piece |= i >= p.offset && i < p.offset + p.count;
        if (in_piece)
          wrong += mine.w.data<float>()[i] != whole.w.data<float>()[i];
        else
          touched += mine.w.data<float>()[i] != initial(i);
      }
      CHECK(wrong == 0);
      CHECK(touched == 0);
      for (const auto& [state, buffer] : sharded->state_buffers()) {
        CAPTURE(state);
        CHECK(buffer.numel() == owned);
      }
    }
  }
}

TEST_CASE("a sharded optimizer refuses what only a whole one can do") {
  Buffers b;
  auto adamw = make_optimizer(OptimizerChoice("adamw"), *b.backend, b.w, b.g, kDecay);
  adamw->shard({{0, 20, 0}});
  CHECK_THROWS(adamw->fresh(b.w, b.g, true));
  CHECK_THROWS(adamw->prediction()->predict_range(0.1f, b.w, b.w, b.g, 0, kSize));
}
