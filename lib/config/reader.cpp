// Reader: dotted paths, bounds, "did you mean", problems and their origins (see config_reader.h).
#include "config/reader.h"

#include <fmt/format.h>  // fmt::format: messages

#include <algorithm>  // std::stable_sort, std::min
#include <cctype>     // std::tolower: case-insensitive suggestions
#include <charconv>   // std::from_chars: strict, locale-free number parsing
#include <climits>    // INT_MIN, INT_MAX
#include <cmath>      // std::isfinite

namespace dtrain::config {

namespace {

// The value under one path step of `node`, looked up without yaml-cpp's converting operator[]
// (which throws on scalars and compares keys by conversion rather than by text).
std::optional<YAML::Node> step_into(const YAML::Node& node, const PathStep& step) {
  if (step.index >= 0) {
    if (!node.IsSequence() || static_cast<size_t>(step.index) >= node.size()) return std::nullopt;
    return node[static_cast<size_t>(step.index)];
  }
  if (!node.IsMap()) return std::nullopt;
  for (auto it = node.begin(); it != node.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == step.key) return it->second;
  return std::nullopt;
}

// Whether `path` is `parent` or lies below it.
bool covers(const std::string& parent, const std::string& path) {
  if (path.size() < parent.size() || path.compare(0, parent.size(), parent) != 0) return false;
  return path.size() == parent.size() || path[parent.size()] == '.' || path[parent.size()] == '[';
}

}  // namespace

std::optional<std::vector<PathStep>> parse_path(std::string_view path) {
  std::vector<PathStep> steps;
  size_t i = 0;
  while (true) {
    size_t end = path.find_first_of(".[", i);
    std::string_view key = path.substr(i, end == std::string_view::npos ? end : end - i);
    if (key.empty()) return std::nullopt;
    steps.push_back({std::string(key)});
    i = end;
    while (i != std::string_view::npos && path[i] == '[') {
      size_t close = path.find(']', i);
      if (close == std::string_view::npos) return std::nullopt;
      int index = -1;
      auto digits = path.substr(i + 1, close - i - 1);
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
      if (ec != std::errc() || ptr != digits.data() + digits.size() || index < 0)
        return std::nullopt;
      steps.push_back({"", index});
      i = close + 1 < path.size() ? close + 1 : std::string_view::npos;
    }
    if (i == std::string_view::npos) return steps;
    if (path[i] != '.') return std::nullopt;
    ++i;
  }
}

std::string describe_node(const YAML::Node& node) {
  if (node.IsNull()) return "an empty value";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  return fmt::format("'{}'", node.Scalar());
}

std::string child_path(const std::string& base, const std::string& key) {
  return base.empty() ? key : base + "." + key;
}

std::string element_path(const std::string& base, size_t index) {
  return fmt::format("{}[{}]", base, index);
}

bool Bounds::contains(double v) const {
  bool lo_ok = lo_open ? v > lo : v >= lo;
  bool hi_ok = hi_open ? v < hi : v <= hi;
  return lo_ok && hi_ok;
}

std::string Bounds::describe() const {
  bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  if (has_lo && has_hi)
    return fmt::format("in {}{}, {}{}", lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']');
  if (has_lo) return fmt::format("{} {}", lo_open ? ">" : ">=", lo);
  if (has_hi) return fmt::format("{} {}", hi_open ? "<" : "<=", hi);
  return "a number";
}

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment distance: a transposed pair of letters counts as one typo.
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& words) {
  // Up to a third of the word may be wrong (at least one letter): close enough to be a typo,
  // far enough that unrelated short names are not suggested.
  size_t limit = std::max<size_t>(1, word.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const auto& candidate : words) {
    size_t d = edit_distance(word, candidate);
    if (d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

// ---- Reader -------------------------------------------------------------------------------------

Reader::Reader(std::string file, YAML::Node root,
               std::vector<std::pair<std::string, std::string>> set_items)
    : file_(std::move(file)), root_(std::move(root)), set_items_(std::move(set_items)) {}

Origin Reader::origin(const std::string& path, const YAML::Node& where) const {
  // A --set item replaced whatever the file had there, so it is the culprit; later items win.
  const std::string* item = nullptr;
  size_t item_depth = 0;
  for (const auto& [set_path, set_item] : set_items_) {
    if (covers(set_path, path) && set_path.size() >= item_depth) {
      item = &set_item;
      item_depth = set_path.size();
    }
  }
  if (item) return {0, *item};
  if (where.IsDefined() && !where.Mark().is_null()) return {where.Mark().line + 1, ""};

  // Otherwise the deepest node along the path that exists: the value itself, or the map that
  // lacks the key. The document root is not a useful place, so a top-level key gets no line.
  Origin found;
  auto steps = parse_path(path);
  if (!steps) return found;
  YAML::Node node = root_;
  std::string node_path;
  for (const auto& step : *steps) {
    auto next = step_into(node, step);
    if (!next) break;
    node.reset(*next);
    node_path =
        step.index >= 0 ? element_path(node_path, step.index) : child_path(node_path, step.key);
    if (node.Mark().is_null()) {
      // Created by a --set of something below it (e.g. `--set cluster.link.latency=1ms`).
      for (const auto& [set_path, set_item] : set_items_)
        if (covers(node_path, set_path)) return {0, set_item};
      break;
    }
    found.line = node.Mark().line + 1;
  }
  return found;
}

void Reader::add(const std::string& path, std::string message, const YAML::Node& where) {
  problems_.push_back({path, std::move(message), origin(path, where)});
}

void Reader::warn(const std::string& path, std::string message, const YAML::Node& where) {
  warnings_.push_back({path, std::move(message), origin(path, where)});
}

bool Reader::has_problem(const std::string& path) const {
  for (const auto& p : problems_)
    if (covers(path, p.path)) return true;
  return false;
}

bool Reader::has_problem_at(const std::string& path) const {
  for (const auto& p : problems_)
    if (p.path == path) return true;
  return false;
}

size_t Reader::register_section(const YAML::Node& map, const std::string& path) {
  for (size_t i = 0; i < sections_.size(); ++i)
    if (sections_[i].path == path) return i;
  SectionRecord record;
  record.path = path;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->first.IsScalar()) {
      add(path, "keys must be plain names, got " + describe_node(it->first), it->first);
      continue;
    }
    const std::string& key = it->first.Scalar();
    auto first = std::find_if(record.entries.begin(), record.entries.end(),
                              [&](const Entry& e) { return e.key == key; });
    if (first != record.entries.end()) {
      // yaml-cpp keeps both and lookups see the first; say so rather than silently ignore one.
      const YAML::Mark& mark = first->key_node.Mark();
      add(child_path(path, key),
          mark.is_null() ? "duplicate key"
                         : fmt::format("duplicate key (first given on line {})", mark.line + 1),
          it->first);
      continue;
    }
    record.entries.push_back({key, it->first, it->second});
  }
  sections_.push_back(std::move(record));
  return sections_.size() - 1;
}

void Reader::report_unknown_keys() {
  for (const auto& section : sections_) {
    if (section.accept_all) continue;
    std::vector<std::string> known(section.asked.begin(), section.asked.end());
    for (const auto& entry : section.entries) {
      if (section.asked.count(entry.key)) continue;
      if (section.explain) {
        if (auto message = section.explain(entry.key)) {
          add(child_path(section.path, entry.key), std::move(*message), entry.key_node);
          continue;
        }
      }
      std::string message = "unknown key";
      if (auto near = closest(entry.key, known)) {
        message += fmt::format("; did you mean '{}'?", *near);
      } else {
        // Perhaps the right key in the wrong section, e.g. a top-level `batch_size`.
        std::optional<std::string> elsewhere;
        for (const auto& other : sections_)
          for (const auto& key : other.asked)
            if (!elsewhere && edit_distance(key, entry.key) == 0)
              elsewhere = child_path(other.path, key);
        if (elsewhere)
          message += fmt::format("; did you mean '{}'?", *elsewhere);
        else if (!known.empty())
          message += fmt::format(" (known keys: {})", fmt::join(known, ", "));
      }
      add(child_path(section.path, entry.key), std::move(message), entry.key_node);
    }
  }
}

std::string Reader::format(const Problem& p) const {
  std::string text = file_;
  if (p.origin.line > 0) text += fmt::format(":{}", p.origin.line);
  text += ": ";
  if (!p.path.empty()) text += p.path + ": ";
  text += p.message;
  if (!p.origin.set_item.empty()) text += fmt::format(" (from --set {})", p.origin.set_item);
  return text;
}

std::string Reader::render() const {
  std::vector<const Problem*> sorted;
  for (const auto& p : problems_) sorted.push_back(&p);
  // In file order, so that the list reads top to bottom; the rest keeps its discovery order.
  auto key = [](const Problem* p) { return p->origin.line > 0 ? p->origin.line : INT_MAX; };
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const Problem* a, const Problem* b) { return key(a) < key(b); });
  std::string text =
      fmt::format("{}: {} problem{}", file_, sorted.size(), sorted.size() == 1 ? "" : "s");
  for (const auto* p : sorted) {
    text += '\n';
    text += format(*p);
  }
  return text;
}

}  // namespace dtrain::config
