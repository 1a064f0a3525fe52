#include "sched/ps_sync_scheduler.h"

#include <optional>  // a compress timer only where there is a codec

#include "comm/tags.h"  // tags::kPsGradient, tags::kPsWeights
#include "core/error.h"
#include "core/timer.h"            // Clock, seconds_since
#include "sched/ps_sync_timing.h"  // predict_ps_sync

namespace dtrain {

AlgorithmEntry ps_sync_algorithm() {
  return {.name = "ps_sync",
          .summary =
              "parameter server on rank 0 (the Pipe-SGD paper's centralised baseline): "
              "workers push gradients, the server updates and sends the weights back",
          .keys = config::erase(config::Schema<PsSyncOptions>("ps_sync")),
          .make = scheduler_factory<PsSyncScheduler, PsSyncOptions>(),
          .predict = [](const TimingInputs& in, const CodecCost& codec,
                        const AlgorithmConfig&) { return predict_ps_sync(in, codec); },
          .equivalence = Equivalence::exact};
}

PsSyncScheduler::PsSyncScheduler(SchedulerContext ctx, const PsSyncOptions&)
    : Scheduler(std::move(ctx)),
      codec_(make_codec(ctx_.compression)),
      grads_(ctx_.model.backend(), trainable_gradients()),
      weights_(ctx_.model.backend(), trainable_parameters()) {
  const int64_t n = ctx_.model.num_parameters();
  encoded_.resize(codec_->encoded_bytes(n));
  if (ctx_.comm.rank() == 0)
    inbox_.assign(ctx_.comm.size() - 1, std::vector<char>(codec_->encoded_bytes(n)));
}

std::string PsSyncScheduler::describe() const {
  return "ps_sync: rank 0 is the parameter server of " + std::to_string(ctx_.comm.size()) +
         " ranks, gradient pushes " +
         (codec_->name() == "none" ? std::string("uncompressed") : "with " + codec_->name());
}

// Frozen layers never change: only the trainable range travels.
Tensor PsSyncScheduler::trainable_parameters() const {
  const Tensor& w = ctx_.model.parameters();
  const int64_t offset = ctx_.model.trainable_offset();
  return w.slice(offset, {w.numel() - offset});
}

// With `compression: none` the codec only copies (encode) or sums (decode_add): the exchange's
// own work, counted as communication; compress_s is the time a real codec takes.
bool PsSyncScheduler::compressing() const {
  return codec_->name() != "none";
}

void PsSyncScheduler::gather_gradients(double* compress_s) {
  const Tensor& grads = grads_.host();
  const int64_t n = grads.numel();
  const size_t bytes = codec_->encoded_bytes(n);
  // One worker after another: the server's incoming link is the shared resource.
  for (int w = 1; w < ctx_.comm.size(); ++w) {
    ctx_.comm.recv(inbox_[w - 1].data(), bytes, w, tags::kPsGradient);
    std::optional<PhaseTimer> t;
    if (compressing()) t.emplace(*compress_s, Phase::compress);
    codec_->decode_add(inbox_[w - 1].data(), n, grads.data<float>());
  }
}

void PsSyncScheduler::send_weights() {
  const Tensor& weights = weights_.host();
  for (int w = 1; w < ctx_.comm.size(); ++w)
    ctx_.comm.send(weights.raw(), weights.bytes(), w, tags::kPsWeights);
}

void PsSyncScheduler::push_and_pull(double* compress_s) {
  const Tensor& grads = grads_.host();
  {
    std::optional<PhaseTimer> t;
    if (compressing()) t.emplace(*compress_s, Phase::compress);
    codec_->encode(grads.data<float>(), grads.numel(), encoded_.data());
  }
  ctx_.comm.send(encoded_.data(), codec_->encoded_bytes(grads.numel()), 0, tags::kPsGradient);
  const Tensor& weights = weights_.host();
  ctx_.comm.recv(weights.raw(), weights.bytes(), 0, tags::kPsWeights);
}

EpochStats PsSyncScheduler::run_epoch(Loader& loader, const EpochPart& part) {
  const int epoch = part.epoch;
  EpochStats stats;
  const auto epoch_start = Clock::now();
  const bool server = ctx_.comm.rank() == 0;
  double compress_s = 0;
  Batch batch;
  for (int64_t i = part.first; part.includes(i); ++i) {
    if (stop_requested()) break;  // every rank at the same iteration
    {
      PhaseTimer t(stats.phases, Phase::data);
      if (!loader.next(batch)) break;
    }
    compute_gradients(batch, stats);
    const float lr = lr_at(epoch, i);
    if (ctx_.comm.size() == 1) {
      PhaseTimer t(stats.phases, Phase::update);
      clip_gradients(trainable_gradients());
      ctx_.optimizer.step(lr);
    } else {
      // The exchange runs on the comm thread; the compute thread has nothing to overlap. GPU
      // buffers are staged through host memory around it (no-ops on the CPU).
      PhaseTimer t(stats.phases, Phase::wait);
      grads_.download();
      if (server) {
        thread_.submit([&] { gather_gradients(&compress_s); }).get();
        grads_.upload();
        clip_gradients(trainable_gradients());  // the sum of all ranks' gradients
        ctx_.optimizer.step(lr);
        weights_.download();
        thread_.submit([&] { send_weights(); }).get();
      } else {
        thread_.submit([&] { push_and_pull(&compress_s); }).get();
        weights_.upload();
      }
    }
    finish_iteration(epoch, i, batch.rows(), stats);
  }
  stats.wall_s = seconds_since(epoch_start);
  stats.phases[Phase::compress] = compress_s;
  stats.phases[Phase::comm] = thread_.take_busy_seconds() - compress_s;
  return stats;
}

}  // namespace dtrain
