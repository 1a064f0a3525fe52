// PipelineRunner: runs one rank's instruction list of a pipeline schedule (schedule.h) on its
// StageModel — the one interpreter of every schedule kind. Each instruction goes to the handler
// of its Op (a table, as DeepSpeed's pipeline engine maps its instructions to _exec_* methods);
// a new Op is a new handler and a row of that table. Minibatches take a free slot of the stage
// model at their forward and give it back after their backward; which weights a slot computes with
// is WeightVersions' (weight_versions.h). Activations and gradients travel through StageChannels
// whose headers are checked. The replicas of a stage all-reduce their gradients (the `compression`
// codec applies) on a communicator of their own.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "comm/comm.h"                       // Comm
#include "comm/gradient_allreducer.h"        // GradientAllreducer: replicas' gradients
#include "comm/stage_channel.h"              // StageChannel
#include "core/phase.h"                      // PhaseTimes
#include "data/loader.h"                     // Batch
#include "optim/optimizer.h"                 // Optimizer: the stage's (SGD or AdamW)
#include "sched/pipeline/schedule.h"         // PipelineShape, Instruction
#include "sched/pipeline/stage_model.h"      // StageModel
#include "sched/pipeline/tied_weights.h"     // TiedWeights: a tie the stages separate
#include "sched/pipeline/weight_versions.h"  // WeightVersions: stashing, vertical sync

namespace dtrain {

// What one run (or evaluation) of a rank's instructions did.
struct PipelineTotals {
  double loss_sum = 0, correct = 0;  // output stage: over its minibatches' rows
  int64_t samples = 0;               // output stage: rows that went through the loss
  int64_t backwards = 0, steps = 0;
  int minibatches = 0;  // of the schedule run: fewer than asked when it ended early
  PhaseTimes phases;    // data, forward, backward, update, comm (sends), wait (receives, reduces)
};

class PipelineRunner {
 public:
  // `stage` is this rank's stage of `shape`; `rows` the rows of every minibatch.
  // `weight_stashing`: a minibatch's backward computes with the weights its forward used (a copy
  // per slot), while steps go to the latest; without it the backward uses the latest weights
  // (the paper's ablation).
  // `vertical_sync` (needs stashing): minibatch b runs on every stage at the weight version the
  // input stage had when it admitted b (its messages carry that version, checked on arrival);
  // each stage keeps the versions still to be used.
  PipelineRunner(Comm& comm, const pipeline::PipelineShape& shape, StageModel& stage,
                 Optimizer& optimizer, int64_t rows, bool weight_stashing = true,
                 const std::string& codec = "none", bool vertical_sync = false);
  // Clips every step's gradient to the L2 norm `max_norm` (> 0) over all stages, as the whole
  // model's gradient would be clipped: the stages' squared norms are summed by one all-reduce
  // of a double per step (replica 0 of each stage contributes; its replicas hold the same
  // gradient). Every stage must take the same steps (1f1b: every stage with the same replicas).
  // A collective (it makes a communicator): every rank calls it.
  void clip_gradients(double max_norm);
  // Weight versions stashed at once, at most: pipeline.csv's versions_max.
  int versions_max() const { return versions_.versions_max(); }
  // Minibatches forwarded and not yet backwarded here, at most: pipeline.csv's in_flight_max.
  int in_flight_max() const { return in_flight_max_; }
  // Bytes this rank sent in training (evaluations not counted): activations and gradients
  // (payload and header), and its share of the replicas' all-reduces (2(R−1)/R of the encoded
  // gradient per reduction, the ring's traffic).
  int64_t activation_bytes_sent() const;
  int64_t gradient_bytes_sent() const;
  int64_t allreduce_bytes_sent() const { return allreduce_bytes_; }
  // Seconds spent communicating (the replicas' all-reduce, the sends' thread) and compressing
  // since the last call, added to *comm_s and *compress_s.
  void take_comm_times(double* comm_s, double* compress_s);
  // Called after each optimizer step with the steps of this run so far (progress).
  void on_step(std::function<void(int)> callback) { on_step_ = std::move(callback); }
  // The input stage: the mean of the output stage's losses that came back with gradients since
  // the last call (the minibatches of the steps just taken, a pipeline's depth late); NaN when
  // none did.
  double take_returned_loss();
  // Minibatch b of the next run draws its dropout masks as step `base + b` (runs of later
  // epochs pass the minibatches done before, so that masks never repeat).
  void set_step_base(uint64_t base) { step_base_ = base; }
  // 1f1b: asked before each forward whether to end the run early (a signal); the input stage's
  // answer counts (its replicas must answer alike, as StopVote does), the other stages' calls
  // let them pass a signal of theirs on to the input stage. On yes the input
  // stage admits a few more minibatches, up to M, a multiple of `multiple` that reaches every
  // replica of every stage with one of them; their headers carry M, and each rank switches to
  // the schedule of M minibatches when it learns it — its past is that schedule's beginning.
  void on_admission(std::function<bool()> end_early, int multiple) {
    end_early_ = std::move(end_early);
    end_multiple_ = multiple;
  }

  // Runs `instructions` (this rank's list). `batch_of(b)`: minibatch b's images (input stage)
  // and labels (output stage). Each step uses learning rate `lr`; the loss is scaled by
  // `grad_scale` (1 / rows for the batch mean); replicas of a stage step with the mean gradient
  // of their round's minibatches. `spec`: the schedule the instructions come from; gpipe and
  // 1f1b_flush sum their microbatches' gradients, each scaled by 1/m, into one step. The
  // minibatch's images and labels are copied: the loader may reuse its buffers meanwhile.
  // `lr(step)`: the learning rate of this run's step `step` (0-based).
  PipelineTotals run(const std::vector<pipeline::Instruction>& instructions,
                     const pipeline::ScheduleSpec& spec, const std::function<Batch(int)>& batch_of,
                     const std::function<float(int)>& lr, float grad_scale);
  PipelineTotals run(const std::vector<pipeline::Instruction>& instructions,
                     const pipeline::ScheduleSpec& spec, const std::function<Batch(int)>& batch_of,
                     float lr, float grad_scale) {
    return run(
        instructions, spec, batch_of, [lr](int) { return lr; }, grad_scale);
  }
  // Forward passes only, in inference mode on the latest weights, of `minibatches` batches
  // through the chain of replica 0 of every stage (the other replicas idle): the input stage
  // reads `batch_of(b)`'s images, the output stage its labels; batches may have fewer rows than
  // the training minibatch (a test set's last). Returns the output stage's loss and accuracy.
  PipelineTotals evaluate(int minibatches, const std::function<Batch(int)>& batch_of);

 private:
  // run()'s arguments, for its handlers.
  struct RunArguments {
    const std::function<Batch(int)>* batch_of = nullptr;
    const std::function<float(int)>* lr = nullptr;
    float grad_scale = 1;  // per microbatch where the step accumulates
  };
  using Handler = void (PipelineRunner::*)(const pipeline::Instruction&);
  // The handler of `op`: one per Op, from a table.
  static Handler handler_of(pipeline::Op op);
  // The handlers: each runs one instruction of the list.
  void exec_receive_activation(const pipeline::Instruction& in);
  void exec_forward(const pipeline::Instruction& in);
  void exec_send_activation(const pipeline::Instruction& in);
  void exec_receive_gradient(const pipeline::Instruction& in);
  void exec_backward(const pipeline::Instruction& in);
  void exec_send_gradient(const pipeline::Instruction& in);
  void exec_reduce_gradients(const pipeline::Instruction& in);
  void exec_step(const pipeline::Instruction& in);
  // The tied weights' copies (TiedWeights): shared at the start, gradients summed before a step.
  void start_tied_weights();
  void sum_tied_gradients();
  // Scales the step's `gradient` (of squared norm `squares`) to the clip over all stages.
  void clip(const Tensor& gradient, double squares);
  // The output stage's mean loss of `minibatch` (< 0: none): kept to pass back with its
  // gradient, or, on the input stage, summed for take_returned_loss.
  void loss_returned(int minibatch, float loss);
  // run()'s set-up (the list, the gradient sum, the receives posted ahead) and its end.
  void start_run(const std::vector<pipeline::Instruction>& instructions,
                 const pipeline::ScheduleSpec& spec, RunArguments arguments);
  PipelineTotals finish_run();
  // Before the forward `in`: whether the run now ends early (a signal, on_admission); true when
  // the list was replaced by the shorter schedule's, to go on at the same index.
  bool ends_at_admission(const pipeline::Instruction& in);
  // Minibatch b from batch_of, checked to have a unit's rows, copied (keep_batch).
  void fetch_batch(int minibatch);
  StageChannel& channel(int peer, StageMessage::Kind kind);
  int take_slot(int minibatch);
  int slot_of(int minibatch) const;
  void release(int minibatch);  // its slot and buffers are free again
  Tensor take_buffer(std::vector<Tensor>& pool, const Shape& shape, DType dtype = DType::f32,
                     bool host = false) const;
  StageMessage header(StageMessage::Kind kind, int minibatch, const Shape& shape) const;
  // Sends `t` (on the stage's device) to `peer`: a GPU tensor through a host copy.
  // `slot`: whose buffer `t` is (the slot waits for the send before it computes again).
  void send(int peer, const StageMessage& message, const Tensor& t, int slot);
  // Until every send has left; the host copies of a GPU stage's sends are free again.
  void wait_sends();
  // Receives the message `expected` from `peer`: a pooled buffer of the kind's shape on the
  // stage's device, to be given back to pool_of(kind). `got`: the header that came.
  Tensor receive(int peer, const StageMessage& expected, StageMessage* got = nullptr);
  // Posts the next receive of the channel when more are due in this run and none is posted.
  void post_next(int peer, StageMessage::Kind kind);
  std::vector<Tensor>& pool_of(StageMessage::Kind kind);
  // One more receive due on the channel of `in`, when it is a receive.
  void count_receive(const pipeline::Instruction& in);
  // Continues this run as the schedule of `minibatches`, after instruction `at` of list_
  // (`receiving`: from within that instruction, a receive).
  void end_early(int minibatches, size_t at, bool receiving);
  const Shape& shape_of(StageMessage::Kind kind) const;
  DType dtype_of(StageMessage::Kind kind) const;
  // Copies minibatch b's images (input stage) and labels (output stage) into buffers of its own.
  void keep_batch(int minibatch, const Batch& batch);
  void give_back_batch(int minibatch);

  Comm& comm_;
  pipeline::PipelineShape shape_;
  StageModel& stage_;
  Optimizer& optimizer_;
  int64_t rows_;
  int stage_index_;                                                        // this rank's stage
  std::map<std::pair<int, int>, std::unique_ptr<StageChannel>> channels_;  // (peer, kind)
  std::map<std::pair<int, int>, int> receives_due_;  // per channel, still to come in this run
  std::vector<int> slot_of_;  // by slot: the minibatch it holds, −1 when free
  // By slot: the sends from its buffers still to wait for (channel, its sends up to there).
  std::vector<std::vector<std::pair<StageChannel*, int64_t>>> slot_sends_;
  std::map<int, int> slot_by_minibatch_;
  // What arrived for each minibatch in flight (host), and the buffers free for the next.
  std::map<int, Tensor> activations_in_, gradients_in_;
  std::vector<Tensor> free_activations_, free_gradients_;
  std::vector<Tensor> input_gradient_;  // per slot: what its last backward gives back
  pipeline::WeightVersions versions_;   // the weights each slot computes with
  pipeline::ScheduleSpec spec_;
  RunArguments args_;        // of the run in progress
  bool accumulate_ = false;  // the run sums microbatches into a step (ScheduleSpec::accumulates)
  Tensor step_gradient_;     // the run's step gradient: the stage's gradient buffer
  std::vector<pipeline::Instruction> list_;  // this run's instructions (shorter after an end)
  size_t at_ = 0;                            // the one running
  int end_ = 0;                              // M + 1 once an early end is known, else 0
  std::function<bool()> end_early_;
  int end_multiple_ = 1;
  Tensor micro_gradient_;  // a microbatch's gradient, before it joins the step's sum
  int steps_ = 0;
  bool backward_in_round_ = false;
  std::map<int, Batch> batches_;  // per minibatch in flight: its own copy of images and labels
  std::map<int, Batch> batch_buffers_;  // the pooled buffers those copies are views of
  std::vector<Tensor> free_images_, free_labels_;
  bool on_host_;  // the stage computes on the host: messages need no staging copy
  std::vector<Tensor> free_staging_;
  std::vector<Tensor> staging_in_use_;  // host copies of sends still in flight (GPU stages)
  int in_flight_max_ = 0;
  int64_t allreduce_bytes_ = 0;
  int64_t evaluation_bytes_ = 0;         // activations sent by evaluate()
  int64_t allreduce_message_bytes_ = 0;  // per reduction
  std::function<void(int)> on_step_;
  std::map<int, float> loss_of_;  // per minibatch in flight: the output stage's mean loss
  double returned_loss_sum_ = 0;  // input stage: losses back since take_returned_loss
  int returned_losses_ = 0;
  uint64_t step_base_ = 0;
  PipelineTotals totals_;
  // Activations and gradients leave on a thread of their own (one egress link per rank), so that
  // compute goes on while they travel. Declared after the channels: its queue runs dry (the
  // channels' sends complete) before they go.
  CommThread sender_{"pipeline send"};
  std::unique_ptr<Comm> stage_comm_;   // this stage's replicas
  std::unique_ptr<TiedWeights> tied_;  // its copies' gradients summed with the other stage's
  double clip_max_norm_ = 0;           // 0: no clipping
  std::unique_ptr<Comm> norm_comm_;    // every rank: the squared norms' all-reduce
  // Declared last: its comm thread is joined before the buffers it works on go.
  std::unique_ptr<GradientAllreducer> allreducer_;  // replicated stages only
};

}  // namespace dtrain
