// TiedWeights: a weight tie that pipeline stages separate (StageSlice::ties), kept as Megatron-LM
// keeps a GPT's token embedding (first stage) and its tied output head (last stage): each of the
// two stages holds a copy of the shared matrix; the borrower's copy takes the lender's values
// once, when the pipeline is built, and before every optimizer step the two stages sum their
// gradients of it, so that both copies take the same steps and stay equal — the gradient of the
// one matrix a single-rank model computes, the sum of both uses' gradients.
//
// Replicated stages: every replica of a stage holds the stage's all-reduced gradient, so replica
// q of one stage needs the other stage's from any one of its replicas: it receives from replica
// q mod R' of the other stage (R' its replicas) and sends to the replicas r of the other stage
// with r mod R = q. Steps are paired by their order: both stages must take as many (checked by
// check_tied_stages).
#pragma once
#include <vector>

#include "comm/comm.h"                   // Comm
#include "core/tensor.h"                 // Tensor
#include "sched/pipeline/schedule.h"     // PipelineShape, ScheduleSpec
#include "sched/pipeline/stage_model.h"  // StageModel

namespace dtrain {

// InputError naming algorithm.replicas when the stages of a tie would take different numbers of
// steps (1f1b steps once per round of a stage's replicas: both stages need as many replicas).
void check_tied_stages(const std::vector<StageSlice>& stages, const pipeline::PipelineShape& shape,
                       const pipeline::ScheduleSpec& spec);

class TiedWeights {
 public:
  // This rank's copies of `stage` (none: every call does nothing). `comm`: the pipeline's.
  TiedWeights(Comm& comm, const pipeline::PipelineShape& shape, StageModel& stage);
  bool empty() const { return links_.empty(); }
  // The borrower's copies take the lender's current weights (stage.parameters()).
  void share_weights();
  // Adds the other stage's gradient of each tied weight to this stage's, in `gradients` (the
  // stage's step gradient): both stages then hold the same sum.
  void sum_gradients(const Tensor& gradients);
  // The squared norm of the borrowers' copies in `gradients` (after sum_gradients): what a norm
  // over all stages leaves out to count the shared weight once, as the single-rank model does.
  double copies_squared_norm(const Tensor& gradients) const;

 private:
  struct Link {
    int64_t offset = 0, count = 0;  // of the stage's flat buffers
    bool lender = true;
    std::vector<int> send_to;  // ranks of the other stage this rank serves
    int receive_from = 0;      // the rank of the other stage this rank hears from
    Tensor out, in;            // host: this rank's range and the other stage's
    Tensor other;              // the other stage's on the stage's device
  };
  // Sends this rank's range of `flat` to the link's peers and receives theirs into link.in.
  void exchange(const Link& link, const Tensor& flat);

  Comm& comm_;
  StageModel& stage_;
  std::vector<Link> links_;
};

}  // namespace dtrain
