// The CUDA kernels of the optimizers' passes: every pass of each rule (rule_passes.h), compiled
// from the same functors the CPU runs, and HPSGD's replica step of SGD.
#include "backend/cuda/device_pass.cuh"  // DTRAIN_DEVICE_PASSES
#include "optim/adamw_rule.h"
#include "optim/lion_rule.h"
#include "optim/rule_passes.h"  // DTRAIN_RULE_PASSES
#include "optim/sgd_rule.h"

namespace dtrain {

DTRAIN_DEVICE_PASSES(DTRAIN_RULE_PASSES(sgd::Rule<sgd::Kind::plain>),
                     DTRAIN_RULE_PASSES(sgd::Rule<sgd::Kind::momentum>),
                     DTRAIN_RULE_PASSES(sgd::Rule<sgd::Kind::nesterov>),
                     sgd::AccumulatePass<false, false>, sgd::AccumulatePass<false, true>,
                     sgd::AccumulatePass<true, false>, sgd::AccumulatePass<true, true>);
DTRAIN_DEVICE_PASSES(DTRAIN_RULE_PASSES(adamw::Rule<true>), DTRAIN_RULE_PASSES(adamw::Rule<false>));
DTRAIN_DEVICE_PASSES(DTRAIN_RULE_PASSES(lion::Rule));

}  // namespace dtrain
