#include "data/sources/source_list.h"

#include <cmath>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "util/input_error.h"

namespace xtrain::data {
namespace {

constexpr const char* kForm = "expected a list of {path: SOURCE, weight: NUMBER}";

double parse_weight(const YAML::Node& node, const std::string& where) {
  double weight = 0;
  bool parsed = node.IsScalar();
  if (parsed) {
    try {
      weight = node.as<double>();
    } catch (const YAML::Exception&) {
      parsed = false;
    }
  }
  if (!parsed || !(weight > 0) || !std::isfinite(weight))
    throw InputError(fmt::format("{}: weight must be a positive number, got '{}'", where,
                                 node.IsScalar() ? node.Scalar() : std::string("a collection")));
  return weight;
}

}  // namespace

bool is_source_list(const std::string& spec) { return !spec.empty() && spec.front() == '['; }

std::vector<WeightedSource> parse_source_list(const std::string& spec) {
  if (!is_source_list(spec)) return {{spec, 1.0}};
  YAML::Node list;
  try {
    list = YAML::Load(spec);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("invalid source list: {} ({})", e.msg, kForm));
  }
  if (!list.IsSequence() || list.size() == 0) throw InputError(fmt::format("empty source list ({})", kForm));
  std::vector<WeightedSource> sources;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    const std::string where = fmt::format("source {}", i + 1);
    WeightedSource source;
    if (item.IsScalar()) {
      source.path = item.Scalar();
    } else if (item.IsMap()) {
      for (const auto& entry : item) {
        const std::string key = entry.first.Scalar();
        if (key == "path" && entry.second.IsScalar()) {
          source.path = entry.second.Scalar();
        } else if (key == "weight") {
          source.weight = parse_weight(entry.second, where);
        } else {
          throw InputError(fmt::format("{}: unknown key '{}' ({})", where, key, kForm));
        }
      }
    } else {
      throw InputError(fmt::format("{}: {}", where, kForm));
    }
    if (source.path.empty()) throw InputError(fmt::format("{}: missing path ({})", where, kForm));
    if (is_source_list(source.path)) throw InputError(fmt::format("{}: a path cannot start with '['", where));
    sources.push_back(source);
  }
  return sources;
}

std::string encode_source_list(const std::vector<WeightedSource>& sources) {
  YAML::Emitter out;
  out << YAML::Flow << YAML::BeginSeq;
  for (const auto& source : sources) {
    // The shortest text that reads back as the same double.
    out << YAML::BeginMap << YAML::Key << "path" << YAML::Value << source.path << YAML::Key << "weight"
        << YAML::Value << fmt::format("{}", source.weight) << YAML::EndMap;
  }
  out << YAML::EndSeq;
  return out.c_str();
}

}  // namespace xtrain::data
