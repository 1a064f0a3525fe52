// StopVote: the ranks agree to stop at the same iteration boundary when any of them was asked
// to (a signal: core/stop_request.h). Each boundary casts this rank's vote in a non-blocking
// all-reduce and reads the result of the vote `lag` boundaries earlier, which every rank has
// long cast: the agreement costs no wait in the iteration, and ranks that drift apart by fewer
// than `lag` iterations (pipelined gradients, local steps) are not pulled together by it.
#pragma once
#include <deque>
#include <memory>

#include "comm/comm.h"

namespace dtrain {

class StopVote {
 public:
  // `comm`: the job's ranks; the votes travel on a communicator of their own.
  explicit StopVote(Comm& comm, int lag = 8);
  ~StopVote();  // completes the votes in flight (every rank has cast as many)
  StopVote(const StopVote&) = delete;
  StopVote& operator=(const StopVote&) = delete;

  // Every rank, at every iteration boundary of an algorithm whose ranks do the same iterations:
  // true from the boundary at which the ranks agree to stop.
  bool stop_here();
  // Every rank at the same point (the end of a part of an epoch): casts a last vote, completes
  // all; true when any rank asked to stop.
  bool settle();
  // The signal the ranks agreed on (the highest asked for), once they agreed.
  int signal() const { return signal_; }

 private:
  void cast();
  struct Vote {
    std::unique_ptr<double> value;  // stays put while the all-reduce writes it
    std::unique_ptr<CommRequest> request;
  };
  std::unique_ptr<Comm> comm_;
  int lag_;
  std::deque<Vote> votes_;
  bool agreed_ = false;
  int signal_ = 0;
};

}  // namespace dtrain
