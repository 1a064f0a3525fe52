// The algorithms whose schedulers arrive with later issues, registered now with the keys
// DESIGN.md §1 fixes for them: their names are known (and refused at validation, saying when
// they arrive), and their keys are checked and documented. Each issue moves its options
// struct and schema into its scheduler's file and adds the factory.
#pragma once
#include <string>
#include <vector>

#include "config/kinds.h"     // WordOr
#include "sched/algorithm.h"  // AlgorithmEntry

namespace dtrain {

// PipeDream (Harlap et al., 2018): pipeline-parallel stages with 1F1B and weight stashing.
struct PipedreamOptions {
  std::string schedule = "1f1b";  // 1f1b | gpipe | 1f1b_flush
  config::WordOr<std::vector<std::string>> stages =
      config::WordOr<std::vector<std::string>>::named("auto");
  config::WordOr<std::vector<int>> replicas = config::WordOr<std::vector<int>>::named("auto");
  config::WordOr<int> in_flight = config::WordOr<int>::named("auto");
  int microbatches = 1;
  bool weight_stashing = true;
  bool vertical_sync = false;
  std::string partition_cost = "runtime";  // paper | runtime
};

// pipedream.
std::vector<AlgorithmEntry> planned_algorithms();

}  // namespace dtrain
