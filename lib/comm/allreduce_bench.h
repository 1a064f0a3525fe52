// `dtrain bench comm`: all-reduce bandwidth over the ranks of a job, nccl-tests style
// (src/common.cu, doc/PERFORMANCE.md): per message size and implementation, the time averaged
// over ranks, algbw = bytes / time, busbw = algbw · 2(p−1)/p, and the largest relative error
// against the exact sum (the "#wrong" column of nccl-tests, as a number because codecs are
// lossy by design).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm.h"  // Comm

namespace dtrain {

struct AllreduceBenchOptions {
  int64_t min_bytes = 4 << 10, max_bytes = 64 << 20;  // doubling from min to max
  std::vector<std::string> codecs{"none", "truncate16", "quantize8"};
  bool include_mpi = true;         // also MPI_Allreduce
  int warmup = 3, iterations = 0;  // 0: chosen per size (about 0.2 s of data)
};

struct AllreduceBenchRow {
  int ranks = 1;
  std::string codec, impl;  // impl: "ring" or "mpi"
  int64_t bytes = 0;
  double time_us = 0, algbw_GBps = 0, busbw_GBps = 0, max_rel_error = 0;
};

// Collective: every rank must call it. Rows are complete on every rank.
std::vector<AllreduceBenchRow> run_allreduce_bench(Comm& comm, const AllreduceBenchOptions& o);
// "ranks,codec,impl,bytes,time_us,algbw_GBps,busbw_GBps,max_rel_error" and one line per row.
std::string allreduce_bench_csv(const std::vector<AllreduceBenchRow>& rows);
// The human table.
std::string allreduce_bench_table(const std::vector<AllreduceBenchRow>& rows);

}  // namespace dtrain
