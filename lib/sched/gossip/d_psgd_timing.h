// D-PSGD's row of the timing model.
#pragma once
#include "plan/timing_model.h"      // TimingInputs, CodecCost, Prediction
#include "sched/gossip/topology.h"  // Topology

namespace dtrain {

// `dtrain plan`'s row (the model exchanged uncompressed: `codec` only names it).
Prediction predict_d_psgd(const TimingInputs& in, const CodecCost& codec, Topology topology);

}  // namespace dtrain
