// Internal to lib/run: the checks that involve more than one value.
#pragma once
#include "config/reader.h"     // Reader: where problems go
#include "run/config_types.h"  // ExperimentConfig

namespace dtrain::config {

// Rules between settings (nesterov needs momentum, multistep needs milestones, ...). Values that
// already have a problem of their own are skipped, so one mistake is reported once. Settings
// that will have no effect (tf32 on the CPU, more threads than cores) are warnings.
void check_cross_setting_rules(const ExperimentConfig& config, Reader& reader);

}  // namespace dtrain::config
