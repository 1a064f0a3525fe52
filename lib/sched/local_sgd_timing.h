// Local SGD's row of the timing model.
#pragma once
#include "plan/timing_model.h"  // TimingInputs, CodecCost, Prediction

namespace dtrain {

// Its timing row: local steps, and every `period`-th iteration an averaging that waits.
Prediction predict_local_sgd(const TimingInputs& in, const CodecCost& codec, int period);

}  // namespace dtrain
