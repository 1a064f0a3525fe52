// The schema engine on a toy section: kinds, defaults, required keys, keys that apply only to
// some values of another, fallbacks, nested maps, lists of maps, writing back, the reference,
// and unknown keys explained.
#include <doctest/doctest.h>

#include <optional>

#include "config/schema.h"

using namespace dtrain;
using namespace dtrain::config;

namespace {

struct Inner {
  int depth = 1;
  Rate rate;
};

struct Toy {
  std::string kind = "plain";
  int count = 3;
  WordOr<int> parts = WordOr<int>::named("auto");
  std::vector<int> sizes;
  double scale = 0.5;
  int spare = 0;  // applies only to kind fancy
  int copies = 0;  // defaults to count
  std::optional<Inner> inner;
  std::vector<Inner> items;
};

const Schema<Inner>& inner_schema() {
  static const auto s = Schema<Inner>("inner")
                            .key("depth", &Inner::depth, integer(Bounds::at_least(1)), "how deep")
                            .key("rate", &Inner::rate, rate(), "how fast")
                            .required("a rate");
  return s;
}

const Schema<Toy>& toy_schema() {
  static const auto s =
      Schema<Toy>("toy")
          .key("kind", &Toy::kind, choice({"plain", "fancy"}), "which toy")
          .key("count", &Toy::count, integer(Bounds::above(0)), "how many")
          .key("parts", &Toy::parts, word_or({"auto"}, integer(Bounds::at_least(1))), "parts")
          .key("sizes", &Toy::sizes, list_of(integer(Bounds::above(0)), 0, 1), "sizes")
          .key("scale", &Toy::scale, real(Bounds::closed_open(0, 1)), "scale")
          .key("spare", &Toy::spare, integer(), "spare parts")
          .only_for("kind", {"fancy"}, "plain toys have none")
          .key("copies", &Toy::copies, integer(), "copies")
          .fallback([](Toy& t) { t.copies = t.count; }, "count")
          .optional_section("inner", &Toy::inner, inner_schema(), "inside", "none")
          .list("items", &Toy::items, inner_schema(), "items");
  return s;
}

struct Parsed {
  Toy toy;
  std::vector<std::string> problems;  // "path: message" (line N)
};

Parsed parse(const std::string& yaml) {
  YAML::Node root = YAML::Load(yaml);
  Reader reader("toy.yaml", root, {});
  Section top(reader, root, "");
  Parsed p;
  toy_schema().read(top, p.toy);
  reader.report_unknown_keys();
  for (const auto& problem : reader.problems()) p.problems.push_back(reader.format(problem));
  return p;
}

bool has(const Parsed& p, const std::string& line) {
  for (const auto& problem : p.problems)
    if (problem == line) return true;
  for (const auto& problem : p.problems) MESSAGE(problem);
  return false;
}

}  // namespace

TEST_CASE("absent keys keep the struct's defaults; fallbacks see what was read") {
  Parsed p = parse("count: 7\n");
  CHECK(p.problems.empty());
  CHECK(p.toy.kind == "plain");
  CHECK(p.toy.count == 7);
  CHECK(p.toy.copies == 7);  // the fallback: count
  CHECK(p.toy.parts.is("auto"));
  CHECK_FALSE(p.toy.inner);
}

TEST_CASE("every problem is collected with its line, key path and what was expected") {
  Parsed p = parse(
      "kind: fancyy\ncount: 0\nparts: 0\nsizes: [1, -2]\nscale: x\nspare: 1\n"
      "inner: {depth: 0}\nitems: [{rate: 1Gbps, colour: red}, 3]\ncuont: 1\n");
  CHECK(has(p, "toy.yaml:1: kind: expected one of plain, fancy, got 'fancyy'; did you mean "
               "'fancy'?"));
  CHECK(has(p, "toy.yaml:2: count: must be > 0, got 0"));
  CHECK(has(p, "toy.yaml:3: parts: must be >= 1, got 0"));
  CHECK(has(p, "toy.yaml:4: sizes[1]: must be > 0, got -2"));
  CHECK(has(p, "toy.yaml:5: scale: expected a number, got 'x'"));
  CHECK(has(p, "toy.yaml:7: inner.depth: must be >= 1, got 0"));
  CHECK(has(p, "toy.yaml:7: inner.rate: required: a rate"));
  CHECK(has(p, "toy.yaml:8: items[0].colour: unknown key (known keys: depth, rate)"));
  CHECK(has(p, "toy.yaml:8: items[1]: expected a map, got '3'"));
  CHECK(has(p, "toy.yaml:9: cuont: unknown key; did you mean 'count'?"));
  // `spare` is not judged while `kind` itself is wrong.
  CHECK(p.problems.size() == 10);
}

TEST_CASE("a key that does not apply is a problem, and is not written back") {
  CHECK(has(parse("spare: 2\n"),
            "toy.yaml:1: spare: applies only to kind fancy, not to 'plain' (plain toys have none)"));
  Parsed p = parse("kind: fancy\nspare: 2\n");
  CHECK(p.problems.empty());
  CHECK(p.toy.spare == 2);
  CHECK(toy_schema().write(p.toy)["spare"].as<int>() == 2);
  CHECK_FALSE(toy_schema().write(parse("").toy)["spare"].IsDefined());
}

TEST_CASE("auto | N, lists and units read and write back in the user's spelling") {
  Parsed p = parse("parts: 4\nsizes: [2, 3]\ninner: {rate: 10Gbps}\nitems: [{rate: 1GBps}]\n");
  REQUIRE(p.problems.empty());
  CHECK(p.toy.parts == WordOr<int>::of(4));
  CHECK(p.toy.inner->rate.bytes_per_s == doctest::Approx(1.25e9));
  CHECK(p.toy.items.at(0).rate.bytes_per_s == doctest::Approx(1e9));
  const YAML::Node out = toy_schema().write(p.toy);
  CHECK(out["parts"].as<int>() == 4);
  CHECK(one_line(out["sizes"]) == "[2, 3]");
  CHECK(one_line(out["inner"]) == "{depth: 1, rate: 10Gbps}");
  CHECK(toy_schema().write(p.toy, Style::table)["inner"]["rate"].as<std::string>() ==
        "10Gbps (1.25e+09 bytes/s)");
  CHECK(has(parse("parts: aut\n"),
            "toy.yaml:1: parts: expected auto | integer >= 1, got 'aut'; did you mean 'auto'?"));
  CHECK(has(parse("sizes: []\n"), "toy.yaml:1: sizes: expected at least 1 entry, got 0"));
}

TEST_CASE("the reference lists every key with its type, default and where it applies") {
  const std::vector<KeyDoc> rows = toy_schema().reference("toy");
  std::vector<std::string> paths;
  for (const auto& r : rows) paths.push_back(r.path);
  CHECK(paths == std::vector<std::string>{"toy.kind", "toy.count", "toy.parts", "toy.sizes",
                                          "toy.scale", "toy.spare", "toy.copies", "toy.inner",
                                          "toy.inner.depth", "toy.inner.rate", "toy.items",
                                          "toy.items[].depth", "toy.items[].rate"});
  CHECK(rows[1].type == "integer > 0");
  CHECK(rows[1].default_text == "3");
  CHECK(rows[2].type == "auto | integer >= 1");
  CHECK(rows[2].default_text == "auto");
  CHECK(rows[5].applies == "kind fancy");
  CHECK(rows[6].default_text == "count");
  CHECK(rows[9].default_text == "required");
  const std::string md = reference_markdown(rows);
  CHECK(md.find("| `toy.parts` | auto \\| integer >= 1 | `auto` | parts |") != std::string::npos);
}

TEST_CASE("unknown keys can be explained by the section") {
  YAML::Node root = YAML::Load("count: 1\nK: 2\nzzz: 3\n");
  Reader reader("toy.yaml", root, {});
  Section top(reader, root, "");
  Toy toy;
  toy_schema().read(top, toy);
  top.explain_unknown([](const std::string& key) -> std::optional<std::string> {
    if (key == "K") return "belongs to another toy";
    return std::nullopt;
  });
  reader.report_unknown_keys();
  REQUIRE(reader.problems().size() == 2);
  CHECK(reader.format(reader.problems()[0]) == "toy.yaml:2: K: belongs to another toy");
  CHECK(reader.format(reader.problems()[1]).starts_with("toy.yaml:3: zzz: unknown key"));
}

namespace {

// The kinds of the layer options: [h, w] pairs, enums, keys without a default, a key written
// back only where it matters.
struct Window {
  Pair kernel = Pair::square(1);
  enum class Mode { fast, exact } mode = Mode::fast;
  std::optional<int64_t> limit;
  double spread = 0.01;  // written back with mode exact only
};

const Schema<Window>& window_schema() {
  static const auto s =
      Schema<Window>("window")
          .key("kernel", &Window::kernel, pair(Bounds::above(0)), "size")
          .key("mode", &Window::mode,
               enum_choice<Window::Mode>(
                   {{"fast", Window::Mode::fast}, {"exact", Window::Mode::exact}}),
               "how")
          .key("limit", &Window::limit, optional_of(integer64(Bounds::at_least(0))), "at most")
          .key("spread", &Window::spread, real(Bounds::above(0)), "how wide")
          .written_if([](const Window& w) { return w.mode == Window::Mode::exact; },
                      "with mode exact");
  return s;
}

std::vector<std::string> window_problems(const std::string& yaml, Window& w) {
  YAML::Node root = YAML::Load(yaml);
  Reader reader("w.yaml", root, {});
  Section top(reader, root, "");
  window_schema().read(top, w);
  std::vector<std::string> out;
  for (const auto& problem : reader.problems()) out.push_back(reader.format(problem));
  return out;
}

}  // namespace

TEST_CASE("pairs, enums, optional keys and keys written only where they matter") {
  Window w;
  REQUIRE(window_problems("kernel: [3, 5]\nmode: exact\nlimit: 4\n", w).empty());
  CHECK(w.kernel == Pair{3, 5});
  CHECK(w.mode == Window::Mode::exact);
  CHECK(w.limit == 4);
  YAML::Node out = window_schema().write(w);
  CHECK(one_line(out) == "{kernel: [3, 5], mode: exact, limit: 4, spread: 0.01}");

  Window d;  // defaults: no limit, spread not written; [2, 2] and 2 keep their spelling
  REQUIRE(window_problems("kernel: [2, 2]\n", d).empty());
  CHECK(one_line(window_schema().write(d)) == "{kernel: [2, 2], mode: fast}");
  REQUIRE(window_problems("kernel: 2\n", d).empty());
  CHECK(one_line(window_schema().write(d)) == "{kernel: 2, mode: fast}");

  CHECK(window_problems("kernel: [0, 2]\n", d) ==
        std::vector<std::string>{"w.yaml:1: kernel[0]: must be > 0, got 0"});
  CHECK(window_problems("kernel: [1, 2, 3]\n", d) ==
        std::vector<std::string>{
            "w.yaml:1: kernel: expected integer > 0 or a [height, width] pair, got a list"});
  CHECK(window_problems("mode: exakt\n", d) ==
        std::vector<std::string>{
            "w.yaml:1: mode: expected one of fast, exact, got 'exakt'; did you mean 'exact'?"});

  const auto rows = window_schema().reference("");
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].type == "integer > 0 or [height, width]");
  CHECK(rows[1].type == "fast | exact");
  CHECK(rows[2].default_text == "none");
  CHECK_FALSE(rows[2].default_is_value);
  CHECK(rows[3].default_text == "0.01 with mode exact");
  CHECK_FALSE(rows[3].default_is_value);

  // A resolved map reads back into the same options; other keys are ignored.
  const std::any again =
      read_resolved(*erase(window_schema()), YAML::Load("{name: w, kernel: [3, 5], mode: exact}"));
  CHECK(std::any_cast<const Window&>(again).kernel == Pair{3, 5});
  CHECK_THROWS_AS(read_resolved(*erase(window_schema()), YAML::Load("{kernel: 0}")),
                  std::logic_error);
}
