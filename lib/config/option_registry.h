// OptionRegistry: the one declaration of every recipe key (path, type, default, check, doc).
// The YAML loader, --set overrides, `xtrain validate` and the recipe reference in docs/recipes.md are
// all driven from it, so a key cannot exist in one place and be missing in another.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/recipe.h"

namespace xtrain::config {

enum class ValueType { Integer, Float, Boolean, String, FloatList, IntegerList, StringList, Sources };
const char* value_type_name(ValueType type);

// A check returns nullopt when the value is fine, else what is wrong ("must be >= 1").
template <class T>
using Check = std::function<std::optional<std::string>(const T&)>;

struct Option {
  std::string path;  // "model.hidden_size"
  ValueType type;
  std::string doc;
  // Parses and checks node into the recipe field; returns the problem or nullopt.
  std::function<std::optional<std::string>(const YAML::Node&, Recipe&)> assign;
  // The field's value rendered as YAML text (a plain scalar or a flow list).
  std::function<std::string(const Recipe&)> render;
  // The field's value as messages write it (fmt's "{}", a choice's name), and as model.init_from
  // hands a config.json value to `assign` for its check.
  std::function<std::string(const Recipe&)> plain;
  // Copies the field from one recipe into another; whether two recipes hold the same value.
  std::function<void(const Recipe& from, Recipe& to)> copy;
  std::function<bool(const Recipe&, const Recipe&)> same;
  std::string default_text;
  bool required = false;
};

class OptionRegistry {
 public:
  // The registry of all recipe keys, in documentation order.
  static const OptionRegistry& instance();

  const std::vector<Option>& options() const { return options_; }
  const Option* find(const std::string& path) const;
  bool is_section(const std::string& name) const;
  // Closest known key to a misspelled one, if it is close enough to be a likely typo.
  std::optional<std::string> suggest(const std::string& path) const;

  // Declares a key bound to a field of Recipe through an accessor.
  template <class T>
  void add(std::string path, std::function<T&(Recipe&)> field, T default_value, std::string doc,
           Check<T> check = {});
  // Declares a data source key: a string, or a list of {path, weight} kept as its YAML flow
  // text (data/sources/source_list.h).
  void add_sources(std::string path, std::function<std::string&(Recipe&)> field, std::string default_value,
                   std::string doc, Check<std::string> check = {});
  // Declares a string key kept in the recipe in another form (an enum, util/choice.h): `store`
  // checks the text and sets the field (or returns the problem), `text` spells the field again.
  void add_text(std::string path, std::string default_text, std::string doc,
                std::function<std::optional<std::string>(const std::string&, Recipe&)> store,
                std::function<std::string(const Recipe&)> text);
  void mark_required(const std::string& path);

  // A recipe with every default applied.
  Recipe defaults() const;

 private:
  void add_section_of(const std::string& path);

  std::vector<Option> options_;
  std::vector<std::string> sections_;
};

// Parses a YAML node as T; returns the problem ("expected an integer, got 'abc'") on failure.
template <class T>
std::optional<std::string> parse_value(const YAML::Node& node, T& out);
template <class T>
std::string render_value(const T& value);

}  // namespace xtrain::config
