#include "plan/layer_profile.h"

#include <fmt/format.h>

#include <array>
#include <charconv>  // from_chars: strict, locale-free numbers
#include <cmath>     // isfinite
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"

namespace dtrain {

namespace {

constexpr std::array<const char*, 5> kColumns = {"layer", "forward_ms", "backward_ms",
                                                 "activation_bytes", "parameter_bytes"};

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, ',')) {
    while (!field.empty() && (field.back() == ' ' || field.back() == '\r')) field.pop_back();
    while (!field.empty() && field.front() == ' ') field.erase(0, 1);
    fields.push_back(field);
  }
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

}  // namespace

std::string layer_profile_csv(const std::vector<LayerProfile>& layers) {
  std::string csv = fmt::format("{}\n", fmt::join(kColumns, ","));
  for (const LayerProfile& l : layers)
    csv += fmt::format("{},{:.6f},{:.6f},{:.0f},{:.0f}\n", l.name, l.forward_s * 1e3,
                       l.backward_s * 1e3, l.activation_bytes, l.parameter_bytes);
  return csv;
}

std::vector<LayerProfile> parse_layer_profile(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header;
  int line_no = 0;
  while (header.empty() && std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") != std::string::npos) header = split_fields(line);
  }
  DTRAIN_INPUT_CHECK(!header.empty())
      << path << ": empty layer profile; expected the header "
      << fmt::format("{}", fmt::join(kColumns, ","))
      << " and a row per layer (dtrain plan --config X --write-profile " << path << " writes one)";
  std::array<size_t, kColumns.size()> at{};
  for (size_t c = 0; c < kColumns.size(); ++c) {
    size_t i = 0;
    while (i < header.size() && header[i] != kColumns[c]) ++i;
    DTRAIN_INPUT_CHECK(i < header.size())
        << path << ": the header lacks the column '" << kColumns[c] << "' (expected "
        << fmt::format("{}", fmt::join(kColumns, ",")) << ")";
    at[c] = i;
  }
  std::vector<LayerProfile> layers;
  std::set<std::string> names;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::vector<std::string> fields = split_fields(line);
    DTRAIN_INPUT_CHECK(fields.size() >= header.size())
        << path << ": line " << line_no << ": " << fields.size() << " field(s), the header has "
        << header.size();
    LayerProfile l;
    l.name = fields[at[0]];
    DTRAIN_INPUT_CHECK(!l.name.empty()) << path << ": line " << line_no << ": no layer name";
    DTRAIN_INPUT_CHECK(names.insert(l.name).second)
        << path << ": line " << line_no << ": layer '" << l.name << "' appears twice";
    double* values[] = {&l.forward_s, &l.backward_s, &l.activation_bytes, &l.parameter_bytes};
    for (size_t c = 1; c < kColumns.size(); ++c) {
      const std::string& f = fields[at[c]];
      double v = 0;
      auto [ptr, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
      DTRAIN_INPUT_CHECK(!f.empty() && ec == std::errc() && ptr == f.data() + f.size() &&
                         std::isfinite(v))
          << path << ": line " << line_no << " (layer " << l.name << "): " << kColumns[c] << ": '"
          << f << "' is not a number";
      DTRAIN_INPUT_CHECK(v >= 0) << path << ": line " << line_no << " (layer " << l.name
                                 << "): " << kColumns[c] << ": " << f << " is negative";
      *values[c - 1] = v;
    }
    l.forward_s /= 1e3;
    l.backward_s /= 1e3;
    layers.push_back(l);
  }
  DTRAIN_INPUT_CHECK(!layers.empty())
      << path << ": the layer profile has a header but no layer row";
  return layers;
}

std::vector<LayerProfile> read_layer_profile(const std::string& path) {
  std::ifstream in(path);
  DTRAIN_INPUT_CHECK(in) << path << ": cannot read the layer profile (--profile)";
  std::ostringstream text;
  text << in.rdbuf();
  return parse_layer_profile(text.str(), path);
}

}  // namespace dtrain
