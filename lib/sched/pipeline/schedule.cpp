#include "sched/pipeline/schedule.h"

#include <fmt/format.h>

#include <algorithm>   // max, min
#include <deque>       // a channel's messages in the simulation
#include <functional>  // function: what follows each backward
#include <map>
#include <numeric>  // lcm
#include <tuple>
#include <utility>  // pair: the kinds' words

#include "core/error.h"

namespace dtrain::pipeline {

int PipelineShape::ranks() const {
  int n = 0;
  for (int r : replicas) n += r;
  return n;
}

int PipelineShape::first_rank(int stage) const {
  int first = 0;
  for (int s = 0; s < stage; ++s) first += replicas[s];
  return first;
}

int PipelineShape::stage_of(int rank) const {
  for (int s = 0; s < stages(); ++s) {
    if (rank < replicas[s]) return s;
    rank -= replicas[s];
  }
  DTRAIN_CHECK(false) << "rank " << rank << " beyond the pipeline";
  return -1;
}

int PipelineShape::replica_of(int rank) const {
  return rank - first_rank(stage_of(rank));
}

int PipelineShape::rank_of(int stage, int minibatch) const {
  return first_rank(stage) + minibatch % replicas[stage];
}

namespace {

// algorithm.schedule's words, by kind.
constexpr std::pair<ScheduleKind, const char*> kKindWords[] = {
    {ScheduleKind::one_f_one_b, "1f1b"},
    {ScheduleKind::gpipe, "gpipe"},
    {ScheduleKind::one_f_one_b_flush, "1f1b_flush"},
};

}  // namespace

std::string schedule_kind_name(ScheduleKind kind) {
  for (const auto& [k, word] : kKindWords)
    if (k == kind) return word;
  DTRAIN_CHECK(false) << "schedule kind " << static_cast<int>(kind);
  return "";
}

ScheduleKind schedule_kind_named(const std::string& word) {
  for (const auto& [kind, w] : kKindWords)
    if (word == w) return kind;
  throw InputError("algorithm.schedule: unknown '" + word + "'");
}

int ScheduleSpec::replicas_in_round(int round, int replicas) const {
  // The round's units: a step's microbatches, or one 1f1b minibatch per replica (fewer at the
  // schedule's end).
  const int per_round = units_per_iteration() * iterations_per_step(replicas);
  return std::min({replicas, per_round, units() - round * per_round});
}

int noam(const PipelineShape& shape, int stage) {
  int downstream = 0;
  for (int s = stage; s < shape.stages(); ++s) downstream += shape.replicas[s];
  const int r = shape.replicas[stage];
  return (downstream + r - 1) / r;
}

int in_flight_bound(const PipelineShape& shape, const ScheduleSpec& spec, int stage) {
  if (spec.forwards_first()) return spec.microbatches;
  const int own = noam(shape, stage);
  if (spec.in_flight <= 0) return own;
  // `in_flight` is the input stage's count; later stages keep the paper's difference to it (a
  // straight pipeline of S admits S − s on stage s), at least one. The output stage runs each
  // backward right after its forward: more than its NOAM there only delays the gradients.
  const int bound = std::max(1, own + spec.in_flight - noam(shape, 0));
  return stage == shape.stages() - 1 ? std::min(bound, own) : bound;
}

namespace {

// A rank's compute instructions (forward, backward, reduce_gradients, step) in order.
using Sequence = std::vector<Instruction>;

// 1F1B over `mine`: up to `bound` forwards, then one backward and one forward alternately,
// then the remaining backwards.
void one_f_one_b(const std::vector<int>& mine, int bound, Sequence& out,
                 const std::function<void(int, Sequence&)>& after_backward) {
  const size_t n = mine.size();
  size_t f = 0, b = 0;
  while (f < std::min<size_t>(static_cast<size_t>(bound), n))
    out.push_back({Op::forward, mine[f++]});
  while (b < n) {
    out.push_back({Op::backward, mine[b]});
    after_backward(mine[b++], out);
    if (f < n) out.push_back({Op::forward, mine[f++]});
  }
}

std::vector<Sequence> compute_sequences(const PipelineShape& shape, const ScheduleSpec& spec) {
  std::vector<Sequence> sequences(static_cast<size_t>(shape.ranks()));
  for (int rank = 0; rank < shape.ranks(); ++rank) {
    const int s = shape.stage_of(rank), r = shape.replica_of(rank), R = shape.replicas[s];
    const int bound = in_flight_bound(shape, spec, s);
    Sequence& seq = sequences[rank];
    if (!spec.flushes()) {
      std::vector<int> mine;
      for (int b = r; b < spec.minibatches; b += R) mine.push_back(b);
      // Each backward is followed by the round's reduction among the replicas and a step.
      int next_round = 0;
      auto step = [&](int b, Sequence& out) {
        const int round = b / R;
        if (R > 1) out.push_back({Op::reduce_gradients, round});
        out.push_back({Op::step, round});
        next_round = round + 1;
      };
      one_f_one_b(mine, bound, seq, step);
      // A last round without a minibatch for this replica: it still takes part (a zero
      // gradient), so that every replica steps the same rounds.
      const int rounds = (spec.minibatches + R - 1) / R;
      for (int round = next_round; round < rounds; ++round) {
        if (R > 1) seq.push_back({Op::reduce_gradients, round});
        seq.push_back({Op::step, round});
      }
      continue;
    }
    const int m = spec.microbatches;
    for (int step = 0; step < spec.minibatches; ++step) {
      std::vector<int> mine;  // this replica's microbatches of the step, by global id
      for (int i = 0; i < m; ++i)
        if ((step * m + i) % R == r) mine.push_back(step * m + i);
      if (spec.forwards_first()) {
        for (int q : mine) seq.push_back({Op::forward, q});
        for (int q : mine) seq.push_back({Op::backward, q});
      } else {
        one_f_one_b(mine, bound, seq, [](int, Sequence&) {});
      }
      if (R > 1) seq.push_back({Op::reduce_gradients, step});
      seq.push_back({Op::step, step});
    }
  }
  return sequences;
}

}  // namespace

std::vector<std::vector<Instruction>> build_schedule(const PipelineShape& shape,
                                                     const ScheduleSpec& spec) {
  DTRAIN_INPUT_CHECK(shape.stages() >= 1) << "pipeline: no stage";
  for (int s = 0; s < shape.stages(); ++s)
    DTRAIN_INPUT_CHECK(shape.replicas[s] >= 1)
        << "algorithm.replicas[" << s << "]: must be >= 1, got " << shape.replicas[s];
  DTRAIN_INPUT_CHECK(spec.minibatches >= 1) << "pipeline: no minibatch to schedule";
  DTRAIN_INPUT_CHECK(spec.microbatches >= 1) << "algorithm.microbatches: must be >= 1";
  DTRAIN_INPUT_CHECK(spec.in_flight >= 0) << "algorithm.in_flight: must be >= 1";

  const std::vector<Sequence> sequences = compute_sequences(shape, spec);
  const int S = shape.stages();
  // Each rank's list: its compute order, each receive right before the pass that needs it (the
  // runtime posts receives ahead, so waiting there costs nothing earlier), each send right
  // after the pass that produced it. Sends never block the compute thread (they leave on a
  // thread of their own), so a send placed early can only help: the next stage starts as soon
  // as the message is there. Per channel both sides meet the minibatches in one order: the
  // producer's pass order, which is the consumer's (both ascend).
  std::vector<std::vector<Instruction>> schedule(static_cast<size_t>(shape.ranks()));
  for (int rank = 0; rank < shape.ranks(); ++rank) {
    const int s = shape.stage_of(rank);
    std::vector<Instruction>& out = schedule[static_cast<size_t>(rank)];
    for (const Instruction& in : sequences[static_cast<size_t>(rank)]) {
      const int b = in.minibatch;
      if (in.op == Op::forward && s > 0)
        out.push_back({Op::receive_activation, b, shape.rank_of(s - 1, b)});
      if (in.op == Op::backward && s < S - 1)
        out.push_back({Op::receive_gradient, b, shape.rank_of(s + 1, b)});
      out.push_back(in);
      if (in.op == Op::forward && s < S - 1)
        out.push_back({Op::send_activation, b, shape.rank_of(s + 1, b)});
      if (in.op == Op::backward && s > 0)
        out.push_back({Op::send_gradient, b, shape.rank_of(s - 1, b)});
    }
  }
  return schedule;
}

ScheduleCheck validate_schedule(const PipelineShape& shape, const ScheduleSpec& spec,
                                const std::vector<std::vector<Instruction>>& schedule) {
  ScheduleCheck check;
  auto problem = [&](std::string text) { check.problems.push_back(std::move(text)); };
  const int ranks = shape.ranks(), S = shape.stages();
  if (static_cast<int>(schedule.size()) != ranks) {
    problem(fmt::format("{} lists for {} ranks", schedule.size(), ranks));
    return check;
  }
  const int items = spec.units();
  // Per (stage, item): forward and backward counts and ranks.
  std::map<std::pair<int, int>, std::pair<int, int>> passes;
  // Per directed channel: the minibatches sent and received, in order.
  std::map<std::tuple<int, int, bool>, std::vector<int>> sends, receives;
  std::map<int, std::vector<std::vector<int>>> rounds;  // stage → per replica, reduce rounds
  check.peak_in_flight.assign(ranks, 0);
  for (int rank = 0; rank < ranks; ++rank) {
    const int s = shape.stage_of(rank);
    const int bound = in_flight_bound(shape, spec, s);
    std::map<int, int> forwarded;  // item → forwarded, not yet backwarded
    int in_flight = 0;
    bool stepped_after_reduce = true;
    for (const Instruction& in : schedule[rank]) {
      switch (in.op) {
        case Op::forward:
        case Op::backward: {
          const bool fwd = in.op == Op::forward;
          if (in.minibatch < 0 || in.minibatch >= items) {
            problem(fmt::format("rank {}: {} of minibatch {} outside 0..{}", rank,
                                fwd ? "forward" : "backward", in.minibatch, items - 1));
            break;
          }
          if (shape.rank_of(s, in.minibatch) != rank)
            problem(fmt::format("rank {}: minibatch {} belongs to rank {} of stage {}", rank,
                                in.minibatch, shape.rank_of(s, in.minibatch), s));
          auto& p = passes[{s, in.minibatch}];
          if (fwd) {
            ++p.first;
            ++forwarded[in.minibatch];
            check.peak_in_flight[rank] = std::max(check.peak_in_flight[rank], ++in_flight);
            if (in_flight > bound)
              problem(fmt::format("rank {}: {} minibatches in flight, bound {}", rank, in_flight,
                                  bound));
          } else {
            ++p.second;
            if (forwarded[in.minibatch]-- <= 0)
              problem(fmt::format("rank {}: backward of minibatch {} before its forward", rank,
                                  in.minibatch));
            --in_flight;
          }
          break;
        }
        case Op::send_activation:
        case Op::send_gradient:
          sends[{rank, in.peer, in.op == Op::send_activation}].push_back(in.minibatch);
          break;
        case Op::receive_activation:
        case Op::receive_gradient:
          receives[{in.peer, rank, in.op == Op::receive_activation}].push_back(in.minibatch);
          break;
        case Op::reduce_gradients: {
          auto& per_replica = rounds[s];
          per_replica.resize(static_cast<size_t>(shape.replicas[s]));
          per_replica[shape.replica_of(rank)].push_back(in.minibatch);
          if (!stepped_after_reduce)
            problem(fmt::format("rank {}: two reductions without a step between", rank));
          stepped_after_reduce = false;
          break;
        }
        case Op::step:
          stepped_after_reduce = true;
          break;
      }
    }
    if (in_flight != 0)
      problem(fmt::format("rank {}: {} minibatches never backwarded", rank, in_flight));
  }
  for (int s = 0; s < S; ++s)
    for (int item = 0; item < items; ++item) {
      const auto it = passes.find({s, item});
      const std::pair<int, int> p = it == passes.end() ? std::pair{0, 0} : it->second;
      if (p.first != 1 || p.second != 1)
        problem(fmt::format("stage {}: minibatch {} has {} forward(s) and {} backward(s)", s, item,
                            p.first, p.second));
    }
  if (sends != receives)
    for (const auto& [channel, order] : sends) {
      const auto it = receives.find(channel);
      if (it == receives.end() || it->second != order)
        problem(fmt::format("channel {} → {} ({}): sends and receives differ", std::get<0>(channel),
                            std::get<1>(channel),
                            std::get<2>(channel) ? "activations" : "gradients"));
    }
  for (const auto& [channel, order] : receives)
    if (!sends.count(channel))
      problem(fmt::format("channel {} → {}: receives with no send", std::get<0>(channel),
                          std::get<1>(channel)));
  for (const auto& [s, per_replica] : rounds)
    for (const auto& r : per_replica)
      if (r != per_replica.front())
        problem(fmt::format("stage {}: its replicas reduce different rounds", s));
  return check;
}

std::vector<std::vector<double>> simulate_schedule(
    const PipelineShape& shape, const std::vector<std::vector<Instruction>>& schedule,
    double forward_time, double backward_time) {
  const size_t S = static_cast<size_t>(shape.stages());
  return simulate_schedule(
      shape, schedule,
      {std::vector<double>(S, forward_time), std::vector<double>(S, backward_time),
       std::vector<double>(S, 0), std::vector<double>(S > 0 ? S - 1 : 0, 0)});
}

std::vector<std::vector<double>> simulate_schedule(
    const PipelineShape& shape, const std::vector<std::vector<Instruction>>& schedule,
    const SimulationTimes& times) {
  const int ranks = shape.ranks();
  DTRAIN_CHECK(static_cast<int>(times.forward_s.size()) == shape.stages() &&
               static_cast<int>(times.backward_s.size()) == shape.stages() &&
               static_cast<int>(times.reduce_s.size()) == shape.stages() &&
               static_cast<int>(times.transfer_s.size()) == shape.stages() - 1)
      << "simulation times for " << shape.stages() << " stages";
  std::vector<double> sender_free(ranks, 0);  // when each rank's sender thread is idle again
  std::vector<size_t> next(ranks, 0);
  std::vector<double> clock(ranks, 0);
  std::vector<std::vector<double>> start(ranks);
  for (int rank = 0; rank < ranks; ++rank) start[rank].resize(schedule[rank].size());
  auto at = [&](int rank) -> const Instruction* {
    return next[rank] < schedule[rank].size() ? &schedule[rank][next[rank]] : nullptr;
  };
  auto advance = [&](int rank, double when, double duration) {
    start[rank][next[rank]] = when;
    clock[rank] = when + duration;
    ++next[rank];
  };
  // Per directed channel (from, to, activation?): minibatches sent, not yet received, and when.
  std::map<std::tuple<int, int, bool>, std::deque<std::pair<int, double>>> in_transit;
  bool moved = true;
  while (moved) {
    moved = false;
    for (int rank = 0; rank < ranks; ++rank) {
      const Instruction* in = at(rank);
      if (!in) continue;
      switch (in->op) {
        case Op::forward:
          advance(rank, clock[rank], times.forward_s[shape.stage_of(rank)]);
          moved = true;
          break;
        case Op::backward:
          advance(rank, clock[rank], times.backward_s[shape.stage_of(rank)]);
          moved = true;
          break;
        case Op::step:
          advance(rank, clock[rank], 0);
          moved = true;
          break;
        case Op::send_activation:
        case Op::send_gradient: {
          // Non-blocking: the message leaves on the rank's sender thread, after the messages
          // before it, into a receive posted ahead.
          const int cut = std::min(shape.stage_of(rank), shape.stage_of(in->peer));
          const double leaves = std::max(clock[rank], sender_free[rank]);
          sender_free[rank] = leaves + times.transfer_s[cut];
          in_transit[{rank, in->peer, in->op == Op::send_activation}].push_back(
              {in->minibatch, sender_free[rank]});
          advance(rank, clock[rank], 0);
          moved = true;
          break;
        }
        case Op::receive_activation:
        case Op::receive_gradient: {
          auto& channel = in_transit[{in->peer, rank, in->op == Op::receive_activation}];
          if (channel.empty()) break;  // not sent yet
          // Messages of a channel arrive in the order sent: another minibatch first is the
          // runtime's header mismatch.
          if (channel.front().first != in->minibatch)
            throw Error(fmt::format(
                "pipeline schedule: rank {} expects the {} of minibatch {} from rank {}, but "
                "minibatch {} comes first",
                rank, in->op == Op::receive_activation ? "activation" : "gradient", in->minibatch,
                in->peer, channel.front().first));
          advance(rank, std::max(clock[rank], channel.front().second), 0);
          channel.pop_front();
          moved = true;
          break;
        }
        case Op::reduce_gradients: {
          const int s = shape.stage_of(rank);
          const int first = shape.first_rank(s);
          bool all = true;
          double when = 0;
          for (int r = first; r < first + shape.replicas[s]; ++r) {
            const Instruction* other = at(r);
            all = all && other && other->op == Op::reduce_gradients &&
                  other->minibatch == in->minibatch;
            when = std::max(when, clock[r]);
          }
          if (all) {
            for (int r = first; r < first + shape.replicas[s]; ++r)
              advance(r, when, times.reduce_s[s]);
            moved = true;
          }
          break;
        }
      }
    }
  }
  std::string stuck;
  for (int rank = 0; rank < ranks; ++rank)
    if (const Instruction* in = at(rank))
      stuck += fmt::format(" rank {} at instruction {} (op {}, minibatch {}, peer {});", rank,
                           next[rank], static_cast<int>(in->op), in->minibatch, in->peer);
  if (!stuck.empty()) throw Error("pipeline schedule deadlocks:" + stuck);
  return start;
}

std::string schedule_grid(const PipelineShape& shape,
                          const std::vector<std::vector<Instruction>>& schedule) {
  std::string grid;
  for (int rank = 0; rank < shape.ranks(); ++rank) {
    grid += fmt::format("rank {:<2} stage {} replica {} |", rank, shape.stage_of(rank),
                        shape.replica_of(rank));
    for (const Instruction& in : schedule[rank]) {
      switch (in.op) {
        case Op::forward:
          grid += fmt::format(" F{}", in.minibatch);
          break;
        case Op::backward:
          grid += fmt::format(" B{}", in.minibatch);
          break;
        case Op::reduce_gradients:
          grid += " R";
          break;
        case Op::step:
          grid += " S";
          break;
        default:
          break;
      }
    }
    grid += "\n";
  }
  return grid;
}

double simulated_minibatch_seconds(const PipelineShape& shape, ScheduleSpec spec,
                                   const SimulationTimes& times) {
  // Two runs, the second twice as long: their difference is steady state only (start-up and
  // drain cancel). Minibatch counts are whole rounds of every stage's replicas.
  int64_t rounds = 1;
  for (int r : shape.replicas) rounds = std::lcm(rounds, static_cast<int64_t>(r));
  const int n1 = static_cast<int>(std::max<int64_t>(4 * rounds, 4 * shape.ranks()));
  auto makespan = [&](int minibatches) {
    spec.minibatches = minibatches;
    double end = 0;
    for (const std::vector<double>& starts :
         simulate_schedule(shape, build_schedule(shape, spec), times))
      if (!starts.empty()) end = std::max(end, starts.back());
    return end;
  };
  return (makespan(2 * n1) - makespan(n1)) / n1;
}

}  // namespace dtrain::pipeline
