// Every MPI tag dtrain uses, in one place, so that two conversations between the same ranks on
// the same communicator can never match each other's messages. A new conversation gets a new
// tag here. (Collectives need no tag; each GradientAllreducer has its own communicator.)
#pragma once

namespace dtrain::tags {

inline constexpr int kRingStep = 0x5249;    // "RI": a ring all-reduce's reduce-scatter/all-gather
inline constexpr int kPsGradient = 0x5053;  // "PS": a worker's gradient push to the server
inline constexpr int kPsWeights = 0x5054;   // "PT": the server's weights back to a worker
inline constexpr int kClock = 0x434c;       // "CL": trace clock alignment with rank 0
inline constexpr int kDPsgdModel = 0x4450;  // "DP": a D-PSGD rank's model to a neighbour
inline constexpr int kTrace = 0x5452;       // "TR": a rank's trace events to rank 0

}  // namespace dtrain::tags
