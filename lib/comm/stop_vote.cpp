#include "comm/stop_vote.h"

#include "comm/wait_watchdog.h"  // WaitContext: a timeout names the vote
#include "core/stop_request.h"   // stop_signal: this rank's vote

namespace dtrain {

StopVote::StopVote(Comm& comm, int lag) : comm_(comm.unpaced().split(0, comm.rank())), lag_(lag) {}

StopVote::~StopVote() {
  try {
    for (Vote& v : votes_) v.request->wait();
  } catch (...) {  // a failing job: the error in flight is the one to report
  }
}

void StopVote::cast() {
  Vote v{std::make_unique<double>(stop_signal()), nullptr};
  v.request = comm_->iallreduce_max(v.value.get());
  votes_.push_back(std::move(v));
}

bool StopVote::stop_here() {
  if (agreed_) return true;
  WaitContext what("the ranks' per-iteration stop vote");
  cast();
  while (static_cast<int>(votes_.size()) > lag_) {
    Vote& oldest = votes_.front();
    oldest.request->wait();
    if (*oldest.value > 0) agreed_ = true, signal_ = static_cast<int>(*oldest.value);
    votes_.pop_front();
  }
  return agreed_;
}

bool StopVote::settle() {
  WaitContext what("the ranks' stop vote at the end of a part");
  cast();
  for (Vote& v : votes_) {
    v.request->wait();
    if (*v.value > 0 && !agreed_) agreed_ = true, signal_ = static_cast<int>(*v.value);
  }
  votes_.clear();
  return agreed_;
}

}  // namespace dtrain
