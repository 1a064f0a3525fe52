// Typed, validating access to the experiment's YAML tree. A Reader collects
// every problem instead of throwing at the first, and knows where each value came from (a line
// of the file or a --set item); a Section reads one map and remembers which keys it asked for,
// so that whatever nobody asked for is an unknown key.
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node: the tree being read

#include <cstdint>     // int64_t, uint64_t
#include <functional>  // Section::explain_unknown
#include <limits>      // Bounds: unbounded ends
#include <optional>    // parse_path: malformed paths
#include <set>         // Reader: keys each section asked for
#include <string>
#include <string_view>
#include <utility>  // std::pair: override path → item
#include <vector>

namespace dtrain::config {

// One step of a dotted key path: a map key, or (index >= 0) a list element.
struct PathStep {
  std::string key;
  int index = -1;
};
// "a.b[2].c" → {a}, {b}, {[2]}, {c}; nullopt when malformed (empty key, bad index).
std::optional<std::vector<PathStep>> parse_path(std::string_view path);
std::string child_path(const std::string& base, const std::string& key);
// What a node is, for "expected X, got Y" messages: "'abc'", "a list", "a map", "an empty value".
std::string describe_node(const YAML::Node& node);
std::string element_path(const std::string& base, size_t index);

// Where a problem is: a line of the file (1-based; 0 when unknown) or the --set item it came from.
struct Origin {
  int line = 0;
  std::string set_item;
};

struct Problem {
  std::string path;  // dotted key path; empty for the document itself
  std::string message;
  Origin origin;
};

// The accepted range of a number, described in messages as "> 0", ">= 1" or "in [0, 1)".
struct Bounds {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;

  static Bounds at_least(double v) { return {v, std::numeric_limits<double>::infinity()}; }
  static Bounds above(double v) { return {v, std::numeric_limits<double>::infinity(), true}; }
  static Bounds closed_open(double a, double b) { return {a, b, false, true}; }
  static Bounds open_closed(double a, double b) { return {a, b, true, false}; }
  bool contains(double v) const;
  std::string describe() const;
};

// Edit distance with adjacent transpositions, case-insensitive: the "did you mean" metric.
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word`, if it is close enough to be a plausible typo.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& words);

class Reader {
 public:
  // `set_items`: the dotted path each --set item wrote, and the item as the user typed it.
  Reader(std::string file, YAML::Node root,
         std::vector<std::pair<std::string, std::string>> set_items);

  // Records a problem; its origin is `where`'s line, or the deepest node along `path` that
  // exists, or the --set item that wrote `path` or one of its parents.
  void add(const std::string& path, std::string message, const YAML::Node& where = YAML::Node());
  void add(Problem problem) { problems_.push_back(std::move(problem)); }
  Origin origin(const std::string& path, const YAML::Node& where = YAML::Node()) const;
  // Whether a problem was recorded at `path` or below it (cross-checks skip such values).
  bool has_problem(const std::string& path) const;
  // Whether a problem was recorded at exactly `path` (a section that is itself broken).
  bool has_problem_at(const std::string& path) const;

  // Not an error: something the user should know (printed, the run goes on).
  void warn(const std::string& path, std::string message, const YAML::Node& where = YAML::Node());
  const std::vector<Problem>& warnings() const { return warnings_; }

  // Reports the keys of every section that no reader asked for. Call once, after reading.
  void report_unknown_keys();
  const std::vector<Problem>& problems() const { return problems_; }
  // "FILE: N problems" and one line per problem, ordered by line.
  std::string render() const;
  // One problem or warning as "FILE:LINE: PATH: MESSAGE (from --set ITEM)".
  std::string format(const Problem& problem) const;
  const std::string& file() const { return file_; }
  const YAML::Node& root() const { return root_; }

 private:
  friend class Section;
  struct Entry {
    std::string key;
    YAML::Node key_node, value;
  };
  struct SectionRecord {
    std::string path;
    std::vector<Entry> entries;
    std::set<std::string> asked;
    bool accept_all = false;
    std::function<std::optional<std::string>(const std::string&)> explain;
  };
  size_t register_section(const YAML::Node& map, const std::string& path);

  std::string file_;
  YAML::Node root_;
  std::vector<std::pair<std::string, std::string>> set_items_;
  std::vector<SectionRecord> sections_;
  std::vector<Problem> problems_, warnings_;
};

// Typed readers of one value. Each returns true when the value is valid and stored in `out`;
// otherwise it has recorded a problem at `path` and left `out` alone.
bool read_int(Reader& r, const std::string& path, const YAML::Node& node, Bounds bounds, int& out);
bool read_int64(Reader& r, const std::string& path, const YAML::Node& node, Bounds bounds,
                int64_t& out);
bool read_uint64(Reader& r, const std::string& path, const YAML::Node& node, uint64_t& out);
bool read_real(Reader& r, const std::string& path, const YAML::Node& node, Bounds bounds,
               double& out);
bool read_bool(Reader& r, const std::string& path, const YAML::Node& node, bool& out);
bool read_text(Reader& r, const std::string& path, const YAML::Node& node, std::string& out);

// One map of the tree. A missing or null section reads as empty (every key takes its default).
class Section {
 public:
  Section(Reader& reader, const YAML::Node& node, std::string path);

  bool exists() const { return exists_; }  // the key was present (possibly as an empty map)
  const std::string& path() const { return path_; }
  std::string path_of(const std::string& key) const { return child_path(path_, key); }
  const YAML::Node& node() const { return node_; }
  Reader& reader() { return reader_; }

  // The value under `key` (undefined when absent); marks `key` as known.
  YAML::Node get(const std::string& key);
  bool has(const std::string& key) { return get(key).IsDefined(); }
  // Records "required" (with `hint`) when `key` is absent; returns whether it is present.
  bool require(const std::string& key, const std::string& hint);
  Section child(const std::string& key);
  // Each element of the list under `key` as a section ("key[i]"); non-maps are reported.
  std::vector<Section> children(const std::string& key);
  // Keys nobody asked for get `explain(key)` as their message when it has one (a key of
  // another algorithm, say), instead of "unknown key".
  void explain_unknown(std::function<std::optional<std::string>(const std::string&)> explain);
  // Takes every key as known: for a section whose keys cannot be judged (its `name` is wrong).
  void accept_all();

 private:
  Reader& reader_;
  YAML::Node node_;
  std::string path_;
  bool exists_ = false;
  std::optional<size_t> record_;  // index into the reader's sections; none when not a map
};

}  // namespace dtrain::config
