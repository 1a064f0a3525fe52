// The typed value readers and Section (see config_reader.h).
#include <fmt/format.h>  // fmt::format: messages

#include <algorithm>  // std::find
#include <charconv>   // std::from_chars: strict, locale-free number parsing
#include <climits>    // INT_MIN, INT_MAX
#include <cmath>      // std::isfinite

#include "config/reader.h"

namespace dtrain::config {

namespace {

YAML::Node undefined_node() {
  return YAML::Node(YAML::NodeType::Undefined);
}

bool scalar_text(Reader& r, const std::string& path, const YAML::Node& node, const char* what,
                 std::string& out) {
  if (!node.IsScalar()) {
    r.add(path, fmt::format("expected {}, got {}", what, describe_node(node)), node);
    return false;
  }
  out = node.Scalar();
  return true;
}

std::string_view without_plus(std::string_view text) {
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  return text;
}

bool check_bounds(Reader& r, const std::string& path, const YAML::Node& node, Bounds bounds,
                  double value, const std::string& text) {
  if (bounds.contains(value)) return true;
  r.add(path, fmt::format("must be {}, got {}", bounds.describe(), text), node);
  return false;
}

}  // namespace

bool read_int64(Reader& r, const std::string& path, const YAML::Node& node, Bounds bounds,
                int64_t& out) {
  std::string text;
  if (!scalar_text(r, path, node, "an integer", text)) return false;
  std::string_view digits = without_plus(text);
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) {
    r.add(path, fmt::format("integer out of range, got {}", text), node);
    return false;
  }
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty()) {
    r.add(path, fmt::format("expected an integer, got '{}'", text), node);
    return false;
  }
  if (!check_bounds(r, path, node, bounds, static_cast<double>(value), text)) return false;
  out = value;
  return true;
}

bool read_int(Reader& r, const std::string& path, const YAML::Node& node, Bounds bounds, int& out) {
  int64_t value = 0;
  if (!read_int64(r, path, node, bounds, value)) return false;
  if (value < INT_MIN || value > INT_MAX) {
    r.add(path, fmt::format("integer out of range, got {}", value), node);
    return false;
  }
  out = static_cast<int>(value);
  return true;
}

bool read_uint64(Reader& r, const std::string& path, const YAML::Node& node, uint64_t& out) {
  int64_t signed_value = 0;
  std::string text;
  if (!scalar_text(r, path, node, "a non-negative integer", text)) return false;
  if (!text.empty() && text[0] == '-') {  // a clearer message than "expected ... got '-1'"
    return read_int64(r, path, node, Bounds::at_least(0), signed_value);
  }
  std::string_view digits = without_plus(text);
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty()) {
    r.add(path, fmt::format("expected a non-negative integer, got '{}'", text), node);
    return false;
  }
  out = value;
  return true;
}

bool read_real(Reader& r, const std::string& path, const YAML::Node& node, Bounds bounds,
               double& out) {
  std::string text;
  if (!scalar_text(r, path, node, "a number", text)) return false;
  std::string_view digits = without_plus(text);
  double value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty()) {
    r.add(path, fmt::format("expected a number, got '{}'", text), node);
    return false;
  }
  if (!std::isfinite(value)) {
    r.add(path, fmt::format("must be a finite number, got {}", text), node);
    return false;
  }
  if (!check_bounds(r, path, node, bounds, value, text)) return false;
  out = value;
  return true;
}

bool read_bool(Reader& r, const std::string& path, const YAML::Node& node, bool& out) {
  std::string text;
  if (!scalar_text(r, path, node, "true or false", text)) return false;
  bool value = false;
  if (!YAML::convert<bool>::decode(node, value)) {
    r.add(path, fmt::format("expected true or false, got '{}'", text), node);
    return false;
  }
  out = value;
  return true;
}

bool read_text(Reader& r, const std::string& path, const YAML::Node& node, std::string& out) {
  return scalar_text(r, path, node, "a string", out);
}

// ---- Section ------------------------------------------------------------------------------------

Section::Section(Reader& reader, const YAML::Node& node, std::string path)
    : reader_(reader), node_(node), path_(std::move(path)) {
  exists_ = node.IsDefined();
  if (!exists_ || node.IsNull()) return;
  if (!node.IsMap()) {
    reader_.add(path_, "expected a map of settings, got " + describe_node(node), node);
    return;
  }
  record_ = reader_.register_section(node, path_);
}

YAML::Node Section::get(const std::string& key) {
  if (!record_) return undefined_node();
  auto& record = reader_.sections_[*record_];
  record.asked.insert(key);
  for (const auto& entry : record.entries)
    if (entry.key == key) return entry.value;
  return undefined_node();
}

bool Section::require(const std::string& key, const std::string& hint) {
  if (has(key)) return true;
  // A section that is itself broken (not a map) has been reported; don't pile on.
  if (!reader_.has_problem_at(path_))
    reader_.add(path_of(key), hint.empty() ? "required" : "required: " + hint);
  return false;
}

Section Section::child(const std::string& key) {
  return Section(reader_, get(key), path_of(key));
}

std::vector<Section> Section::children(const std::string& key) {
  std::vector<Section> items;
  YAML::Node list = get(key);
  if (!list.IsDefined() || list.IsNull()) return items;
  if (!list.IsSequence()) {
    reader_.add(path_of(key), "expected a list of maps, got " + describe_node(list), list);
    return items;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    YAML::Node item = list[i];
    std::string item_path = element_path(path_of(key), i);
    if (!item.IsMap()) {
      reader_.add(item_path, "expected a map, got " + describe_node(item), item);
      continue;
    }
    items.emplace_back(reader_, item, item_path);
  }
  return items;
}

void Section::explain_unknown(
    std::function<std::optional<std::string>(const std::string&)> explain) {
  if (record_) reader_.sections_[*record_].explain = std::move(explain);
}

void Section::accept_all() {
  if (record_) reader_.sections_[*record_].accept_all = true;
}

}  // namespace dtrain::config
