// Declarative config schemas: every key of a section is declared once — its kind (type and
// constraint), its default (the struct member's initialiser), a doc line, and when it applies —
// and that one declaration drives reading (every problem collected, with file:line, dotted key
// and "did you mean"), the resolved YAML, the settings table and the key reference in --help
// and the key reference (docs/configuration.md). Schemas are built once (function-local statics)
// and never change.
//
//   const Schema<TrainConfig>& train_schema() {
//     static const auto s = Schema<TrainConfig>("train")
//         .key("epochs", &TrainConfig::epochs, integer(Bounds::at_least(1)), "passes over the
//         data");
//     return s;
//   }
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node

#include <any>         // AnySchema: options whose type depends on a name (the algorithm's)
#include <functional>  // std::function: a field's operations
#include <memory>      // std::shared_ptr: erased schemas
#include <optional>    // optional sections
#include <stdexcept>   // std::logic_error: options of the wrong type
#include <string>
#include <type_traits>  // is_base_of: keys of a base struct
#include <vector>

#include "config/kinds.h"   // Kind and the kinds
#include "config/reader.h"  // Reader, Section

namespace dtrain::config {

// One row of the key reference.
struct KeyDoc {
  std::string path;  // "dataset.batch_size", "cluster.stragglers[].rank"
  std::string type;  // "integer > 0"
  std::string default_text;
  bool default_is_value = false;  // a value ("100"), not a description ("the file's stem")
  std::string doc;
  std::string applies;  // "" or "dataset synthetic"
};

// The resolved config file, or the settings table (which shows parsed units and absent maps).
enum class Style { file, table };

// One line of YAML flow text for a node ("[1, 28, 28]", "{bandwidth: 1Gbps}", "auto").
std::string one_line(const YAML::Node& node);
// "path: problem" for a key that does not apply to the section's current discriminator value.
std::string not_applying_message(const std::string& noun, const std::string& key,
                                 const std::vector<std::string>& values, const std::string& current,
                                 const std::string& reason);

// Rows that differ only in where they apply become one ("model alexnet | vgg16").
std::vector<KeyDoc> merge_alike(const std::vector<KeyDoc>& rows);

// A schema whose target type is known only at run time (each algorithm's keys).
class AnySchema {
 public:
  virtual ~AnySchema() = default;
  virtual std::any defaults() const = 0;
  virtual void read(Section& s, std::any& value) const = 0;
  virtual YAML::Node write(const std::any& value, Style style) const = 0;
  virtual std::vector<KeyDoc> reference(const std::string& prefix) const = 0;
  virtual bool has_key(const std::string& key) const = 0;
  virtual std::vector<std::string> keys() const = 0;
};

// One row of a table as Schema::row_keys sees it: its name, its own keys, and the rules across
// them that one key's kind cannot judge (problems to the Reader under the section's path).
struct RowKeys {
  std::string name;
  std::shared_ptr<const AnySchema> keys;
  std::function<void(const std::any& options, Reader& reader, const std::string& section)> check{};
};

template <class T>
class Schema {
 public:
  // `noun` names the section in messages ("schedule", "dataset", "linear").
  explicit Schema(std::string noun) : noun_(std::move(noun)) {}

  // ---- declarations (each returns *this; the modifiers below apply to the last key) ----
  // `member` may be a member of a base class of T (a section that extends a shared struct).
  template <class V, class C>
  requires std::is_base_of_v<C, T> Schema& key(const std::string& key, V C::*member, Kind<V> kind,
                                               std::string doc) {
    Field f = base(key, kind.type, std::move(doc));
    f.read = [key, member, kind](Section& s, T& t) {
      V v = t.*member;
      if (kind.read(s.reader(), s.path_of(key), s.get(key), v)) t.*member = std::move(v);
    };
    f.write = [member, kind](const T& t, Style style) {
      if (style == Style::table && kind.show) return YAML::Node(kind.show(t.*member));
      return kind.write(t.*member);
    };
    f.none_when_unwritten = true;
    return add(std::move(f));
  }
  // A nested map (always read: an absent one takes its defaults).
  template <class U>
  Schema& section(const std::string& key, U T::*member, const Schema<U>& schema, std::string doc) {
    Field f = base(key, "map", std::move(doc));
    f.always_read = true;
    f.read = [key, member, &schema](Section& s, T& t) {
      Section child = s.child(key);
      schema.read(child, t.*member);
    };
    f.write = [member, &schema](const T& t, Style style) { return schema.write(t.*member, style); };
    f.nested = [&schema](const std::string& prefix) { return schema.reference(prefix); };
    return add(std::move(f));
  }
  // A nested map that may be absent (absent: the optional is empty, nothing is written; the
  // table shows `absent_text`).
  template <class U>
  Schema& optional_section(const std::string& key, std::optional<U> T::*member,
                           const Schema<U>& schema, std::string doc, std::string absent_text) {
    Field f = base(key, "map, optional", std::move(doc));
    f.default_text = "absent";
    f.read = [key, member, &schema](Section& s, T& t) {
      Section child = s.child(key);
      if (!child.exists() || !child.node().IsMap()) return;  // null: absent; not a map: reported
      U value{};
      schema.read(child, value);
      t.*member = std::move(value);
    };
    f.write = [member, &schema, absent_text](const T& t, Style style) {
      if (t.*member) return flow(schema.write(*(t.*member), style));
      return style == Style::table ? YAML::Node(absent_text) : YAML::Node();
    };
    f.nested = [&schema](const std::string& prefix) { return schema.reference(prefix); };
    return add(std::move(f));
  }
  // A list of maps, each read with `schema`.
  template <class U>
  Schema& list(const std::string& key, std::vector<U> T::*member, const Schema<U>& schema,
               std::string doc) {
    Field f = base(key, "list of maps", std::move(doc));
    f.default_text = "[]";
    f.default_is_value = true;
    f.read = [key, member, &schema](Section& s, T& t) {
      std::vector<U> items;
      for (Section& item : s.children(key)) {
        U value{};
        schema.read(item, value);
        items.push_back(std::move(value));
      }
      t.*member = std::move(items);
    };
    f.write = [member, &schema](const T& t, Style style) {
      YAML::Node items(YAML::NodeType::Sequence);
      for (const U& u : t.*member) items.push_back(flow(schema.write(u, style)));
      return flow(items);
    };
    f.nested = [&schema](const std::string& prefix) { return schema.reference(prefix + "[]"); };
    return add(std::move(f));
  }
  // A key read and written by hand (a value whose schema depends on another, like the model):
  // `read` gets the section holding the key (always called: it handles absence), `nested`
  // the reference rows of its keys.
  Schema& custom(const std::string& key, std::string type, std::string doc,
                 std::function<void(Section&, T&)> read,
                 std::function<YAML::Node(const T&, Style)> write,
                 std::function<std::vector<KeyDoc>()> nested = {}) {
    Field f = base(key, std::move(type), std::move(doc));
    f.always_read = true;
    f.read = std::move(read);
    f.write = std::move(write);
    if (nested) f.nested = [nested](const std::string&) { return nested(); };
    return add(std::move(f));
  }

  // The keys of the table row that the earlier key `name_key` chose (an optimizer's): each row's
  // own schema over its options, read into `member` (a std::any that then holds that row's
  // options struct), written here, in this place of the section, and in the reference with
  // "(<noun> <row> only)", rows alike but for their row merged. A key of another row is reported
  // as applying only to the rows that have it; with a wrong name, no row's key is judged.
  template <class C>
  requires std::is_base_of_v<C, T> Schema& row_keys(const std::string& name_key,
                                                    std::any C::*member,
                                                    std::function<std::vector<RowKeys>()> rows) {
    const Field* name_field = field(name_key);
    if (!name_field) throw std::logic_error("row_keys: declare `" + name_key + "` first");
    // The chosen row's name, as written (the schema is copied: capture no `this`).
    const auto chosen_of = [write = name_field->write](const T& t) {
      const YAML::Node v = write(t, Style::file);
      return v.IsScalar() ? v.Scalar() : std::string();
    };
    Field f = base("", "", "");
    f.always_read = true;
    f.read = [chosen_of, name_key, member, rows, noun = noun_](Section& s, T& t) {
      const std::vector<RowKeys> all = rows();
      const std::string chosen = chosen_of(t);
      const RowKeys* row = nullptr;
      for (const RowKeys& r : all)
        if (r.name == chosen) row = &r;
      if (s.reader().has_problem(s.path_of(name_key)) || !row) {
        for (const RowKeys& r : all)  // the name is wrong: its keys cannot be judged
          for (const std::string& key : r.keys->keys()) s.get(key);
        return;
      }
      t.*member = row->keys->defaults();
      row->keys->read(s, t.*member);
      if (row->check) row->check(t.*member, s.reader(), s.path());
      s.explain_unknown([all, noun, name_key, chosen](const std::string& key) {
        std::vector<std::string> owners;
        for (const RowKeys& r : all)
          if (r.keys->has_key(key)) owners.push_back(r.name);
        return owners.empty() ? std::optional<std::string>()
                              : not_applying_message(noun, name_key, owners, chosen, "");
      });
    };
    f.write = [chosen_of, member, rows](const T& t, Style style) {
      const std::string chosen = chosen_of(t);
      for (const RowKeys& r : rows())
        if (r.name == chosen) return r.keys->write(t.*member, style);
      return YAML::Node(YAML::NodeType::Map);
    };
    f.nested = [rows, noun = noun_](const std::string& prefix) {
      std::vector<KeyDoc> docs;
      for (const RowKeys& r : rows())
        for (KeyDoc doc : r.keys->reference(prefix)) {
          doc.applies = noun + " " + r.name;
          docs.push_back(std::move(doc));
        }
      return merge_alike(docs);
    };
    f.splices = true;
    return add(std::move(f));
  }

  // ---- modifiers of the last declared key ----
  // Absent → a problem "required: `hint`".
  Schema& required(std::string hint) {
    last().required = true;
    last().hint = std::move(hint);
    last().default_text = "required";
    return *this;
  }
  // The key applies only when the (earlier) key `discriminator` has one of `values`; given
  // otherwise it is a problem, and it is left out of the resolved file.
  Schema& only_for(std::string discriminator, std::vector<std::string> values,
                   std::string reason = "") {
    Field& f = last();
    f.only_key = std::move(discriminator);
    f.only_values = std::move(values);
    f.only_reason = std::move(reason);
    return *this;
  }
  // Absent → `fill` computes the default from the keys read so far; `text` documents it.
  Schema& fallback(std::function<void(T&)> fill, std::string text) {
    last().fallback = std::move(fill);
    last().default_text = std::move(text);
    return *this;
  }
  // The key is read whatever `when` says, but written back only where it matters (the normal
  // initialisation's init_std); the reference gives its default "<default> `condition`".
  Schema& written_if(std::function<bool(const T&)> when, std::string condition) {
    last().written_if = std::move(when);
    last().written_if_text = std::move(condition);
    return *this;
  }

  // ---- use ----
  void read(Section& s, T& t) const {
    for (const Field& f : fields_) {
      if (!f.only_key.empty()) {
        std::optional<bool> applies = applies_in(f, s, t);
        if (!applies) {  // the discriminator itself is wrong: no judgement, no noise
          s.get(f.key);
          continue;
        }
        if (!*applies) {
          if (s.has(f.key))
            s.reader().add(s.path_of(f.key),
                           not_applying_message(noun_, f.only_key, f.only_values,
                                                discriminator(f, t), f.only_reason),
                           s.get(f.key));
          continue;
        }
      }
      if (f.required && !s.has(f.key))
        s.require(f.key, f.hint);
      else if (f.always_read || s.has(f.key))
        f.read(s, t);
      else if (f.fallback)
        f.fallback(t);
    }
  }
  // The keys that apply, in declaration order.
  YAML::Node write(const T& t, Style style = Style::file) const {
    YAML::Node map(YAML::NodeType::Map);
    for (const Field& f : fields_) {
      if (!applies(f, t) || (f.written_if && !f.written_if(t))) continue;
      YAML::Node value = f.write(t, style);
      if (f.splices) {
        for (auto it = value.begin(); it != value.end(); ++it) map[it->first] = it->second;
      } else if (value.IsDefined()) {
        map[f.key] = value;
      }
    }
    return map;
  }
  std::vector<KeyDoc> reference(const std::string& prefix) const {
    std::vector<KeyDoc> rows;
    for (const Field& f : fields_) {
      if (f.splices) {
        for (KeyDoc& row : f.nested(prefix)) rows.push_back(std::move(row));
        continue;
      }
      const std::string path = prefix.empty() ? f.key : prefix + "." + f.key;
      std::string applies;
      if (!f.only_key.empty()) {
        applies = f.only_key == "name" || f.only_key == "type" ? noun_ : f.only_key;
        for (size_t i = 0; i < f.only_values.size(); ++i)
          applies += (i ? " | " : " ") + f.only_values[i];
      }
      std::string default_text = default_of(f);
      bool literal = f.default_text.empty() ? !default_text.empty() : f.default_is_value;
      if (default_text.empty() && f.none_when_unwritten) default_text = "none";
      if (!f.written_if_text.empty()) {
        default_text += " " + f.written_if_text;
        literal = false;
      }
      rows.push_back({path, f.type, default_text, literal, f.doc, applies});
      if (f.nested)
        for (KeyDoc& row : f.nested(path)) rows.push_back(std::move(row));
    }
    return rows;
  }
  bool has_key(const std::string& key) const {
    for (const Field& f : fields_)
      if (!f.splices && f.key == key) return true;
    return false;
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> names;
    for (const Field& f : fields_)
      if (!f.splices) names.push_back(f.key);
    return names;
  }
  const std::string& noun() const { return noun_; }

 private:
  struct Field {
    std::string key, type, doc, default_text;
    bool required = false, always_read = false;
    std::string hint;
    bool default_is_value = false;
    bool none_when_unwritten = false;  // a key() whose default writes nothing: "none"
    bool splices = false;              // row_keys(): its keys go into the section itself
    std::string only_key, only_reason;
    std::vector<std::string> only_values;
    std::function<void(Section&, T&)> read;
    std::function<YAML::Node(const T&, Style)> write;
    std::function<void(T&)> fallback;
    std::function<std::vector<KeyDoc>(const std::string&)> nested;
    std::function<bool(const T&)> written_if;
    std::string written_if_text;
  };

  Field base(const std::string& key, std::string type, std::string doc) {
    Field f;
    f.key = key;
    f.type = std::move(type);
    f.doc = std::move(doc);
    return f;
  }
  Schema& add(Field f) {
    fields_.push_back(std::move(f));
    return *this;
  }
  Field& last() { return fields_.back(); }
  const Field* field(const std::string& key) const {
    for (const Field& f : fields_)
      if (f.key == key) return &f;
    return nullptr;
  }
  std::string discriminator(const Field& f, const T& t) const {
    const Field* d = field(f.only_key);
    if (!d) return {};
    YAML::Node v = d->write(t, Style::file);
    return v.IsScalar() ? v.Scalar() : std::string();
  }
  bool applies(const Field& f, const T& t) const {
    if (f.only_key.empty()) return true;
    const std::string current = discriminator(f, t);
    for (const auto& v : f.only_values)
      if (v == current) return true;
    return false;
  }
  // nullopt when the discriminator has a problem of its own.
  std::optional<bool> applies_in(const Field& f, Section& s, const T& t) const {
    if (s.reader().has_problem(s.path_of(f.only_key))) return std::nullopt;
    return applies(f, t);
  }
  std::string default_of(const Field& f) const {
    if (!f.default_text.empty() || f.nested) return f.default_text;
    if constexpr (std::is_default_constructible_v<T>) {
      YAML::Node v = f.write(T{}, Style::file);
      return v.IsDefined() ? one_line(v) : std::string();
    }
    return {};
  }

  std::string noun_;
  std::vector<Field> fields_;
};

template <class T>
class ErasedSchema final : public AnySchema {
 public:
  explicit ErasedSchema(Schema<T> schema) : schema_(std::move(schema)) {}
  std::any defaults() const override { return T{}; }
  void read(Section& s, std::any& value) const override { schema_.read(s, cast(value)); }
  YAML::Node write(const std::any& value, Style style) const override {
    return schema_.write(cast(value), style);
  }
  std::vector<KeyDoc> reference(const std::string& prefix) const override {
    return schema_.reference(prefix);
  }
  bool has_key(const std::string& key) const override { return schema_.has_key(key); }
  std::vector<std::string> keys() const override { return schema_.keys(); }

 private:
  // The options of another schema here are a programming error (a name changed without its
  // options): say so instead of std::bad_any_cast.
  std::string noun_of() const { return "'" + schema_.noun() + "'"; }
  template <class Any>
  auto& cast(Any& value) const {
    auto* typed = std::any_cast<T>(&value);
    if (!typed) throw std::logic_error("options of another type given to the keys of " + noun_of());
    return *typed;
  }
  Schema<T> schema_;
};

template <class T>
std::shared_ptr<const AnySchema> erase(Schema<T> schema) {
  return std::make_shared<ErasedSchema<T>>(std::move(schema));
}

// The options in `map`, which a check with the same schema has passed and completed (a resolved
// model spec): read without .as<T>(default), other keys of the map ignored. A problem here is a
// programming error (std::logic_error), not the user's.
std::any read_resolved(const AnySchema& schema, const YAML::Node& map);

// The key reference as a Markdown table: key, type, default, description.
std::string reference_markdown(const std::vector<KeyDoc>& rows);

}  // namespace dtrain::config
