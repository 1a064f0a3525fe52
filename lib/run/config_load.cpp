// load_config and its outputs: file → YAML tree → --set overrides → the experiment schema →
// cross-setting rules; and back to YAML, the settings table and the key reference.
#include <fmt/format.h>  // fmt::format: messages, table layout

#include <algorithm>   // std::all_of, std::max
#include <cerrno>      // errno: why a file could not be opened
#include <cstring>     // std::strerror
#include <filesystem>  // std::filesystem: existence checks
#include <fstream>     // std::ifstream: reading the file
#include <iterator>    // std::istreambuf_iterator
#include <utility>     // std::pair: table rows

#include "config/overrides.h"     // apply_overrides: --set
#include "config/reader.h"        // Reader, Section
#include "core/error.h"           // InputError, DTRAIN_INPUT_CHECK
#include "nn/spec.h"              // model_markdown: the zoo and the layer types
#include "run/config.h"           // the API implemented here
#include "run/config_schema.h"    // experiment_schema
#include "run/config_validate.h"  // check_cross_setting_rules

namespace dtrain {

using config::Reader;
using config::Section;

namespace {

std::string read_file(const std::string& path) {
  std::error_code ec;
  DTRAIN_INPUT_CHECK(std::filesystem::exists(path, ec)) << path << ": no such config file";
  DTRAIN_INPUT_CHECK(!std::filesystem::is_directory(path, ec))
      << path << ": is a directory, expected a YAML config file";
  std::ifstream in(path, std::ios::binary);
  DTRAIN_INPUT_CHECK(in) << path << ": cannot read the config file (" << std::strerror(errno)
                         << ")";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  DTRAIN_INPUT_CHECK(!in.bad()) << path << ": cannot read the config file";
  return text;
}

YAML::Node parse_yaml(const std::string& text, const std::string& origin) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}:{}: YAML syntax error: {}", origin, e.mark.line + 1,
                                 e.mark.column + 1, e.msg));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: cannot parse YAML: {}", origin, e.msg));
  }
}

ExperimentConfig read_experiment(YAML::Node root, const std::string& origin,
                                 const std::vector<std::string>& overrides,
                                 const std::optional<std::string>& output_dir) {
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);  // an empty file: all defaults
  DTRAIN_INPUT_CHECK(root.IsMap()) << origin
                                   << ": expected a map of settings (name:, model:, dataset:, "
                                      "...) at the top level";
  auto set_items = config::apply_overrides(root, overrides);

  Reader reader(origin, root, std::move(set_items));
  Section top(reader, root, "");
  ExperimentConfig config;
  config.source_path = origin;
  experiment_schema().read(top, config);
  if (output_dir) {
    config.output.dir = *output_dir;  // --out wins over the file and --set
    DTRAIN_INPUT_CHECK(!config.output.dir.empty()) << "--out: the directory must not be empty";
  } else if (config.output.dir.empty() && !reader.has_problem("output.dir")) {
    config.output.dir = "runs/" + config.name;
  }

  config::check_cross_setting_rules(config, reader);
  reader.report_unknown_keys();
  if (!reader.problems().empty()) throw InputError(reader.render());
  for (const auto& w : reader.warnings()) config.warnings.push_back(reader.format(w));
  return config;
}

void flatten(const YAML::Node& node, const std::string& path,
             std::vector<std::pair<std::string, std::string>>& rows) {
  if (node.IsMap() && node.size() > 0) {
    for (auto it = node.begin(); it != node.end(); ++it)
      flatten(it->second, config::child_path(path, it->first.as<std::string>()), rows);
  } else if (node.IsSequence() && node.size() > 0 &&
             !std::all_of(node.begin(), node.end(),
                          [](const YAML::Node& n) { return n.IsScalar(); })) {
    // A list of maps (stragglers, custom layers): one row each, so long lists stay readable.
    for (size_t i = 0; i < node.size(); ++i)
      rows.emplace_back(config::element_path(path, i), config::one_line(node[i]));
  } else {
    rows.emplace_back(path, config::one_line(node));
  }
}

}  // namespace

ExperimentConfig load_config(const ConfigSources& sources) {
  return read_experiment(parse_yaml(read_file(sources.path), sources.path), sources.path,
                         sources.overrides, sources.output_dir);
}

ExperimentConfig parse_config(const std::string& yaml, const std::string& origin,
                              const std::vector<std::string>& overrides) {
  return read_experiment(parse_yaml(yaml, origin), origin, overrides, std::nullopt);
}

std::string to_yaml(const ExperimentConfig& config) {
  YAML::Emitter out;
  out << experiment_schema().write(config, config::Style::file);
  std::string header = "# dtrain experiment, resolved: every default that applies is shown";
  if (!config.source_path.empty()) header += " (from " + config.source_path + ")";
  return header + "\n" + out.c_str() + "\n";
}

std::string to_table(const ExperimentConfig& config) {
  std::vector<std::pair<std::string, std::string>> rows;
  flatten(experiment_schema().write(config, config::Style::table), "", rows);
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  std::string table;
  for (const auto& [key, value] : rows) table += fmt::format("{:<{}}  {}\n", key, width, value);
  return table;
}

std::string config_reference() {
  return algorithms_markdown() + "\n" + optimizers_markdown() + "\n" + model_markdown() + "\n" +
         config::reference_markdown(experiment_schema().reference(""));
}

}  // namespace dtrain
