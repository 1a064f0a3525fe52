// The registry's table and what is derived from it (see algorithm.h).
#include <fmt/format.h>  // fmt::format, fmt::join

#include "core/named_rows.h"  // find_row, row_names
#include "sched/algorithm.h"
#include "sched/gossip/d_psgd_algorithm.h"       // d_psgd_algorithm
#include "sched/gossip/gossip_algorithm.h"       // gossip_algorithm
#include "sched/gradient_segments.h"             // segment_bounds: a row without its own
#include "sched/hpsgd/hpsgd_algorithm.h"         // hpsgd_algorithm
#include "sched/local_sgd_scheduler.h"           // local_sgd_algorithm
#include "sched/pipe_sgd_scheduler.h"            // pipe_sgd_algorithm
#include "sched/pipeline/pipedream_scheduler.h"  // pipedream_algorithm
#include "sched/ps_sync_scheduler.h"             // ps_sync_algorithm
#include "sched/sapipe/sapipe_algorithm.h"       // sapipe_algorithm
#include "sched/sync_scheduler.h"                // sync_algorithm

namespace dtrain {

std::vector<int64_t> gradient_segment_bounds(const AlgorithmConfig& a, int64_t begin, int64_t end) {
  if (a.entry().segment_bounds) return a.entry().segment_bounds(a, begin, end);
  return segment_bounds(begin, end, segments_for_bytes(end - begin, kAutoSegmentBytes));
}

const std::vector<AlgorithmEntry>& algorithms() {
  static const std::vector<AlgorithmEntry> table = [] {
    std::vector<AlgorithmEntry> t{
        sync_algorithm(),      ps_sync_algorithm(), pipe_sgd_algorithm(),
        local_sgd_algorithm(), gossip_algorithm(),  d_psgd_algorithm(),
        hpsgd_algorithm(),     sapipe_algorithm(),  pipedream_algorithm()};
    return t;
  }();
  return table;
}

const AlgorithmEntry* find_algorithm(const std::string& name) {
  return find_row(algorithms(), &AlgorithmEntry::name, name);
}

std::vector<std::string> algorithm_names() {
  return row_names(algorithms(), &AlgorithmEntry::name);
}

const char* equivalence_name(Equivalence e) {
  switch (e) {
    case Equivalence::exact:
      return "exact";
    case Equivalence::stale:
      return "stale";
    case Equivalence::local:
      return "local";
    case Equivalence::decentralized:
      return "decentralized";
  }
  return "exact";
}

const AlgorithmEntry* chain_planning_algorithm() {
  for (const AlgorithmEntry& a : algorithms())
    if (a.model_parallel && a.model_parallel->plan_chain) return &a;
  return nullptr;
}

// ---- AlgorithmConfig ------------------------------------------------------------------------

AlgorithmConfig::AlgorithmConfig() : AlgorithmConfig("sync") {}

AlgorithmConfig::AlgorithmConfig(const std::string& n) : name(n), entry_(find_algorithm(n)) {
  DTRAIN_CHECK(entry_ != nullptr) << "no algorithm '" << name << "' is registered";
  options = entry_->keys->defaults();
}

bool AlgorithmConfig::operator==(const AlgorithmConfig& other) const {
  if (name != other.name) return false;
  return config::one_line(write_algorithm(*this, config::Style::file)) ==
         config::one_line(write_algorithm(other, config::Style::file));
}

// ---- reading and writing ---------------------------------------------------------------------

void read_algorithm(config::Section& s, AlgorithmConfig& out) {
  config::Reader& r = s.reader();
  std::string name = "sync";
  if (s.has("name")) {
    const YAML::Node node = s.get("name");
    if (!config::read_text(r, s.path_of("name"), node, name)) {
      s.accept_all();
      return;
    }
    if (!find_algorithm(name)) {
      const std::vector<std::string> names = algorithm_names();
      std::string message =
          fmt::format("expected one of {}, got '{}'", fmt::join(names, ", "), name);
      if (auto near = config::closest(name, names))
        message += fmt::format("; did you mean '{}'?", *near);
      r.add(s.path_of("name"), std::move(message), node);
      s.accept_all();  // its keys cannot be judged
      return;
    }
  }
  AlgorithmConfig chosen(name);
  const AlgorithmEntry& entry = chosen.entry();
  entry.keys->read(s, chosen.options);
  // A key of another algorithm: name both. When a --set switched the name but not the key, say
  // how to switch the keys with it.
  const std::string name_item = r.origin(s.path_of("name")).set_item, base = s.path();
  s.explain_unknown(  // runs when the reader reports unknown keys: capture nothing of `s`
      [name, &entry, name_item, &r, base](const std::string& key) -> std::optional<std::string> {
        std::vector<std::string> owners;
        for (const AlgorithmEntry& a : algorithms())
          if (a.name != name && a.keys->has_key(key)) owners.push_back(a.name);
        if (owners.empty()) return std::nullopt;
        const std::vector<std::string> own = entry.keys->keys();
        std::string message = fmt::format(
            "belongs to algorithm {}, not to the chosen '{}' ({})", fmt::join(owners, ", "), name,
            own.empty() ? name + " has no keys besides name"
                        : fmt::format("{}'s keys: {}", name, fmt::join(own, ", ")));
        if (!name_item.empty() && r.origin(config::child_path(base, key)).set_item != name_item)
          message += fmt::format(
              "; to switch algorithms, replace the whole map: --set "
              "'algorithm={{name: {}}}'",
              name);
        return message;
      });
  out = std::move(chosen);
}

YAML::Node write_algorithm(const AlgorithmConfig& a, config::Style style) {
  YAML::Node node(YAML::NodeType::Map);
  node["name"] = a.name;
  const YAML::Node keys = a.entry().keys->write(a.options, style);
  for (auto it = keys.begin(); it != keys.end(); ++it) node[it->first] = it->second;
  return node;
}

std::vector<config::KeyDoc> algorithm_reference() {
  std::vector<config::KeyDoc> rows;
  rows.push_back({.path = "algorithm.name",
                  .type = fmt::format("{}", fmt::join(algorithm_names(), " | ")),
                  .default_text = "sync",
                  .default_is_value = true,
                  .doc = "the distributed algorithm (its keys follow)",
                  .applies = ""});
  for (const AlgorithmEntry& a : algorithms()) {
    for (config::KeyDoc row : a.keys->reference("algorithm")) {
      row.applies = "algorithm " + a.name;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::string algorithms_help() {
  std::string text = "Algorithms (algorithm.name, with their keys and defaults):\n";
  for (const AlgorithmEntry& a : algorithms()) {
    const YAML::Node defaults = write_algorithm(AlgorithmConfig(a.name), config::Style::file);
    text += fmt::format("  {}\n      {}\n      algorithm: {}\n", a.name, a.summary,
                        config::one_line(defaults));
  }
  return text;
}

std::string algorithms_markdown() {
  std::string md = "| algorithm.name | what it is |\n| --- | --- |\n";
  for (const AlgorithmEntry& a : algorithms())
    md += fmt::format("| `{}` | {} |\n", a.name, a.summary);
  return md;
}

std::unique_ptr<Scheduler> make_scheduler(const AlgorithmConfig& algorithm, SchedulerContext ctx) {
  return algorithm.entry().make(std::move(ctx), algorithm);
}

}  // namespace dtrain
