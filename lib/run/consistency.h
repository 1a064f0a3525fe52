// Start-up consistency check: before training, every rank confirms it has the same resolved
// config, model size and dataset sizes as rank 0. A mismatch (a rank started with another
// --set, another data folder) stops every rank with a message naming the difference, instead
// of a silent divergence or a hang in the first all-reduce.
#pragma once
#include <cstdint>
#include <string>

#include "comm/comm.h"  // Comm

namespace dtrain {

struct RankFacts {
  std::string resolved_config;  // to_yaml of the resolved experiment
  int64_t parameters = 0;
  int64_t train_samples = 0, test_samples = 0;
};

// Collective: throws InputError on every rank when any rank differs from rank 0.
void check_ranks_agree(Comm& comm, const RankFacts& mine);

}  // namespace dtrain
