#include "run/output_dir.h"

#include <fmt/format.h>

#include <filesystem>
#include <vector>

#include "core/error.h"
#include "run/checkpoint.h"  // newest_finished_checkpoint: whether --resume can continue

namespace dtrain {

namespace fs = std::filesystem;

namespace {

// What a run writes into its folder: a folder holding any of them holds results.
constexpr const char* kResults[] = {"accuracy.csv", "timing.csv",        "config.yaml",
                                    "run.yaml",     "trace.json",        "pipeline.csv",
                                    "vocab.json",   "model.safetensors", "checkpoints"};

}  // namespace

void claim_output_dir(const std::string& dir, OutputMode mode, bool remove) {
  std::error_code ec;
  std::vector<std::string> present;
  for (const char* name : kResults)
    if (fs::exists(fs::path(dir) / name, ec)) present.push_back(name);
  switch (mode) {
    case OutputMode::fresh: {
      if (present.empty()) return;
      const std::string results = fmt::format("{}", fmt::join(present, ", "));
      // --resume is a way out only where there is a finished checkpoint to continue from.
      if (newest_finished_checkpoint((fs::path(dir) / "checkpoints").string()))
        throw InputError(fmt::format(
            "output folder {} already holds a run's results ({}): continue it with --resume {}, "
            "write elsewhere with --out DIR, or replace it with --overwrite",
            dir, results, dir));
      throw InputError(fmt::format(
          "output folder {} already holds a run's results ({}) and no checkpoint to continue "
          "from: write elsewhere with --out DIR, or replace it with --overwrite",
          dir, results));
    }
    case OutputMode::overwrite:
      if (remove)
        for (const std::string& name : present) fs::remove_all(fs::path(dir) / name);
      return;
    case OutputMode::resume:
      DTRAIN_INPUT_CHECK(fs::is_directory(fs::path(dir) / "checkpoints", ec))
          << "--resume " << dir << ": no checkpoints/ in it (was the run's config without "
          << "`checkpoint:`?); start it again with --overwrite, or elsewhere with --out DIR";
      return;
  }
}

}  // namespace dtrain
