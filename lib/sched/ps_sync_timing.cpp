#include "sched/ps_sync_timing.h"

namespace dtrain {

Prediction predict_ps_sync(const TimingInputs& in, const CodecCost& codec) {
  // Not in the paper's equations; derived from its scheduler and PacedComm. Rank 0 is
  // the server and also computes its share, so all ranks finish backward together. Then:
  //  push: each worker encodes its n-element gradient (a memcpy for `none`) and sends it
  //    (α + W·β, asleep, then the copy). The server receives them one after another: its
  //    incoming link is paced, so each further worker adds W·β (a sleep), and it decode_adds
  //    every one.
  //  update: only the server steps (l_up); the workers wait for the weights.
  //  pull: the server sends the f32 weights to the workers one after another.
  //  Then everyone computes again, cold after the wait.
  if (in.p <= 1)
    return make_prediction(in, "ps_sync", codec, compute_seconds(in), 0, compute_seconds(in));
  const double n = static_cast<double>(in.n);
  const double workers = in.p - 1;
  const double w = codec.wire_bytes(n);
  const LinkCost& link = in.link;
  const CommCost first = link.message(w);
  const double ingress =
      link.emulated() ? link.paced_s(w * link.sleep_s_per_byte()) : w * link.copy_s_per_byte;
  const double push = codec.encode_s * n + first.total() + (workers - 1) * ingress +
                      workers * codec.decode_add_s * n;
  const double pull = workers * link.message(sizeof(float) * n).total();
  const double comm = push + pull + in.sync_s;
  const double compute = compute_seconds(in) + idle_penalty(in, comm);
  return make_prediction(in, "ps_sync", codec, compute, comm, compute + comm);
}

}  // namespace dtrain
