// LinkCost: what a link between two ranks costs, as dtrain's predictions see it (the timing
// model of plan/timing_model.h and PipeDream's planner, sched/pipeline/pipedream_plan.h), and
// the one rule for where its numbers come from. With cluster.link the link is emulated
// (comm/paced_comm.h): the sender sleeps latency + bytes / bandwidth, late by the timer's
// overshoot, then the bytes really move (a shared-memory copy). Without it the ranks of this
// machine talk over shared memory: the latency is a core-to-core hand-off and the transfer a
// memory copy, both measured (plan/profiler.h).
#pragma once
#include <optional>

#include "comm/paced_comm.h"  // LinkModel: the emulated link

namespace dtrain {

struct TransportTimes;  // plan/profiler.h

// A communication's time, split into waiting (latency, the emulated link's sleeps) and CPU work
// (codecs, copies, sums).
struct CommCost {
  double wait_s = 0, cpu_s = 0;
  double total() const { return wait_s + cpu_s; }
};

struct LinkCost {
  double latency_s = 0;              // α, per message: cluster.link's latency, or the hand-off
  double bandwidth_bytes_per_s = 0;  // cluster.link's; 0: not emulated, the transfer is the copy
  double copy_s_per_byte = 0;        // the real transfer (after the emulated link's sleep)
  // Each of PacedComm's sleeps returns late by overshoot_s + overshoot_per_s · its length.
  double overshoot_s = 0, overshoot_per_s = 0;

  bool emulated() const { return bandwidth_bytes_per_s > 0; }
  // β: what the emulated link sleeps per byte before the copy; 0 when not emulated.
  double sleep_s_per_byte() const { return emulated() ? 1.0 / bandwidth_bytes_per_s : 0; }
  // The bandwidth a transfer sees: the emulated link's, else the memory copy's.
  double transfer_bytes_per_s() const {
    return emulated() ? bandwidth_bytes_per_s : 1.0 / copy_s_per_byte;
  }
  // A sleep of `s` seconds in PacedComm, with the timer's overshoot.
  double paced_s(double s) const { return s + overshoot_s + overshoot_per_s * s; }
  // One message of `bytes` (a ring step's sendrecv, a push, a pull): the sender waits α + bytes·β
  // (asleep when the link is emulated), then the bytes really move (copy).
  CommCost message(double bytes) const;
};

// The link between this machine's ranks: the emulated one (cluster.link) when there is one, with
// the transport's measured overshoot and copy; else the measured hand-off and copy.
LinkCost link_cost(const std::optional<LinkModel>& emulated, const TransportTimes& transport);

}  // namespace dtrain
