// sync with gradient segments: the all-reduce of each segment starts while backward still runs
// (DDP's buckets, Pipe-SGD Eq. 6 with K = 1), and the result is the unsegmented sync's.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi_comm.h"
#include "core/phase.h"  // trace_code
#include "core/trace.h"
#include "trainee.h"

using namespace dtrain;
using test::Trainee;
using test::TraineeOptions;

namespace {

TraineeOptions sync(int segments, const char* compression = "none") {
  TraineeOptions o;
  o.keys = "segments: " + std::to_string(segments);
  o.compression = compression;
  return o;
}

}  // namespace

TEST_CASE("sync with segments gives the unsegmented weights bit for bit, and one rank's") {
  auto world = make_mpi_comm();
  auto local = make_local_comm();
  Trainee whole(*world, sync(1)), parts(*world, sync(4));
  whole.start_epoch(0);
  parts.start_epoch(0);
  for (int i = 0; i < 12; ++i) {
    CAPTURE(i);
    whole.train(0, 1);
    parts.train(0, 1);
    REQUIRE(std::memcmp(whole.weights(), parts.weights(), whole.size() * 4) == 0);
  }
  // One rank computes the global batch's gradient in one GEMM, p ranks in p and add them:
  // equal to float rounding.
  Trainee single(*local, sync(1));
  single.start_epoch(0);
  single.train(0, 12);
  CHECK(test::max_difference(parts.weights(), single.weights(), single.size()) < 1e-4);
}

TEST_CASE("with a codec, segments change only where the codec's blocks fall") {
  // The ring quantises blocks of each segment, so the rounding differs from the unsegmented
  // ring's; the ranks still agree bit for bit.
  auto world = make_mpi_comm();
  Trainee whole(*world, sync(1, "quantize8")), parts(*world, sync(4, "quantize8"));
  Trainee exact(*world, sync(1));
  for (Trainee* t : {&whole, &parts, &exact}) {
    t->start_epoch(0);
    t->train(0, 12);
  }
  std::vector<float> root(parts.weights(), parts.weights() + parts.size());
  world->broadcast(Tensor::borrow(root.data(), Shape{parts.size()}), 0);
  CHECK(std::memcmp(root.data(), parts.weights(), root.size() * 4) == 0);
  // Moving the blocks changes the result by no more than quantising does at all.
  const double quantisation = test::max_difference(whole.weights(), exact.weights(), whole.size());
  CHECK(test::max_difference(whole.weights(), parts.weights(), parts.size()) < 2 * quantisation);
}

TEST_CASE("each segment's all-reduce starts while the backward phase still runs") {
  // The scheduler hands a segment to the comm thread from Model::backward's on_ready, before
  // backward returns (the order of the code); here it is seen in the trace (core/trace.h): the
  // comm thread's span of an iteration's first segment begins after that iteration's backward
  // span began and before it ends. When the comm thread gets a core is up to the OS, so the
  // window is made wide, not a race: every rank is a 21x straggler (cluster.stragglers), whose
  // backward phase ends with a sleep of 20 times its forward and backward (> 50 ms with these
  // convolutions) after the segments were handed over; the comm thread, woken before that
  // sleep, need only be scheduled once in it. That a segment starts as soon as the layers
  // behind it are done, not only before the phase ends, is tested without any timing in
  // tests/nn/test_model_hooks.cpp (on_ready) and tests/sched/test_gradient_segments.cpp
  // (start_ready). How much communication the overlap hides is a speed claim: benchmarks'.
  auto world = make_mpi_comm();
  TraineeOptions o = sync(2);
  o.shape = "[3, 32, 32]";
  o.global_batch = 16;
  o.train_size = 160;
  // The linear layer holds nearly all parameters: the first segment is final after its backward,
  // the second after the convolutions'.
  o.model =
      "{layers: [{name: c1, type: conv2d, out_channels: 32, kernel: 3, padding: 1}, "
      "{name: r1, type: relu}, {name: c2, type: conv2d, out_channels: 32, kernel: 3, padding: 1}, "
      "{name: r2, type: relu}, {name: flat, type: flatten}, "
      "{name: fc, type: linear, out_features: 3}]}";
  {
    // The first use of these layers' kernels in the process (oneDNN's code generation), outside
    // the straggler: stretched 21 times it would take seconds.
    Trainee warm(*world, o);
    warm.start_epoch(0);
    warm.train(0, 1);
  }
  std::string all = "[";
  for (int r = 0; r < world->size(); ++r)
    all += fmt::format("{}{{rank: {}, slowdown: 21}}", r ? ", " : "", r);
  o.stragglers = all + "]";
  trace::Recorder recorder(64);
  trace::ThreadScope compute(&recorder, "compute");  // before the Trainee: its comm thread's too
  Trainee t(*world, o);
  t.start_epoch(0);
  t.train(0, 1);  // its own first iteration
  recorder.set_recording(true);
  const EpochStats s = t.train(0, 3);
  recorder.set_recording(false);
  CHECK(s.phases[Phase::comm] > 0);
  std::vector<trace::Event> backward, segments;
  for (const trace::ThreadTrack* track : recorder.tracks())
    for (size_t i = 0; i < track->size(); ++i) {
      const trace::Event& e = (*track)[i];
      if (track->name() == "compute" && e.what == trace_code(Phase::backward))
        backward.push_back(e);
      if (track->name() == "comm" && e.what == trace_code(Phase::comm)) segments.push_back(e);
    }
  REQUIRE(backward.size() == 3);
  REQUIRE(segments.size() == 2 * backward.size());  // two segments an iteration, in issue order
  for (size_t k = 0; k < backward.size(); ++k) {
    CAPTURE(k);
    const trace::Event& first = segments[2 * k];
    CHECK(first.begin_ns >= backward[k].begin_ns);  // handed over within backward: always
    CHECK(first.begin_ns < backward[k].end_ns);     // running before it ends: the wide window
  }
}
