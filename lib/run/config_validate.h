// Internal to lib/run: the checks that involve more than one value, and the model hook.
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node: the model map

#include "run/config.h"         // ExperimentConfig, ModelChecker
#include "run/config_reader.h"  // Reader: where problems go

namespace dtrain::config_detail {

// Rules between settings (nesterov needs momentum, multistep needs milestones, ...). Values that
// already have a problem of their own are skipped, so one mistake is reported once.
void check_consistency(const ExperimentConfig& config, Reader& reader);

// Checks that `model` is a map with `name` or `layers`, then runs `hook` (when set) and merges its
// messages. Returns the resolved model map (the hook's result, else `model` itself).
YAML::Node check_model(const YAML::Node& model, const ModelChecker& hook, Reader& reader);

}  // namespace dtrain::config_detail
