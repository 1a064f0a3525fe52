#include "comm/allreduce_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "comm/ring_allreduce.h"  // RingAllreduce
#include "compress/codec.h"       // make_codec
#include "core/error.h"
#include "core/timer.h"  // Clock

namespace dtrain {
namespace {

// Rank r's element i: signed, different per rank, and computed without library maths, so that
// the reference below reproduces every rank's value exactly.
float element(int rank, int64_t i) {
  return static_cast<float>((i * 7 + rank * 31) % 2001 - 1000) * 0.001f * (1.0f + rank);
}

double max_relative_error(const std::vector<float>& result, int ranks) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < result.size(); ++i) {
    double exact = 0;
    for (int q = 0; q < ranks; ++q) exact += element(q, static_cast<int64_t>(i));
    worst = std::max(worst, std::abs(result[i] - exact));
    scale = std::max(scale, std::abs(exact));
  }
  return scale > 0 ? worst / scale : worst;
}

}  // namespace

std::vector<AllreduceBenchRow> run_allreduce_bench(Comm& comm, const AllreduceBenchOptions& o) {
  DTRAIN_INPUT_CHECK(o.min_bytes >= 4 && o.max_bytes >= o.min_bytes)
      << "bench comm: need 4 <= --min-bytes <= --max-bytes";
  const int p = comm.size(), r = comm.rank();
  std::vector<AllreduceBenchRow> rows;
  struct Impl {
    std::string codec, impl;
  };
  std::vector<Impl> impls;
  for (const auto& c : o.codecs) impls.push_back({c, "ring"});
  if (o.include_mpi) impls.push_back({"none", "mpi"});
  const int64_t max_n = o.max_bytes / 4;
  std::vector<float> data(max_n), init(max_n);
  for (int64_t i = 0; i < max_n; ++i) init[i] = element(r, i);

  for (const Impl& impl : impls) {
    auto codec = make_codec(impl.codec);
    RingAllreduce ring(comm, *codec, max_n);
    for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
      const int64_t n = bytes / 4;
      auto once = [&] {
        if (impl.impl == "mpi")
          comm.allreduce_sum(Tensor::borrow(data.data(), Shape{n}));
        else
          ring.run(data.data(), n);
      };
      // Correctness first, then timing.
      std::copy(init.begin(), init.begin() + n, data.begin());
      once();
      const double error = max_relative_error({data.begin(), data.begin() + n}, p);
      const int iters = o.iterations > 0
                            ? o.iterations
                            : static_cast<int>(std::clamp<int64_t>((50 << 20) / bytes, 5, 1000));
      // Each timed call starts from the original data, so sums never grow out of range.
      double total = 0;
      comm.barrier();
      for (int i = -o.warmup; i < iters; ++i) {
        std::copy(init.begin(), init.begin() + n, data.begin());
        const auto start = Clock::now();
        once();
        if (i >= 0) total += seconds_since(start);
      }
      std::vector<double> stats{total / iters, error};
      comm.allreduce_sum(stats);
      AllreduceBenchRow row;
      row.ranks = p;
      row.codec = impl.codec;
      row.impl = impl.impl;
      row.bytes = bytes;
      const double seconds = stats[0] / p;  // averaged over ranks, as nccl-tests
      row.time_us = seconds * 1e6;
      row.algbw_GBps = bytes / seconds / 1e9;
      row.busbw_GBps = row.algbw_GBps * 2.0 * (p - 1) / p;
      row.max_rel_error = stats[1] / p;
      rows.push_back(row);
    }
  }
  return rows;
}

std::string allreduce_bench_csv(const std::vector<AllreduceBenchRow>& rows) {
  std::string out = "ranks,codec,impl,bytes,time_us,algbw_GBps,busbw_GBps,max_rel_error\n";
  for (const auto& r : rows)
    out += fmt::format("{},{},{},{},{:.3f},{:.4f},{:.4f},{:.3e}\n", r.ranks, r.codec, r.impl,
                       r.bytes, r.time_us, r.algbw_GBps, r.busbw_GBps, r.max_rel_error);
  return out;
}

std::string allreduce_bench_table(const std::vector<AllreduceBenchRow>& rows) {
  std::string out =
      fmt::format("{:>12} {:>11} {:>5} {:>12} {:>10} {:>10} {:>14}\n", "size", "codec", "impl",
                  "time_us", "algbw_GBps", "busbw_GBps", "max_rel_error");
  for (const auto& r : rows)
    out += fmt::format("{:>12} {:>11} {:>5} {:>12.1f} {:>10.3f} {:>10.3f} {:>14.3e}\n", r.bytes,
                       r.codec, r.impl, r.time_us, r.algbw_GBps, r.busbw_GBps, r.max_rel_error);
  return out;
}

}  // namespace dtrain
