// The layer profile file of `dtrain plan --write-profile P.csv` and `--profile P.csv` (the
// contract, docs/architecture.md §3): one row per element of the model's partitionable chain,
//   layer,forward_ms,backward_ms,activation_bytes,parameter_bytes
// with times per minibatch of the profiled size — so that a profile taken on one machine (a GPU
// node) plans a pipeline for a cluster that is not this one, without building the model.
#pragma once
#include <string>
#include <vector>

#include "plan/partitioner.h"  // LayerProfile

namespace dtrain {

std::string layer_profile_csv(const std::vector<LayerProfile>& layers);

// Parses a profile; InputError naming `path` and the row for a missing or empty file, a missing
// column, a field that is not a finite number, a negative value, an empty or repeated layer name.
// Columns may come in any order; others are ignored.
std::vector<LayerProfile> parse_layer_profile(const std::string& text, const std::string& path);
std::vector<LayerProfile> read_layer_profile(const std::string& path);

}  // namespace dtrain
