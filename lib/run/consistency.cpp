#include "run/consistency.h"

#include <sstream>

#include "core/error.h"

namespace dtrain {
namespace {

std::string serialise(const RankFacts& f) {
  std::ostringstream out;
  out << "parameters: " << f.parameters << "\ntrain samples: " << f.train_samples
      << "\ntest samples: " << f.test_samples << "\n"
      << f.resolved_config;
  return out.str();
}

// The first line where two texts differ, as "'ours' vs 'theirs'".
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string la, lb;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(x, la));
    const bool more_b = static_cast<bool>(std::getline(y, lb));
    if (!more_a && !more_b) return "";
    if (!more_a) la = "<nothing>";
    if (!more_b) lb = "<nothing>";
    if (la != lb || !more_a || !more_b) return "'" + la + "' vs rank 0's '" + lb + "'";
  }
}

}  // namespace

void check_consistency(Comm& comm, const RankFacts& mine) {
  if (comm.size() == 1) return;
  const std::string ours = serialise(mine);
  std::string reference = ours;
  comm.broadcast(reference, 0);
  const std::string diff = first_difference(ours, reference);
  std::vector<double> bad{diff.empty() ? 0.0 : 1.0};
  comm.allreduce_sum(bad);
  if (bad[0] == 0) return;
  if (!diff.empty())
    throw InputError("rank " + std::to_string(comm.rank()) +
                     " was started with a different experiment than rank 0: " + diff);
  throw InputError(std::to_string(static_cast<int>(bad[0])) +
                   " rank(s) were started with a different experiment than rank 0");
}

}  // namespace dtrain
