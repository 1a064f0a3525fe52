// Pipeline schedules as data: for every shape up to 5 stages × 3 replicas and 1–20 minibatches
// (fewer than the stages included), every kind validates, runs without deadlock when sends
// block until received, and a straight 1F1B pipeline never idles in steady state.
#include <doctest/doctest.h>
#include <fmt/format.h>  // the order as text

#include <algorithm>  // equal
#include <numeric>    // lcm
#include <string>
#include <vector>

#include "core/error.h"
#include "sched/pipeline/schedule.h"

using namespace dtrain;
using namespace dtrain::pipeline;

namespace {

// Every vector of `stages` replica counts in 1..max_replicas.
std::vector<PipelineShape> shapes(int stages, int max_replicas) {
  std::vector<PipelineShape> out{{}};
  for (int s = 0; s < stages; ++s) {
    std::vector<PipelineShape> longer;
    for (const PipelineShape& p : out)
      for (int r = 1; r <= max_replicas; ++r) {
        PipelineShape q = p;
        q.replicas.push_back(r);
        longer.push_back(q);
      }
    out = longer;
  }
  return out;
}

std::string name(const PipelineShape& shape) {
  std::string s;
  for (int r : shape.replicas) {
    if (!s.empty()) s += '-';
    s += std::to_string(r);
  }
  return s;
}

}  // namespace

TEST_CASE("schedules validate and never deadlock, for every shape and kind") {
  int checked = 0;
  for (int stages = 1; stages <= 5; ++stages)
    for (const PipelineShape& shape : shapes(stages, stages <= 3 ? 3 : 2))
      for (const char* kind : {"1f1b", "gpipe", "1f1b_flush"})
        for (int minibatches : {1, 2, 3, 5, 8, 20}) {
          if (std::string(kind) != "1f1b" && minibatches > 5) continue;
          for (int micro :
               std::string(kind) == "1f1b" ? std::vector<int>{1} : std::vector<int>{1, 3, 4}) {
            CAPTURE(name(shape));
            CAPTURE(kind);
            CAPTURE(minibatches);
            CAPTURE(micro);
            ScheduleSpec spec{schedule_kind_named(kind), minibatches, micro, 0};
            const auto schedule = build_schedule(shape, spec);
            const ScheduleCheck check = validate_schedule(shape, spec, schedule);
            INFO(schedule_grid(shape, schedule));
            for (const std::string& p : check.problems) FAIL_CHECK(p);
            // The slots a replica needs are its peak, never above the bound.
            for (int rank = 0; rank < shape.ranks(); ++rank)
              CHECK(check.peak_in_flight[rank] <=
                    in_flight_bound(shape, spec, shape.stage_of(rank)));
            CHECK_NOTHROW(simulate_schedule(shape, schedule));
            CHECK_NOTHROW(simulate_schedule(shape, schedule, 1, 2));  // backward twice forward
            ++checked;
          }
        }
  CHECK(checked > 1000);
}

TEST_CASE("1f1b admits NOAM minibatches per replica, or in_flight") {
  CHECK(noam({{1, 1, 1, 1}}, 0) == 4);
  CHECK(noam({{1, 1, 1, 1}}, 3) == 1);
  CHECK(noam({{3, 1}}, 0) == 2);  // ⌈4 / 3⌉
  CHECK(noam({{2, 1, 1}}, 0) == 2);
  CHECK(noam({{1, 2}}, 1) == 1);
  const PipelineShape straight{{1, 1, 1}};
  const auto schedule = build_schedule(straight, {ScheduleKind::one_f_one_b, 12, 1, 0});
  const ScheduleCheck check =
      validate_schedule(straight, {ScheduleKind::one_f_one_b, 12, 1, 0}, schedule);
  CHECK(check.peak_in_flight == std::vector<int>{3, 2, 1});
  // in_flight: 1 is plain model parallelism: one minibatch in the pipeline at a time.
  const auto serial = build_schedule(straight, {ScheduleKind::one_f_one_b, 6, 1, 1});
  CHECK(validate_schedule(straight, {ScheduleKind::one_f_one_b, 6, 1, 1}, serial).peak_in_flight ==
        std::vector<int>{1, 1, 1});
  // More than NOAM (slack for slow links): the input stage's count, later stages keep their
  // difference to it, the output stage stays at one.
  CHECK(in_flight_bound(straight, {ScheduleKind::one_f_one_b, 6, 1, 5}, 0) == 5);
  CHECK(in_flight_bound(straight, {ScheduleKind::one_f_one_b, 6, 1, 5}, 1) == 4);
  CHECK(in_flight_bound(straight, {ScheduleKind::one_f_one_b, 6, 1, 5}, 2) == 1);
  CHECK(in_flight_bound(straight, {ScheduleKind::one_f_one_b, 6, 1, 2}, 1) == 1);
  const auto slack = build_schedule(straight, {ScheduleKind::one_f_one_b, 12, 1, 5});
  CHECK(validate_schedule(straight, {ScheduleKind::one_f_one_b, 12, 1, 5}, slack).peak_in_flight ==
        std::vector<int>{5, 4, 1});
  // The first stage's order: warm-up, then one backward, one forward.
  std::string first;
  for (const Instruction& in : schedule[0])
    if (in.op == Op::forward || in.op == Op::backward)
      first += fmt::format("{}{} ", in.op == Op::forward ? 'F' : 'B', in.minibatch);
  CHECK(first.rfind("F0 F1 F2 B0 F3 B1 F4 B2 F5 ", 0) == 0);
}

TEST_CASE("with unit times a straight 1F1B pipeline has no idle step in steady state") {
  for (int stages : {2, 3, 4, 5}) {
    CAPTURE(stages);
    const PipelineShape shape{std::vector<int>(static_cast<size_t>(stages), 1)};
    const int minibatches = 6 * stages;
    const auto schedule = build_schedule(shape, {ScheduleKind::one_f_one_b, minibatches, 1, 0});
    const auto start = simulate_schedule(shape, schedule);
    for (int rank = 0; rank < stages; ++rank) {
      // Compute start times of this rank; steady state: between the first backward of the
      // (stages)-th minibatch and the last forward.
      std::vector<double> compute;
      for (size_t i = 0; i < schedule[rank].size(); ++i) {
        const Op op = schedule[rank][i].op;
        if (op == Op::forward || op == Op::backward) compute.push_back(start[rank][i]);
      }
      const size_t from = 2 * static_cast<size_t>(stages), to = compute.size() - 2 * stages;
      for (size_t i = from + 1; i < to; ++i) {
        CAPTURE(rank);
        CAPTURE(i);
        CHECK(compute[i] - compute[i - 1] == doctest::Approx(1.0));
      }
    }
  }
}

TEST_CASE("replicated stages: replica b mod R runs minibatch b, every replica steps every round") {
  const PipelineShape shape{{3, 1}};  // 3-1 on 4 ranks
  const ScheduleSpec spec{ScheduleKind::one_f_one_b, 7, 1,
                          0};  // the last round has one minibatch for 3 replicas
  const auto schedule = build_schedule(shape, spec);
  CHECK(validate_schedule(shape, spec, schedule).problems.empty());
  for (int replica = 0; replica < 3; ++replica) {
    int reductions = 0;
    for (const Instruction& in : schedule[replica]) {
      if (in.op == Op::forward) CHECK(in.minibatch % 3 == replica);
      reductions += in.op == Op::reduce_gradients;
    }
    CHECK(reductions == 3);  // rounds {0,1,2}, {3,4,5}, {6}
  }
  CHECK(shape.rank_of(0, 7) == 1);
  CHECK(shape.rank_of(1, 7) == 3);
  CHECK_NOTHROW(simulate_schedule(shape, schedule));
}

TEST_CASE("the validator and the simulation catch broken schedules") {
  const PipelineShape shape{{1, 1}};
  const ScheduleSpec spec{ScheduleKind::one_f_one_b, 4, 1, 0};
  auto schedule = build_schedule(shape, spec);
  {
    auto broken = schedule;  // a backward lost
    for (auto it = broken[1].begin(); it != broken[1].end(); ++it)
      if (it->op == Op::backward) {
        broken[1].erase(it);
        break;
      }
    CHECK_FALSE(validate_schedule(shape, spec, broken).problems.empty());
  }
  {
    // The second stage receives its activations in the wrong order: the sends and receives of
    // the channel no longer match: the simulation meets the other minibatch first.
    auto broken = schedule;
    std::vector<Instruction>& s1 = broken[1];
    size_t a = s1.size(), b = s1.size();
    for (size_t i = 0; i < s1.size(); ++i)
      if (s1[i].op == Op::receive_activation) (a == s1.size() ? a : b) = i;
    REQUIRE(b < s1.size());
    std::swap(s1[a].minibatch, s1[b].minibatch);
    CHECK_FALSE(validate_schedule(shape, spec, broken).problems.empty());
    CHECK_THROWS_AS(simulate_schedule(shape, broken), Error);
  }
  CHECK_THROWS_AS(build_schedule({{}}, spec), InputError);
  CHECK_THROWS_AS(build_schedule({{1, 0}}, spec), InputError);
  CHECK_THROWS_AS(build_schedule(shape, {schedule_kind_named("zigzag"), 4, 1, 0}), InputError);
}

TEST_CASE("the grid shows each rank's passes in order") {
  const PipelineShape shape{{1, 1}};
  const std::string grid =
      schedule_grid(shape, build_schedule(shape, {ScheduleKind::one_f_one_b, 3, 1, 0}));
  CHECK(grid ==
        "rank 0  stage 0 replica 0 | F0 F1 B0 S F2 B1 S B2 S\n"
        "rank 1  stage 1 replica 0 | F0 B0 S F1 B1 S F2 B2 S\n");
}

TEST_CASE("dtrain's prediction: the steady-state time per minibatch of a simulated schedule") {
  const ScheduleSpec f1b1{ScheduleKind::one_f_one_b, 0, 1, 0};
  // A straight pipeline on a fast link: the slowest stage's forward + backward.
  const PipelineShape two{{1, 1}};
  CHECK(simulated_minibatch_seconds(two, f1b1, {{1, 0.5}, {2, 1}, {0, 0}, {0}}) ==
        doctest::Approx(3.0));
  // On a slow link the round trip of a minibatch (activation over, the next stage's passes,
  // gradient back) is not hidden by the input stage's other work: with NOAM = 2 minibatches in
  // flight, each takes (2 · transfer + its passes on both stages) / 2 = (4 + 1.5 + 3) / 2.
  CHECK(simulated_minibatch_seconds(two, f1b1, {{1, 0.5}, {2, 1}, {0, 0}, {2}}) ==
        doctest::Approx(4.25));
  // With in_flight 1 (plain model parallelism) nothing overlaps: 4 + 1.5 + 3.
  CHECK(simulated_minibatch_seconds(two, {ScheduleKind::one_f_one_b, 0, 1, 1},
                                    {{1, 0.5}, {2, 1}, {0, 0}, {2}}) == doctest::Approx(8.5));
  // One stage on three replicas: each round, every replica's passes, then their all-reduce.
  CHECK(simulated_minibatch_seconds({{3}}, f1b1, {{1}, {2}, {0.5}, {}}) ==
        doctest::Approx(3.5 / 3));
}

TEST_CASE("a tie between the first and last stages pairs their steps") {
  // Two stages of forward 1 and backward 1 on a link without delay: untied, the slowest stage's
  // 2 per minibatch. Tied (a GPT's embedding and head), the output stage's step of minibatch m
  // waits for the input stage's, which follows that stage's backward of m after its forward of
  // m + 1: the output stage's forward and backward, then the input stage's backward, 3 per
  // minibatch, plus the tied gradient's exchange (0.25) that both wait for.
  const ScheduleSpec f1b1{ScheduleKind::one_f_one_b, 0, 1, 0};
  const PipelineShape two{{1, 1}};
  SimulationTimes times{{1, 1}, {1, 1}, {0, 0}, {0}};
  CHECK(simulated_minibatch_seconds(two, f1b1, times) == doctest::Approx(2.0));
  times.tied_s = 0;
  CHECK(simulated_minibatch_seconds(two, f1b1, times) == doctest::Approx(3.0));
  times.tied_s = 0.25;
  CHECK(simulated_minibatch_seconds(two, f1b1, times) == doctest::Approx(3.25));
  // One stage has no ends to pair.
  CHECK(simulated_minibatch_seconds({{2}}, f1b1, {{2}, {2}, {0}, {}, 0.25}) ==
        doctest::Approx(simulated_minibatch_seconds({{2}}, f1b1, {{2}, {2}, {0}, {}})));
}

// The ground of an early end of 1F1B (a signal, the input stage stops admitting): each rank can
// switch from the schedule of N minibatches to the one of M < N at its first instruction that
// admits a minibatch >= M — a forward on the input stage, a receive of its activation elsewhere —
// because everything before is the same in both lists. (Not so for gpipe and 1f1b_flush: a
// replica without a microbatch in a step reduces and steps before its next forward.)
TEST_CASE("1f1b: the schedule of M minibatches is the one of N until a minibatch >= M arrives") {
  for (const std::string kind : {"1f1b"}) {
    for (const PipelineShape& shape :
         {PipelineShape{{1, 1}}, PipelineShape{{1, 1, 1}}, PipelineShape{{2, 1}},
          PipelineShape{{1, 2}}, PipelineShape{{3, 1, 2}}, PipelineShape{{2, 2}}}) {
      const int m = kind == "1f1b" ? 1 : 2;  // units per step
      const int L = std::lcm(std::lcm(shape.replicas.front(), shape.replicas.back()), m);
      for (int M = L; M < 8 * L; M += L) {
        const int N = M + L * 3;
        CAPTURE(kind);
        CAPTURE(M);
        CAPTURE(shape.replicas.size());
        CAPTURE(shape.replicas.front());
        const auto long_lists =
            build_schedule(shape, {schedule_kind_named(kind), kind == "1f1b" ? N : N / m, m, 0});
        const auto short_lists =
            build_schedule(shape, {schedule_kind_named(kind), kind == "1f1b" ? M : M / m, m, 0});
        for (int r = 0; r < shape.ranks(); ++r) {
          const auto& a = long_lists[static_cast<size_t>(r)];
          const auto& b = short_lists[static_cast<size_t>(r)];
          const bool input = shape.stage_of(r) == 0;
          size_t p = 0;
          while (p < a.size() &&
                 !((input ? a[p].op == Op::forward : a[p].op == Op::receive_activation) &&
                   a[p].minibatch >= M))
            ++p;
          CAPTURE(r);
          REQUIRE(p <= b.size());
          CHECK(std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(p), b.begin()));
        }
      }
    }
  }
}
