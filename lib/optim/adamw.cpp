#include "optim/adamw.h"

#include <algorithm>  // max, min, sort

#include "core/error.h"

namespace dtrain {

namespace {

// `ranges` sorted, the gaps filled with decayed runs, neighbours of equal decay merged: the
// whole buffer [0, size) in as few backend calls as the model's layout allows.
std::vector<DecayRange> cover(std::vector<DecayRange> ranges, int64_t size) {
  std::sort(ranges.begin(), ranges.end(),
            [](const DecayRange& a, const DecayRange& b) { return a.offset < b.offset; });
  std::vector<DecayRange> runs;
  auto append = [&runs](int64_t offset, int64_t count, bool decay) {
    if (count <= 0) return;
    if (!runs.empty() && runs.back().decay == decay &&
        runs.back().offset + runs.back().count == offset)
      runs.back().count += count;
    else
      runs.push_back({offset, count, decay});
  };
  int64_t at = 0;
  for (const DecayRange& r : ranges) {
    if (r.count == 0 || (r.offset + r.count <= at && r.offset < at)) continue;  // a tied weight's
    DTRAIN_CHECK(r.offset >= at && r.count >= 0 && r.offset + r.count <= size)
        << "AdamW: decay range [" << r.offset << ", " << r.offset + r.count
        << ") overlaps another or lies outside the " << size << " parameters";
    append(at, r.offset - at, true);
    append(r.offset, r.count, r.decay);
    at = r.offset + r.count;
  }
  append(at, size - at, true);
  return runs;
}

// Calls body(from, shape, hyper) for each run of equal decay within [begin, end): the backend's
// AdamW ops take one weight decay a call. `hyper` carries lr and the step count t.
template <typename Body>
void for_each_decay_run(const std::vector<DecayRange>& runs, const AdamWOptions& o, float lr,
                        int64_t t, int64_t begin, int64_t end, Body body) {
  AdamWHyper h{lr, o.beta1, o.beta2, o.eps, 0.0f, t};
  for (const DecayRange& r : runs) {
    const int64_t from = std::max(begin, r.offset), to = std::min(end, r.offset + r.count);
    if (to <= from) continue;
    h.weight_decay = r.decay ? o.weight_decay : 0.0f;
    body(from, Shape{to - from}, h);
  }
}

}  // namespace

AdamW::AdamW(Backend& backend, Tensor parameters, Tensor gradients, const AdamWOptions& options,
             std::vector<DecayRange> ranges, int64_t trainable_offset)
    : Optimizer(std::move(parameters), std::move(gradients), trainable_offset),
      backend_(backend),
      options_(options),
      ranges_(cover(std::move(ranges), parameters_.numel())),
      m_(backend.zeros(parameters_.shape())),
      v_(backend.zeros(parameters_.shape())) {}

void AdamW::step(float lr, const Tensor& parameters, const Tensor& gradients) {
  begin_step();
  step_range(lr, parameters, gradients, 0, parameters_.numel());
}

void AdamW::step_range(float lr, const Tensor& parameters, const Tensor& gradients, int64_t offset,
                       int64_t count) {
  const auto [begin, end] =
      clipped_range(parameters, gradients, offset, count, "AdamW::step_range");
  if (end <= begin) return;
  DTRAIN_CHECK(step_ >= 1) << "AdamW::step_range before begin_step";
  for_each_decay_run(ranges_, options_, lr, step_, begin, end,
                     [&](int64_t from, const Shape& s, const AdamWHyper& h) {
                       backend_.adamw_step(parameters.slice(from, s), gradients.slice(from, s),
                                           m_.slice(from, s), v_.slice(from, s), h);
                     });
}

void AdamW::step_range_delta(float lr, const Tensor& parameters, const Tensor& gradients,
                             const Tensor& delta, int64_t offset, int64_t count) {
  DTRAIN_CHECK(delta.numel() == parameters_.numel()) << "AdamW::step_range_delta: another size";
  const auto [begin, end] =
      clipped_range(parameters, gradients, offset, count, "AdamW::step_range_delta");
  if (end <= begin) return;
  const Shape s{end - begin};
  backend_.copy(delta.slice(begin, s), parameters.slice(begin, s));
  step_range(lr, parameters, gradients, offset, count);
  backend_.axpby(1.0f, parameters.slice(begin, s), -1.0f, delta.slice(begin, s));
}

void AdamW::predict_range(float lr, const Tensor& out, const Tensor& parameters,
                          const Tensor& gradients, int64_t offset, int64_t count) const {
  DTRAIN_CHECK(out.numel() == parameters_.numel()) << "AdamW::predict_range into another size";
  const auto [begin, end] =
      clipped_range(parameters, gradients, offset, count, "AdamW::predict_range");
  for_each_decay_run(ranges_, options_, lr, step_ + 1, begin, end,
                     [&](int64_t from, const Shape& s, const AdamWHyper& h) {
                       backend_.adamw_predict(out.slice(from, s), parameters.slice(from, s),
                                              gradients.slice(from, s), m_.slice(from, s),
                                              v_.slice(from, s), h);
                     });
}

void AdamW::step_predict_range(float lr, const Tensor& parameters, const Tensor& gradients,
                               const Tensor& ghat, const Tensor& out, int64_t offset,
                               int64_t count) {
  DTRAIN_CHECK(out.numel() == parameters_.numel() && ghat.numel() == parameters_.numel())
      << "AdamW::step_predict_range with buffers of another size";
  const auto [begin, end] =
      clipped_range(parameters, gradients, offset, count, "AdamW::step_predict_range");
  if (end <= begin) return;
  DTRAIN_CHECK(step_ >= 1) << "AdamW::step_predict_range before begin_step";
  for_each_decay_run(ranges_, options_, lr, step_, begin, end,
                     [&](int64_t from, const Shape& s, const AdamWHyper& h) {
                       backend_.adamw_step_predict(
                           parameters.slice(from, s), gradients.slice(from, s), m_.slice(from, s),
                           v_.slice(from, s), ghat.slice(from, s), out.slice(from, s), h);
                     });
}

double AdamW::step_range_dot(float lr, const Tensor& parameters, const Tensor& gradients,
                             float alpha, const Tensor& other, const Tensor& scratch,
                             int64_t offset, int64_t count) {
  DTRAIN_CHECK(other.numel() == parameters_.numel() && scratch.numel() == parameters_.numel())
      << "AdamW::step_range_dot with buffers of another size";
  const auto [begin, end] =
      clipped_range(parameters, gradients, offset, count, "AdamW::step_range_dot");
  if (end <= begin) return 0;
  DTRAIN_CHECK(step_ >= 1) << "AdamW::step_range_dot before begin_step";
  double sum = 0;  // the runs' sums in layout order: fixed by the layout
  for_each_decay_run(ranges_, options_, lr, step_, begin, end,
                     [&](int64_t from, const Shape& s, const AdamWHyper& h) {
                       sum += backend_.adamw_step_dot(
                           parameters.slice(from, s), gradients.slice(from, s), m_.slice(from, s),
                           v_.slice(from, s), alpha, other.slice(from, s), scratch.slice(from, s),
                           h);
                     });
  return sum;
}

void AdamW::predict_range_sum(float lr, const Tensor& out, const Tensor& parameters,
                              const GradientSum& ghat, int64_t offset, int64_t count) const {
  DTRAIN_CHECK(out.numel() == parameters_.numel() && ghat.x.numel() == parameters_.numel() &&
               ghat.y.numel() == parameters_.numel())
      << "AdamW::predict_range_sum with buffers of another size";
  const auto [begin, end] =
      clipped_range(parameters, ghat.y, offset, count, "AdamW::predict_range_sum");
  for_each_decay_run(ranges_, options_, lr, step_ + 1, begin, end,
                     [&](int64_t from, const Shape& s, const AdamWHyper& h) {
                       backend_.adamw_predict_sum(out.slice(from, s), parameters.slice(from, s),
                                                  ghat.slice(from, s), m_.slice(from, s),
                                                  v_.slice(from, s), h);
                     });
}

std::vector<std::pair<std::string, Tensor>> AdamW::state_buffers() const {
  return {{"m", m_}, {"v", v_}};
}

std::vector<std::pair<std::string, int64_t>> AdamW::counters() const {
  return {{"step", step_}};
}

void AdamW::load_counter(const std::string& name, int64_t value) {
  if (name != "step") return Optimizer::load_counter(name, value);
  DTRAIN_CHECK(value >= 0) << "AdamW: a step count of " << value;
  step_ = value;
}

}  // namespace dtrain
