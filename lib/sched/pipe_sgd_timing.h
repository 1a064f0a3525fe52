// Pipe-SGD's row of the timing model (the paper's Eq. 4–6) and the paper's recommendation.
#pragma once
#include <string>
#include <vector>

#include "plan/timing_model.h"  // TimingInputs, CodecCost, Prediction

namespace dtrain {

// Its timing row, Eq. 4–6: Pipe-SGD with iteration dependency K and L gradient segments (K = 1
// is D-Sync).
Prediction predict_pipe_sgd(const TimingInputs& in, const CodecCost& codec, int K, int L);

// The paper's rule (§3.1): "Pipe-SGD is optimal for K = 2, system is compute bound (after
// compression), and sequential gradient communication is used", applied to the inputs and the
// plan's rows (`dtrain plan`'s recommendation); `segments`: the L to weigh against L = 1.
struct Recommendation {
  Prediction best;             // the fastest of the rows
  Prediction fastest_pipe;     // the fastest pipe_sgd with K = 2, L = 1
  int L = 1;                   // segments: 1 unless more are predicted faster
  bool compute_bound = false;  // of fastest_pipe: communication fully hidden
  std::string text;            // one or two lines for the user
};
Recommendation recommend_pipe_sgd(const TimingInputs& in, const std::vector<Prediction>& rows,
                                  int segments);

}  // namespace dtrain
