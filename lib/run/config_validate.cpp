// Cross-setting rules and the model hook (see config_validate.h).
#include "run/config_validate.h"

#include <fmt/format.h>  // fmt::format: messages

#include <charconv>  // std::from_chars: the line number in a hook message
#include <map>       // straggler ranks seen
#include <string_view>

#include "core/error.h"  // InputError: a hook may throw one

namespace dtrain::config_detail {

namespace {

// Channels of a dataset's samples, which mean/std must match; 0 when not known.
int channels_of(const DatasetConfig& d, const Reader& r) {
  if (d.name == "mnist" || d.name == "fashion_mnist") return 1;
  if (d.name == "cifar10" || d.name == "cifar100" || d.name == "imagefolder") return 3;
  if (d.name == "synthetic" && !r.has_problem("dataset.shape") && !d.shape.empty())
    return d.shape[0];
  return 0;
}

void check_dataset(const DatasetConfig& d, Reader& r) {
  if (d.name.empty() || r.has_problem("dataset.name")) return;
  bool needs_path =
      d.name == "mnist" || d.name == "cifar10" || d.name == "cifar100" || d.name == "imagefolder";
  if (needs_path && d.path.empty() && !r.has_problem("dataset.path"))
    r.add("dataset.path",
          fmt::format("required for dataset '{}': the directory holding its files", d.name));
  int channels = channels_of(d, r);
  for (const auto& [key, values] : {std::pair{"mean", &d.mean}, std::pair{"std", &d.std}}) {
    std::string path = std::string("dataset.") + key;
    if (channels > 0 && !values->empty() && static_cast<int>(values->size()) != channels &&
        !r.has_problem(path))
      r.add(path, fmt::format("needs one entry per channel: dataset '{}' has {}, got {}", d.name,
                              channels, values->size()));
  }
}

void check_stragglers(const ClusterConfig& c, Reader& r) {
  std::map<int, size_t> seen;  // rank → first entry
  for (size_t i = 0; i < c.stragglers.size(); ++i) {
    std::string path = fmt::format("cluster.stragglers[{}].rank", i);
    if (r.has_problem(path)) continue;
    auto [it, fresh] = seen.emplace(c.stragglers[i].rank, i);
    if (!fresh)
      r.add(path,
            fmt::format("rank {} is already listed as stragglers[{}]", it->first, it->second));
  }
}

void check_optimizer(const OptimizerConfig& o, Reader& r) {
  // Nesterov's look-ahead is defined for undampened momentum only (as in PyTorch's SGD).
  if (o.nesterov && !r.has_problem("optimizer.momentum") && !r.has_problem("optimizer.dampening") &&
      (o.momentum <= 0 || o.dampening != 0))
    r.add("optimizer.nesterov",
          fmt::format("needs momentum > 0 and dampening 0, got momentum {} and dampening {}",
                      o.momentum, o.dampening));

  const ScheduleConfig& s = o.schedule;
  const std::string milestones = "optimizer.schedule.milestones";
  if (!r.has_problem(milestones)) {
    if (s.name == "multistep" && s.milestones.empty())
      r.add(milestones, "required for schedule 'multistep': a non-empty list of epochs");
    for (size_t i = 1; i < s.milestones.size(); ++i)
      if (s.milestones[i] <= s.milestones[i - 1])
        r.add(fmt::format("{}[{}]", milestones, i),
              fmt::format("milestones must increase: {} follows {}", s.milestones[i],
                          s.milestones[i - 1]));
  }
  // Cosine anneals from lr down to min_lr; a floor above the start would anneal upwards.
  if (s.name == "cosine" && s.min_lr > o.lr && !r.has_problem("optimizer.schedule.min_lr") &&
      !r.has_problem("optimizer.lr"))
    r.add(
        "optimizer.schedule.min_lr",
        fmt::format("must be <= optimizer.lr ({}) for schedule 'cosine', got {}", o.lr, s.min_lr));
}

// A hook message "model.hidden[1]: must be > 0 (line 4)" as a Problem, with its position moved
// to where load_config's own messages have it. Messages in another shape are kept whole.
Problem from_hook_message(std::string text, const Reader& r) {
  int line = 0;
  const std::string_view set_suffix = " (from --set)";
  if (text.ends_with(set_suffix)) {
    text.resize(text.size() - set_suffix.size());
  } else if (auto open = text.rfind(" (line "); open != std::string::npos && text.ends_with(")")) {
    const char* first = text.data() + open + 7;
    const char* last = text.data() + text.size() - 1;
    auto [ptr, ec] = std::from_chars(first, last, line);
    if (ec == std::errc() && ptr == last && line > 0)
      text.resize(open);
    else
      line = 0;
  }
  Problem p{"model", text, {}};
  auto colon = text.find(": ");
  if (colon != std::string::npos && text.starts_with("model") && parse_path(text.substr(0, colon)))
    p = {text.substr(0, colon), text.substr(colon + 2), {}};
  p.origin = r.origin(p.path);
  if (p.origin.set_item.empty() && line > 0) p.origin.line = line;
  return p;
}

}  // namespace

void check_consistency(const ExperimentConfig& config, Reader& reader) {
  check_dataset(config.dataset, reader);
  check_stragglers(config.cluster, reader);
  check_optimizer(config.optimizer, reader);
}

YAML::Node check_model(const YAML::Node& model, const ModelChecker& hook, Reader& reader) {
  const char* what = "a map with a zoo model `name` (e.g. {name: mlp}) or a custom `layers` list";
  if (!model.IsDefined()) {
    reader.add("model", std::string("required: ") + what);
    return YAML::Node();
  }
  if (!model.IsMap()) {
    reader.add("model", fmt::format("expected {}, got {}", what, describe_node(model)), model);
    return model;
  }
  if (!model["name"].IsDefined() && !model["layers"].IsDefined()) {
    reader.add("model", std::string("needs `name` or `layers`: ") + what, model);
    return model;
  }
  if (!hook) return model;
  std::vector<std::string> messages;
  YAML::Node resolved;
  try {
    resolved = hook(model, messages);
  } catch (const InputError& e) {
    messages.push_back(e.what());  // a hook that throws still gets its say among the others
  }
  for (auto& message : messages) reader.add(from_hook_message(std::move(message), reader));
  return resolved.IsDefined() && resolved.IsMap() ? resolved : model;
}

}  // namespace dtrain::config_detail

namespace dtrain {

std::string format_model_problem(const YAML::Node& node, const std::string& path,
                                 const std::string& message) {
  std::string text = path + ": " + message;
  // Nodes from --set, and defaults the hook made, have no position; load_config finds the
  // --set item from the path.
  if (node.IsDefined() && !node.Mark().is_null())
    text += fmt::format(" (line {})", node.Mark().line + 1);
  return text;
}

}  // namespace dtrain
