// The scalar kinds (see kinds.h), on the typed readers of section.cpp.
#include "config/kinds.h"

#include <fmt/format.h>  // fmt::format: shortest round-trip doubles, messages

#include "core/error.h"  // InputError: what the unit parsers throw

namespace dtrain::config {

namespace {

std::string bounded(const char* noun, Bounds bounds) {
  return bounds.describe() == "a number" ? noun : std::string(noun) + " " + bounds.describe();
}

// A unit-bearing string through its parser; the parser's message becomes the problem.
template <class V>
Kind<V> with_unit(const char* type, double (*parse)(const std::string&), double V::*number) {
  Kind<V> k;
  k.type = type;
  k.read = [parse, number](Reader& r, const std::string& path, const YAML::Node& node, V& out) {
    std::string text;
    if (!read_text(r, path, node, text)) return false;
    try {
      V v;
      v.*number = parse(text);
      v.text = text;
      out = std::move(v);
      return true;
    } catch (const InputError& e) {
      r.add(path, e.what(), node);
      return false;
    }
  };
  k.write = [](const V& v) { return YAML::Node(v.text); };
  return k;
}

}  // namespace

YAML::Node real_node(double value) {
  return YAML::Node(fmt::format("{}", value));
}

YAML::Node flow(YAML::Node node) {
  node.SetStyle(YAML::EmitterStyle::Flow);
  return node;
}

Kind<int> integer(Bounds bounds) {
  return {bounded("integer", bounds),
          [bounds](Reader& r, const std::string& path, const YAML::Node& node, int& out) {
            return read_int(r, path, node, bounds, out);
          },
          [](const int& v) { return YAML::Node(v); },
          {}};
}

Kind<int64_t> integer64(Bounds bounds) {
  return {bounded("integer", bounds),
          [bounds](Reader& r, const std::string& path, const YAML::Node& node, int64_t& out) {
            return read_int64(r, path, node, bounds, out);
          },
          [](const int64_t& v) { return YAML::Node(v); },
          {}};
}

Kind<uint64_t> natural() {
  return {"integer >= 0",
          [](Reader& r, const std::string& path, const YAML::Node& node, uint64_t& out) {
            return read_uint64(r, path, node, out);
          },
          [](const uint64_t& v) { return YAML::Node(v); },
          {}};
}

Kind<double> real(Bounds bounds) {
  return {bounded("number", bounds),
          [bounds](Reader& r, const std::string& path, const YAML::Node& node, double& out) {
            return read_real(r, path, node, bounds, out);
          },
          [](const double& v) { return real_node(v); },
          {}};
}

Kind<bool> boolean() {
  return {"true | false",
          [](Reader& r, const std::string& path, const YAML::Node& node, bool& out) {
            return read_bool(r, path, node, out);
          },
          [](const bool& v) { return YAML::Node(v); },
          {}};
}

Kind<std::string> text() {
  return {"text",
          [](Reader& r, const std::string& path, const YAML::Node& node, std::string& out) {
            return read_text(r, path, node, out);
          },
          [](const std::string& v) { return YAML::Node(v); },
          [](const std::string& v) { return v.empty() ? std::string("\"\"") : v; }};
}

Kind<std::string> nonempty_text() {
  Kind<std::string> k = text();
  k.type = "non-empty text";
  k.read = [](Reader& r, const std::string& path, const YAML::Node& node, std::string& out) {
    std::string v;
    if (!read_text(r, path, node, v)) return false;
    if (v.empty()) {
      r.add(path, "must not be empty", node);
      return false;
    }
    out = std::move(v);
    return true;
  };
  return k;
}

Kind<std::string> choice(std::vector<std::string> names) {
  Kind<std::string> k = text();
  k.type = fmt::format("{}", fmt::join(names, " | "));
  k.read = [names](Reader& r, const std::string& path, const YAML::Node& node, std::string& out) {
    std::string v;
    if (!read_text(r, path, node, v)) return false;
    if (std::find(names.begin(), names.end(), v) != names.end()) {
      out = std::move(v);
      return true;
    }
    std::string message = fmt::format("expected one of {}, got '{}'", fmt::join(names, ", "), v);
    if (auto near = closest(v, names)) message += fmt::format("; did you mean '{}'?", *near);
    r.add(path, std::move(message), node);
    return false;
  };
  return k;
}

Kind<Pair> pair(Bounds bounds) {
  const Kind<int64_t> one = integer64(bounds);
  Kind<Pair> k;
  k.type = one.type + " or [height, width]";
  k.read = [one](Reader& r, const std::string& path, const YAML::Node& node, Pair& out) {
    if (node.IsScalar()) {
      int64_t v = 0;
      if (!one.read(r, path, node, v)) return false;
      out = Pair::square(v);
      return true;
    }
    if (!node.IsSequence() || node.size() != 2) {
      r.add(path, "expected " + one.type + " or a [height, width] pair, got " + describe_node(node),
            node);
      return false;
    }
    Pair hw{0, 0, true};
    bool ok = one.read(r, element_path(path, 0), node[0], hw.h);
    ok &= one.read(r, element_path(path, 1), node[1], hw.w);
    if (ok) out = hw;
    return ok;
  };
  k.write = [](const Pair& v) {
    if (v.h == v.w && !v.listed) return YAML::Node(v.h);
    YAML::Node list(YAML::NodeType::Sequence);
    list.push_back(v.h);
    list.push_back(v.w);
    return flow(list);
  };
  return k;
}

Kind<Rate> rate() {
  Kind<Rate> k =
      with_unit<Rate>("rate (10Gbps, 100Mbps, 1.5GBps)", parse_bandwidth, &Rate::bytes_per_s);
  k.show = [](const Rate& v) { return fmt::format("{} ({:.4g} bytes/s)", v.text, v.bytes_per_s); };
  return k;
}

Kind<Duration> duration() {
  Kind<Duration> k =
      with_unit<Duration>("duration (20us, 1ms, 0.5s)", parse_duration, &Duration::seconds);
  k.show = [](const Duration& v) { return fmt::format("{} ({:.4g} s)", v.text, v.seconds); };
  return k;
}

Kind<ByteSize> size() {
  Kind<ByteSize> k = with_unit<ByteSize>("size (20GB, 512MiB)", parse_size, &ByteSize::bytes);
  k.show = [](const ByteSize& v) { return fmt::format("{} ({:.0f} bytes)", v.text, v.bytes); };
  return k;
}

}  // namespace dtrain::config
