#include "run/metrics.h"

#include <fmt/format.h>  // fmt::print to FILE*

#include <cerrno>
#include <cstring>  // strerror

#include "core/error.h"

namespace dtrain {
namespace {
std::FILE* open_csv(const std::string& path, const char* header) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw Error("cannot write " + path + ": " + std::strerror(errno));
  fmt::print(f, "{}\n", header);
  std::fflush(f);
  return f;
}
}  // namespace

MetricsWriter::MetricsWriter(const std::string& dir) : dir_(dir) {
  accuracy_ = open_csv(dir + "/accuracy.csv", kAccuracyHeader);
  timing_ = open_csv(dir + "/timing.csv", kTimingHeader);
}

MetricsWriter::~MetricsWriter() {
  if (accuracy_) std::fclose(accuracy_);
  if (timing_) std::fclose(timing_);
}

void MetricsWriter::accuracy(const AccuracyRow& r) {
  fmt::print(accuracy_, "{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f}\n", r.epoch, r.iteration,
             r.wall_s, r.train_loss, r.train_acc, r.test_loss, r.test_acc);
  if (std::fflush(accuracy_) != 0) throw Error("cannot write " + dir_ + "/accuracy.csv");
}

void MetricsWriter::timing(int epoch, const std::vector<EpochStats>& per_rank) {
  for (size_t rank = 0; rank < per_rank.size(); ++rank) {
    const EpochStats& s = per_rank[rank];
    fmt::print(timing_, "{},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f}\n", rank,
               epoch, s.iterations, s.wall_s, s.data_s, s.forward_s, s.backward_s, s.update_s,
               s.compress_s, s.comm_s, s.wait_s);
  }
  if (std::fflush(timing_) != 0) throw Error("cannot write " + dir_ + "/timing.csv");
}

std::vector<double> to_row(const EpochStats& s) {
  return {static_cast<double>(s.iterations),
          s.wall_s,
          s.data_s,
          s.forward_s,
          s.backward_s,
          s.update_s,
          s.compress_s,
          s.comm_s,
          s.wait_s,
          s.loss_sum,
          s.correct,
          static_cast<double>(s.samples)};
}

EpochStats from_row(const std::vector<double>& r) {
  DTRAIN_CHECK(r.size() == 12) << "timing row of " << r.size() << " values";
  EpochStats s;
  s.iterations = static_cast<int64_t>(r[0]);
  s.wall_s = r[1], s.data_s = r[2], s.forward_s = r[3], s.backward_s = r[4], s.update_s = r[5];
  s.compress_s = r[6], s.comm_s = r[7], s.wait_s = r[8], s.loss_sum = r[9], s.correct = r[10];
  s.samples = static_cast<int64_t>(r[11]);
  return s;
}

}  // namespace dtrain
