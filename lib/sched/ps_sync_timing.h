// The parameter server's row of the timing model (`ps_sync`).
#pragma once
#include "plan/timing_model.h"  // TimingInputs, CodecCost, Prediction

namespace dtrain {

// Its timing row: the parameter-server baseline as this scheduler runs it (rank 0 serves and
// computes).
Prediction predict_ps_sync(const TimingInputs& in, const CodecCost& codec);

}  // namespace dtrain
