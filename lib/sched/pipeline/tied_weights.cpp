#include "sched/pipeline/tied_weights.h"

#include <memory>  // unique_ptr: requests in flight

#include "comm/tags.h"  // kTiedWeight, kTiedGradient
#include "core/error.h"

namespace dtrain {

void check_tied_stages(const std::vector<StageSlice>& stages, const pipeline::PipelineShape& shape,
                       const pipeline::ScheduleSpec& spec) {
  for (const StageSlice& stage : stages)
    for (const StageTie& tie : stage.ties) {
      const int a = shape.replicas[static_cast<size_t>(tie.lender_stage)];
      const int b = shape.replicas[static_cast<size_t>(tie.borrower_stage)];
      DTRAIN_INPUT_CHECK(spec.iterations_per_step(a) == spec.iterations_per_step(b))
          << "algorithm.replicas: stage " << tie.lender_stage << " (" << tie.lender
          << ") and stage " << tie.borrower_stage << " (" << tie.borrower
          << ", tied to it) sum their gradients of the shared weight every step, so they must "
             "step as often: with schedule 1f1b they need as many replicas (they have "
          << a << " and " << b << "), or use schedule gpipe or 1f1b_flush";
    }
}

TiedWeights::TiedWeights(Comm& comm, const pipeline::PipelineShape& shape, StageModel& stage)
    : comm_(comm), stage_(stage) {
  const int rank = comm.rank();
  const int mine = shape.stage_of(rank), q = shape.replica_of(rank);
  const int R = shape.replicas[static_cast<size_t>(mine)];
  for (const StageModel::TiedCopy& copy : stage.tied_copies()) {
    Link link;
    link.offset = copy.offset, link.count = copy.count, link.lender = copy.lender;
    const int other = copy.peer_stage;
    const int R_other = shape.replicas[static_cast<size_t>(other)];
    link.receive_from = shape.first_rank(other) + q % R_other;
    for (int r = q; r < R_other; r += R) link.send_to.push_back(shape.first_rank(other) + r);
    Backend& backend = stage.backend();
    link.out = Tensor::empty({copy.count}, DType::f32, backend.host_allocator());
    link.in = Tensor::empty({copy.count}, DType::f32, backend.host_allocator());
    link.other = Tensor::empty({copy.count}, DType::f32, backend.allocator());
    links_.push_back(std::move(link));
  }
}

void TiedWeights::exchange(const Link& link, const Tensor& flat) {
  // Each side sends before it waits: neither blocks the other.
  Backend& backend = stage_.backend();
  backend.copy(link.out, flat.slice(link.offset, link.out.shape()));
  backend.synchronize();
  std::vector<std::unique_ptr<CommRequest>> sends;
  for (int peer : link.send_to)
    sends.push_back(comm_.isend(link.out.raw(), link.out.bytes(), peer, tags::kTiedGradient));
  comm_.recv(link.in.raw(), link.in.bytes(), link.receive_from, tags::kTiedGradient);
  for (auto& s : sends) s->wait();
}

void TiedWeights::share_weights() {
  Backend& backend = stage_.backend();
  for (const Link& link : links_) {
    const Tensor range = stage_.parameters().slice(link.offset, link.out.shape());
    const Tensor& host = link.out;
    if (link.lender) {
      backend.copy(host, range);
      backend.synchronize();
      for (int peer : link.send_to) comm_.send(host.raw(), host.bytes(), peer, tags::kTiedWeight);
    } else {
      comm_.recv(host.raw(), host.bytes(), link.receive_from, tags::kTiedWeight);
      backend.copy(range, host);
      backend.synchronize();
    }
  }
}

void TiedWeights::sum_gradients(const Tensor& gradients) {
  Backend& backend = stage_.backend();
  for (const Link& link : links_) {
    exchange(link, gradients);
    // a + b on one stage, b + a on the other: the same float, so the copies stay equal.
    backend.copy(link.other, link.in);
    backend.axpy(1.0f, link.other, gradients.slice(link.offset, link.in.shape()));
  }
}

double TiedWeights::copies_squared_norm(const Tensor& gradients) const {
  double squares = 0;
  for (const Link& link : links_)
    if (!link.lender) {
      const Tensor range = gradients.slice(link.offset, link.in.shape());
      squares += stage_.backend().dot(range, range);
    }
  return squares;
}

}  // namespace dtrain
