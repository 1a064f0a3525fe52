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

// The first line where two texts differ, with its YAML section: "train.epochs: 3 (rank 0: 5)".
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string la, lb, section;
  auto trim = [](const std::string& t) { return t.substr(t.find_first_not_of(' ')); };
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(x, la));
    const bool more_b = static_cast<bool>(std::getline(y, lb));
    if (!more_a && !more_b) return "";
    if (more_a && more_b && la == lb) {
      if (!la.empty() && la[0] != ' ' && la.back() == ':') section = la.substr(0, la.size() - 1);
      continue;
    }
    const std::string ours = more_a && !la.empty() ? trim(la) : "<nothing>";
    const std::string theirs = more_b && !lb.empty() ? trim(lb) : "<nothing>";
    const bool nested = more_a && !la.empty() && la[0] == ' ' && !section.empty();
    return (nested ? section + "." : "") + ours + " (rank 0: " + theirs + ")";
  }
}

}  // namespace

void check_ranks_agree(Comm& comm, const RankFacts& mine) {
  if (comm.size() == 1) return;
  const std::string ours = serialise(mine);
  std::string reference = ours;
  comm.broadcast(reference, 0);
  std::string diff = first_difference(ours, reference);
  // Which ranks differ; the first of them tells everyone how, so that every rank's message (and
  // whichever one reaches the terminal first) names the difference.
  std::vector<double> differs(comm.size(), 0.0);
  differs[comm.rank()] = diff.empty() ? 0.0 : 1.0;
  comm.allreduce_sum(differs);
  int first = -1, count = 0;
  for (int r = 0; r < comm.size(); ++r)
    if (differs[r] != 0) count += 1, first = first < 0 ? r : first;
  if (count == 0) return;
  comm.broadcast(diff, first);
  throw InputError(std::to_string(count) + " rank(s) were started with a different experiment " +
                   "than rank 0; rank " + std::to_string(first) + " has " + diff);
}

}  // namespace dtrain
