// The optimizer table and what is derived from it (see optimizer_table.h).
#include "optim/optimizer_table.h"

#include <fmt/format.h>  // fmt::format

#include "core/named_rows.h"  // find_row, row_names

namespace dtrain {

// The rows, each written in its optimizer's file.
OptimizerEntry sgd_optimizer();
OptimizerEntry adamw_optimizer();
OptimizerEntry lion_optimizer();

const std::vector<OptimizerEntry>& optimizers() {
  static const std::vector<OptimizerEntry> table{sgd_optimizer(), adamw_optimizer(),
                                                 lion_optimizer()};
  return table;
}

const OptimizerEntry* find_optimizer(const std::string& name) {
  return find_row(optimizers(), &OptimizerEntry::name, name);
}

std::vector<std::string> optimizer_names() {
  return row_names(optimizers(), &OptimizerEntry::name);
}

std::vector<config::RowKeys> optimizer_row_keys() {
  std::vector<config::RowKeys> rows;
  for (const OptimizerEntry& o : optimizers()) rows.push_back({o.name, o.keys, o.check});
  return rows;
}

std::string optimizers_markdown() {
  std::string md = "| optimizer.name | what it is |\n| --- | --- |\n";
  for (const OptimizerEntry& o : optimizers())
    md += fmt::format("| `{}` | {} |\n", o.name, o.summary);
  return md;
}

std::string optimizers_help() {
  std::string text = "Optimizers (optimizer.name, with their keys and defaults):\n";
  for (const OptimizerEntry& o : optimizers()) {
    YAML::Node defaults = o.keys->write(o.keys->defaults(), config::Style::file);
    YAML::Node named(YAML::NodeType::Map);
    named["name"] = o.name;
    for (auto it = defaults.begin(); it != defaults.end(); ++it) named[it->first] = it->second;
    text += fmt::format("  {}\n      {}\n      optimizer: {}\n", o.name, o.summary,
                        config::one_line(named));
  }
  return text;
}

// ---- OptimizerChoice ------------------------------------------------------------------------

OptimizerChoice::OptimizerChoice() : OptimizerChoice(optimizers().front().name) {}

OptimizerChoice::OptimizerChoice(const std::string& n) : name(n) {
  options = entry().keys->defaults();
}

const OptimizerEntry& OptimizerChoice::entry() const {
  const OptimizerEntry* row = find_optimizer(name);
  DTRAIN_CHECK(row != nullptr) << "no optimizer '" << name << "' is registered";
  return *row;
}

bool OptimizerChoice::operator==(const OptimizerChoice& other) const {
  if (name != other.name) return false;
  const config::AnySchema& keys = *entry().keys;
  return config::one_line(keys.write(options, config::Style::file)) ==
         config::one_line(keys.write(other.options, config::Style::file));
}

int optimizer_state_floats(const OptimizerChoice& choice) {
  const OptimizerEntry& row = choice.entry();
  DTRAIN_CHECK(row.states) << "optimizer '" << row.name << "' does not name its state buffers";
  return static_cast<int>(row.states(choice.options).size());
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerChoice& choice, Backend& backend,
                                          Tensor parameters, Tensor gradients,
                                          std::vector<DecayRange> decay, int64_t trainable_offset) {
  return choice.entry().make(choice.options, backend, std::move(parameters), std::move(gradients),
                             std::move(decay), trainable_offset);
}

}  // namespace dtrain
