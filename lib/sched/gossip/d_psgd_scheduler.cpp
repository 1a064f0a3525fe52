#include "sched/gossip/d_psgd_scheduler.h"

#include "comm/tags.h"  // tags::kDPsgdModel
#include "core/error.h"

namespace dtrain {

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
  return on_mean_model(averager_.get(), [&] { return evaluate_model(test); });
}

}  // namespace dtrain
