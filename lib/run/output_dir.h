// The output folder rule (docs/architecture.md §3): a run never silently replaces another run's
// results.
#pragma once
#include <string>

namespace dtrain {

enum class OutputMode {
  fresh,      // the folder must not hold results: refused (exit 2) with the ways out
  overwrite,  // --overwrite: the previous results are deleted first (other files stay)
  resume,     // --resume: the results are continued (from the newest checkpoint)
};

// Checks `dir` for `mode` on every rank; `remove` (one rank): deletes what --overwrite replaces.
// InputError naming the folder and the ways out that apply when a fresh run finds results
// (--resume only where a finished checkpoint is), or a resumed one finds no checkpoints.
void claim_output_dir(const std::string& dir, OutputMode mode, bool remove);

}  // namespace dtrain
