// ParameterGather: the weights of a rank that stores only its shard of them (algorithm.shard:
// parameters; ZeRO-3, FSDP's full shard; docs/memory.md). The model's flat weight buffer is
// reserved memory (Backend::reserve) of which the rank keeps its own pieces; every other part of
// a segment is all-gathered (the ring's second half, on the comm thread) just before a layer
// that reads it runs — its forward, a recomputed block's forward, its backward (the graph's
// weight hook) — with the segment after it (forward) or before it (backward) prefetched, and is
// given back (Backend::release) as soon as the pass has moved on. A tied head gathers its
// lender's segments again. Every rank runs the same passes, so the gathers pair up.
#pragma once
#include <cstddef>
#include <cstdint>
#include <future>
#include <vector>

#include "comm/gradient_allreducer.h"  // GradientAllreducer: the all-gathers
#include "nn/graph.h"                  // Graph::WeightRanges: what a layer reads
#include "nn/model.h"                  // Model: its weights and weight hook
#include "sched/gradient_segments.h"   // GradientSegments
#include "sched/shard/shard_layout.h"  // ShardLayout: the pieces that stay

namespace dtrain {

class ParameterGather {
 public:
  // Gives back every segment's memory outside the rank's pieces and hooks the model's graph.
  ParameterGather(Model& model, GradientAllreducer& allreducer, const GradientSegments& segments,
                  const ShardLayout& layout);
  ~ParameterGather();
  ParameterGather(const ParameterGather&) = delete;
  ParameterGather& operator=(const ParameterGather&) = delete;

  // Makes [ranges) of the weights whole (waiting for their gathers), prefetches the next
  // segment in the pass's direction and gives back the others: the graph's weight hook, and
  // how the weights are read for model.safetensors.
  void need(const Graph::WeightRanges& ranges, bool backward);
  // After the optimizer's step: the gathered copies are stale, so every segment goes back to
  // the rank's pieces; the first segment's gather starts for the next forward.
  void refresh();
  // Waits for the gathers in flight.
  void flush();
  // Seconds the forward and the backward passes waited for gathers since the last call.
  double take_wait(bool backward);

 private:
  enum class Held { pieces, gathering, whole };
  void gather(size_t j);
  void wait(size_t j, bool backward);
  void give_back(size_t j);

  Model& model_;
  GradientAllreducer& allreducer_;
  const GradientSegments& segments_;
  const ShardLayout& layout_;
  std::vector<Held> held_;
  std::vector<std::future<void>> gathering_;
  std::vector<char> wanted_;  // scratch of need(): by segment
  double wait_s_[2] = {0, 0};
};

// Gives back the memory of segment j of `flat` outside `layout`'s piece of it.
void release_unowned(Backend& backend, const Tensor& flat, const GradientSegments& segments,
                     const ShardLayout& layout, size_t j);

}  // namespace dtrain
