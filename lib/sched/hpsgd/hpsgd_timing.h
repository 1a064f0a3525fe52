// HPSGD's row of the timing model.
#pragma once
#include "plan/timing_model.h"  // TimingInputs, CodecCost, Prediction

namespace dtrain {

// Its timing row: the passes over the parameters the scheduler makes per iteration, averaged
// over a round of all-reduce (`period`: sync_period, 0 for auto).
Prediction predict_hpsgd(const TimingInputs& in, const CodecCost& codec, int period);

}  // namespace dtrain
