#include "plan/link_cost.h"

#include "plan/profiler.h"  // TransportTimes

namespace dtrain {

CommCost LinkCost::message(double bytes) const {
  const double sleep = latency_s + bytes * sleep_s_per_byte();
  return {emulated() ? paced_s(sleep) : latency_s, bytes * copy_s_per_byte};
}

LinkCost link_cost(const std::optional<LinkModel>& emulated, const TransportTimes& transport) {
  LinkCost link;
  link.copy_s_per_byte = transport.copy_s_per_byte;
  if (emulated) {
    // PacedComm: sleep α + bytes·β (late by the timer's overshoot), then the real transfer.
    link.latency_s = emulated->latency_s;
    link.bandwidth_bytes_per_s = emulated->bandwidth_Bps;
    link.overshoot_s = transport.overshoot_s;
    link.overshoot_per_s = transport.overshoot_per_s;
  } else {
    // No emulation: α is a core-to-core hand-off and the transfer a memory copy.
    link.latency_s = transport.handoff_s;
  }
  return link;
}

}  // namespace dtrain
