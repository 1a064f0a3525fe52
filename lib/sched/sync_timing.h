// D-Sync's row of the timing model (`sync`): the reference the plan's speedups are measured
// against.
#pragma once
#include "plan/timing_model.h"  // TimingInputs, CodecCost, Prediction

namespace dtrain {

// Its timing row, Eq. 2: D-Sync, forward + backward + exposed all-reduce + update; with L > 1
// segments the all-reduces of the first L − 1 start during backward (Eq. 6 with K = 1).
Prediction predict_sync(const TimingInputs& in, const CodecCost& codec, int L = 1);

}  // namespace dtrain
