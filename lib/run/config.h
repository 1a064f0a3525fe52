// The experiment configuration: load a YAML experiment (plus --set overrides) into typed,
// validated structs, and print it back. Every problem in the input is collected and reported in
// one InputError (exit code 2), so a user fixes a config in one round instead of one per error.
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node: the model map handed to the ModelChecker

#include <functional>  // std::function: ModelChecker
#include <optional>    // ConfigSources::output_dir
#include <string>
#include <vector>

#include "run/config_types.h"  // ExperimentConfig and its section structs

namespace dtrain {

// Validates the `model:` map: returns the map with defaults filled in and appends one message per
// problem to `problems`, formatted "model.hidden[1]: must be > 0 (line 4)" (see
// format_model_problem). load_config moves the line to the front like its own messages.
using ModelChecker =
    std::function<YAML::Node(const YAML::Node& model, std::vector<std::string>& problems)>;

struct ConfigSources {
  std::string path;                    // the YAML file
  std::vector<std::string> overrides;  // --set items: "train.epochs=1", "model.hidden=[256, 256]"
  std::optional<std::string> output_dir;  // --out DIR: wins over output.dir
  ModelChecker check_model;  // may be empty: then only "a map with name or layers" is checked
};

// Reads the file, applies the overrides, validates. Throws InputError listing all problems at once:
// a summary line "configs/x.yaml: 3 problems", then one line per problem, e.g.
//   configs/x.yaml:7: dataset.batch_size: must be > 0, got -1
//   configs/x.yaml: train.epochs: must be >= 1, got 0 (from --set train.epochs=0)
// A missing or unreadable file, a YAML syntax error (with line and column) and a malformed --set
// item are InputErrors too. Writes nothing anywhere.
ExperimentConfig load_config(const ConfigSources& sources);

// The resolved experiment as YAML with every default visible; load_config reads it back to the
// same ExperimentConfig (this is the config.yaml written to the output directory).
std::string to_yaml(const ExperimentConfig& config);

// A two-column "key  value" table of every resolved setting, for rank 0 to print at start.
std::string to_table(const ExperimentConfig& config);

// "10Gbps" (bits), "1.5GBps" (bytes), "100Mbps", "1Gbit/s" → bytes per second (> 0), decimal
// prefixes k, M, G, T as network rates are quoted. InputError on anything else.
double parse_bandwidth(const std::string& text);
// "20us", "1ms", "0.5s", "100ns", "0" → seconds (>= 0). InputError on anything else.
double parse_duration(const std::string& text);

// For ModelChecker authors: "PATH: MESSAGE (line N)" with the node's line in the file. Nodes
// without one (from --set, or made by the hook) get no suffix: load_config then locates the
// problem from PATH, naming the --set item when one wrote it.
std::string format_model_problem(const YAML::Node& node, const std::string& path,
                                 const std::string& message);

}  // namespace dtrain
