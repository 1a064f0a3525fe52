// Internal to lib/run: the schema of a whole experiment file (config_schema.cpp).
#pragma once
#include "config/schema.h"     // Schema
#include "run/config_types.h"  // ExperimentConfig

namespace dtrain {

const config::Schema<ExperimentConfig>& experiment_schema();

}  // namespace dtrain
