// The experiment configuration: load a YAML experiment (plus --set overrides) into typed,
// validated structs, and print it back. Every problem in the input is collected and reported in
// one InputError (exit code 2), so a user fixes a config in one round instead of one per error.
// Every key is declared once, in config_schema.cpp; reading, the resolved config.yaml, the
// settings table and the key reference (`dtrain keys`, docs/configuration.md) all come from there.
#pragma once
#include <optional>  // ConfigSources::output_dir
#include <string>
#include <vector>

#include "config/units.h"      // parse_bandwidth, parse_duration
#include "run/config_types.h"  // ExperimentConfig and its section structs

namespace dtrain {

struct ConfigSources {
  std::string path;                       // the YAML file
  std::vector<std::string> overrides;     // --set items: "train.epochs=1", "model.hidden=[256]"
  std::optional<std::string> output_dir;  // --out DIR: wins over output.dir
};

// Reads the file, applies the overrides, validates. Throws InputError listing all problems at once:
// a summary line "configs/x.yaml: 3 problems", then one line per problem, e.g.
//   configs/x.yaml:7: dataset.batch_size: must be > 0, got -1
//   configs/x.yaml: train.epochs: must be >= 1, got 0 (from --set train.epochs=0)
// A missing or unreadable file, a YAML syntax error (with line and column) and a malformed --set
// item are InputErrors too. Writes nothing anywhere. What is not wrong but worth saying (a
// setting that has no effect here) is in `warnings`.
ExperimentConfig load_config(const ConfigSources& sources);
// The same from YAML text; `origin` names it in messages (tests, generated experiments).
ExperimentConfig parse_config(const std::string& yaml, const std::string& origin,
                              const std::vector<std::string>& overrides = {});

// The resolved experiment as YAML with every default that applies visible; load_config reads it
// back to the same ExperimentConfig (this is the config.yaml written to the output directory).
std::string to_yaml(const ExperimentConfig& config);

// A two-column "key  value" table of every resolved setting, for rank 0 to print at start.
std::string to_table(const ExperimentConfig& config);

// The algorithms, then every key of an experiment file as a Markdown table
// (key, value, default, meaning), the algorithms' and the model's keys included: `dtrain keys`
// and the key reference in docs/configuration.md.
std::string config_reference();

}  // namespace dtrain
