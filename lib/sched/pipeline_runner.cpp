#include "sched/pipeline_runner.h"

#include <algorithm>  // max

#include "core/error.h"

namespace dtrain {

using pipeline::Instruction;
using pipeline::Op;

PipelineRunner::PipelineRunner(Comm& comm, const pipeline::PipelineShape& shape, StageModel& stage,
                               Sgd& sgd, int64_t rows, bool weight_stashing,
                               const std::string& codec, bool vertical_sync)
    : comm_(comm),
      shape_(shape),
      stage_(stage),
      sgd_(sgd),
      rows_(rows),
      stage_index_(shape.stage_of(comm.rank())),
      stashing_(weight_stashing),
      vertical_(vertical_sync) {
  DTRAIN_INPUT_CHECK(!vertical_ || stashing_)
      << "algorithm.vertical_sync: needs weight_stashing (the versions are stashed weights)";
  DTRAIN_CHECK(shape.ranks() == comm.size())
      << "pipeline of " << shape.ranks() << " ranks on " << comm.size();
  const size_t slots = static_cast<size_t>(stage.slots());
  slot_of_.assign(slots, -1);
  for (size_t s = 0; s < slots; ++s) {
  }
  input_gradient_.resize(slots);
  // The replicas of each stage all-reduce their gradients among themselves, on a communicator
  // of their own (split is collective: every rank takes part, each keeps its stage's).
  stage_comm_ = comm.split(stage_index_, comm.rank());
  if (shape.replicas[static_cast<size_t>(stage_index_)] > 1)
    allreducer_ = std::make_unique<GradientAllreducer>(*stage_comm_, codec, stage.num_parameters(),
                                                       GradientPlacement{&stage.backend(), "auto"});
  // The stash ring, allocated once: one version per slot, never more than in flight.
  if (stashing_)
    for (size_t s = 0; s < slots; ++s)
      stash_.push_back(stage.backend().zeros({stage.num_parameters()}));
}

StageChannel& PipelineRunner::channel(int peer, StageMessage::Kind kind) {
  auto& c = channels_[{peer, static_cast<int>(kind)}];
  if (!c) c = std::make_unique<StageChannel>(comm_, peer, kind);
  return *c;
}

int PipelineRunner::take_slot(int minibatch) {
  for (size_t s = 0; s < slot_of_.size(); ++s)
    if (slot_of_[s] < 0) {
      // What this slot sent last (its output, its input gradient) must have left before the
      // slot computes again.
      for (auto& [key, c] : channels_) c->wait_sends();
      slot_of_[s] = minibatch;
      slot_by_minibatch_[minibatch] = static_cast<int>(s);
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
  const int version = vertical_ ? admitted_version_.at(static_cast<size_t>(minibatch)) : 0;
  return {kind, minibatch, static_cast<int32_t>(rows_), version, shape.numel()};
}

double PipelineRunner::run(const std::vector<Instruction>& instructions,
                           const pipeline::ScheduleSpec& spec,
                           const std::function<Batch(int)>& batch_of, float lr, float grad_scale) {
  spec_ = spec;
  steps_ = 0;
  forwarded_.clear();
  if (vertical_) {
    // When the input stage admits each minibatch: the steps before its forward, from the
    // input stage's own lists (the schedule is data).
    const auto all = pipeline::build_schedule(shape_, spec);
    admitted_version_.assign(static_cast<size_t>(spec.minibatches * spec.microbatches), 0);
    for (int r = 0; r < shape_.replicas[0]; ++r) {
      int steps = 0;
      for (const Instruction& in : all[static_cast<size_t>(r)]) {
        if (in.op == Op::step) ++steps;
        if (in.op == Op::forward) admitted_version_[static_cast<size_t>(in.minibatch)] = steps;
      }
    }
    keep_version();
  }
  // Several microbatches per step (gpipe, 1f1b_flush): each backward writes into a buffer of
  // its own, added to the step's sum; each microbatch's loss counts 1/m of the minibatch's.
  const bool accumulate = spec.kind != "1f1b" && spec.microbatches > 1;
  const Tensor sum = stage_.gradients();
  if (accumulate) {
    if (!micro_gradient_.defined()) micro_gradient_ = stage_.backend().zeros(sum.shape());
    stage_.set_gradients(micro_gradient_);
    stage_.backend().fill_zero(sum);
    grad_scale /= static_cast<float>(spec.microbatches);
  }
  double loss = 0;
  for (const Instruction& in : instructions) {
    const int b = in.minibatch;
    switch (in.op) {
      case Op::receive_activation: {
        // Receives come as early as the schedule allows, before a slot is free: into a buffer
        // of their own (a pool that stops growing at its peak), kept until the backward.
        const Tensor& buf = activations_in_[b] =
            take_buffer(free_activations_, stage_.input_shape());
        channel(in.peer, StageMessage::activation)
            .receive(header(StageMessage::activation, b, buf.shape()), buf);
        break;
      }
      case Op::forward: {
        const int slot = take_slot(b);
        if (stage_.first() || stage_.last()) batches_[b] = batch_of(b);
        const Tensor& input = stage_.first() ? batches_[b].images : activations_in_.at(b);
        if (stashing_) {
          // This minibatch's version — the latest weights now, or with vertical sync the
          // version the input stage admitted it at — kept until its backward.
          const Tensor& version = vertical_
                                      ? versions_.at(admitted_version_.at(static_cast<size_t>(b)))
                                      : stage_.parameters();
          stage_.backend().copy(stash_[static_cast<size_t>(slot)], version);
          stage_.set_slot_parameters(slot, stash_[static_cast<size_t>(slot)]);
          int in_use = 0;
          for (int m : slot_of_) in_use += m >= 0;
          versions_max_ = std::max(versions_max_, in_use);
        }
        forwarded_.insert(b);
        stage_.forward(slot, static_cast<uint64_t>(b), input,
                       stage_.last() ? batches_[b].labels : Tensor());
        if (stage_.last()) loss += stage_.last_stats(slot).loss_sum;
        break;
      }
      case Op::send_activation: {
        const Tensor& out = stage_.output(slot_of(b));
        channel(in.peer, StageMessage::activation)
            .send(header(StageMessage::activation, b, out.shape()), out);
        break;
      }
      case Op::receive_gradient: {
        const Tensor& buf = gradients_in_[b] = take_buffer(free_gradients_, stage_.output_shape());
        channel(in.peer, StageMessage::gradient)
            .receive(header(StageMessage::gradient, b, buf.shape()), buf);
        break;
      }
      case Op::backward: {
        const int slot = slot_of(b);
        const Tensor dy = stage_.last() ? Tensor() : gradients_in_.at(b);
        input_gradient_[static_cast<size_t>(slot)] = stage_.backward(slot, dy, grad_scale);
        if (accumulate) stage_.backend().axpy(1.0f, micro_gradient_, sum);
        backward_in_round_ = true;
        if (stage_.first()) release(b);  // nothing more to send for it
        break;
      }
      case Op::send_gradient: {
        const int slot = slot_of(b);
        const Tensor& dx = input_gradient_[static_cast<size_t>(slot)];
        channel(in.peer, StageMessage::gradient)
            .send(header(StageMessage::gradient, b, dx.shape()), dx);
        release(b);
        break;
      }
      case Op::reduce_gradients: {
        // The round's minibatches of this stage, one per replica (fewer in a last round): the
        // mean of their gradients; a replica without one adds zeros.
        const int R = shape_.replicas[static_cast<size_t>(stage_index_)];
        const int count = spec_.kind == "1f1b" ? std::min(R, spec_.minibatches - b * R)
                                               : std::min(R, spec_.microbatches);
        if (!backward_in_round_) stage_.backend().fill_zero(sum);
        allreducer_->start(sum).get();
        // 1f1b: the mean over the round's minibatches; a flush step: the microbatches were
        // already scaled to the step's mean, and the replicas hold disjoint parts of it.
        if (!accumulate) stage_.backend().scale(sum, 1.0f / static_cast<float>(count));
        backward_in_round_ = false;
        break;
      }
      case Op::step:
        sgd_.step(lr);
        ++steps_;
        if (vertical_) keep_version();
        if (accumulate) stage_.backend().fill_zero(sum);
        break;
    }
  }
  for (auto& [key, c] : channels_) c->wait_sends();
  if (accumulate) stage_.set_gradients(sum);
  return loss;
}

void PipelineRunner::keep_version() {
  // The weights after steps_ steps; versions no later minibatch will use go back to the pool.
  Tensor t = take_buffer(free_versions_, stage_.parameters().shape());
  stage_.backend().copy(t, stage_.parameters());
  versions_[steps_] = t;
  int oldest_needed = steps_;
  for (size_t b = 0; b < admitted_version_.size(); ++b)
    if (shape_.rank_of(stage_index_, static_cast<int>(b)) == comm_.rank() &&
        !forwarded_.count(static_cast<int>(b)))
      oldest_needed = std::min(oldest_needed, admitted_version_[b]);
  for (auto it = versions_.begin(); it != versions_.end() && it->first < oldest_needed;) {
    free_versions_.push_back(it->second);
    it = versions_.erase(it);
  }
}

Tensor PipelineRunner::take_buffer(std::vector<Tensor>& pool, const Shape& shape) {
  if (pool.empty()) return Tensor::empty(shape);
  Tensor t = pool.back();
  pool.pop_back();
  return t;
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
  const int slot = slot_of(minibatch);
  slot_of_[static_cast<size_t>(slot)] = -1;
  slot_by_minibatch_.erase(minibatch);
  batches_.erase(minibatch);
}

}  // namespace dtrain
