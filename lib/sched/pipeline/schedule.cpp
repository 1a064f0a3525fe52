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

namespace {

// validate_schedule's findings: each rank's list read once, what must match across ranks
// gathered on the way and compared at the end.
class Validation {
 public:
  Validation(const PipelineShape& shape, const ScheduleSpec& spec)
      : shape_(shape), spec_(spec), items_(spec.units()) {
    check_.peak_in_flight.assign(static_cast<size_t>(shape.ranks()), 0);
  }

  // One rank's list: its passes in order and within the in-flight bound, its reductions each
  // followed by a step; its messages and reductions noted for the comparison across ranks.
  void read(int rank, const std::vector<Instruction>& list) {
    const int stage = shape_.stage_of(rank);
    RankState r{rank, stage, in_flight_bound(shape_, spec_, stage), {}};
    for (const Instruction& in : list) {
      switch (in.op) {
        case Op::forward:
        case Op::backward:
          pass(r, in);
          break;
        case Op::send_activation:
        case Op::send_gradient:
          sends_[{rank, in.peer, in.op == Op::send_activation}].push_back(in.minibatch);
          break;
        case Op::receive_activation:
        case Op::receive_gradient:
          receives_[{in.peer, rank, in.op == Op::receive_activation}].push_back(in.minibatch);
          break;
        case Op::reduce_gradients: {
          auto& per_replica = rounds_[r.stage];
          per_replica.resize(static_cast<size_t>(shape_.replicas[r.stage]));
          per_replica[shape_.replica_of(rank)].push_back(in.minibatch);
          if (!r.stepped_after_reduce)
            problem(fmt::format("rank {}: two reductions without a step between", rank));
          r.stepped_after_reduce = false;
          break;
        }
        case Op::step:
          r.stepped_after_reduce = true;
          break;
      }
    }
    if (r.in_flight != 0)
      problem(fmt::format("rank {}: {} minibatches never backwarded", rank, r.in_flight));
  }

  // Across ranks: each item's passes, each channel's two sides, each stage's reduction rounds.
  ScheduleCheck finish() {
    for (int s = 0; s < shape_.stages(); ++s)
      for (int item = 0; item < items_; ++item) {
        const auto it = passes_.find({s, item});
        const std::pair<int, int> p = it == passes_.end() ? std::pair{0, 0} : it->second;
        if (p.first != 1 || p.second != 1)
          problem(fmt::format("stage {}: minibatch {} has {} forward(s) and {} backward(s)", s,
                              item, p.first, p.second));
      }
    if (sends_ != receives_)
      for (const auto& [channel, order] : sends_) {
        const auto it = receives_.find(channel);
        if (it == receives_.end() || it->second != order)
          problem(fmt::format("channel {} → {} ({}): sends and receives differ",
                              std::get<0>(channel), std::get<1>(channel),
                              std::get<2>(channel) ? "activations" : "gradients"));
      }
    for (const auto& [channel, order] : receives_)
      if (!sends_.count(channel))
        problem(fmt::format("channel {} → {}: receives with no send", std::get<0>(channel),
                            std::get<1>(channel)));
    for (const auto& [s, per_replica] : rounds_)
      for (const auto& r : per_replica)
        if (r != per_replica.front())
          problem(fmt::format("stage {}: its replicas reduce different rounds", s));
    return std::move(check_);
  }

 private:
  struct RankState {
    int rank, stage, bound;
    std::map<int, int> forwarded;  // item → forwarded, not yet backwarded
    int in_flight = 0;
    bool stepped_after_reduce = true;
  };

  void problem(std::string text) { check_.problems.push_back(std::move(text)); }

  // A forward or backward of rank r.rank.
  void pass(RankState& r, const Instruction& in) {
    const bool fwd = in.op == Op::forward;
    const int rank = r.rank, s = r.stage;
    if (in.minibatch < 0 || in.minibatch >= items_) {
      problem(fmt::format("rank {}: {} of minibatch {} outside 0..{}", rank,
                          fwd ? "forward" : "backward", in.minibatch, items_ - 1));
      return;
    }
    if (shape_.rank_of(s, in.minibatch) != rank)
      problem(fmt::format("rank {}: minibatch {} belongs to rank {} of stage {}", rank,
                          in.minibatch, shape_.rank_of(s, in.minibatch), s));
    auto& p = passes_[{s, in.minibatch}];
    if (fwd) {
      ++p.first;
      ++r.forwarded[in.minibatch];
      int& peak = check_.peak_in_flight[static_cast<size_t>(rank)];
      peak = std::max(peak, ++r.in_flight);
      if (r.in_flight > r.bound)
        problem(
            fmt::format("rank {}: {} minibatches in flight, bound {}", rank, r.in_flight, r.bound));
    } else {
      ++p.second;
      if (r.forwarded[in.minibatch]-- <= 0)
        problem(fmt::format("rank {}: backward of minibatch {} before its forward", rank,
                            in.minibatch));
      --r.in_flight;
    }
  }

  const PipelineShape& shape_;
  const ScheduleSpec& spec_;
  const int items_;
  ScheduleCheck check_;
  // Per (stage, item): forward and backward counts.
  std::map<std::pair<int, int>, std::pair<int, int>> passes_;
  // Per directed channel: the minibatches sent and received, in order.
  std::map<std::tuple<int, int, bool>, std::vector<int>> sends_, receives_;
  std::map<int, std::vector<std::vector<int>>> rounds_;  // stage → per replica, reduce rounds
};

}  // namespace

ScheduleCheck validate_schedule(const PipelineShape& shape, const ScheduleSpec& spec,
                                const std::vector<std::vector<Instruction>>& schedule) {
  if (static_cast<int>(schedule.size()) != shape.ranks()) {
    ScheduleCheck check;
    check.problems.push_back(fmt::format("{} lists for {} ranks", schedule.size(), shape.ranks()));
    return check;
  }
  Validation v(shape, spec);
  for (int rank = 0; rank < shape.ranks(); ++rank)
    v.read(rank, schedule[static_cast<size_t>(rank)]);
  return v.finish();
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

namespace {

// simulate_schedule's state: per rank its clock, its next instruction and each instruction's
// start; per channel the messages in flight.
class Simulation {
 public:
  Simulation(const PipelineShape& shape, const std::vector<std::vector<Instruction>>& schedule,
             const SimulationTimes& times)
      : shape_(shape),
        schedule_(schedule),
        times_(times),
        sender_free_(static_cast<size_t>(shape.ranks()), 0),
        next_(static_cast<size_t>(shape.ranks()), 0),
        clock_(static_cast<size_t>(shape.ranks()), 0),
        start_(static_cast<size_t>(shape.ranks())) {
    for (int rank = 0; rank < shape.ranks(); ++rank) start_[rank].resize(schedule[rank].size());
  }

  // Moves every rank on as far as it can, in rounds over the ranks, until none can move.
  std::vector<std::vector<double>> run() {
    bool moved = true;
    while (moved) {
      moved = false;
      for (int rank = 0; rank < shape_.ranks(); ++rank)
        if (const Instruction* in = at(rank)) moved = step(rank, *in) || moved;
    }
    std::string stuck;
    for (int rank = 0; rank < shape_.ranks(); ++rank)
      if (const Instruction* in = at(rank))
        stuck += fmt::format(" rank {} at instruction {} (op {}, minibatch {}, peer {});", rank,
                             next_[rank], static_cast<int>(in->op), in->minibatch, in->peer);
    if (!stuck.empty()) throw Error("pipeline schedule deadlocks:" + stuck);
    return std::move(start_);
  }

 private:
  const Instruction* at(int rank) const {
    return next_[rank] < schedule_[rank].size() ? &schedule_[rank][next_[rank]] : nullptr;
  }
  void advance(int rank, double when, double duration) {
    start_[rank][next_[rank]] = when;
    clock_[rank] = when + duration;
    ++next_[rank];
  }

  // Runs `in`, rank's next instruction, when it can run now: whether it did.
  bool step(int rank, const Instruction& in) {
    switch (in.op) {
      case Op::forward:
        advance(rank, clock_[rank], times_.forward_s[shape_.stage_of(rank)]);
        return true;
      case Op::backward:
        advance(rank, clock_[rank], times_.backward_s[shape_.stage_of(rank)]);
        return true;
      case Op::step:
        return step_weights(rank, in);
      case Op::send_activation:
      case Op::send_gradient:
        send(rank, in);
        return true;
      case Op::receive_activation:
      case Op::receive_gradient:
        return receive(rank, in);
      case Op::reduce_gradients:
        return reduce(rank, in);
    }
    return false;
  }

  void send(int rank, const Instruction& in) {
    // Non-blocking: the message leaves on the rank's sender thread, after the messages before
    // it, into a receive posted ahead.
    const int cut = std::min(shape_.stage_of(rank), shape_.stage_of(in.peer));
    const double leaves = std::max(clock_[rank], sender_free_[rank]);
    sender_free_[rank] = leaves + times_.transfer_s[cut];
    in_transit_[{rank, in.peer, in.op == Op::send_activation}].push_back(
        {in.minibatch, sender_free_[rank]});
    advance(rank, clock_[rank], 0);
  }

  bool receive(int rank, const Instruction& in) {
    auto& channel = in_transit_[{in.peer, rank, in.op == Op::receive_activation}];
    if (channel.empty()) return false;  // not sent yet
    // Messages of a channel arrive in the order sent: another minibatch first is the runtime's
    // header mismatch.
    if (channel.front().first != in.minibatch)
      throw Error(
          fmt::format("pipeline schedule: rank {} expects the {} of minibatch {} from rank {}, but "
                      "minibatch {} comes first",
                      rank, in.op == Op::receive_activation ? "activation" : "gradient",
                      in.minibatch, in.peer, channel.front().first));
    advance(rank, std::max(clock_[rank], channel.front().second), 0);
    channel.pop_front();
    return true;
  }

  // A step; one of a tied end's waits for the other end's step of the same round, then both
  // exchange the tied weight's gradient (the runtime's TiedWeights::sum_gradients).
  bool step_weights(int rank, const Instruction& in) {
    const int stage = shape_.stage_of(rank), last = shape_.stages() - 1;
    const bool tied = times_.tied_s >= 0 && last > 0 && (stage == 0 || stage == last) &&
                      shape_.replicas.front() == shape_.replicas.back();
    if (!tied) {
      advance(rank, clock_[rank], 0);
      return true;
    }
    const int partner = shape_.first_rank(stage == 0 ? last : 0) + shape_.replica_of(rank);
    const Instruction* theirs = at(partner);
    if (!theirs || theirs->op != Op::step || theirs->minibatch != in.minibatch) return false;
    const double when = std::max(clock_[rank], clock_[partner]);
    advance(rank, when, times_.tied_s);
    advance(partner, when, times_.tied_s);
    return true;
  }

  // A reduction starts once every replica of the stage has reached it.
  bool reduce(int rank, const Instruction& in) {
    const int s = shape_.stage_of(rank);
    const int first = shape_.first_rank(s);
    bool all = true;
    double when = 0;
    for (int r = first; r < first + shape_.replicas[s]; ++r) {
      const Instruction* other = at(r);
      all = all && other && other->op == Op::reduce_gradients && other->minibatch == in.minibatch;
      when = std::max(when, clock_[r]);
    }
    if (!all) return false;
    for (int r = first; r < first + shape_.replicas[s]; ++r) advance(r, when, times_.reduce_s[s]);
    return true;
  }

  const PipelineShape& shape_;
  const std::vector<std::vector<Instruction>>& schedule_;
  const SimulationTimes& times_;
  std::vector<double> sender_free_;  // when each rank's sender thread is idle again
  std::vector<size_t> next_;
  std::vector<double> clock_;
  std::vector<std::vector<double>> start_;
  // Per directed channel (from, to, activation?): minibatches sent, not yet received, and when.
  std::map<std::tuple<int, int, bool>, std::deque<std::pair<int, double>>> in_transit_;
};

}  // namespace

std::vector<std::vector<double>> simulate_schedule(
    const PipelineShape& shape, const std::vector<std::vector<Instruction>>& schedule,
    const SimulationTimes& times) {
  DTRAIN_CHECK(static_cast<int>(times.forward_s.size()) == shape.stages() &&
               static_cast<int>(times.backward_s.size()) == shape.stages() &&
               static_cast<int>(times.reduce_s.size()) == shape.stages() &&
               static_cast<int>(times.transfer_s.size()) == shape.stages() - 1)
      << "simulation times for " << shape.stages() << " stages";
  return Simulation(shape, schedule, times).run();
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
