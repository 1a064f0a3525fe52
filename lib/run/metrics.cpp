#include "run/metrics.h"

#include <fmt/format.h>  // fmt::print to FILE*

#include <cerrno>
#include <cstring>  // strerror

#include "core/error.h"

namespace dtrain {
namespace {
std::FILE* open_csv(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw Error("cannot write " + path + ": " + std::strerror(errno));
  return f;
}
}  // namespace

std::string timing_header() {
  std::string header = "rank,epoch,iterations,wall_s";
  for (std::string_view phase : kPhaseNames) header += fmt::format(",{}_s", phase);
  return header;
}

MetricsWriter::MetricsWriter(const std::string& dir, const std::string& accuracy_so_far,
                             const std::string& timing_so_far)
    : dir_(dir) {
  accuracy_ = open_csv(dir + "/accuracy.csv");
  timing_ = open_csv(dir + "/timing.csv");
  append(accuracy_, accuracy_text_,
         accuracy_so_far.empty() ? std::string(kAccuracyHeader) + "\n" : accuracy_so_far,
         "accuracy.csv");
  append(timing_, timing_text_, timing_so_far.empty() ? timing_header() + "\n" : timing_so_far,
         "timing.csv");
}

void MetricsWriter::append(std::FILE* f, std::string& text, const std::string& rows,
                           const char* name) {
  text += rows;
  if (std::fwrite(rows.data(), 1, rows.size(), f) != rows.size() || std::fflush(f) != 0)
    throw Error("cannot write " + dir_ + "/" + name);
}

MetricsWriter::~MetricsWriter() {
  if (accuracy_) std::fclose(accuracy_);
  if (timing_) std::fclose(timing_);
}

void MetricsWriter::accuracy(const AccuracyRow& r) {
  append(accuracy_, accuracy_text_,
         fmt::format("{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f}\n", r.epoch, r.iteration, r.wall_s,
                     r.train_loss, r.train_acc, r.test_loss, r.test_acc),
         "accuracy.csv");
}

void MetricsWriter::timing(int epoch, const std::vector<EpochStats>& per_rank) {
  std::string rows;
  for (size_t rank = 0; rank < per_rank.size(); ++rank) {
    const EpochStats& s = per_rank[rank];
    rows += fmt::format("{},{},{},{:.6f}", rank, epoch, s.iterations, s.wall_s);
    for (double seconds : s.phases.seconds) rows += fmt::format(",{:.6f}", seconds);
    rows += "\n";
  }
  append(timing_, timing_text_, rows, "timing.csv");
}

// iterations, wall_s, the phases, then the training sums.
std::vector<double> to_row(const EpochStats& s) {
  std::vector<double> row{static_cast<double>(s.iterations), s.wall_s};
  row.insert(row.end(), s.phases.seconds.begin(), s.phases.seconds.end());
  row.insert(row.end(), {s.loss_sum, s.correct, static_cast<double>(s.samples)});
  return row;
}

EpochStats from_row(const std::vector<double>& r) {
  DTRAIN_CHECK(r.size() == kPhaseCount + 5) << "timing row of " << r.size() << " values";
  EpochStats s;
  s.iterations = static_cast<int64_t>(r[0]);
  s.wall_s = r[1];
  for (size_t i = 0; i < kPhaseCount; ++i) s.phases.seconds[i] = r[2 + i];
  s.loss_sum = r[kPhaseCount + 2];
  s.correct = r[kPhaseCount + 3];
  s.samples = static_cast<int64_t>(r[kPhaseCount + 4]);
  return s;
}

}  // namespace dtrain
