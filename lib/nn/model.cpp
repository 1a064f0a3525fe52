#include "nn/model.h"

#include <fmt/format.h>  // the cut points in messages
#include <fmt/ranges.h>  // fmt::join

#include <algorithm>  // find
#include <map>        // the dtype of each cut

#include "core/error.h"
#include "nn/graph.h"
#include "nn/layers/softmax_xent.h"
#include "nn/spec.h"

namespace dtrain {

int64_t loss_positions(const Shape& out, const std::string& name, const ModelInput& input) {
  const bool classes = out.rank() == 2 && out[1] == input.classes;
  const bool sequence = out.rank() == 3 && out[2] == input.classes;
  DTRAIN_INPUT_CHECK(classes || sequence)
      << "model: the last layer '" << name << "' gives " << out.str()
      << " but the loss needs [batch, classes] = [" << input.batch << ", " << input.classes
      << "] or, per position, [batch, positions, classes] (the dataset has " << input.classes
      << " classes)";
  return sequence ? out[1] : 1;
}

Model::Model(std::unique_ptr<Graph> graph, const ModelInput& input) : graph_(std::move(graph)) {
  const int64_t positions = loss_positions(graph_->output_shape(), graph_->output_name(), input);
  // The softmax kept in the logits' gradient (computed in place by the loss's backward).
  loss_ = std::make_unique<SoftmaxCrossEntropy>(graph_->backend(), input.batch, input.classes,
                                                positions, graph_->output_gradient());
}

Model::~Model() = default;

int64_t Model::num_parameters() const {
  return graph_->num_parameters();
}
const Tensor& Model::parameters() const {
  return graph_->parameters();
}
const Tensor& Model::gradients() const {
  return graph_->gradients();
}
void Model::set_gradients(const Tensor& flat) {
  graph_->set_gradients(flat);
}
void Model::set_parameters(const Tensor& flat) {
  graph_->set_parameters(flat);
}
void Model::set_forward_hook(const std::string& name, std::function<void()> hook) {
  graph_->set_forward_hook(name, std::move(hook));
}
const Tensor& Model::buffers() const {
  return graph_->buffers();
}
const std::vector<LayerRange>& Model::layer_ranges() const {
  return graph_->layer_ranges();
}
std::vector<WeightSlot> Model::weight_slots() const {
  return graph_->weight_slots();
}
void Model::set_training(bool training) {
  graph_->set_training(training);
}
bool Model::training() const {
  return graph_->training();
}
void Model::set_dropout_seed(uint64_t seed) {
  graph_->set_dropout_seed(seed);
}

void Model::forward(const Tensor& images, const Tensor& labels) {
  logits_ = &graph_->forward(images);
  loss_->forward(*logits_, labels);
}

void Model::backward(float grad_scale, const std::function<void(int64_t)>& on_ready) {
  DTRAIN_CHECK(logits_ != nullptr) << "backward before forward";
  loss_->backward(graph_->output_gradient(), grad_scale);
  graph_->backward(on_ready);
}

LossStats Model::last_stats() {
  const int64_t count = loss_->last_batch();  // before stats() lets the held forwards go
  auto [loss, correct] = loss_->stats();
  return {loss, correct, count};
}

void Model::hold_stats() {
  loss_->hold_stats();
}

void Model::freeze_first(int layers) {
  graph_->freeze_first(layers);
}
int64_t Model::trainable_offset() const {
  return graph_->trainable_offset();
}
int64_t Model::forward_flops() const {
  return graph_->forward_flops();
}
std::string Model::summary() const {
  return graph_->summary();
}
Backend& Model::backend() {
  return graph_->backend();
}

const Tensor& Model::logits() const {
  DTRAIN_CHECK(logits_ != nullptr) << "logits before forward";
  return *logits_;
}

// ---- building ------------------------------------------------------------------------------

namespace {

// Checks the spec (again: cheap, and build_model may be handed an unchecked one) and returns
// the structural graph for this input.
std::unique_ptr<Graph> make_graph(const YAML::Node& model, const ModelInput& input) {
  DTRAIN_INPUT_CHECK(input.batch > 0) << "model: batch size must be positive, got " << input.batch;
  DTRAIN_INPUT_CHECK(input.classes > 0)
      << "model: class count must be positive, got " << input.classes;
  DTRAIN_INPUT_CHECK(input.sample_shape.rank() >= 1 && input.sample_shape.numel() > 0)
      << "model: bad sample shape " << input.sample_shape.str();
  const YAML::Node spec = expand_model_spec(model, input);
  std::vector<int64_t> dims{input.batch};
  for (int64_t d : input.sample_shape.dims()) dims.push_back(d);
  auto graph = std::make_unique<Graph>(make_nodes(spec["layers"], input.classes), Shape(dims));
  loss_positions(graph->output_shape(), graph->output_name(), input);
  graph->use_precision(input.precision);
  const bool recompute = spec["recompute"] && spec["recompute"].as<std::string>() == "blocks";
  // The spec reader checked this for the list it was given; a list a caller edited may lack them.
  DTRAIN_INPUT_CHECK(!recompute || graph->num_blocks() > 0)
      << "model.recompute: blocks, but no layer of the model has a `block`";
  graph->recompute_blocks(recompute);
  return graph;
}

}  // namespace

YAML::Node expand_model_spec(const YAML::Node& model, const ModelInput& input) {
  std::vector<std::string> problems;
  YAML::Node checked = check_model_spec(model, problems);
  throw_if_problems(problems);
  if (checked["layers"]) return checked;
  // A zoo model: its list must pass the same checks (an error here is a zoo bug).
  YAML::Node spec = zoo_layers(checked, input);
  YAML::Node out(YAML::NodeType::Map);
  out["layers"] = check_layer_list(spec["layers"], problems);
  DTRAIN_CHECK(problems.empty()) << "zoo model '" << checked["name"].as<std::string>()
                                 << "' is malformed: " << problems.front();
  out["recompute"] = checked["recompute"];
  // Where a planner may cut it (model_stage_boundaries), when the zoo says.
  if (spec["stage_boundaries"]) out["stage_boundaries"] = spec["stage_boundaries"];
  return out;
}

std::unique_ptr<Model> build_model(Backend& backend, const YAML::Node& model,
                                   const ModelInput& input, uint64_t seed) {
  std::unique_ptr<Graph> graph = make_graph(model, input);
  graph->materialize(backend, seed);
  return std::make_unique<Model>(std::move(graph), input);
}

int64_t count_parameters(const YAML::Node& model, const ModelInput& input) {
  return make_graph(model, input)->num_parameters();
}

int64_t estimate_activation_bytes(const YAML::Node& model, const ModelInput& input,
                                  bool recompute) {
  // The graph as build_model makes it (input.precision), planned but not materialized.
  return make_graph(model, input)->estimate_activation_bytes(recompute);
}

std::vector<WeightSlot> model_weight_slots(const YAML::Node& model, const ModelInput& input) {
  return make_graph(model, input)->weight_slots();
}

std::vector<WeightRanges> model_weight_reads(const YAML::Node& model, const ModelInput& input) {
  return make_graph(model, input)->forward_weight_ranges();
}

std::string describe_model(const YAML::Node& model, const ModelInput& input) {
  return make_graph(model, input)->summary();
}

}  // namespace dtrain

namespace dtrain {

std::vector<std::string> model_cut_points(const YAML::Node& model, const ModelInput& input) {
  return make_graph(model, input)->cut_points();
}

std::string chain_ends_tie_lender(const YAML::Node& model, const ModelInput& input) {
  const std::vector<StageSlice> pieces =
      split_model(model, input, model_stage_boundaries(model, input));
  const int last = static_cast<int>(pieces.size()) - 1;
  for (const StageTie& t : pieces.front().ties)
    if (t.lender_stage == 0 && t.borrower_stage == last) return t.lender;
  return "";
}

bool chain_ends_tied(const YAML::Node& model, const ModelInput& input) {
  return !chain_ends_tie_lender(model, input).empty();
}

std::vector<std::string> model_stage_boundaries(const YAML::Node& model, const ModelInput& input) {
  std::vector<std::string> points = model_cut_points(model, input);
  const YAML::Node boundaries = expand_model_spec(model, input)["stage_boundaries"];
  if (!boundaries) return points;
  std::vector<std::string> named;
  for (const YAML::Node& b : boundaries) named.push_back(b.as<std::string>());
  std::erase_if(points, [&](const std::string& p) {
    return std::find(named.begin(), named.end(), p) == named.end();
  });
  return points;
}

namespace {

// The ties whose lender and borrower land in different stages: the borrower's entry loses its
// `tie_weight` (a weight of its own: the copy) and both stages learn of the tie.
void separate_ties(const std::vector<std::string>& names, const std::vector<size_t>& bounds,
                   std::vector<StageSlice>& stages) {
  auto stage_of = [&](const std::string& layer) {
    const auto i =
        static_cast<size_t>(std::find(names.begin(), names.end(), layer) - names.begin());
    return static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), i) - bounds.begin()) - 1;
  };
  for (size_t s = 0; s < stages.size(); ++s)
    for (YAML::Node entry : stages[s].layers) {
      if (!entry["tie_weight"]) continue;
      StageTie tie{entry["tie_weight"].as<std::string>(), entry["name"].as<std::string>(), 0,
                   static_cast<int>(s)};
      tie.lender_stage = stage_of(tie.lender);
      if (tie.lender_stage == tie.borrower_stage) continue;
      entry.remove("tie_weight");
      stages[s].ties.push_back(tie);
      stages[static_cast<size_t>(tie.lender_stage)].ties.push_back(tie);
    }
}

}  // namespace

std::vector<StageSlice> split_model(const YAML::Node& model, const ModelInput& input,
                                    const std::vector<std::string>& starts,
                                    const std::string& key) {
  const std::unique_ptr<Graph> graph = make_graph(model, input);
  const YAML::Node layers = expand_model_spec(model, input)["layers"];
  std::vector<std::string> names;
  for (const YAML::Node& e : layers) names.push_back(e["name"].as<std::string>());
  auto index_of = [&](const std::string& name) {
    return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  // Stage boundaries as indices into the layer list, checked one by one.
  std::vector<size_t> bounds{0};
  std::vector<Graph::Cut> cuts{Graph::Cut{}};
  for (size_t k = 0; k < starts.size(); ++k) {
    const std::string at = key + "[" + std::to_string(k) + "]";
    const size_t i = index_of(starts[k]);
    DTRAIN_INPUT_CHECK(i < names.size())
        << at << ": '" << starts[k] << "' is not a layer of the model (its cut points: "
        << fmt::format("{}", fmt::join(graph->cut_points(), ", ")) << ")";
    DTRAIN_INPUT_CHECK(i > bounds.back())
        << at << ": stage " << k + 1 << " would be empty ('" << starts[k]
        << (i == 0 ? "' is the first layer" : "' does not come after the previous start") << ")";
    const Graph::Cut cut = graph->cut_before(starts[k]);
    DTRAIN_INPUT_CHECK(cut.fused_into.empty())
        << at << ": cannot cut before '" << starts[k] << "': it is a ReLU fused into '"
        << cut.fused_into << "' (cut after it)";
    DTRAIN_INPUT_CHECK(cut.crossing.size() == 1)
        << at << ": cannot cut before '" << starts[k] << "': " << cut.crossing.size()
        << " tensors would cross (" << fmt::format("{}", fmt::join(cut.crossing, ", "))
        << "); a cut must leave exactly one, e.g. at a block's output";
    bounds.push_back(i);
    cuts.push_back(cut);
  }
  bounds.push_back(names.size());
  const std::map<std::string, DType> dtypes = graph->dtypes_under(input.precision);
  std::vector<StageSlice> stages;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    StageSlice stage;
    const size_t begin = bounds[s], end = bounds[s + 1];
    stage.first_layer = names[begin];
    stage.last_layer = names[end - 1];
    if (s == 0) {
      stage.sample_shape = input.sample_shape;
    } else {
      const Shape& crossing = cuts[s].shape;  // [batch, ...]
      stage.sample_shape =
          Shape(std::vector<int64_t>(crossing.dims().begin() + 1, crossing.dims().end()));
    }
    if (s > 0) stage.input_dtype = dtypes.at(cuts[s].crossing[0]);
    stage.output_dtype = s + 2 < bounds.size() ? dtypes.at(cuts[s + 1].crossing[0]) : DType::f32;
    stage.first_parameter = cuts[s].parameters_before;
    stage.first_param_stream = cuts[s].param_streams_before;
    stage.parameters =
        (s + 2 < bounds.size() ? cuts[s + 1].parameters_before : graph->num_parameters()) -
        stage.first_parameter;
    // The stage's entries with every input named: what was made before the stage is "input".
    stage.layers = YAML::Node(YAML::NodeType::Sequence);
    for (size_t i = begin; i < end; ++i) {
      YAML::Node entry = YAML::Clone(layers[i]);
      YAML::Node inputs(YAML::NodeType::Sequence);
      std::vector<std::string> read;
      if (layers[i]["inputs"])
        for (const YAML::Node& in : layers[i]["inputs"]) read.push_back(in.as<std::string>());
      else
        read.push_back(i == 0 ? std::string(Graph::kInputName) : names[i - 1]);
      for (const std::string& r : read) {
        const size_t p = index_of(r);
        inputs.push_back(p < begin || p >= names.size() ? std::string(Graph::kInputName) : r);
      }
      inputs.SetStyle(YAML::EmitterStyle::Flow);
      entry["inputs"] = inputs;
      stage.layers.push_back(entry);
    }
    stages.push_back(std::move(stage));
  }
  separate_ties(names, bounds, stages);
  return stages;
}

}  // namespace dtrain
