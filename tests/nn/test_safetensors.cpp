// The safetensors file (nn/safetensors.h) and a model's named weights (nn/model_weights.h):
// every zoo model's weights go to a file and back into another model bit for bit, the header is
// the format's JSON, and damaged or foreign files are InputErrors that say what is wrong.
#include <algorithm>  // copy_n
#include <cstring>    // memcpy
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "helpers.h"
#include "nn/model_weights.h"
#include "nn/safetensors.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// A file's bytes from its header text and data section, as a foreign writer would lay them.
std::string file_of(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t length = header.size();
  std::memcpy(out.data(), &length, 8);
  return out + header + data;
}

std::string floats(std::initializer_list<float> values) {
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.begin(), bytes.size());
  return bytes;
}

// The InputError's message of decoding `bytes` (fails the test when it decodes).
std::string decode_error(const std::string& bytes) {
  try {
    decode_safetensors(bytes, "w.safetensors");
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("decoded without an error");
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a hand-written safetensors file decodes to its tensors") {
  // Two tensors, the second first in the header: the data order decides the result's order.
  const std::string header = R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]},)"
                             R"("a":{"dtype":"F32","shape":[1,3],"data_offsets":[0,12]},)"
                             R"("__metadata__":{"format":"pt"}})";
  TensorMetadata metadata;
  const NamedTensors t =
      decode_safetensors(file_of(header, floats({1, 2, 3, -4.5f, 0.25f})), "f", &metadata);
  REQUIRE(t.size() == 2);
  CHECK(t[0].name == "a");
  CHECK(t[0].shape == Shape{1, 3});
  CHECK(t[0].values == std::vector<float>{1, 2, 3});
  CHECK(t[1].name == "b");
  CHECK(t[1].values == std::vector<float>{-4.5f, 0.25f});
  CHECK(metadata.at("format") == "pt");
}

TEST_CASE("the encoding is the format's: length, JSON header in order, padding, raw data") {
  const NamedTensors t{{"w", {2, 2}, {1, 2, 3, 4}}, {"b", {2}, {5, 6}}};
  const std::string bytes = encode_safetensors(t, {{"model", "mlp"}});
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  CHECK(length % 8 == 0);  // padded with spaces: the data starts aligned
  REQUIRE(bytes.size() == 8 + length + 6 * 4);
  const auto header = nlohmann::ordered_json::parse(bytes.substr(8, length));
  CHECK(header["__metadata__"]["model"] == "mlp");
  CHECK(header["w"]["dtype"] == "F32");
  CHECK(header["w"]["shape"] == nlohmann::json::array({2, 2}));
  CHECK(header["w"]["data_offsets"] == nlohmann::json::array({0, 16}));
  CHECK(header["b"]["data_offsets"] == nlohmann::json::array({16, 24}));
  std::vector<std::string> order;
  for (const auto& [key, value] : header.items()) order.push_back(key);
  CHECK(order == std::vector<std::string>{"__metadata__", "w", "b"});
  CHECK(bytes.substr(8 + length) == floats({1, 2, 3, 4, 5, 6}));
}

TEST_CASE("every zoo model's weights go through a file into another model bit for bit") {
  auto backend = cpu(2);
  // Small inputs keep the big models' classifiers small; batch 1 allocates little.
  const std::vector<std::pair<std::string, ModelInput>> cases{
      {"{name: mlp}", {{1, 28, 28}, 10, 1}},
      {"{name: lenet}", {{1, 28, 28}, 10, 1}},
      {"{name: cifar_cnn}", {{3, 32, 32}, 10, 1}},
      {"{name: alexnet}", {{3, 64, 64}, 10, 1}},
      {"{name: vgg16, batch_norm: true}", {{3, 32, 32}, 10, 1}},
      {"{name: resnet18}", {{3, 32, 32}, 10, 1}},
      {"{name: resnet50}", {{3, 32, 32}, 10, 1}},
      {"{name: resnet20}", {{3, 32, 32}, 10, 1}},
      {"{name: gpt, n_layer: 2, n_embd: 32}", {{8}, 65, 1}},
      {"{name: gpt, n_layer: 1, n_embd: 32, tie_weights: false}", {{8}, 65, 1}}};
  // Every zoo model is among the cases (a new one joins this test); gpt2 is gpt at GPT-2's size
  // (85M parameters at any vocabulary): gpt's case covers its layout.
  for (const std::string& name : zoo_names()) {
    if (name == "gpt2") continue;
    bool listed = false;
    for (const auto& c : cases)
      listed |=
          contains(c.first, "name: " + name + "}") || contains(c.first, "name: " + name + ",");
    CHECK_MESSAGE(listed, name);
  }
  for (const auto& [spec, input] : cases) {
    CAPTURE(spec);
    const YAML::Node model = YAML::Load(spec);
    const auto trained = build_model(*backend, model, input, 1);
    // Statistics that differ from their initial constants, so that copying them shows.
    if (trained->buffers().numel() > 0) fill_random(trained->buffers(), 3, 0.5f, 2.0f);
    const NamedTensors weights = model_weights(*trained);
    const std::string bytes = encode_safetensors(weights, {{"model", spec}});

    // The header: the model's slots in order, their shapes, offsets back to back.
    uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);
    const auto header = nlohmann::ordered_json::parse(bytes.substr(8, length));
    const std::vector<WeightSlot> slots = model_weight_slots(model, input);
    REQUIRE(header.size() == slots.size() + 1);  // and __metadata__
    uint64_t offset = 0;
    for (const WeightSlot& s : slots) {
      CAPTURE(s.name);
      REQUIRE(header.contains(s.name));
      CHECK(header[s.name]["shape"].get<std::vector<int64_t>>() == s.shape.dims());
      CHECK(header[s.name]["data_offsets"][0].get<uint64_t>() == offset);
      offset += static_cast<uint64_t>(s.shape.numel()) * 4;
      CHECK(header[s.name]["data_offsets"][1].get<uint64_t>() == offset);
    }
    CHECK(bytes.size() == 8 + length + offset);

    // Into a model initialised otherwise: its flat buffers become the first one's exactly.
    const auto loaded = build_model(*backend, model, input, 2);
    load_model_weights(*loaded, decode_safetensors(bytes, "file"), "file");
    CHECK(to_vector(loaded->parameters()) == to_vector(trained->parameters()));
    CHECK(to_vector(loaded->buffers()) == to_vector(trained->buffers()));
  }
}

TEST_CASE("weights are named as PyTorch names them, BatchNorm statistics included") {
  const std::vector<WeightSlot> slots =
      model_weight_slots(YAML::Load("{name: resnet20}"), {{3, 32, 32}, 10, 1});
  std::vector<std::string> names;
  for (const WeightSlot& s : slots) names.push_back(s.name);
  const std::vector<std::string> first{"conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                       "bn1.running_var"};
  REQUIRE(names.size() > first.size());
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 5) == first);
  CHECK(slots[3].buffer);
  CHECK(!slots[1].buffer);
  CHECK(names.back() == "fc.bias");
  CHECK(slots[0].shape == Shape{16, 3, 3, 3});  // [out, in, kh, kw]
  const std::vector<WeightSlot> mlp =
      model_weight_slots(YAML::Load("{name: mlp, hidden: [7]}"), {{1, 2, 3}, 4, 1});
  REQUIRE(mlp.size() == 4);
  CHECK(mlp[0].name == "fc1.weight");
  CHECK(mlp[0].shape == Shape{7, 6});  // [out, in], as torch.nn.Linear
}

TEST_CASE("a file that is not this model's weights names the first tensor at fault") {
  auto backend = cpu();
  const YAML::Node spec = YAML::Load("{name: mlp, hidden: [5]}");
  const ModelInput input{{1, 2, 2}, 3, 1};
  const auto model = build_model(*backend, spec, input, 1);
  const NamedTensors good = model_weights(*model);
  auto error_of = [&](const NamedTensors& tensors) {
    try {
      load_model_weights(*model, tensors, "w.safetensors");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    FAIL("loaded without an error");
    return std::string();
  };
  NamedTensors renamed = good;
  renamed[2].name = "head.weight";
  const std::string missing = error_of(renamed);
  CHECK(contains(missing, "w.safetensors: has no tensor 'fc2.weight' (shape [3, 5])"));
  CHECK(contains(missing, "it has 'head.weight', which the model does not have"));
  NamedTensors reshaped = good;
  reshaped[0].shape = Shape{4, 5};
  CHECK(
      contains(error_of(reshaped), "tensor 'fc1.weight' has shape [4, 5], the model's is [5, 4]"));
  NamedTensors extra = good;
  extra.push_back({"fc3.bias", {1}, {0}});
  CHECK(contains(error_of(extra), "tensor 'fc3.bias' is not a weight of the model"));
  NamedTensors fewer(good.begin(), good.end() - 1);
  CHECK(contains(error_of(fewer), "has no tensor 'fc2.bias'"));
  // A failed load leaves the model as it was.
  CHECK(to_vector(model->parameters()) ==
        to_vector(build_model(*backend, spec, input, 1)->parameters()));
}

TEST_CASE("damaged and foreign files are InputErrors naming the file and the fault") {
  const std::string good = encode_safetensors({{"w", {2}, {1, 2}}, {"b", {1}, {3}}});
  CHECK_NOTHROW(decode_safetensors(good, "w.safetensors"));

  SUBCASE("truncated") {
    CHECK(contains(decode_error(good.substr(0, 5)), "w.safetensors: not a safetensors file"));
    CHECK(contains(decode_error(good.substr(0, good.size() - 4)), "outside the data section"));
    CHECK(contains(decode_error(good.substr(0, 20)), "does not fit"));
  }
  SUBCASE("a header length beyond the file, or absurd") {
    std::string bytes = good;
    const uint64_t huge = uint64_t{1} << 40;
    std::memcpy(bytes.data(), &huge, 8);
    CHECK(contains(decode_error(bytes), "header length 1099511627776 does not fit"));
    CHECK(contains(decode_error(std::string(8, '\0')), "header length 0 does not fit"));
    CHECK(contains(decode_error("some text that is no safetensors file"), "does not fit"));
  }
  SUBCASE("a header that is not JSON, or not a map") {
    CHECK(contains(decode_error(file_of("{\"w\": ", "")), "header is not valid JSON"));
    CHECK(contains(decode_error(file_of("[1, 2]", "")), "header is not a JSON map"));
  }
  SUBCASE("another dtype") {
    const std::string bytes =
        file_of(R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", floats({0}));
    CHECK(contains(decode_error(bytes), "tensor 'w' has dtype \"F16\"; dtrain reads F32 only"));
  }
  SUBCASE("offsets that overlap, leave a gap or disagree with the shape") {
    const std::string overlap = file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                        floats({1, 2, 3}));
    CHECK(contains(decode_error(overlap), "tensors 'a' and 'b' overlap"));
    const std::string gap = file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                    floats({1, 2, 3}));
    CHECK(contains(decode_error(gap), "a gap of 4 bytes in the data section before 'b'"));
    const std::string tail =
        file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", floats({1, 2}));
    CHECK(contains(decode_error(tail), "4 bytes of the data section belong to no tensor"));
    const std::string size =
        file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", floats({1, 2, 3}));
    CHECK(contains(decode_error(size), "has shape [3] (12 bytes) but data_offsets [0, 8] hold 8"));
    const std::string negative =
        file_of(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", floats({1}));
    CHECK(contains(decode_error(negative), "must be a non-negative integer, got -1"));
    const std::string huge =
        file_of(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
                floats({1}));
    CHECK(contains(decode_error(huge), "larger than the file's data"));
  }
}

TEST_CASE("files are written whole and read back; a missing file is an InputError") {
  const std::string dir = std::filesystem::temp_directory_path() / "dtrain_test_safetensors";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.safetensors";
  const NamedTensors t{{"x", {3}, {1, 2, 3}}};
  write_safetensors(path, t, {{"model", "m"}});
  CHECK(!std::filesystem::exists(path + ".partial"));
  TensorMetadata metadata;
  const NamedTensors back = read_safetensors(path, &metadata);
  REQUIRE(back.size() == 1);
  CHECK(back[0].values == t[0].values);
  CHECK(metadata.at("model") == "m");
  CHECK_THROWS_AS(read_safetensors(dir + "/none.safetensors"), InputError);
  CHECK_THROWS_WITH_AS(read_safetensors(dir), (dir + ": no such file").c_str(), InputError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("tensors read part by part make the same file as tensors held whole") {
  // One tensor longer than a part (its last part short), one of a single element.
  NamedTensors held{{"big", Shape{kTensorSourcePart + 5}, {}}, {"one", Shape{1}, {-2.5f}}};
  held[0].values.resize(static_cast<size_t>(kTensorSourcePart + 5));
  for (size_t i = 0; i < held[0].values.size(); ++i)
    held[0].values[i] = static_cast<float>(i) * 0.5f;
  std::vector<std::pair<int64_t, int64_t>> asked;  // (begin, count) of every read
  std::vector<TensorSource> sources;
  for (const NamedTensor& t : held)
    sources.push_back({t.name, t.shape, [&t, &asked](float* dst, int64_t begin, int64_t count) {
                         asked.emplace_back(begin, count);
                         std::copy_n(t.values.begin() + begin, count, dst);
                       }});
  const auto dir = std::filesystem::temp_directory_path() / "dtrain_test_sources";
  std::filesystem::create_directories(dir);
  const TensorMetadata metadata{{"format", "pt"}};
  write_safetensors((dir / "held.safetensors").string(), held, metadata);
  write_safetensors((dir / "parts.safetensors").string(), sources, metadata);
  auto bytes = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  CHECK(bytes(dir / "parts.safetensors") == bytes(dir / "held.safetensors"));
  const std::vector<std::pair<int64_t, int64_t>> expected{
      {0, kTensorSourcePart}, {kTensorSourcePart, 5}, {0, 1}};
  CHECK(asked == expected);
  std::filesystem::remove_all(dir);
}
