// to_yaml and to_table: the resolved experiment, built once as a YAML tree and printed two ways.
#include <fmt/format.h>  // fmt::format: shortest round-trip doubles, table layout

#include <algorithm>  // std::all_of, std::max
#include <utility>    // std::pair: table rows

#include "run/config.h"
#include "run/config_reader.h"  // child_path, element_path: dotted keys of table rows

namespace dtrain {

namespace {

// Shortest text that parses back to the same double ("0.1", not yaml-cpp's "0.10000000000000001").
std::string number(double v) {
  return fmt::format("{}", v);
}

YAML::Node flow(YAML::Node node) {
  node.SetStyle(YAML::EmitterStyle::Flow);
  return node;
}

template <typename T>
YAML::Node list(const std::vector<T>& values) {
  YAML::Node node(YAML::NodeType::Sequence);
  for (const T& v : values) {
    if constexpr (std::is_floating_point_v<T>)
      node.push_back(number(v));
    else
      node.push_back(v);
  }
  return flow(node);
}

// `for_table` adds what a reader of the table wants and a config file must not contain: the
// parsed link rates, and an explicit "none" for an absent link.
YAML::Node to_node(const ExperimentConfig& c, bool for_table) {
  YAML::Node root(YAML::NodeType::Map);
  root["name"] = c.name;
  root["seed"] = c.seed;
  root["model"] = c.model.IsDefined() ? c.model : YAML::Node(YAML::NodeType::Map);

  const DatasetConfig& d = c.dataset;
  YAML::Node dataset(YAML::NodeType::Map);
  dataset["name"] = d.name;
  dataset["path"] = d.path;
  dataset["batch_size"] = d.batch_size;
  dataset["test_batch_size"] = d.test_batch_size;
  dataset["shape"] = list(d.shape);
  dataset["classes"] = d.classes;
  dataset["train_size"] = d.train_size;
  dataset["test_size"] = d.test_size;
  dataset["image_size"] = d.image_size;
  dataset["resize"] = d.resize;
  dataset["augment"] = d.augment;
  dataset["mean"] = list(d.mean);
  dataset["std"] = list(d.std);
  dataset["prefetch"] = d.prefetch;
  dataset["workers"] = d.workers;
  root["dataset"] = dataset;

  YAML::Node cluster(YAML::NodeType::Map);
  cluster["device"] = c.cluster.device;
  cluster["comm"] = c.cluster.comm;
  cluster["tf32"] = c.cluster.tf32;
  cluster["threads_per_rank"] = c.cluster.threads_per_rank;
  if (const auto& l = c.cluster.link) {
    YAML::Node link(YAML::NodeType::Map);
    // The user's spelling, so that config.yaml reads like the input; a programmatic LinkConfig
    // without text gets exact byte/second units.
    std::string bandwidth =
        l->bandwidth_text.empty() ? number(l->bandwidth_Bps) + "Bps" : l->bandwidth_text;
    std::string latency = l->latency_text.empty() ? number(l->latency_s) + "s" : l->latency_text;
    if (for_table) {
      bandwidth += fmt::format(" ({:.4g} bytes/s)", l->bandwidth_Bps);
      latency += fmt::format(" ({:.4g} s)", l->latency_s);
    }
    link["bandwidth"] = bandwidth;
    link["latency"] = latency;
    cluster["link"] = flow(link);
  } else if (for_table) {
    cluster["link"] = "none (no network emulation)";
  }
  YAML::Node stragglers(YAML::NodeType::Sequence);
  for (const auto& s : c.cluster.stragglers) {
    YAML::Node item(YAML::NodeType::Map);
    item["rank"] = s.rank;
    item["slowdown"] = number(s.slowdown);
    stragglers.push_back(item);
  }
  cluster["stragglers"] = flow(stragglers);
  root["cluster"] = cluster;

  YAML::Node algorithm(YAML::NodeType::Map);
  algorithm["name"] = c.algorithm.name;
  algorithm["K"] = c.algorithm.K;
  algorithm["warmup_epochs"] = c.algorithm.warmup_epochs;
  algorithm["segments"] = c.algorithm.segments;
  root["algorithm"] = algorithm;

  YAML::Node compression(YAML::NodeType::Map);
  compression["name"] = c.compression.name;
  root["compression"] = compression;

  const OptimizerConfig& o = c.optimizer;
  YAML::Node optimizer(YAML::NodeType::Map);
  optimizer["name"] = o.name;
  optimizer["lr"] = number(o.lr);
  optimizer["momentum"] = number(o.momentum);
  optimizer["dampening"] = number(o.dampening);
  optimizer["weight_decay"] = number(o.weight_decay);
  optimizer["nesterov"] = o.nesterov;
  optimizer["freeze_layers"] = o.freeze_layers;
  YAML::Node schedule(YAML::NodeType::Map);
  schedule["name"] = o.schedule.name;
  schedule["every_epochs"] = o.schedule.every_epochs;
  schedule["gamma"] = number(o.schedule.gamma);
  schedule["milestones"] = list(o.schedule.milestones);
  schedule["min_lr"] = number(o.schedule.min_lr);
  schedule["warmup_epochs"] = number(o.schedule.warmup_epochs);
  schedule["warmup_start_factor"] = number(o.schedule.warmup_start_factor);
  optimizer["schedule"] = schedule;
  root["optimizer"] = optimizer;

  YAML::Node train(YAML::NodeType::Map);
  train["epochs"] = c.train.epochs;
  train["eval_every_epochs"] = c.train.eval_every_epochs;
  train["max_iterations"] = c.train.max_iterations;
  train["log_every_iterations"] = c.train.log_every_iterations;
  root["train"] = train;

  YAML::Node output(YAML::NodeType::Map);
  output["dir"] = c.output.dir;
  output["trace"] = c.output.trace;
  root["output"] = output;
  return root;
}

std::string flow_text(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

void flatten(const YAML::Node& node, const std::string& path,
             std::vector<std::pair<std::string, std::string>>& rows) {
  if (node.IsMap() && node.size() > 0) {
    for (auto it = node.begin(); it != node.end(); ++it)
      flatten(it->second, config_detail::child_path(path, it->first.as<std::string>()), rows);
  } else if (node.IsSequence() && node.size() > 0 &&
             !std::all_of(node.begin(), node.end(),
                          [](const YAML::Node& n) { return n.IsScalar(); })) {
    // A list of maps (stragglers, custom layers): one row each, so long lists stay readable.
    for (size_t i = 0; i < node.size(); ++i)
      rows.emplace_back(config_detail::element_path(path, i), flow_text(node[i]));
  } else if (node.IsScalar()) {
    rows.emplace_back(path, node.Scalar().empty() ? "\"\"" : node.Scalar());
  } else {
    rows.emplace_back(path, flow_text(node));
  }
}

}  // namespace

std::string to_yaml(const ExperimentConfig& config) {
  YAML::Emitter out;
  out << to_node(config, false);
  std::string header = "# dtrain experiment, resolved: every default is shown";
  if (!config.source_path.empty()) header += " (from " + config.source_path + ")";
  return header + "\n" + out.c_str() + "\n";
}

std::string to_table(const ExperimentConfig& config) {
  std::vector<std::pair<std::string, std::string>> rows;
  flatten(to_node(config, true), "", rows);
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  std::string table;
  for (const auto& [key, value] : rows) table += fmt::format("{:<{}}  {}\n", key, width, value);
  return table;
}

}  // namespace dtrain
