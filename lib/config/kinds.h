// Kinds of config values: how one value is read from YAML (every problem recorded, not thrown),
// written back, shown in the settings table and described in messages and the key reference.
// A schema (schema.h) pairs a key with a kind; the kinds are the vocabulary of every config
// section, the model spec and each algorithm's keys.
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node: what is read and written

#include <algorithm>   // std::find
#include <cstdint>     // int64_t, uint64_t
#include <functional>  // std::function: a kind's operations
#include <optional>    // optional_of: keys without a default
#include <string>
#include <utility>  // std::pair: enum_choice's names
#include <vector>

#include "config/reader.h"  // Reader, Bounds: where problems go, numeric ranges
#include "config/units.h"   // Rate, Duration, ByteSize

namespace dtrain::config {

// One of a few words or a value: `auto | N`, `auto | all | N`, `auto | [names]`.
template <class V>
struct WordOr {
  std::string word;  // one of the kind's words; empty when `value` is meant
  V value{};

  static WordOr of(V v) { return {std::string(), std::move(v)}; }
  static WordOr named(std::string w) { return {std::move(w), V{}}; }
  bool is(const std::string& w) const { return word == w; }
  bool operator==(const WordOr&) const = default;
};

// A height and a width (kernel, stride, padding), given as one integer or a [height, width] pair.
struct Pair {
  int64_t h = 0, w = 0;
  bool listed = false;  // given as [height, width]: written back so, in the user's spelling

  static Pair square(int64_t v) { return {v, v}; }
  bool operator==(const Pair& o) const { return h == o.h && w == o.w; }
};

template <class V>
struct Kind {
  // "integer >= 1", "one of cpu | cuda | auto", "auto | integer >= 1": messages and the reference.
  std::string type;
  // Reads `node` (present) into `out`; false (and a problem recorded at `path`) when invalid.
  std::function<bool(Reader&, const std::string& path, const YAML::Node& node, V& out)> read;
  std::function<YAML::Node(const V&)> write;
  // How the settings table shows it (empty: the written YAML).
  std::function<std::string(const V&)> show;
};

// ---- scalars ----------------------------------------------------------------------------------
Kind<int> integer(Bounds bounds = {});
Kind<int64_t> integer64(Bounds bounds = {});
Kind<uint64_t> natural();
Kind<double> real(Bounds bounds = {});
Kind<bool> boolean();
Kind<std::string> text();
Kind<std::string> nonempty_text();
// One of `names`; a near miss gets "did you mean".
Kind<std::string> choice(std::vector<std::string> names);
// An integer for both, or [height, width]; written back as it was given.
Kind<Pair> pair(Bounds bounds);
Kind<Rate> rate();          // "10Gbps", "1.5GBps"
Kind<Duration> duration();  // "20us", "1ms", "0"
Kind<ByteSize> size();      // "20GB", "512MiB"

// Shortest text that reads back as the same double ("0.1", not "0.10000000000000001").
YAML::Node real_node(double value);
YAML::Node flow(YAML::Node node);

// ---- lists --------------------------------------------------------------------------------------
// A list of `item`s; `exact` > 0 demands that many entries, `at_least` a minimum.
template <class V>
Kind<std::vector<V>> list_of(Kind<V> item, size_t exact = 0, size_t at_least = 0) {
  Kind<std::vector<V>> k;
  k.type = "list of " + item.type;
  if (exact > 0) k.type = "list of " + std::to_string(exact) + " × " + item.type;
  k.read = [item, exact, at_least](Reader& r, const std::string& path, const YAML::Node& node,
                                   std::vector<V>& out) {
    if (!node.IsSequence()) {
      r.add(path, "expected a list of " + item.type + ", got " + describe_node(node), node);
      return false;
    }
    if (exact > 0 && node.size() != exact) {
      r.add(path,
            "expected " + std::to_string(exact) + " entries, got " + std::to_string(node.size()),
            node);
      return false;
    }
    if (node.size() < at_least) {
      r.add(path,
            "expected at least " + std::to_string(at_least) + " entr" +
                (at_least == 1 ? "y" : "ies") + ", got " + std::to_string(node.size()),
            node);
      return false;
    }
    std::vector<V> values(node.size());
    bool ok = true;
    for (size_t i = 0; i < node.size(); ++i) {
      V value{};
      if (item.read(r, element_path(path, i), node[i], value))
        values[i] = std::move(value);
      else
        ok = false;
    }
    if (ok) out = std::move(values);
    return ok;
  };
  k.write = [item](const std::vector<V>& values) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const V& v : values) list.push_back(item.write(v));
    return flow(list);
  };
  return k;
}

// ---- enums and optional values ----------------------------------------------------------------
// One of the `names`, read into its enum value (messages as choice()).
template <class E>
Kind<E> enum_choice(std::vector<std::pair<std::string, E>> names) {
  std::vector<std::string> words;
  for (const auto& n : names) words.push_back(n.first);
  const Kind<std::string> word = choice(words);
  Kind<E> k;
  k.type = word.type;
  k.read = [word, names](Reader& r, const std::string& path, const YAML::Node& node, E& out) {
    std::string w;
    if (!word.read(r, path, node, w)) return false;
    for (const auto& n : names)
      if (n.first == w) out = n.second;
    return true;
  };
  k.write = [names](const E& v) {
    for (const auto& n : names)
      if (n.second == v) return YAML::Node(n.first);
    return YAML::Node(YAML::NodeType::Undefined);
  };
  return k;
}

// `value`, or nothing: a key without a default (absent: not written back; the reference says
// "none").
template <class V>
Kind<std::optional<V>> optional_of(Kind<V> value) {
  Kind<std::optional<V>> k;
  k.type = value.type;
  k.read = [value](Reader& r, const std::string& path, const YAML::Node& node,
                   std::optional<V>& out) {
    V v{};
    if (!value.read(r, path, node, v)) return false;
    out = std::move(v);
    return true;
  };
  k.write = [value](const std::optional<V>& v) {
    return v ? value.write(*v) : YAML::Node(YAML::NodeType::Undefined);
  };
  return k;
}

// ---- a word or a value ------------------------------------------------------------------------
// `words` first ("auto"), then anything `value` accepts; a bad value is reported as
// "expected auto | integer >= 1, got ...".
template <class V>
Kind<WordOr<V>> word_or(std::vector<std::string> words, Kind<V> value) {
  Kind<WordOr<V>> k;
  std::string type;
  for (const auto& w : words) type += w + " | ";
  k.type = type + value.type;
  k.read = [words, value, type = k.type](Reader& r, const std::string& path, const YAML::Node& node,
                                         WordOr<V>& out) {
    if (node.IsScalar() && std::find(words.begin(), words.end(), node.Scalar()) != words.end()) {
      out = WordOr<V>::named(node.Scalar());
      return true;
    }
    Reader scratch(r.file(), r.root(), {});  // the value's own message may hide the words
    V v{};
    if (value.read(scratch, path, node, v)) {
      out = WordOr<V>::of(std::move(v));
      return true;
    }
    // A value of the right type out of range keeps its own message ("must be >= 1, got 0");
    // anything else is told what the key takes.
    std::string message = "expected " + type + ", got " + describe_node(node);
    if (!scratch.problems().empty() && scratch.problems()[0].message.starts_with("must be"))
      message = scratch.problems()[0].message;
    else if (node.IsScalar())
      if (auto near = closest(node.Scalar(), words)) message += "; did you mean '" + *near + "'?";
    r.add(path, std::move(message), node);
    return false;
  };
  k.write = [value](const WordOr<V>& v) {
    return v.word.empty() ? value.write(v.value) : YAML::Node(v.word);
  };
  return k;
}

}  // namespace dtrain::config
