// The profiler measures something plausible, and reports codec wire formats exactly.
#include <doctest/doctest.h>

#include <yaml-cpp/yaml.h>

#include <algorithm>  // min, all_of
#include <cmath>      // isfinite

#include "backend/backend.h"
#include "data/dataset_table.h"  // dataset_defaults
#include "data/synthetic.h"      // SyntheticOptions
#include "optim/sgd.h"           // make_sgd: the step profiled
#include "plan/profiler.h"

using namespace dtrain;

TEST_CASE("codec costs: positive per-element times and the exact wire format") {
  const CodecCost q8 = profile_codec("quantize8", 16384, 4);
  CHECK(q8.name == "quantize8");
  CHECK(q8.bytes_per_element == 1 + 4.0 / 1024);  // a float scale per 1024 int8s
  CHECK(q8.header_bytes == 0);
  CHECK(q8.encode_s > 0);
  CHECK(q8.decode_s > 0);
  CHECK(q8.decode_add_s > 0);
  const CodecCost t16 = profile_codec("truncate16", 16384, 2);
  CHECK(t16.bytes_per_element == 2);
  CHECK(t16.header_bytes == 0);
  CHECK(profile_codec("none", 4096, 1).bytes_per_element == 4);
  CHECK(q8.wire_bytes(4096) == 4096 + 4 * 4);
}

TEST_CASE("transport figures are positive and bounded") {
  const TransportTimes t = profile_transport(1 << 16);
  CHECK(t.copy_s_per_byte > 0);
  CHECK(t.copy_s_per_byte < 1e-8);  // faster than 100 MB/s
  CHECK(t.gamma_s_per_byte > 0);
  CHECK(t.handoff_s > 0);
  CHECK(t.overshoot_s >= 0);
  CHECK(t.overshoot_per_s >= 0);
  CHECK(t.sync_s > 0);
  // 0 where the threads cannot be pinned to two cores; a round trip of time slices otherwise.
  CHECK(t.yield_wait_s >= 0);
  CHECK(t.yield_wait_s < 1.0);
  if (available_cores() >= 2) CHECK(t.yield_wait_s > 0);
  CHECK(available_cores() >= 1);
}

TEST_CASE("expected excess of the slowest of p ranks") {
  CHECK(expected_max_excess({1, 1, 1, 1}, 4) == doctest::Approx(0));
  CHECK(expected_max_excess({1, 2}, 1) == doctest::Approx(0));
  // max of two draws from {1, 2}: 1 with probability 1/4, else 2 → 1.75, mean 1.5.
  CHECK(expected_max_excess({1, 2}, 2) == doctest::Approx(0.25));
  CHECK(expected_max_excess({2, 1}, 2) == doctest::Approx(0.25));
  CHECK(expected_max_excess({1, 2, 3}, 8) > expected_max_excess({1, 2, 3}, 2));
}

// A CPU MLP of `hidden` layers on 1×16×16 synthetic images, trained as one of 2 ranks with
// `rows` rows each, its loader and an SGD step: what the compute profiles below time.
struct SmallMlp {
  std::unique_ptr<Backend> backend = make_backend({DeviceChoice::cpu, 1, 0});
  std::unique_ptr<Dataset> data;
  std::unique_ptr<Loader> loader;
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> sgd;
  SmallMlp(const std::string& hidden, int64_t train_size, int64_t rows) {
    DatasetConfig d = dataset_defaults("synthetic");
    d.get<SyntheticOptions>() = {{1, 16, 16}, 10};
    d.train_size = train_size;
    data = open_dataset(d, Split::train);
    std::vector<std::string> problems;
    const YAML::Node spec =
        check_model_spec(YAML::Load("{name: mlp, hidden: " + hidden + "}"), problems);
    REQUIRE(problems.empty());
    LoaderOptions lo;
    lo.global_batch = 2 * rows;
    lo.world = 2;
    loader = std::make_unique<Loader>(*data, lo);
    model = build_model(*backend, spec, ModelInput{data->sample_shape(), 10, rows}, 1);
    sgd = make_sgd(*backend, model->parameters(), model->gradients(), SgdOptions{});
  }
};

TEST_CASE("compute profile of a small MLP: every phase timed, bigger batches take longer") {
  auto time_batch = [](int64_t batch) {
    SmallMlp m("[256]", 2048, batch);
    return profile_compute(*m.model, *m.sgd, *m.loader, 2, 2, 7);
  };
  const ComputeTimes small = time_batch(4), large = time_batch(512);
  CHECK(small.iterations == 7);
  CHECK(small.data_s >= 0);
  CHECK(small.forward_s > 0);
  CHECK(small.backward_s > 0);
  CHECK(small.update_s > 0);
  CHECK(small.skew_s >= 0);
  // 128 times the rows. A stall on a busy machine only lengthens the profile it hits, and a few
  // stalls in the small batch's 7 iterations of microseconds could outweigh the large batch's
  // milliseconds: its time is the least of three profiles, which all three would have to hit.
  double small_s = small.forward_s + small.backward_s;
  for (int again = 0; again < 2; ++again) {
    const ComputeTimes t = time_batch(4);
    small_s = std::min(small_s, t.forward_s + t.backward_s);
  }
  CHECK(large.forward_s + large.backward_s > small_s);
}

TEST_CASE("compute profile with time_layers: every other timed step per layer, the rest phased") {
  SmallMlp m("[64, 32]", 512, 16);
  Model& model = *m.model;
  Optimizer& sgd = *m.sgd;
  Loader& loader = *m.loader;
  const ComputeTimes t = profile_compute(model, sgd, loader, 2, 2, 7, 60.0, true);
  // 7 timed steps: 1st, 3rd, 5th, 7th phased, 2nd, 4th, 6th per layer.
  CHECK(t.iterations == 4);
  CHECK(t.forward_s > 0);
  CHECK(t.backward_s > 0);
  REQUIRE(t.layers.size() == 3);  // fc1, fc2, fc3
  for (const LayerCost& l : t.layers) {
    CHECK(l.forward_s > 0);
    CHECK(l.backward_s > 0);
    CHECK(l.comm_s == 0);
  }
  // Without it, no layers and every timed step phased.
  const ComputeTimes plain = profile_compute(model, sgd, loader, 2, 2, 7);
  CHECK(plain.layers.empty());
  CHECK(plain.iterations == 7);
}

TEST_CASE("SAPipe's update passes: each timed, and the model still trains after them") {
  SmallMlp m("[64]", 256, 16);
  Model& model = *m.model;
  Loader& loader = *m.loader;
  loader.start_epoch(0);
  const UpdatePasses p = profile_update_passes(model, *m.sgd, loader, 2, 3);
  CHECK(p.step_dot_s > 0);
  CHECK(p.predict_sum_s > 0);
  CHECK(p.step_predict_s > 0);
  CHECK(p.step_delta_s > 0);
  CHECK(p.predict_s > 0);
  // The passes step with a tiny learning rate: the weights stay finite.
  const float* w = model.parameters().data<float>();  // the CPU backend's: host memory
  CHECK(std::all_of(w, w + model.num_parameters(), [](float x) { return std::isfinite(x); }));
}
