// The zoo's GPT: its forward and gradients against a plain double-precision GPT written out
// below (embeddings, layer norm, causal attention, MLP, tied head, per-token cross-entropy), the
// loss at initialisation, GPT-2's initialisation statistics, its cut points and a pipeline split
// whose stages chained equal the whole model, its summary, its parameter counts and its errors.
#include <cmath>
#include <map>

#include "core/error.h"  // InputError
#include "helpers.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

constexpr int64_t kVocab = 65, kT = 16, kC = 32, kHeads = 4, kLayers = 2, kBatch = 2;

YAML::Node small_gpt(bool tied = true) {
  YAML::Node spec = YAML::Load("{name: gpt, n_layer: 2, n_head: 4, n_embd: 32}");
  spec["tie_weights"] = tied;
  return spec;
}
const ModelInput kInput{{kT}, kVocab, kBatch};

using Vec = std::vector<double>;

// ---- the reference GPT, in double ---------------------------------------------------------

// The model's weights by name, read from its flat parameters (as nanoGPT's state_dict).
struct Weights {
  std::map<std::string, Vec> w;
  const Vec& operator[](const std::string& name) const {
    auto it = w.find(name);
    REQUIRE_MESSAGE(it != w.end(), "no weight " << name);
    return it->second;
  }
};
Weights read_weights(Model& model) {
  Weights out;
  const float* p = model.parameters().data<float>();
  for (const WeightSlot& s : model.weight_slots())
    out.w[s.name] = Vec(p + s.offset, p + s.offset + s.shape.numel());
  return out;
}

// y [rows, out] = x [rows, in] · wᵀ + b (b may be empty).
Vec linear(const Vec& x, const Vec& w, const Vec& b, int64_t rows, int64_t in, int64_t out) {
  Vec y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

Vec layer_norm(const Vec& x, const Vec& g, const Vec& b, int64_t rows, int64_t c) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < c; ++i) mean += x[r * c + i];
    mean /= c;
    for (int64_t i = 0; i < c; ++i) var += (x[r * c + i] - mean) * (x[r * c + i] - mean);
    var /= c;
    const double rstd = 1.0 / std::sqrt(var + 1e-5);
    for (int64_t i = 0; i < c; ++i) y[r * c + i] = (x[r * c + i] - mean) * rstd * g[i] + b[i];
  }
  return y;
}

// Causal attention of qkv [N, T, 3C] → [N, T, C] (PyTorch's split and head views).
Vec attention(const Vec& qkv, int64_t n, int64_t t, int64_t c, int64_t heads) {
  const int64_t d = c / heads;
  Vec y(n * t * c, 0.0);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < t; ++i) {
        const double* q = &qkv[(s * t + i) * 3 * c + h * d];
        Vec score(i + 1);
        double most = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          const double* k = &qkv[(s * t + j) * 3 * c + c + h * d];
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += q[e] * k[e];
          score[j] = dot / std::sqrt(static_cast<double>(d));
          most = std::max(most, score[j]);
        }
        double sum = 0;
        for (double& v : score) sum += (v = std::exp(v - most));
        for (int64_t j = 0; j <= i; ++j) {
          const double* v = &qkv[(s * t + j) * 3 * c + 2 * c + h * d];
          for (int64_t e = 0; e < d; ++e) y[(s * t + i) * c + h * d + e] += score[j] / sum * v[e];
        }
      }
  return y;
}

// The logits [N·T, V] of the GPT for token ids [N, T].
Vec reference_logits(const Weights& w, const std::vector<int>& ids, int64_t n, bool tied) {
  const int64_t rows = n * kT, c = kC;
  Vec x(rows * c);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < c; ++i)
      x[r * c + i] = w["transformer.wte.weight"][ids[r] * c + i] +
                     w["transformer.wpe.weight"][(r % kT) * c + i];
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    Vec a = layer_norm(x, w[h + "ln_1.weight"], w[h + "ln_1.bias"], rows, c);
    a = linear(a, w[h + "attn.c_attn.weight"], w[h + "attn.c_attn.bias"], rows, c, 3 * c);
    a = attention(a, n, kT, c, kHeads);
    a = linear(a, w[h + "attn.c_proj.weight"], w[h + "attn.c_proj.bias"], rows, c, c);
    for (size_t i = 0; i < x.size(); ++i) x[i] += a[i];
    Vec m = layer_norm(x, w[h + "ln_2.weight"], w[h + "ln_2.bias"], rows, c);
    m = linear(m, w[h + "mlp.c_fc.weight"], w[h + "mlp.c_fc.bias"], rows, c, 4 * c);
    for (double& v : m) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));  // nn.GELU()
    m = linear(m, w[h + "mlp.c_proj.weight"], w[h + "mlp.c_proj.bias"], rows, 4 * c, c);
    for (size_t i = 0; i < x.size(); ++i) x[i] += m[i];
  }
  x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], rows, c);
  return linear(x, w[tied ? "transformer.wte.weight" : "lm_head.weight"], {}, rows, c, kVocab);
}

// The mean over the batch of each sequence's mean next-token cross-entropy.
double reference_loss(const Vec& logits, const std::vector<int>& labels, int64_t n) {
  double total = 0;
  for (int64_t r = 0; r < n * kT; ++r) {
    const double* z = &logits[r * kVocab];
    const double most = *std::max_element(z, z + kVocab);
    double sum = 0;
    for (int64_t v = 0; v < kVocab; ++v) sum += std::exp(z[v] - most);
    total += std::log(sum) + most - z[labels[r]];
  }
  return total / static_cast<double>(n * kT);
}

struct Batch {
  Tensor ids, labels;
  std::vector<int> id_list, label_list;
};
Batch random_batch(int64_t n, uint64_t stream) {
  Batch b{Tensor::empty({n, kT}), Tensor::empty({n, kT}, DType::i32), {}, {}};
  for (int64_t i = 0; i < n * kT; ++i) {
    const int id = static_cast<int>(random_bits(21, stream, i) % kVocab);
    const int next = static_cast<int>(random_bits(21, stream + 1, i) % kVocab);
    b.ids.data<float>()[i] = static_cast<float>(id);
    b.labels.data<int32_t>()[i] = next;
    b.id_list.push_back(id);
    b.label_list.push_back(next);
  }
  return b;
}

std::string what_throws(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

double stddev(const float* p, int64_t count) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < count; ++i) mean += p[i];
  mean /= count;
  for (int64_t i = 0; i < count; ++i) var += (p[i] - mean) * (p[i] - mean);
  return std::sqrt(var / count);
}

}  // namespace

TEST_CASE("gpt: forward and gradients equal a plain double GPT, tied and untied") {
  for (const bool tied : {true, false}) {
    CAPTURE(tied);
    auto backend = cpu(2);
    auto model = build_model(*backend, small_gpt(tied), kInput, 5);
    // Away from the initial weights, so every part of the model matters for the loss.
    const Tensor& params = model->parameters();
    for (const WeightSlot& s : model->weight_slots())
      if (s.name.find("ln_") != std::string::npos) {
        const Tensor t = params.slice(s.offset, {s.shape.numel()});
        const bool gain = s.name.find(".weight") != std::string::npos;
        fill_random(t, s.offset, gain ? 0.5f : -0.3f, gain ? 1.5f : 0.3f);
      } else if (s.name.find("bias") != std::string::npos) {
        fill_random(params.slice(s.offset, {s.shape.numel()}), s.offset, -0.1f, 0.1f);
      } else {
        fill_random(params.slice(s.offset, {s.shape.numel()}), s.offset, -0.15f, 0.15f);
      }
    const Batch batch = random_batch(kBatch, 1);
    model->forward(batch.ids, batch.labels);
    const Weights weights = read_weights(*model);
    const Vec logits = reference_logits(weights, batch.id_list, kBatch, tied);
    const Tensor& z = model->logits();
    REQUIRE(z.numel() == static_cast<int64_t>(logits.size()));
    double worst = 0;
    for (size_t i = 0; i < logits.size(); ++i)
      worst = std::max(worst, std::fabs(z.data<float>()[i] - logits[i]));
    CHECK(worst < 2e-4);
    const double loss = reference_loss(logits, batch.label_list, kBatch);
    const LossStats stats = model->last_stats();
    CHECK(stats.loss_sum / stats.count == doctest::Approx(loss).epsilon(1e-5));

    // The analytic gradient of the batch mean (grad_scale 1/b) against central differences of
    // the double reference, at sampled elements of every weight.
    model->backward(1.0f / kBatch);
    const std::vector<float> grads = to_vector(model->gradients());
    float* p = params.data<float>();
    for (const WeightSlot& s : model->weight_slots()) {
      double scale = 0;
      for (int64_t i = 0; i < s.shape.numel(); ++i)
        scale = std::max(scale, std::fabs(static_cast<double>(grads[s.offset + i])));
      int bad = 0;
      for (int64_t i : sample_indices(s.shape.numel(), 12)) {
        float& value = p[s.offset + i];
        const float saved = value;
        value = saved + 1e-3f;
        const double up = value;
        const double plus =
            reference_loss(reference_logits(read_weights(*model), batch.id_list, kBatch, tied),
                           batch.label_list, kBatch);
        value = saved - 1e-3f;
        const double down = value;
        const double minus =
            reference_loss(reference_logits(read_weights(*model), batch.id_list, kBatch, tied),
                           batch.label_list, kBatch);
        value = saved;
        const double numeric = (plus - minus) / (up - down);
        const double analytic = grads[s.offset + i];
        if (std::fabs(analytic - numeric) > 2e-3 * scale + 2e-3 * std::fabs(numeric) + 1e-7)
          if (++bad <= 3) MESSAGE(s.name << "[" << i << "]: " << analytic << " vs " << numeric);
      }
      CHECK_MESSAGE(bad == 0, s.name << ": " << bad << " mismatches");
    }
  }
}

TEST_CASE("gpt at initialisation: loss ≈ ln(vocab), GPT-2's initialisation statistics") {
  auto backend = cpu(2);
  auto model = build_model(*backend, YAML::Load("{name: gpt}"), {{kT}, kVocab, 4}, 1);
  const Batch batch = random_batch(4, 3);
  Tensor ids = Tensor::empty({4, kT}), labels = Tensor::empty({4, kT}, DType::i32);
  model->forward(random_batch(4, 3).ids, random_batch(4, 3).labels);
  const LossStats stats = model->last_stats();
  CHECK(std::fabs(stats.loss_sum / stats.count - std::log(static_cast<double>(kVocab))) < 0.1);

  const float* p = model->parameters().data<float>();
  const double residual = 0.02 / std::sqrt(2.0 * 4);  // n_layer 4
  int checked = 0;
  for (const WeightSlot& s : model->weight_slots()) {
    CAPTURE(s.name);
    const float* w = p + s.offset;
    const int64_t count = s.shape.numel();
    const bool ln = s.name.find("ln_") != std::string::npos;
    if (s.name.ends_with("c_proj.weight")) {
      CHECK(stddev(w, count) == doctest::Approx(residual).epsilon(0.05));
      ++checked;
    } else if (ln && s.name.ends_with(".weight")) {
      CHECK(std::all_of(w, w + count, [](float v) { return v == 1.0f; }));
    } else if (s.name.ends_with(".bias")) {
      CHECK(std::all_of(w, w + count, [](float v) { return v == 0.0f; }));
    } else {  // embeddings, c_attn, c_fc
      CHECK(stddev(w, count) == doctest::Approx(0.02).epsilon(0.05));
    }
  }
  CHECK(checked == 8);
  // The tied head has no weight of its own; the table is saved once.
  for (const WeightSlot& s : model->weight_slots()) CHECK(s.name.rfind("lm_head", 0) != 0);
}

TEST_CASE("gpt's names are nanoGPT's, its summary shows [T, C] per sample") {
  const std::vector<WeightSlot> slots = model_weight_slots(small_gpt(false), kInput);
  std::vector<std::string> names;
  for (const WeightSlot& s : slots) names.push_back(s.name);
  const std::vector<std::string> first{"transformer.wte.weight",
                                       "transformer.wpe.weight",
                                       "transformer.h.0.ln_1.weight",
                                       "transformer.h.0.ln_1.bias",
                                       "transformer.h.0.attn.c_attn.weight",
                                       "transformer.h.0.attn.c_attn.bias",
                                       "transformer.h.0.attn.c_proj.weight",
                                       "transformer.h.0.attn.c_proj.bias",
                                       "transformer.h.0.ln_2.weight",
                                       "transformer.h.0.ln_2.bias",
                                       "transformer.h.0.mlp.c_fc.weight",
                                       "transformer.h.0.mlp.c_fc.bias",
                                       "transformer.h.0.mlp.c_proj.weight",
                                       "transformer.h.0.mlp.c_proj.bias"};
  REQUIRE(names.size() == 2 + 12 * 2 + 2 + 1);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 14) == first);
  CHECK(names.back() == "lm_head.weight");
  CHECK(slots.back().shape == Shape{kVocab, kC});
  CHECK(model_weight_slots(small_gpt(true), kInput).front().aliases ==
        std::vector<std::string>{"lm_head.weight"});

  const std::string summary = describe_model(small_gpt(), kInput);
  CHECK(summary.find("transformer.h.1.attn.c_attn") != std::string::npos);
  CHECK(summary.find("[16, 96]") != std::string::npos);
  CHECK(summary.find("[16, 32]") != std::string::npos);
  CHECK(summary.find("[16, 65]") != std::string::npos);
  // The dropout layers appear only with dropout.
  CHECK(summary.find("dropout") == std::string::npos);
  YAML::Node with_dropout = small_gpt();
  with_dropout["dropout"] = 0.1;
  CHECK(describe_model(with_dropout, kInput).find("transformer.h.0.attn.resid_dropout") !=
        std::string::npos);
}

TEST_CASE("gpt parameter counts: GPT-2 small is 124,439,808 at its vocabulary and block size") {
  CHECK(count_parameters(YAML::Load("{name: gpt2}"), {{1024}, 50257, 1}) == 124439808);
  // Its position table stays GPT-2's 1024 rows at a shorter context (fine-tuning).
  CHECK(count_parameters(YAML::Load("{name: gpt2}"), {{80}, 50257, 1}) == 124439808);
  // Untied: the head's [vocab, C] on top.
  const int64_t tied = count_parameters(small_gpt(true), kInput);
  CHECK(count_parameters(small_gpt(false), kInput) == tied + kVocab * kC);
  // By hand: wte, wpe, per block 12C² + 13C (LNs 4C, c_attn 3C²+3C, c_proj C²+C, c_fc 4C²+4C,
  // c_proj 4C²+C), ln_f.
  CHECK(tied == kVocab * kC + kT * kC + kLayers * (12 * kC * kC + 13 * kC) + 2 * kC);
}

TEST_CASE("gpt2 sizes: medium, large and xl have GPT-2's published 355M, 774M and 1558M") {
  // wte, wpe (1024 rows), L blocks of 12C² + 13C, ln_f: the formula of the test above.
  auto formula = [](int64_t layers, int64_t c) {
    return 50257 * c + 1024 * c + layers * (12 * c * c + 13 * c) + 2 * c;
  };
  auto count = [](const char* size) {
    return count_parameters(YAML::Load(std::string("{name: gpt2, size: ") + size + "}"),
                            {{1024}, 50257, 1});
  };
  CHECK(count("small") == 124439808);
  CHECK(count("small") == formula(12, 768));
  CHECK(count("medium") == formula(24, 1024));
  CHECK(count("medium") == 354823168);
  CHECK(count("large") == formula(36, 1280));
  CHECK(count("large") == 774030080);
  CHECK(count("xl") == formula(48, 1600));
  CHECK(count("xl") == 1557611200);
  // Hugging Face's model cards round them to 355M, 774M and 1558M (1.5B).
  CHECK((count("medium") + 500000) / 1000000 == 355);
  CHECK((count("large") + 500000) / 1000000 == 774);
  CHECK((count("xl") + 500000) / 1000000 == 1558);
  std::vector<std::string> problems;
  check_model_spec(YAML::Load("{name: gpt2, size: huge}"), problems);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("model.size") != std::string::npos);
}

TEST_CASE("gpt: cuts between blocks, and a 2-stage split chained equals the whole model") {
  const YAML::Node spec = small_gpt(false);
  const std::vector<std::string> points = model_cut_points(spec, kInput);
  for (const char* block : {"transformer.h.1.ln_1", "transformer.ln_f", "transformer.wpe"})
    CHECK(std::find(points.begin(), points.end(), block) != points.end());
  // Inside a block the residual stream and the branch both cross.
  CHECK(std::find(points.begin(), points.end(), "transformer.h.0.attn.c_proj") == points.end());
  // Tied, the same cuts; a planner's are between blocks only.
  CHECK(model_cut_points(small_gpt(true), kInput) == points);
  CHECK(model_stage_boundaries(spec, kInput) == std::vector<std::string>{"transformer.h.1.ln_1"});
  YAML::Node four = small_gpt(true);
  four["n_layer"] = 4;
  CHECK(model_stage_boundaries(four, kInput) == std::vector<std::string>{"transformer.h.1.ln_1",
                                                                         "transformer.h.2.ln_1",
                                                                         "transformer.h.3.ln_1"});
  four["n_layer"] = 1;
  CHECK(model_stage_boundaries(four, kInput).empty());
  // Tied, the first and last stages share the embedding (a planner pairs their steps).
  CHECK(chain_ends_tie_lender(small_gpt(true), kInput) == "transformer.wte");
  CHECK(chain_ends_tied(small_gpt(true), kInput));
  CHECK(chain_ends_tie_lender(spec, kInput).empty());

  auto backend = cpu();
  const auto stages = split_model(spec, kInput, {"transformer.h.1.ln_1"});
  REQUIRE(stages.size() == 2);
  CHECK(stages[0].sample_shape == Shape{kT});
  CHECK(stages[1].sample_shape == Shape{kT, kC});
  auto whole = build_model(*backend, spec, kInput, 9);
  std::vector<std::unique_ptr<Graph>> graphs;
  for (size_t s = 0; s < 2; ++s) {
    std::vector<int64_t> dims{kBatch};
    for (int64_t d : stages[s].sample_shape.dims()) dims.push_back(d);
    graphs.push_back(std::make_unique<Graph>(make_nodes(stages[s].layers, kVocab), Shape(dims)));
    graphs.back()->materialize(*backend, 9, s > 0, stages[s].first_param_stream);
  }
  const Batch batch = random_batch(kBatch, 5);
  whole->forward(batch.ids, batch.labels);
  const Tensor& middle = graphs[0]->forward(batch.ids);
  const Tensor& out = graphs[1]->forward(middle);
  CHECK(to_vector(out) == to_vector(whole->logits()));
  // Backward of the same output gradient through the chain: the stages' gradients laid end to
  // end are the whole model's.
  const Tensor r = random_tensor(whole->graph().output_shape(), 6);
  backend->copy(whole->graph().output_gradient(), r);
  whole->graph().backward();
  backend->copy(graphs[1]->output_gradient(), r);
  graphs[1]->backward();
  backend->copy(graphs[0]->output_gradient(), graphs[1]->input_gradient());
  graphs[0]->backward();
  std::vector<float> chained = to_vector(graphs[0]->gradients());
  const std::vector<float> second = to_vector(graphs[1]->gradients());
  chained.insert(chained.end(), second.begin(), second.end());
  const std::vector<float> expected = to_vector(whole->gradients());
  REQUIRE(chained.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    CHECK(chained[i] == doctest::Approx(expected[i]).epsilon(1e-5).scale(1e-6));
}

TEST_CASE("gpt: a cut between the tied table and head gives the head's stage a copy") {
  const auto stages = split_model(small_gpt(true), kInput, {"transformer.h.1.ln_1"});
  REQUIRE(stages.size() == 2);
  for (const StageSlice& stage : stages) {
    REQUIRE(stage.ties.size() == 1);
    CHECK(stage.ties[0].lender == "transformer.wte");
    CHECK(stage.ties[0].borrower == "lm_head");
    CHECK(stage.ties[0].lender_stage == 0);
    CHECK(stage.ties[0].borrower_stage == 1);
  }
  // The head's entry lost its tie_weight: a [vocab, C] weight of its own.
  const YAML::Node head = stages[1].layers[stages[1].layers.size() - 1];
  CHECK(head["name"].as<std::string>() == "lm_head");
  CHECK(!head["tie_weight"]);
  // The whole model's ranges are unchanged (the copy is on top of the last stage's range).
  CHECK(stages[1].first_parameter + stages[1].parameters ==
        count_parameters(small_gpt(true), kInput));
  // Uncut, nothing changes.
  const auto whole = split_model(small_gpt(true), kInput, {});
  CHECK(whole[0].ties.empty());
  CHECK(whole[0].layers[whole[0].layers.size() - 1]["tie_weight"]);
}

TEST_CASE("gpt errors: widths that do not split into heads, image samples, long sequences") {
  std::string m = what_throws(
      [] { count_parameters(YAML::Load("{name: gpt, n_embd: 30, n_head: 4}"), kInput); });
  CHECK(m.find("model.n_embd") != std::string::npos);
  // A context above the position table: gpt2's 1024, or gpt's model.block_size.
  m = what_throws([] { count_parameters(YAML::Load("{name: gpt2}"), {{2048}, 50257, 1}); });
  CHECK(m.find("dataset.block_size: 2048 tokens of context is above the model's position table "
               "of 1024") != std::string::npos);
  m = what_throws([] {
    count_parameters(YAML::Load("{name: gpt, block_size: 8}"), {{16}, 65, 1});
  });
  CHECK(m.find("model.block_size") != std::string::npos);
  m = what_throws([] { count_parameters(YAML::Load("{name: gpt}"), {{3, 32, 32}, 10, 2}); });
  CHECK(m.find("language model") != std::string::npos);
  // An image model on token sequences is refused the other way round.
  m = what_throws([] { count_parameters(YAML::Load("{name: lenet}"), kInput); });
  CHECK(m.find("[channels, height, width]") != std::string::npos);
  std::vector<std::string> problems;
  check_model_spec(YAML::Load("{name: gpt, n_layer: 0, tie_weights: maybe}"), problems);
  CHECK(problems.size() == 2);
}
