// The non-template parts of schemas (see schema.h): flow text, messages, the Markdown reference.
#include "config/schema.h"

#include <fmt/format.h>  // fmt::format, fmt::join

namespace dtrain::config {

std::string one_line(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar().empty() ? "\"\"" : node.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

std::string not_applying_message(const std::string& noun, const std::string& key,
                                 const std::vector<std::string>& values, const std::string& current,
                                 const std::string& reason) {
  const std::string which = key == "name" || key == "type" ? noun : key;
  std::string message =
      fmt::format("applies only to {} {}, not to '{}'", which, fmt::join(values, " or "), current);
  if (!reason.empty()) message += " (" + reason + ")";
  return message;
}

namespace {
// Table cells must not break the row.
std::string cell(std::string text) {
  for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2))
    text.replace(at, 1, "\\|");
  return text;
}
}  // namespace

std::any read_resolved(const AnySchema& schema, const YAML::Node& map) {
  Reader reader("", map, {});
  Section section(reader, map, "");
  std::any options = schema.defaults();
  schema.read(section, options);
  if (!reader.problems().empty())
    throw std::logic_error("a resolved entry fails its own check: " +
                           reader.format(reader.problems().front()));
  return options;
}

std::vector<KeyDoc> merge_alike(const std::vector<KeyDoc>& rows) {
  std::vector<KeyDoc> merged;
  for (const KeyDoc& row : rows) {
    bool joined = false;
    for (KeyDoc& m : merged) {
      if (m.path != row.path || m.type != row.type || m.default_text != row.default_text ||
          m.doc != row.doc || m.applies.empty() || row.applies.empty())
        continue;
      // "model alexnet" + "model vgg16" → "model alexnet | vgg16".
      const size_t space = row.applies.find(' ');
      const std::string prefix = row.applies.substr(0, space + 1);
      if (!m.applies.starts_with(prefix)) continue;
      m.applies += " | " + row.applies.substr(space + 1);
      joined = true;
      break;
    }
    if (!joined) merged.push_back(row);
  }
  return merged;
}

std::string reference_markdown(const std::vector<KeyDoc>& rows) {
  std::string md = "| key | value | default | meaning |\n| --- | --- | --- | --- |\n";
  for (const KeyDoc& r : rows) {
    std::string meaning = r.doc;
    if (!r.applies.empty())
      meaning += fmt::format("{}({} only)", meaning.empty() ? "" : " ", r.applies);
    // Values as code ("`100`"), descriptions as text ("the file's stem").
    const std::string shown =
        r.default_is_value ? fmt::format("`{}`", cell(r.default_text)) : cell(r.default_text);
    md += fmt::format("| `{}` | {} | {} | {} |\n", r.path, cell(r.type), shown, cell(meaning));
  }
  return md;
}

}  // namespace dtrain::config
