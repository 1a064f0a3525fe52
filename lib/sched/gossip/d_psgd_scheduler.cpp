#include "sched/gossip/d_psgd_scheduler.h"

#include <algorithm>  // max

#include "comm/tags.h"  // tags::kDPsgdModel
#include "core/error.h"

namespace dtrain {

// D-PSGD as this scheduler runs it, with m = 4n bytes of model (not in the Pipe-SGD paper):
// each iteration hands the exchange to the comm thread (S) and computes meanwhile. Ring and
// exponential: it sends the model to each of its d neighbours (d messages of m bytes, paced one
// after another; the receives overlap them), then the compute thread mixes
// x ← (x + Σ_j x_j)/(d + 1) (d sums: d·γ·m) and steps (l_up). Complete: one all-reduce of the
// model on a snapshot (a copy of m, and one back with the scale). The compute thread waits for
// the longer of forward + backward and the exchange, and computes cold after idling.
// When the comm thread has no core of its own, only the exchange's CPU work (S, the copies, the
// all-reduce's sums) competes with forward and backward (share_core); its waiting — the emulated
// link's sleeps, a neighbour's latency — still hides behind them. (Measured on 2 cores: ResNet-20
// on 2 ranks at 100 Mbit/s exchanges 86 ms of sleep in a 115 ms iteration of 112 ms compute.)
// A rank needs its neighbours' models of this iteration, sent when they start it: neighbours
// are at most one iteration apart, ranks at distance h at most h, so in the long run every rank
// goes at the slowest rank's pace (a straggler's pace propagates through the graph): its
// compute is on the critical path, and so is the lag of the ranks it meets (l_skew, which the
// profile measures for the whole job: an overestimate for a few neighbours).
Prediction predict_d_psgd(const TimingInputs& in, const CodecCost& codec, Topology topology) {
  const double compute = compute_seconds(in);
  if (in.p <= 1) return make_prediction(in, "d_psgd", codec, compute, 0, compute);
  const double m = 4.0 * static_cast<double>(in.n);
  CommCost exchange{0, in.sync_s};
  double mix = 0;
  if (topology == Topology::complete) {
    const CommCost all = allreduce_cost(in, codec, static_cast<double>(in.n));
    exchange.wait_s += all.wait_s, exchange.cpu_s += all.cpu_s;
    mix = 2 * in.link.copy_s_per_byte * m;
  } else {
    const double d = static_cast<double>(topology_neighbours(topology, 0, in.p).size());
    const CommCost one = in.link.message(m);
    // The neighbours meet every iteration: with the compute threads time-sliced the last one
    // is as late as for an all-reduce (oversubscribed_wait_s).
    exchange.wait_s += d * one.wait_s + oversubscribed_wait_s(in);
    exchange.cpu_s += d * one.cpu_s;
    mix = d * in.gamma_s_per_byte * m;
  }
  const double forward_backward = (in.l_for + in.l_back) * slowest_slowdown(in);
  const SharedCore shared = share_core(in, forward_backward, exchange.total(), exchange.cpu_s);
  // The compute thread's core also did the comm thread's CPU work, then it waits for the rest.
  const double idle =
      (shared.compute_s - forward_backward) + std::max(0.0, shared.comm_s - shared.compute_s);
  const double iteration = compute + idle + idle_penalty(in, idle) + mix;
  Prediction r =
      make_prediction(in, "d_psgd", codec, iteration - idle, exchange.total(), iteration);
  r.compute_bound = forward_backward >= exchange.total();
  return r;
}

AlgorithmEntry d_psgd_algorithm() {
  using namespace config;
  auto keys = Schema<DPsgdOptions>("d_psgd").key("topology", &DPsgdOptions::topology,
                                                 choice({"ring", "exponential", "complete"}),
                                                 "the neighbours each rank averages with");
  return {.name = "d_psgd",
          .summary =
              "D-PSGD (Lian et al., 2017): each iteration every rank averages its model with "
              "its neighbours' (uniform weights) and steps with its own gradient",
          .keys = erase(std::move(keys)),
          .make = scheduler_factory<DPsgdScheduler, DPsgdOptions>(),
          .predict =
              [](const TimingInputs& in, const CodecCost& codec, const AlgorithmConfig& a) {
                return predict_d_psgd(in, codec, topology_named(a.get<DPsgdOptions>().topology));
              },
          .compressions = {"none"},
          // Each rank steps its own model through Optimizer::step: any optimizer.
          .optimizers = {"sgd", "adamw"},
          // Each rank clips its own gradient (the local norm) before its own step.
          .clips_gradients = true,
          .equivalence = Equivalence::decentralized};
}

DPsgdScheduler::DPsgdScheduler(SchedulerContext ctx, const DPsgdOptions& options)
    : Scheduler(std::move(ctx)), topology_(topology_named(options.topology)) {
  DTRAIN_INPUT_CHECK(ctx_.compression == "none")
      << "compression.name: d_psgd exchanges whole models, uncompressed; got '" << ctx_.compression
      << "' (use none)";
  Comm& comm = ctx_.comm;
  Model& model = ctx_.model;
  weights_ = trainable_part(model.parameters());
  if (comm.size() == 1) return;  // one rank: plain SGD
  averager_ = std::make_unique<ModelAverager>(model, comm, gradient_placement());
  if (topology_ == Topology::complete) {
    mixed_ = model.backend().empty(weights_.shape());
    mixer_ =
        std::make_unique<GradientAllreducer>(comm, "none", weights_.numel(), gradient_placement());
    return;
  }
  neighbours_ = topology_neighbours(topology_, comm.rank(), comm.size());
  host_ = std::make_unique<HostMirror>(model.backend(), weights_);
  inbox_.assign(neighbours_.size(), std::vector<float>(static_cast<size_t>(weights_.numel())));
}

DPsgdScheduler::~DPsgdScheduler() {
  if (pending_.valid()) pending_.wait();  // the comm thread may still use the buffers
}

std::string DPsgdScheduler::describe() const {
  const int p = ctx_.comm.size();
  if (p == 1) return "d_psgd (one rank: plain SGD)";
  if (topology_ == Topology::complete)
    return "d_psgd over " + std::to_string(p) +
           " ranks, complete: every iteration the models' "
           "mean (" +
           mixer_->describe() + ")";
  std::string ns;
  for (int j : neighbours_) ns += (ns.empty() ? "" : ", ") + std::to_string(j);
  return "d_psgd over " + std::to_string(p) + " ranks, " +
         (topology_ == Topology::ring ? "ring" : "exponential") + " topology: rank " +
         std::to_string(ctx_.comm.rank()) + " averages with " + ns + " (weights 1/" +
         std::to_string(neighbours_.size() + 1) + ")";
}

void DPsgdScheduler::exchange() {
  Comm& comm = ctx_.comm;
  const Tensor& mine = host_->host();
  const size_t bytes = static_cast<size_t>(mine.numel()) * sizeof(float);
  std::vector<std::unique_ptr<CommRequest>> requests;
  for (size_t k = 0; k < neighbours_.size(); ++k)
    requests.push_back(comm.irecv(inbox_[k].data(), bytes, neighbours_[k], tags::kDPsgdModel));
  for (int j : neighbours_) requests.push_back(comm.isend(mine.raw(), bytes, j, tags::kDPsgdModel));
  for (auto& r : requests) r->wait();
}

void DPsgdScheduler::start_mixing() {
  if (mixer_) {
    // The sum runs on a snapshot: forward and backward read the model meanwhile.
    ctx_.model.backend().copy(mixed_, weights_);
    pending_ = mixer_->start(mixed_);
  } else if (host_) {
    host_->download();  // forward and backward only read the model: it is sent as it is
    pending_ = thread_.submit([this] { exchange(); });
  }
}

void DPsgdScheduler::finish_mixing(EpochStats& stats) {
  if (!pending_.valid()) return;
  {
    PhaseTimer t(stats.phases, Phase::wait);
    pending_.get();
  }
  PhaseTimer t(stats.phases, Phase::update);
  Backend& backend = ctx_.model.backend();
  if (mixer_) {
    backend.copy(weights_, mixed_);
    backend.scale(weights_, 1.0f / static_cast<float>(ctx_.comm.size()));
    return;
  }
  // x ← (x + Σ_j x_j) / (degree + 1), on the host view (the model itself on the CPU).
  float* x = host_->host().data<float>();
  const float weight = 1.0f / static_cast<float>(neighbours_.size() + 1);
  const int64_t n = weights_.numel();
  for (int64_t e = 0; e < n; ++e) {
    float sum = x[e];
    for (const std::vector<float>& theirs : inbox_) sum += theirs[e];
    x[e] = sum * weight;
  }
  host_->upload();
}

EpochStats DPsgdScheduler::run_epoch(Loader& loader, const EpochPart& part) {
  const int epoch = part.epoch;
  EpochStats stats;
  const auto epoch_start = Clock::now();
  Batch batch;
  for (int64_t i = part.first; part.includes(i); ++i) {
    if (stop_requested()) break;  // every rank at the same iteration
    {
      PhaseTimer t(stats.phases, Phase::data);
      if (!loader.next(batch)) break;
    }
    start_mixing();                   // the model as it is goes to the neighbours ...
    compute_gradients(batch, stats);  // ... while its gradient is computed
    finish_mixing(stats);
    {
      PhaseTimer t(stats.phases, Phase::update);
      clip_gradients(trainable_gradients());  // this rank's own gradient: the local norm
      ctx_.optimizer.step(lr_at(epoch, i));
    }
    finish_iteration(epoch, i, batch.rows(), stats);
  }
  stats.wall_s = seconds_since(epoch_start);
  if (mixer_) mixer_->take_times(&stats.phases[Phase::comm], &stats.phases[Phase::compress]);
  stats.phases[Phase::comm] += thread_.take_busy_seconds();
  return stats;
}

EvalResult DPsgdScheduler::evaluate(Loader& test) {
  return evaluate_mean(averager_.get(), test);
}

}  // namespace dtrain
