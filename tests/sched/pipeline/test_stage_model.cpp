// StageModel: a model cut into stages and run stage after stage in one process — activations
// forward, gradients back — computes the whole model's loss and gradients bit for bit.
#include <doctest/doctest.h>

#include <cstring>  // memcmp
#include <vector>

#include "backend/backend.h"
#include "core/rng.h"
#include "nn/model.h"
#include "sched/pipeline/stage_model.h"

using namespace dtrain;

namespace {

void fill(const Tensor& t, uint64_t stream) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = 2.0f * random_uniform(7, stream, i) - 1.0f;
}

}  // namespace

TEST_CASE("stages run one after the other compute the whole model's gradient, bit for bit") {
  auto backend = make_backend({DeviceChoice::cpu, 1, 0});
  struct Case {
    const char* spec;
    ModelInput input;
  };
  for (const Case& c : {Case{"{name: mlp, hidden: [32, 16]}", {{1, 8, 8}, 10, 6}},
                        Case{"{name: lenet}", {{1, 28, 28}, 10, 6}}}) {
    CAPTURE(c.spec);
    const YAML::Node spec = YAML::Load(c.spec);
    const int64_t b = c.input.batch;
    std::vector<int64_t> dims{b};
    for (int64_t d : c.input.sample_shape.dims()) dims.push_back(d);
    Tensor images = Tensor::empty(Shape(dims)), labels = Tensor::empty({b}, DType::i32);
    fill(images, 1);
    for (int64_t i = 0; i < b; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(i % 10);
    // The whole model.
    auto whole = build_model(*backend, spec, c.input, 3);
    whole->forward(images, labels);
    whole->backward(1.0f / static_cast<float>(b));
    const LossStats expected = whole->last_stats();
    const float* g = whole->gradients().data<float>();
    const std::vector<float> gradient(g, g + whole->num_parameters());

    const std::vector<std::string> points = model_cut_points(spec, c.input);
    for (const auto& starts :
         std::vector<std::vector<std::string>>{{points.front()}, {points.back()}, points}) {
      CAPTURE(starts.size());
      const std::vector<StageSlice> stages = split_model(spec, c.input, starts);
      std::vector<std::unique_ptr<StageModel>> models;
      for (size_t s = 0; s < stages.size(); ++s)
        models.push_back(std::make_unique<StageModel>(*backend, stages[s], c.input, 3, 2, s == 0,
                                                      s + 1 == stages.size()));
      // Through slot 1 (any slot computes the same).
      Tensor x = images;
      for (auto& m : models) x = m->forward(1, 0, x, m->last() ? labels : Tensor());
      Tensor dy;
      for (size_t s = models.size(); s-- > 0;)
        dy = models[s]->backward(1, dy, 1.0f / static_cast<float>(b));
      CHECK_FALSE(dy.defined());  // the first stage returns no input gradient
      const LossStats got = models.back()->last_stats(1);
      CHECK(got.loss_sum == expected.loss_sum);
      CHECK(got.correct == expected.correct);
      std::vector<float> joined;
      for (auto& m : models) {
        const float* p = m->gradients().data<float>();
        joined.insert(joined.end(), p, p + m->num_parameters());
      }
      REQUIRE(joined.size() == gradient.size());
      CHECK(std::memcmp(joined.data(), gradient.data(), gradient.size() * sizeof(float)) == 0);
    }
  }
}
