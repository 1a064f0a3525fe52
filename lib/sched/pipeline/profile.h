// PipeDream's profile (§3.2) of the model's partitionable chain, measured on the backend and the
// data path training uses. The model is cut at every stage boundary (model_stage_boundaries:
// every valid cut point, or a zoo model's own, such as a GPT's between transformer blocks) and
// each piece built as the StageModel a pipeline stage would run, for the minibatch's rows (the
// last piece of a tied GPT with its copy of the tied matrix, as the pipeline's); the pieces
// run one after the other on the loader's minibatches — forwards in order, backwards in reverse,
// then each piece's SGD step — each timed alone (the backend synchronised around it).
//
// Two differences from PipeDream's profiler: backward_s includes the piece's SGD update (with
// 1F1B every stage steps after every minibatch, so the update is part of a stage's time per
// minibatch: 32M parameters of VGG-16's classifier take tens of ms on a CPU core), and the first
// piece's forward_s includes taking the minibatch from the loader (the input stage does).
#pragma once
#include <vector>

#include "backend/backend.h"   // Backend
#include "data/loader.h"       // Loader
#include "plan/partitioner.h"  // LayerProfile
#include "sched/scheduler.h"   // ModelSource

namespace dtrain {

struct ChainProfileOptions {
  int warmup = 1;       // untimed minibatches (the compute primitives are created there)
  int iterations = 5;   // timed minibatches, at most
  double budget_s = 3;  // stop timing after this long, once `at_least` were timed
  int at_least = 2;
};

// `loader` gives minibatches of source.batch_size rows (its epoch restarts when it runs out).
std::vector<LayerProfile> profile_pipeline_chain(Backend& backend, const ModelSource& source,
                                                 Loader& loader,
                                                 const ChainProfileOptions& options = {});

}  // namespace dtrain
