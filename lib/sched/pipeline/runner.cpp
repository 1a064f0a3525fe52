#include "sched/pipeline/runner.h"

#include <fmt/format.h>

#include <algorithm>  // max
#include <cmath>      // isfinite: a diverged minibatch ends the run at once; sqrt
#include <iterator>   // size: the handler table
#include <utility>    // pair, move

#include "compress/codec.h"  // make_codec: the all-reduce's bytes per element
#include "core/error.h"
#include "optim/clip.h"  // clip_coefficient: the norm over all stages

namespace dtrain {

using pipeline::Instruction;
using pipeline::Op;

PipelineRunner::PipelineRunner(Comm& comm, const pipeline::PipelineShape& shape, StageModel& stage,
                               Optimizer& optimizer, int64_t rows, bool weight_stashing,
                               const std::string& codec, bool vertical_sync)
    : comm_(comm),
      shape_(shape),
      stage_(stage),
      optimizer_(optimizer),
      rows_(rows),
      stage_index_(shape.stage_of(comm.rank())),
      versions_(stage, shape, comm.rank(), weight_stashing, vertical_sync),
      on_host_(stage.backend().device() == Device::cpu) {
  DTRAIN_CHECK(shape.ranks() == comm.size())
      << "pipeline of " << shape.ranks() << " ranks on " << comm.size();
  // Messages advance while this rank computes: the sender thread, when idle, lets MPI progress
  // the receives posted ahead (and its peers' sends into them).
  sender_.poll_when_idle([&comm] { comm.progress(); }, std::chrono::microseconds(100));
  const size_t slots = static_cast<size_t>(stage.slots());
  slot_of_.assign(slots, -1);
  slot_sends_.resize(slots);
  input_gradient_.resize(slots);
  // The replicas of each stage all-reduce their gradients among themselves, on a communicator
  // of their own (split is collective: every rank takes part, each keeps its stage's).
  stage_comm_ = comm.split(stage_index_, comm.rank());
  const int R = shape.replicas[static_cast<size_t>(stage_index_)];
  if (R > 1) {
    allreducer_ = std::make_unique<GradientAllreducer>(*stage_comm_, codec, stage.num_parameters(),
                                                       GradientPlacement{&stage.backend(), "auto"});
    // A ring all-reduce sends 2(R−1)/R of the (encoded) buffer per rank.
    const auto encoded =
        static_cast<double>(make_codec(codec)->encoded_bytes(stage.num_parameters()));
    allreduce_message_bytes_ = static_cast<int64_t>(2.0 * (R - 1) / R * encoded);
  }
  start_tied_weights();
}

void PipelineRunner::start_tied_weights() {
  // A tie the stages separate (a GPT's embedding and head): the copies start equal.
  tied_ = std::make_unique<TiedWeights>(comm_, shape_, stage_);
  tied_->share_weights();
}

void PipelineRunner::clip_gradients(double max_norm) {
  DTRAIN_CHECK(max_norm > 0) << "pipeline: a clip of " << max_norm;
  clip_max_norm_ = max_norm;
  // Collectives on a communicator of their own: the sends' thread uses comm_ meanwhile.
  norm_comm_ = comm_.split(0, comm_.rank());
}

StageChannel& PipelineRunner::channel(int peer, StageMessage::Kind kind) {
  auto& c = channels_[{peer, static_cast<int>(kind)}];
  if (!c) c = std::make_unique<StageChannel>(comm_, peer, kind, &sender_);
  return *c;
}

int PipelineRunner::take_slot(int minibatch) {
  for (size_t s = 0; s < slot_of_.size(); ++s)
    if (slot_of_[s] < 0) {
      // What this slot sent last (its output, its input gradient) must have left before the
      // slot computes again; other slots' sends go on.
      {
        PhaseTimer timer(totals_.phases, Phase::wait);
        for (const auto& [c, upto] : slot_sends_[s]) c->wait_sends(upto);
        slot_sends_[s].clear();
      }
      slot_of_[s] = minibatch;
      slot_by_minibatch_[minibatch] = static_cast<int>(s);
      in_flight_max_ = std::max(in_flight_max_, static_cast<int>(slot_by_minibatch_.size()));
      return static_cast<int>(s);
    }
  throw Error("pipeline: rank " + std::to_string(comm_.rank()) +
              " has no free slot for minibatch " + std::to_string(minibatch) + " (" +
              std::to_string(slot_of_.size()) + " in flight)");
}

int PipelineRunner::slot_of(int minibatch) const {
  const auto it = slot_by_minibatch_.find(minibatch);
  DTRAIN_CHECK(it != slot_by_minibatch_.end())
      << "pipeline: rank " << comm_.rank() << " holds no minibatch " << minibatch;
  return it->second;
}

StageMessage PipelineRunner::header(StageMessage::Kind kind, int minibatch,
                                    const Shape& shape) const {
  return {kind,
          minibatch,
          static_cast<int32_t>(rows_),
          versions_.message_version(minibatch),
          shape.numel() / shape[0] * rows_,
          end_};
}

int64_t PipelineRunner::activation_bytes_sent() const {
  int64_t bytes = 0;
  for (const auto& [key, c] : channels_)
    if (key.second == StageMessage::activation) bytes += c->bytes_sent();
  return bytes - evaluation_bytes_;
}
int64_t PipelineRunner::gradient_bytes_sent() const {
  int64_t bytes = 0;
  for (const auto& [key, c] : channels_)
    if (key.second == StageMessage::gradient) bytes += c->bytes_sent();
  return bytes;
}

void PipelineRunner::take_comm_times(double* comm_s, double* compress_s) {
  double comm = 0, compress = 0;
  if (allreducer_) allreducer_->take_times(&comm, &compress);
  *comm_s += comm + sender_.take_busy_seconds();
  *compress_s += compress;
}

void PipelineRunner::send(int peer, const StageMessage& message, const Tensor& t, int slot) {
  PhaseTimer timer(totals_.phases, Phase::comm);
  StageChannel& c = channel(peer, static_cast<StageMessage::Kind>(message.kind));
  slot_sends_[static_cast<size_t>(slot)].push_back({&c, c.sends_started() + 1});
  if (on_host_) return c.send(message, t);
  // A GPU stage sends a host copy, kept until every send has completed (the end of the run).
  Tensor host = take_buffer(free_staging_, t.shape(), t.dtype(), true);
  stage_.backend().copy(host.slice(0, t.shape()), t);
  stage_.backend().synchronize();
  c.send(message, host);
  staging_in_use_.push_back(host);
}

void PipelineRunner::wait_sends() {
  {
    PhaseTimer timer(totals_.phases, Phase::wait);
    for (auto& [key, c] : channels_) c->wait_sends();
  }
  for (Tensor& t : staging_in_use_) free_staging_.push_back(t);
  staging_in_use_.clear();
}

std::vector<Tensor>& PipelineRunner::pool_of(StageMessage::Kind kind) {
  return kind == StageMessage::activation ? free_activations_ : free_gradients_;
}
const Shape& PipelineRunner::shape_of(StageMessage::Kind kind) const {
  return kind == StageMessage::activation ? stage_.input_shape() : stage_.output_shape();
}
DType PipelineRunner::dtype_of(StageMessage::Kind kind) const {
  return kind == StageMessage::activation ? stage_.input_dtype() : stage_.output_dtype();
}

void PipelineRunner::post_next(int peer, StageMessage::Kind kind) {
  // One receive posted ahead per channel while more are due in this run: the sender's transfer
  // completes as soon as it starts, instead of holding its thread until this rank arrives.
  const int due = receives_due_[{peer, static_cast<int>(kind)}];
  StageChannel& c = channel(peer, kind);
  if (due <= 0 || c.posted() > 0) return;
  c.post_receive(on_host_ ? take_buffer(pool_of(kind), shape_of(kind), dtype_of(kind))
                          : take_buffer(free_staging_, shape_of(kind), dtype_of(kind), true));
}

Tensor PipelineRunner::receive(int peer, const StageMessage& expected, StageMessage* got) {
  const auto kind = static_cast<StageMessage::Kind>(expected.kind);
  StageChannel& c = channel(peer, kind);
  Tensor t;
  {
    PhaseTimer timer(totals_.phases, Phase::wait);
    if (c.posted() == 0)
      t = on_host_ ? take_buffer(pool_of(kind), shape_of(kind), dtype_of(kind))
                   : take_buffer(free_staging_, shape_of(kind), dtype_of(kind), true);
    const StageMessage message = c.receive(expected, &t);
    if (got) *got = message;
    if (message.end > 0 && end_ == 0) end_early(message.end - 1, at_, true);  // before a post
  }
  int& due = receives_due_[{peer, static_cast<int>(kind)}];
  if (due > 0) --due;
  post_next(peer, kind);
  if (on_host_) return t;
  // A GPU stage received into a host buffer: up into one of the stage's device buffers.
  Tensor dst = take_buffer(pool_of(kind), shape_of(kind), dtype_of(kind));
  stage_.backend().copy(dst, t.slice(0, dst.shape()));
  stage_.backend().synchronize();
  free_staging_.push_back(t);
  return dst;
}

void PipelineRunner::keep_batch(int minibatch, const Batch& batch) {
  PhaseTimer timer(totals_.phases, Phase::data);
  Batch own, whole;  // the rows in use; the pooled buffers they are in
  own.index = batch.index;
  const int64_t rows = batch.rows();
  if (stage_.first()) {
    whole.images = take_buffer(free_images_, stage_.input_shape());
    own.images = whole.images.narrow_batch(rows);
    stage_.backend().copy(own.images, batch.images);
  }
  if (stage_.last()) {
    whole.labels = take_buffer(
        free_labels_, batch.labels.shape().with_batch(stage_.input_shape()[0]), DType::i32);
    own.labels = whole.labels.narrow_batch(rows);
    stage_.backend().copy(own.labels, batch.labels);
  }
  batches_[minibatch] = own;
  batch_buffers_[minibatch] = whole;
}

void PipelineRunner::count_receive(const Instruction& in) {
  if (in.op != Op::receive_activation && in.op != Op::receive_gradient) return;
  const auto kind =
      in.op == Op::receive_activation ? StageMessage::activation : StageMessage::gradient;
  ++receives_due_[{in.peer, static_cast<int>(kind)}];
}

void PipelineRunner::end_early(int minibatches, size_t at, bool receiving) {
  pipeline::ScheduleSpec spec = spec_;
  // `minibatches` counts the units admitted (microbatches of gpipe and 1f1b_flush, whose
  // schedules count steps).
  spec.minibatches = spec.iterations_of(minibatches);
  std::vector<Instruction> shorter =
      pipeline::build_schedule(shape_, spec)[static_cast<size_t>(comm_.rank())];
  DTRAIN_CHECK(at < shorter.size() &&
               std::equal(list_.begin(), list_.begin() + static_cast<std::ptrdiff_t>(at) + 1,
                          shorter.begin()))
      << "pipeline: rank " << comm_.rank() << " cannot end after " << minibatches
      << " minibatches at its instruction " << at << ": what it did is not that schedule's start";
  // The receives still to come are the shorter list's (the one running counts as done).
  for (auto& [key, due] : receives_due_) due = 0;
  for (size_t i = at + 1; i < shorter.size(); ++i) count_receive(shorter[i]);
  // The receive now completing is counted off by the receive that found the end.
  if (receiving) count_receive(list_[at]);
  list_ = std::move(shorter);
  spec_ = spec;
  end_ = minibatches + 1;
  versions_.end_early(minibatches);
}

PipelineRunner::Handler PipelineRunner::handler_of(Op op) {
  // A row per Op, in the order of its enumerators (schedule.h): a new Op needs its row, which
  // the static_assert below asks for.
  static constexpr std::pair<Op, Handler> kHandlers[] = {
      {Op::receive_activation, &PipelineRunner::exec_receive_activation},
      {Op::forward, &PipelineRunner::exec_forward},
      {Op::send_activation, &PipelineRunner::exec_send_activation},
      {Op::receive_gradient, &PipelineRunner::exec_receive_gradient},
      {Op::backward, &PipelineRunner::exec_backward},
      {Op::send_gradient, &PipelineRunner::exec_send_gradient},
      {Op::reduce_gradients, &PipelineRunner::exec_reduce_gradients},
      {Op::step, &PipelineRunner::exec_step},
  };
  static_assert([] {
    for (size_t i = 0; i < std::size(kHandlers); ++i)
      if (static_cast<size_t>(kHandlers[i].first) != i) return false;
    return std::size(kHandlers) == static_cast<size_t>(Op::step) + 1;
  }());
  return kHandlers[static_cast<size_t>(op)].second;
}

PipelineTotals PipelineRunner::run(const std::vector<Instruction>& instructions,
                                   const pipeline::ScheduleSpec& spec,
                                   const std::function<Batch(int)>& batch_of,
                                   const std::function<float(int)>& lr, float grad_scale) {
  start_run(instructions, spec, {&batch_of, &lr, grad_scale});
  for (at_ = 0; at_ < list_.size(); ++at_) {
    const Instruction in = list_[at_];  // a copy: an early end replaces the list
    if (in.op == Op::forward && ends_at_admission(in)) {
      --at_;  // this index again, in the shorter list (the same forward)
      continue;
    }
    (this->*handler_of(in.op))(in);
  }
  return finish_run();
}

void PipelineRunner::start_run(const std::vector<Instruction>& instructions,
                               const pipeline::ScheduleSpec& spec, RunArguments arguments) {
  totals_ = {};
  spec_ = spec;
  list_ = instructions;
  end_ = 0;
  steps_ = 0;
  versions_.start_run(spec);
  args_ = std::move(arguments);
  // Several microbatches per step (gpipe, 1f1b_flush): each backward writes into a buffer of
  // its own, added to the step's sum; each microbatch's loss counts 1/m of the minibatch's.
  accumulate_ = spec.accumulates();
  step_gradient_ = stage_.gradients();
  if (accumulate_) {
    if (!micro_gradient_.defined())
      micro_gradient_ = stage_.backend().zeros(step_gradient_.shape());
    stage_.set_gradients(micro_gradient_);
    stage_.backend().fill_zero(step_gradient_);
    args_.grad_scale /= static_cast<float>(spec.microbatches);
  }
  // The receives each channel will complete in this run; the first of each is posted now.
  receives_due_.clear();
  for (const Instruction& in : instructions) count_receive(in);
  for (const auto& [key, due] : receives_due_)
    post_next(key.first, static_cast<StageMessage::Kind>(key.second));
}

PipelineTotals PipelineRunner::finish_run() {
  wait_sends();
  if (accumulate_) stage_.set_gradients(step_gradient_);
  args_ = {};
  step_gradient_ = Tensor();
  totals_.minibatches = spec_.minibatches;
  return totals_;
}

bool PipelineRunner::ends_at_admission(const Instruction& in) {
  // The input stage's replicas admit minibatch (or microbatch) q, q + R, ...: the k-th forward of
  // each is in the same round, where they decide alike whether to end early. gpipe and
  // 1f1b_flush can end so only where every replica has a microbatch in every step (otherwise an
  // idle replica reduces and steps before it could learn of the end): else at the part's end.
  // The other stages ask too: their answer passes a signal on to the input stage.
  const int R0 = shape_.replicas.front();
  int max_replicas = 0;
  for (int r : shape_.replicas) max_replicas = std::max(max_replicas, r);
  const bool can_end_early = !spec_.flushes() || max_replicas <= spec_.microbatches;
  if (!(can_end_early && end_ == 0 && end_early_ && end_early_() && stage_.first())) return false;
  // The round's last minibatch, then enough for every replica of every stage to receive one
  // that carries the end, rounded up to a multiple the schedule accepts.
  const int b = in.minibatch;
  const int round_last = b - b % R0 + R0 - 1;
  const int m =
      ((round_last + 1 + max_replicas + end_multiple_ - 1) / end_multiple_) * end_multiple_;
  if (m >= spec_.units() || at_ == 0) return false;
  end_early(m, at_ - 1, false);
  return true;
}

void PipelineRunner::exec_receive_activation(const Instruction& in) {
  // Receives come as early as the schedule allows, before a slot is free: into a buffer of
  // their own (a pool that stops growing at its peak), kept until the backward.
  activations_in_[in.minibatch] =
      receive(in.peer, header(StageMessage::activation, in.minibatch, stage_.input_shape()));
}

void PipelineRunner::fetch_batch(int minibatch) {
  Batch batch;
  {
    PhaseTimer timer(totals_.phases, Phase::data);
    batch = (*args_.batch_of)(minibatch);
  }
  DTRAIN_CHECK(batch.rows() == rows_)
      << "pipeline: minibatch " << minibatch << " has " << batch.rows() << " rows, not " << rows_;
  keep_batch(minibatch, batch);
}

void PipelineRunner::exec_forward(const Instruction& in) {
  const int b = in.minibatch;
  const int slot = take_slot(b);
  if (stage_.first() || stage_.last()) fetch_batch(b);
  const Tensor& input =
      stage_.first() ? batches_[b].images : activations_in_.at(b).narrow_batch(rows_);
  int in_use = 0;
  for (int m : slot_of_) in_use += m >= 0;
  versions_.forward(b, slot, in_use);
  PhaseTimer timer(totals_.phases, Phase::forward);
  stage_.forward(slot, step_base_ + static_cast<uint64_t>(b), input,
                 stage_.last() ? batches_[b].labels : Tensor());
  if (!stage_.last()) return;
  const LossStats stats = stage_.last_stats(slot);
  if (!std::isfinite(stats.loss_sum))
    throw Error(
        fmt::format("training diverged: the loss of minibatch {} is {} on rank "
                    "{} (the last stage) (lower optimizer.lr?)",
                    step_base_ + static_cast<uint64_t>(b), stats.loss_sum, comm_.rank()));
  totals_.loss_sum += stats.loss_sum;
  totals_.correct += stats.correct;
  totals_.samples += stats.count;
  if (stats.count > 0) loss_returned(b, static_cast<float>(stats.loss_sum / stats.count));
}

void PipelineRunner::loss_returned(int minibatch, float loss) {
  if (loss < 0) return;
  if (stage_.first()) {
    returned_loss_sum_ += loss;
    ++returned_losses_;
  } else {
    loss_of_[minibatch] = loss;  // passed on with the minibatch's gradient
  }
}

double PipelineRunner::take_returned_loss() {
  const double mean = returned_losses_ > 0 ? returned_loss_sum_ / returned_losses_ : std::nan("");
  returned_loss_sum_ = 0, returned_losses_ = 0;
  return mean;
}

void PipelineRunner::exec_send_activation(const Instruction& in) {
  const int slot = slot_of(in.minibatch);
  const Tensor& out = stage_.output(slot);
  send(in.peer, header(StageMessage::activation, in.minibatch, out.shape()), out, slot);
}

void PipelineRunner::exec_receive_gradient(const Instruction& in) {
  StageMessage got;
  gradients_in_[in.minibatch] =
      receive(in.peer, header(StageMessage::gradient, in.minibatch, stage_.output_shape()), &got);
  loss_returned(in.minibatch, got.loss);
}

void PipelineRunner::exec_backward(const Instruction& in) {
  const int b = in.minibatch;
  const int slot = slot_of(b);
  const Tensor dy = stage_.last() ? Tensor() : gradients_in_.at(b).narrow_batch(rows_);
  PhaseTimer timer(totals_.phases, Phase::backward);
  input_gradient_[static_cast<size_t>(slot)] = stage_.backward(slot, dy, args_.grad_scale);
  if (accumulate_) stage_.backend().axpy(1.0f, micro_gradient_, step_gradient_);
  backward_in_round_ = true;
  ++totals_.backwards;
  if (stage_.first()) release(b);  // nothing more to send for it
}

void PipelineRunner::exec_send_gradient(const Instruction& in) {
  const int slot = slot_of(in.minibatch);
  const Tensor& dx = input_gradient_[static_cast<size_t>(slot)];
  StageMessage message = header(StageMessage::gradient, in.minibatch, dx.shape());
  if (const auto it = loss_of_.find(in.minibatch); it != loss_of_.end()) {
    message.loss = it->second;
    loss_of_.erase(it);
  }
  send(in.peer, message, dx, slot);
  release(in.minibatch);
}

void PipelineRunner::exec_reduce_gradients(const Instruction& in) {
  // The round's minibatches of this stage, one per replica (fewer in a last round): the mean of
  // their gradients; a replica without one adds zeros.
  const int R = shape_.replicas[static_cast<size_t>(stage_index_)];
  const int count = spec_.replicas_in_round(in.minibatch, R);
  if (!backward_in_round_) stage_.backend().fill_zero(step_gradient_);
  {
    PhaseTimer timer(totals_.phases, Phase::wait);
    allreducer_->start(step_gradient_).get();
  }
  allreduce_bytes_ += allreduce_message_bytes_;
  // 1f1b: the mean over the round's minibatches; a flush step: the microbatches were already
  // scaled to the step's mean, and the replicas hold disjoint parts of it.
  if (!accumulate_) stage_.backend().scale(step_gradient_, 1.0f / static_cast<float>(count));
  backward_in_round_ = false;
}

void PipelineRunner::exec_step(const Instruction&) {
  sum_tied_gradients();  // before the norm, the clip and the step: the gradient is complete
  // The step's gradient (the microbatches' sum where a step accumulates them).
  const Tensor& gradient = optimizer_.gradients();
  double squares = 0;
  {
    PhaseTimer timer(totals_.phases, Phase::update);
    squares = stage_.backend().dot(gradient, gradient);
  }
  // A stage's gradient is applied while later minibatches are in flight: checked here, a
  // divergence ends the run at this step.
  if (!std::isfinite(squares))
    throw Error(
        fmt::format("training diverged: the gradient of step {} is not finite "
                    "(NaN or inf) on rank {} (lower optimizer.lr?)",
                    steps_ + 1, comm_.rank()));
  if (clip_max_norm_ > 0) clip(gradient, squares);
  {
    PhaseTimer timer(totals_.phases, Phase::update);
    optimizer_.step((*args_.lr)(steps_));
    ++steps_;
    versions_.stepped(steps_);
    if (accumulate_) stage_.backend().fill_zero(step_gradient_);
  }
  ++totals_.steps;
  if (on_step_) on_step_(steps_);
}

void PipelineRunner::sum_tied_gradients() {
  if (tied_->empty()) return;
  PhaseTimer timer(totals_.phases, Phase::wait);
  tied_->sum_gradients(step_gradient_);
}

void PipelineRunner::clip(const Tensor& gradient, double squares) {
  // The whole model's squared norm: every stage's once (its replicas hold the same gradient), a
  // tied weight once (its copy on the borrower's stage left out, as the single-rank model).
  if (!tied_->empty()) squares -= tied_->copies_squared_norm(gradient);
  std::vector<double> sum{shape_.replica_of(comm_.rank()) == 0 ? squares : 0.0};
  {
    PhaseTimer timer(totals_.phases, Phase::wait);
    norm_comm_->allreduce_sum(sum);
  }
  PhaseTimer timer(totals_.phases, Phase::update);
  const double coefficient = clip_coefficient(std::sqrt(sum[0]), clip_max_norm_);
  if (coefficient < 1.0) stage_.backend().scale(gradient, static_cast<float>(coefficient));
}

PipelineTotals PipelineRunner::evaluate(int minibatches,
                                        const std::function<Batch(int)>& batch_of) {
  totals_ = {};
  if (shape_.replica_of(comm_.rank()) != 0) return totals_;  // replica 0's chain evaluates
  const int64_t bytes_before = activation_bytes_sent();
  const int previous = stage_.first() ? -1 : shape_.first_rank(stage_index_ - 1);
  const int next = stage_.last() ? -1 : shape_.first_rank(stage_index_ + 1);
  stage_.set_training(false);
  // One slot, on the latest weights (training left it on a stashed version); a forward's output
  // has left (wait_sends) before the next forward overwrites it.
  const int slot = 0;
  stage_.set_slot_parameters(slot, stage_.parameters());
  for (int b = 0; b < minibatches; ++b) {
    Tensor input;
    int64_t rows = 0;
    if (stage_.first() || stage_.last()) {
      const Batch batch = batch_of(b);
      rows = batch.rows();
      keep_batch(b, batch);
    }
    if (stage_.first()) {
      input = batches_[b].images;
    } else {
      // The rows come with the message: any count up to the build batch.
      StageMessage got;
      const Tensor buf = receive(previous, {StageMessage::activation, b, 0, 0, 0}, &got);
      DTRAIN_CHECK(!stage_.last() || got.rows == rows)
          << "pipeline evaluation: rank " << comm_.rank() << " received " << got.rows
          << " rows of batch " << b << " but its labels have " << rows;
      rows = got.rows;
      input = buf.narrow_batch(rows);
      free_activations_.push_back(buf);
    }
    wait_sends();
    const Tensor& out = stage_.forward(slot, static_cast<uint64_t>(b), input,
                                       stage_.last() ? batches_[b].labels : Tensor());
    if (stage_.last()) {
      const LossStats stats = stage_.last_stats(slot);
      totals_.loss_sum += stats.loss_sum;
      totals_.correct += stats.correct;
      totals_.samples += stats.count;
    } else {
      const int64_t elements = out.numel() / out.shape()[0] * rows;
      send(next, {StageMessage::activation, b, static_cast<int32_t>(rows), 0, elements}, out, slot);
    }
    give_back_batch(b);
  }
  wait_sends();
  stage_.set_training(true);
  evaluation_bytes_ += activation_bytes_sent() - bytes_before;
  return totals_;
}

Tensor PipelineRunner::take_buffer(std::vector<Tensor>& pool, const Shape& shape, DType dtype,
                                   bool host) const {
  // Pools stop growing at their peak: a pooled buffer at least as large is taken whole (the
  // caller views the part it needs and gives the whole back).
  for (auto it = pool.begin(); it != pool.end(); ++it)
    if (it->numel() >= shape.numel() && it->dtype() == dtype) {
      Tensor t = *it;
      pool.erase(it);
      return t;
    }
  if (host || on_host_) return Tensor::empty(shape, dtype, stage_.backend().host_allocator());
  return stage_.backend().empty(shape, dtype);
}

void PipelineRunner::release(int minibatch) {
  auto give_back = [minibatch](std::map<int, Tensor>& in_use, std::vector<Tensor>& pool) {
    const auto it = in_use.find(minibatch);
    if (it == in_use.end()) return;
    pool.push_back(it->second);
    in_use.erase(it);
  };
  give_back(activations_in_, free_activations_);
  give_back(gradients_in_, free_gradients_);
  give_back_batch(minibatch);
  loss_of_.erase(minibatch);
  const int slot = slot_of(minibatch);
  slot_of_[static_cast<size_t>(slot)] = -1;
  slot_by_minibatch_.erase(minibatch);
}

void PipelineRunner::give_back_batch(int minibatch) {
  const auto it = batch_buffers_.find(minibatch);
  if (it == batch_buffers_.end()) return;
  if (it->second.images.defined()) free_images_.push_back(it->second.images);
  if (it->second.labels.defined()) free_labels_.push_back(it->second.labels);
  batch_buffers_.erase(it);
  batches_.erase(minibatch);
}

}  // namespace dtrain
