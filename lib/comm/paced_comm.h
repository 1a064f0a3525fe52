// Network emulation (docs/architecture.md, decision 6): a Comm decorator that makes every message a
// rank sends cost what it would on a link of the given bandwidth and latency, so that one machine
// reproduces the communication-bound regime of a 1–10 Gbit/s cluster. It is explicit and off by
// default (`cluster.link`). The sender waits latency + bytes / bandwidth before the real transfer
// (the link is full duplex: a ring step's send and receive overlap, as on real hardware).
// Library all-reduces are paced as a bandwidth-optimal ring over the same link would be:
// 2(p−1) latencies and 2(p−1)/p of the bytes. The small host collectives of the runner
// (metrics, consistency check) are not paced.
#pragma once
#include <memory>

#include "comm/comm.h"  // Comm

namespace dtrain {

struct LinkModel {
  double bandwidth_Bps = 0;  // bytes per second; > 0
  double latency_s = 0;
  double seconds_for(size_t bytes) const { return latency_s + bytes / bandwidth_Bps; }
};

std::unique_ptr<Comm> make_paced_comm(std::unique_ptr<Comm> inner, const LinkModel& link);

}  // namespace dtrain
