// The optimizer table: one row per optimizer — its name, a one-line summary, its own keys (a
// typed schema over its options struct, each default stated once), the checks across its keys,
// and its factory. The `optimizer:` section's reader, `dtrain keys` and `--help` take the
// optimizers from here, and no code outside a row names one. Adding an optimizer is a file with
// its row (and its element rule, rule_passes.h) plus one line in optimizer_table.cpp and one in
// cuda/optimizer_passes.cu (docs/architecture.md, "Adding an optimizer").
#pragma once
#include <any>  // OptimizerChoice::options: the chosen optimizer's own struct
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"  // Backend
#include "config/reader.h"    // Reader: a row's checks report there
#include "config/schema.h"    // AnySchema, RowKeys
#include "core/error.h"       // DTRAIN_CHECK
#include "core/tensor.h"
#include "optim/decay.h"      // DecayRange
#include "optim/optimizer.h"  // Optimizer

namespace dtrain {

// An optimizer over flat buffers, from its row's options: `decay` says which parts decay where
// its decay is decoupled; [0, trainable_offset) is never touched.
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(
    const std::any& options, Backend& backend, Tensor parameters, Tensor gradients,
    std::vector<DecayRange> decay, int64_t trainable_offset)>;

struct OptimizerEntry {
  std::string name;                               // optimizer.name
  std::string summary;                            // one line: what it is, and its paper
  std::shared_ptr<const config::AnySchema> keys;  // its own keys (besides lr and the shared ones)
  OptimizerFactory make;
  // What `dtrain plan` calls its step ("AdamW update of the trainable parameters (and of its 2
  // moments per parameter)").
  std::string update_summary;
  // Rules across its keys that one key's kind cannot judge (SGD: Nesterov needs momentum);
  // problems go to the Reader under `section` ("optimizer").
  std::function<void(const std::any& options, config::Reader& reader, const std::string& section)>
      check{};
  // The names of the state buffers it keeps for these options, a buffer of one float per
  // parameter each (the checkpoint's optimizer.<name>; the memory model's count): SGD's
  // momentum only with momentum > 0.
  std::function<std::vector<std::string>(const std::any& options)> states{};
};

// A rule row's `states`: its Family's (rule_optimizer.h), read from the options struct.
template <class Family>
auto family_states() {
  return [](const std::any& options) {
    return Family::states(std::any_cast<const typename Family::Options&>(options));
  };
}

// Every optimizer, in the order of the documentation.
const std::vector<OptimizerEntry>& optimizers();
// Null when no optimizer has that name.
const OptimizerEntry* find_optimizer(const std::string& name);
std::vector<std::string> optimizer_names();
// Each row's name and keys, for the `optimizer:` section's schema (Schema::row_keys).
std::vector<config::RowKeys> optimizer_row_keys();
// For the key reference (`dtrain keys`): a Markdown table of every optimizer.
std::string optimizers_markdown();
// For `dtrain --help`: each optimizer with its keys and defaults.
std::string optimizers_help();

// The chosen optimizer and exactly its keys: `options` holds the options struct of its row
// (SgdOptions, AdamWOptions, ...), nothing of any other optimizer.
struct OptimizerChoice {
  OptimizerChoice();                                  // sgd with its defaults
  explicit OptimizerChoice(const std::string& name);  // `name` with its defaults

  std::string name;
  std::any options;

  const OptimizerEntry& entry() const;
  template <class T>
  const T& get() const {
    const T* o = std::any_cast<T>(&options);
    DTRAIN_CHECK(o != nullptr) << "optimizer '" << name << "' has other options";
    return *o;
  }
  template <class T>
  T& get() {
    T* o = std::any_cast<T>(&options);
    DTRAIN_CHECK(o != nullptr) << "optimizer '" << name << "' has other options";
    return *o;
  }
  // Same name and same keys.
  bool operator==(const OptimizerChoice& other) const;
};

// State floats the chosen optimizer keeps per trainable parameter (its row's `states`).
int optimizer_state_floats(const OptimizerChoice& choice);

// The chosen optimizer over `parameters` and `gradients` (row.make).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerChoice& choice, Backend& backend,
                                          Tensor parameters, Tensor gradients,
                                          std::vector<DecayRange> decay,
                                          int64_t trainable_offset = 0);

}  // namespace dtrain
