// Every MPI tag dtrain uses, in one place, so that two conversations between the same ranks on
// the same communicator can never match each other's messages. A new conversation gets a new
// tag here. (Collectives need no tag; each GradientAllreducer has its own communicator.)
#pragma once

namespace dtrain::tags {

inline constexpr int kRingStep = 0x5249;      // "RI": a ring all-reduce's reduce-scatter/all-gather
inline constexpr int kPsGradient = 0x5053;    // "PS": a worker's gradient push to the server
inline constexpr int kPsWeights = 0x5054;     // "PT": the server's weights back to a worker
inline constexpr int kClock = 0x434c;         // "CL": trace clock alignment with rank 0
inline constexpr int kDPsgdModel = 0x4450;    // "DP": a D-PSGD rank's model to a neighbour
inline constexpr int kGossipHeader = 0x4748;  // "GH": an AD-PSGD request (exchange or done)
inline constexpr int kGossipModel = 0x474d;   // "GM": an AD-PSGD model, either way
inline constexpr int kGossipCount = 0x4743;   // "GC": a rank's updates this epoch, to rank 0
inline constexpr int kGossipStop = 0x4753;    // "GS": rank 0 to all: the epoch's updates are done
inline constexpr int kTrace = 0x5452;         // "TR": a rank's trace events to rank 0
inline constexpr int kStageActivation = 0x5341;  // "SA": a pipeline stage's activation, forward
inline constexpr int kStageGradient = 0x5347;    // "SG": a pipeline stage's gradient, backward
inline constexpr int kProgress = 0x5052;      // "PR": never sent; probed only to let MPI progress
inline constexpr int kStopNotice = 0x534e;    // "SN": a pipeline rank asked to stop, to rank 0
inline constexpr int kStageWeights = 0x5357;  // "SW": a pipeline stage's weights file, to rank 0
inline constexpr int kTiedWeight = 0x5457;    // "TW": a tied weight, lender stage to borrower
inline constexpr int kTiedGradient = 0x5447;  // "TG": a tied weight's gradient, either way

}  // namespace dtrain::tags
