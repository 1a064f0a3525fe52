// The algorithms' timing rows (beside their registry rows) against hand-computed numbers:
// Eq. 2, 4, 5, 6, ps_sync, where the bound flips, and Pipe-SGD's recommendation.
#include <doctest/doctest.h>

#include <algorithm>  // max

#include "../plan/timing_fixtures.h"  // four_ranks, none, quantize8
#include "sched/pipe_sgd_timing.h"    // predict_pipe_sgd, recommend_pipe_sgd
#include "sched/ps_sync_timing.h"     // predict_ps_sync
#include "sched/sync_timing.h"        // predict_sync

using namespace dtrain;
using namespace dtrain::test;

namespace {

// sync, ps_sync and pipe_sgd (K, L) with every codec, in that order, with speedups against
// sync + none: the Pipe-SGD paper's comparison.
std::vector<Prediction> predict_all(const TimingInputs& in, int K = 2, int L = 1) {
  std::vector<Prediction> rows;
  for (const CodecCost& c : in.codecs) rows.push_back(predict_sync(in, c));
  for (const CodecCost& c : in.codecs) rows.push_back(predict_ps_sync(in, c));
  for (const CodecCost& c : in.codecs) rows.push_back(predict_pipe_sgd(in, c, K, L));
  set_speedups(rows);
  return rows;
}

}  // namespace

TEST_CASE("Eq. 2: D-Sync adds update, compute and the whole all-reduce") {
  const TimingInputs in = four_ranks();
  const Prediction r = predict_sync(in, none());
  CHECK(r.compute_s == doctest::Approx(3.5e-3));
  CHECK(r.comm_s == doctest::Approx(kCommNone));
  CHECK(r.iteration_s == doctest::Approx(3.5e-3 + kCommNone));
  CHECK_FALSE(r.compute_bound);
  CHECK(r.samples_per_s == doctest::Approx(128 / (3.5e-3 + kCommNone)));
}

TEST_CASE("Eq. 4/5: Pipe-SGD with K >= 2 is bound by the longer of compute and communication") {
  const TimingInputs in = four_ranks();
  for (int K : {2, 3}) {
    const Prediction r = predict_pipe_sgd(in, none(), K, 1);
    CHECK(r.iteration_s == doctest::Approx(kCommNone));
    CHECK_FALSE(r.compute_bound);
  }
  // K = 1 is D-Sync.
  CHECK(predict_pipe_sgd(in, none(), 1, 1).iteration_s ==
        doctest::Approx(predict_sync(in, none()).iteration_s));
}

TEST_CASE("compression flips Pipe-SGD from communication- to compute-bound (Eq. 7: SE = 1)") {
  const TimingInputs in = four_ranks();
  const Prediction plain = predict_pipe_sgd(in, none(), 2, 1);
  const Prediction q8 = predict_pipe_sgd(in, quantize8(), 2, 1);
  CHECK_FALSE(plain.compute_bound);
  CHECK(q8.compute_bound);  // 3.455 ms of communication < 3.5 ms of compute
  CHECK(q8.iteration_s == doctest::Approx(3.5e-3));
  CHECK(q8.scaling_efficiency == doctest::Approx(1.0));
  CHECK(plain.scaling_efficiency == doctest::Approx(3.5e-3 / kCommNone));
  // D-Sync pays the communication, codec included, on the critical path.
  const Prediction sync = predict_sync(in, quantize8());
  CHECK(sync.iteration_s == doctest::Approx(3.5e-3 + q8.comm_s));
  CHECK(sync.iteration_s > q8.iteration_s);
}

TEST_CASE("Eq. 6: when communication-bound, L > 1 segments are slower than sequential L = 1") {
  const TimingInputs in = four_ranks();
  const Prediction l1 = predict_pipe_sgd(in, none(), 2, 1);
  const Prediction l4 = predict_pipe_sgd(in, none(), 2, 4);
  // 2·3·4·10us + 6 ms + 1.5 ms + 4·20us
  CHECK(l4.comm_s == doctest::Approx(240e-6 + 7.5e-3 + 80e-6));
  CHECK(l4.iteration_s > l1.iteration_s);
}

TEST_CASE("ps_sync: pushes through the server's link one after another, weights back likewise") {
  const TimingInputs in = four_ranks();
  const Prediction r = predict_ps_sync(in, none());
  // encode 0.25 ms; α; 3 gradients of 4 MB through the server's link; 3 decode_adds of 0.25 ms;
  // then 3 weight copies of 4 MB, each α + 4 ms; plus S.
  const double push = 0.25e-3 + 10e-6 + 3 * 4e-3 + 3 * 0.25e-3;
  const double pull = 3 * (10e-6 + 4e-3);
  CHECK(r.comm_s == doctest::Approx(push + pull + 20e-6));
  CHECK(r.iteration_s == doctest::Approx(3.5e-3 + push + pull + 20e-6));
  CHECK(r.iteration_s > predict_sync(in, none()).iteration_s);
}

TEST_CASE("a comm thread without a core of its own slows Pipe-SGD by its CPU work") {
  TimingInputs in = four_ranks();
  const Prediction own = predict_pipe_sgd(in, quantize8(), 2, 1);
  in.comm_shares_core = true;
  const Prediction shared = predict_pipe_sgd(in, quantize8(), 2, 1);
  const double w = allreduce_cost(in, quantize8(), 1e6).cpu_s;  // the codec work, 1.875 ms
  CHECK(w == doctest::Approx(1.875e-3));
  CHECK(shared.compute_s == doctest::Approx(own.compute_s + w));
  // Computing 3.5 ms of the 3.455 ms of communication: all of W meets it.
  CHECK(shared.comm_s == doctest::Approx(own.comm_s + w));
  CHECK(shared.iteration_s == doctest::Approx(std::max(shared.compute_s, shared.comm_s)));
  CHECK(shared.iteration_s > own.iteration_s);
  // A slower link: computation covers 3.5 ms of the communication, so does that part of W.
  in.link.bandwidth_bytes_per_s = 100e6;  // β = 10 ns/B
  const Prediction slow = predict_pipe_sgd(in, quantize8(), 2, 1);
  in.comm_shares_core = false;
  const double comm = predict_pipe_sgd(in, quantize8(), 2, 1).comm_s;
  CHECK(slow.comm_s == doctest::Approx(comm + w * 3.5e-3 / comm));
  in.comm_shares_core = true;
  // Compute threads two to a core (4 ranks on 2 cores): the comm threads' CPU work shares the
  // crowded cores too and takes twice as long, as the profile's stretched compute does.
  TimingInputs crowded = in;
  crowded.crowding = 2;
  const Prediction two = predict_pipe_sgd(crowded, quantize8(), 2, 1);
  crowded.comm_shares_core = false;
  const Prediction two_own = predict_pipe_sgd(crowded, quantize8(), 2, 1);
  CHECK(two.compute_s == doctest::Approx(two_own.compute_s + 2 * w));
  CHECK(two.comm_s ==
        doctest::Approx(two_own.comm_s + w + 2 * w * two_own.compute_s / two_own.comm_s));
  // D-Sync does not overlap the two: unchanged.
  TimingInputs own_core = in;
  own_core.comm_shares_core = false;
  CHECK(predict_sync(in, quantize8()).iteration_s ==
        doctest::Approx(predict_sync(own_core, quantize8()).iteration_s));
}

TEST_CASE("the loader's wait and the slowest rank's lag count as compute, with p > 1 only") {
  TimingInputs in = four_ranks();
  in.l_data = 0.1e-3, in.l_skew = 0.2e-3;
  CHECK(predict_sync(in, none()).compute_s == doctest::Approx(3.8e-3));
  in.p = 1;
  CHECK(predict_sync(in, none()).compute_s == doctest::Approx(3.6e-3));
}

TEST_CASE("one rank communicates nothing") {
  TimingInputs in = four_ranks();
  in.p = 1;
  for (const Prediction& r : predict_all(in)) {
    CHECK(r.comm_s == 0);
    CHECK(r.iteration_s == doctest::Approx(3.5e-3));
    CHECK(r.compute_bound);
  }
}

TEST_CASE("predict_all: 3 algorithms x codecs, speedups against sync + none") {
  const TimingInputs in = four_ranks();
  const auto rows = predict_all(in);
  REQUIRE(rows.size() == 6);
  CHECK(rows[0].algorithm == "sync");
  CHECK(rows[0].compression == "none");
  CHECK(rows[0].speedup == doctest::Approx(1.0));
  CHECK(rows[2].algorithm == "ps_sync");
  CHECK(rows[5].algorithm == "pipe_sgd");
  CHECK(rows[5].compression == "quantize8");
  CHECK(rows[5].speedup == doctest::Approx(rows[0].iteration_s / rows[5].iteration_s));
}

TEST_CASE("recommendation: K = 2, the least compression that is compute-bound, L = 1") {
  TimingInputs in = four_ranks();
  const int L = 4;  // algorithm.segments
  Recommendation rec = recommend_pipe_sgd(in, predict_all(in, 2, L), L);
  CHECK(rec.fastest_pipe.algorithm == "pipe_sgd");
  CHECK(rec.fastest_pipe.K == 2);
  CHECK(rec.fastest_pipe.compression == "quantize8");
  CHECK(rec.compute_bound);
  CHECK(rec.L == 1);
  CHECK(rec.best.algorithm == "pipe_sgd");
  CHECK(rec.text.find("quantize8") != std::string::npos);

  // A 100x slower link: nothing makes it compute-bound; the fastest codec is recommended.
  in.link.bandwidth_bytes_per_s = 10e6;  // β = 100 ns/B
  rec = recommend_pipe_sgd(in, predict_all(in, 2, L), L);
  CHECK(rec.fastest_pipe.compression == "quantize8");
  CHECK_FALSE(rec.compute_bound);
  CHECK(rec.text.find("communication-bound") != std::string::npos);

  // A fast link: already compute-bound without compression, so no codec is needed.
  in.link.bandwidth_bytes_per_s = 100e9;  // β = 0.01 ns/B
  in.gamma_s_per_byte = 0.01e-9;
  rec = recommend_pipe_sgd(in, predict_all(in, 2, L), L);
  CHECK(rec.fastest_pipe.compression == "none");
  CHECK(rec.compute_bound);
}
