#include "run/output_dir.h"

#include <fmt/format.h>

#include <filesystem>
#include <vector>

#include "core/error.h"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

// What a run writes into its folder: a folder holding any of them holds results.
constexpr const char* kResults[] = {"accuracy.csv",      "timing.csv", "config.yaml",
                                    "run.yaml",          "trace.json", "pipeline.csv",
                                    "model.safetensors", "checkpoints"};

}  // namespace

void claim_output_dir(const std::string& dir, OutputMode mode, bool remove) {
  std::error_code ec;
  std::vector<std::string> present;
  for (const char* name : kResults)
    if (fs::exists(fs::path(dir) / name, ec)) present.push_back(name);
  switch (mode) {
    case OutputMode::fresh:
      DTRAIN_INPUT_CHECK(present.empty())
          << "output folder " << dir << " already holds a run's results ("
          << fmt::format("{}", fmt::join(present, ", ")) << "): continue it with --resume " << dir
          << ", write elsewhere with --out DIR, or replace it with --overwrite";
      return;
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
