// The CSV outputs of a run (docs/architecture.md §3): accuracy.csv, one row per evaluation, and
// timing.csv, one row per rank per epoch. Rows are flushed as written so a run that dies still
// leaves what it measured. Only rank 0 creates a MetricsWriter.
#pragma once
#include <cstdio>  // FILE
#include <string>
#include <vector>

#include "sched/scheduler.h"  // EpochStats

namespace dtrain {

struct AccuracyRow {
  int epoch = 0;
  int64_t iteration = 0;
  double wall_s = 0;
  double train_loss = 0, train_acc = 0, test_loss = 0, test_acc = 0;
};

inline constexpr const char* kAccuracyHeader =
    "epoch,iteration,wall_s,train_loss,train_acc,test_loss,test_acc";
// "rank,epoch,iterations,wall_s," and each phase's name + "_s" (core/phase.h).
std::string timing_header();

class MetricsWriter {
 public:
  // Creates (truncates) both files and writes their headers, or — a resumed run — the rows a
  // checkpoint kept (`accuracy_so_far`, `timing_so_far`: whole files, headers included).
  explicit MetricsWriter(const std::string& dir, const std::string& accuracy_so_far = "",
                         const std::string& timing_so_far = "");
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  void accuracy(const AccuracyRow& row);
  // One row per rank, in rank order.
  void timing(int epoch, const std::vector<EpochStats>& per_rank);
  // Everything written so far (a checkpoint keeps it: a resumed run rewrites exactly this).
  const std::string& accuracy_csv() const { return accuracy_text_; }
  const std::string& timing_csv() const { return timing_text_; }

 private:
  void append(std::FILE* f, std::string& text, const std::string& rows, const char* name);
  std::FILE* accuracy_ = nullptr;
  std::FILE* timing_ = nullptr;
  std::string accuracy_text_, timing_text_;
  std::string dir_;
};

// EpochStats as a flat row of doubles (for Comm::gather) and back.
std::vector<double> to_row(const EpochStats& s);
EpochStats from_row(const std::vector<double>& row);

}  // namespace dtrain
