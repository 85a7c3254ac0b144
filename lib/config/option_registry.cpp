#include "config/option_registry.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "config/close_match.h"
#include "data/sources/source_list.h"
#include "util/input_error.h"

namespace xtrain::config {

const char* value_type_name(ValueType type) {
  switch (type) {
    case ValueType::Integer: return "integer";
    case ValueType::Float: return "float";
    case ValueType::Boolean: return "bool";
    case ValueType::String: return "string";
    case ValueType::FloatList: return "list of floats";
    case ValueType::IntegerList: return "list of integers";
    case ValueType::StringList: return "list of strings";
    case ValueType::Sources: return "source or list";
  }
  return "?";
}

namespace {

template <class T> constexpr ValueType value_type_of();
template <> constexpr ValueType value_type_of<int64_t>() { return ValueType::Integer; }
template <> constexpr ValueType value_type_of<double>() { return ValueType::Float; }
template <> constexpr ValueType value_type_of<bool>() { return ValueType::Boolean; }
template <> constexpr ValueType value_type_of<std::string>() { return ValueType::String; }
template <> constexpr ValueType value_type_of<std::vector<double>>() { return ValueType::FloatList; }
template <> constexpr ValueType value_type_of<std::vector<int64_t>>() { return ValueType::IntegerList; }
template <> constexpr ValueType value_type_of<std::vector<std::string>>() { return ValueType::StringList; }

std::string describe(const YAML::Node& node) {
  if (node.IsNull()) return "nothing";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "'" + node.Scalar() + "'";
}

std::optional<double> parse_double(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(begin, &end);
  if (end != begin + text.size() || errno == ERANGE || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace

template <>
std::optional<std::string> parse_value(const YAML::Node& node, int64_t& out) {
  if (!node.IsScalar()) return "expected an integer, got " + describe(node);
  const std::string& text = node.Scalar();
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE)
    return "expected an integer, got " + describe(node);
  out = value;
  return std::nullopt;
}

template <>
std::optional<std::string> parse_value(const YAML::Node& node, double& out) {
  if (!node.IsScalar()) return "expected a number, got " + describe(node);
  auto value = parse_double(node.Scalar());
  if (!value) return "expected a number, got " + describe(node);
  out = *value;
  return std::nullopt;
}

template <>
std::optional<std::string> parse_value(const YAML::Node& node, bool& out) {
  if (node.IsScalar() && (node.Scalar() == "true" || node.Scalar() == "false")) {
    out = node.Scalar() == "true";
    return std::nullopt;
  }
  return "expected true or false, got " + describe(node);
}

template <>
std::optional<std::string> parse_value(const YAML::Node& node, std::string& out) {
  if (node.IsNull()) {  // `eval:` or `--set data.eval=`: the empty string, i.e. none
    out.clear();
    return std::nullopt;
  }
  if (!node.IsScalar()) return "expected a string, got " + describe(node);
  out = node.Scalar();
  return std::nullopt;
}

namespace {

// A YAML list of numbers, each read as parse_value reads one.
template <class T>
std::optional<std::string> parse_number_list(const YAML::Node& node, std::vector<T>& out, const std::string& kind,
                                             const std::string& example) {
  if (!node.IsSequence()) return "expected a list of " + kind + " like " + example + ", got " + describe(node);
  std::vector<T> values;
  for (const auto& item : node) {
    T value;
    if (parse_value(item, value)) return "expected a list of " + kind + ", got item " + describe(item);
    values.push_back(value);
  }
  out = std::move(values);
  return std::nullopt;
}

}  // namespace

template <>
std::optional<std::string> parse_value(const YAML::Node& node, std::vector<double>& out) {
  return parse_number_list(node, out, "numbers", "[0.9, 0.95]");
}

template <>
std::optional<std::string> parse_value(const YAML::Node& node, std::vector<int64_t>& out) {
  if (node.IsNull()) {  // `--set parallel.pp_layers=`: none
    out.clear();
    return std::nullopt;
  }
  return parse_number_list(node, out, "integers", "[3, 4, 4, 3]");
}

template <>
std::optional<std::string> parse_value(const YAML::Node& node, std::vector<std::string>& out) {
  if (node.IsNull()) {  // `freeze:` or `--set model.freeze=`: none
    out.clear();
    return std::nullopt;
  }
  if (!node.IsSequence()) return "expected a list like [a, b], got " + describe(node);
  std::vector<std::string> values;
  for (const auto& item : node) {
    if (!item.IsScalar()) return "expected a list of names, got item " + describe(item);
    values.push_back(item.Scalar());
  }
  out = std::move(values);
  return std::nullopt;
}

template <> std::string render_value(const int64_t& value) { return std::to_string(value); }
// Shortest text that parses back to the same double, so a dumped recipe reloads exactly.
template <> std::string render_value(const double& value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}
template <> std::string render_value(const bool& value) { return value ? "true" : "false"; }
template <> std::string render_value(const std::string& value) {
  YAML::Emitter emitter;
  emitter << value;
  return emitter.c_str();
}
namespace {
template <class T>
std::string render_list(const std::vector<T>& value) {
  std::string text = "[";
  for (size_t i = 0; i < value.size(); ++i) text += (i ? ", " : "") + render_value(value[i]);
  return text + "]";
}
}  // namespace
template <> std::string render_value(const std::vector<std::string>& value) { return render_list(value); }
template <> std::string render_value(const std::vector<int64_t>& value) { return render_list(value); }
template <> std::string render_value(const std::vector<double>& value) { return render_list(value); }

namespace {

template <class T>
std::string plain_text(const T& value) {
  return fmt::format("{}", value);
}
template <> std::string plain_text(const std::vector<double>& value) { return render_value(value); }
template <> std::string plain_text(const std::vector<std::string>& value) { return render_value(value); }
template <> std::string plain_text(const std::vector<int64_t>& value) { return render_value(value); }

}  // namespace

template <class T>
void OptionRegistry::add(std::string path, std::function<T&(Recipe&)> field, T default_value,
                         std::string doc, Check<T> check) {
  add_section_of(path);
  Option option;
  option.path = path;
  option.type = value_type_of<T>();
  option.doc = std::move(doc);
  option.default_text = render_value(default_value);
  option.assign = [field, check, default_value](const YAML::Node& node,
                                                 Recipe& recipe) -> std::optional<std::string> {
    T value = default_value;
    if (auto problem = parse_value(node, value)) return problem;
    if (check) {
      if (auto problem = check(value)) return problem;
    }
    field(recipe) = value;
    return std::nullopt;
  };
  option.render = [field](const Recipe& recipe) {
    return render_value<T>(field(const_cast<Recipe&>(recipe)));
  };
  option.plain = [field](const Recipe& recipe) { return plain_text<T>(field(const_cast<Recipe&>(recipe))); };
  option.copy = [field](const Recipe& from, Recipe& to) { field(to) = field(const_cast<Recipe&>(from)); };
  option.same = [field](const Recipe& a, const Recipe& b) {
    return field(const_cast<Recipe&>(a)) == field(const_cast<Recipe&>(b));
  };
  options_.push_back(std::move(option));
}

template void OptionRegistry::add<int64_t>(std::string, std::function<int64_t&(Recipe&)>, int64_t,
                                           std::string, Check<int64_t>);
template void OptionRegistry::add<double>(std::string, std::function<double&(Recipe&)>, double,
                                          std::string, Check<double>);
template void OptionRegistry::add<bool>(std::string, std::function<bool&(Recipe&)>, bool,
                                        std::string, Check<bool>);
template void OptionRegistry::add<std::string>(std::string, std::function<std::string&(Recipe&)>,
                                               std::string, std::string, Check<std::string>);
template void OptionRegistry::add<std::vector<std::string>>(
    std::string, std::function<std::vector<std::string>&(Recipe&)>, std::vector<std::string>, std::string,
    Check<std::vector<std::string>>);
template void OptionRegistry::add<std::vector<int64_t>>(
    std::string, std::function<std::vector<int64_t>&(Recipe&)>, std::vector<int64_t>, std::string,
    Check<std::vector<int64_t>>);
template void OptionRegistry::add<std::vector<double>>(
    std::string, std::function<std::vector<double>&(Recipe&)>, std::vector<double>, std::string,
    Check<std::vector<double>>);

void OptionRegistry::add_sources(std::string path, std::function<std::string&(Recipe&)> field,
                                 std::string default_value, std::string doc, Check<std::string> check) {
  add<std::string>(path, field, default_value, std::move(doc), check);
  Option& option = options_.back();
  option.type = ValueType::Sources;
  option.assign = [field, check](const YAML::Node& node, Recipe& recipe) -> std::optional<std::string> {
    std::string value;
    if (node.IsSequence()) {
      // As flow text, the one form that data::parse_source_list reads, whatever style the recipe used.
      YAML::Node list = YAML::Clone(node);
      list.SetStyle(YAML::EmitterStyle::Flow);
      for (auto item : list) item.SetStyle(YAML::EmitterStyle::Flow);
      YAML::Emitter flow;
      flow << list;
      try {
        value = data::encode_source_list(data::parse_source_list(flow.c_str()));
      } catch (const InputError& e) {
        return std::string(e.what());
      }
    } else {
      if (auto problem = parse_value(node, value))
        return "expected a source or a list of {path: SOURCE, weight: NUMBER}, got " + describe(node);
      if (data::is_source_list(value)) return std::string("a source path cannot start with '['");
    }
    if (check) {
      if (auto problem = check(value)) return problem;
    }
    field(recipe) = value;
    return std::nullopt;
  };
  option.render = [field](const Recipe& recipe) {
    const std::string& value = field(const_cast<Recipe&>(recipe));
    return data::is_source_list(value) ? value : render_value<std::string>(value);
  };
}

void OptionRegistry::add_section_of(const std::string& path) {
  auto dot = path.find('.');
  if (dot == std::string::npos) return;
  std::string section = path.substr(0, dot);
  if (std::find(sections_.begin(), sections_.end(), section) == sections_.end()) sections_.push_back(section);
}

void OptionRegistry::add_text(std::string path, std::string default_text, std::string doc,
                              std::function<std::optional<std::string>(const std::string&, Recipe&)> store,
                              std::function<std::string(const Recipe&)> text) {
  add_section_of(path);
  Option option;
  option.path = std::move(path);
  option.type = ValueType::String;
  option.doc = std::move(doc);
  option.default_text = render_value(default_text);
  // Read as any string key (nothing is the empty string), so that its problems read alike.
  option.assign = [store, default_text](const YAML::Node& node, Recipe& recipe) -> std::optional<std::string> {
    std::string value = default_text;
    if (auto problem = parse_value(node, value)) return problem;
    return store(value, recipe);
  };
  option.render = [text](const Recipe& recipe) { return render_value(text(recipe)); };
  option.plain = text;
  option.copy = [store, text](const Recipe& from, Recipe& to) { store(text(from), to); };
  option.same = [text](const Recipe& a, const Recipe& b) { return text(a) == text(b); };
  options_.push_back(std::move(option));
}

void OptionRegistry::mark_required(const std::string& path) {
  for (auto& option : options_)
    if (option.path == path) option.required = true;
}

const Option* OptionRegistry::find(const std::string& path) const {
  for (const auto& option : options_)
    if (option.path == path) return &option;
  return nullptr;
}

bool OptionRegistry::is_section(const std::string& name) const {
  return std::find(sections_.begin(), sections_.end(), name) != sections_.end();
}

std::optional<std::string> OptionRegistry::suggest(const std::string& path) const {
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(2, path.size() / 4) + 1;
  auto consider = [&](const std::string& candidate) {
    // The distance is at least the difference in length: a long unknown key costs nothing.
    const size_t length_gap = path.size() > candidate.size() ? path.size() - candidate.size() : candidate.size() - path.size();
    if (length_gap >= best_distance) return;
    size_t distance = edit_distance(path, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  };
  for (const auto& option : options_) consider(option.path);
  for (const auto& section : sections_) {
    consider(section);
    // "optimizer" for "optim", "check" for "checkpoint".
    if (!best && path.find('.') == std::string::npos && path.size() >= 3 &&
        (path.rfind(section, 0) == 0 || section.rfind(path, 0) == 0))
      best = section;
  }
  // A key placed in the wrong section: "hidden_size" at top level or "train.lr".
  auto leaf = path.substr(path.rfind('.') == std::string::npos ? 0 : path.rfind('.') + 1);
  if (!best) {
    for (const auto& option : options_) {
      auto option_leaf = option.path.substr(option.path.rfind('.') + 1);
      if (option_leaf == leaf && option.path != path) return option.path;
    }
  }
  return best;
}

Recipe OptionRegistry::defaults() const {
  Recipe recipe;
  for (const auto& option : options_) {
    YAML::Node node = YAML::Load(option.default_text);
    option.assign(node, recipe);
  }
  return recipe;
}

}  // namespace xtrain::config
