#include "plan/hardware_profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/close_match.h"
#include "util/build_info.h"
#include "util/input_error.h"

namespace xtrain::plan {
namespace {

std::filesystem::path profile_folder() { return std::filesystem::path(XTRAIN_SOURCE_DIR) / "data" / "hardware"; }

// The values a figure may take: finite, within what any device could have, so that a typo
// (1e-300, .inf, 8e10) is refused rather than planned with.
struct Bounds {
  double low, high;
  bool low_open;  // (low, high] rather than [low, high]
  const char* unit;
};
constexpr Bounds kTflops{1e-4, 1e5, false, "TFLOPS"};
constexpr Bounds kGib{1e-3, 1e5, false, "GiB"};
constexpr Bounds kGbs{1e-3, 1e5, false, "GB/s"};
constexpr Bounds kFraction{0, 1, true, ""};
constexpr Bounds kOverhead{0, 10, true, "(a fraction of what a step allocates)"};
constexpr Bounds kLatencyMs{0, 1e4, true, "ms"};

std::string line_of(const std::string& file, const YAML::Node& node) {
  return fmt::format("{}:{}", file, node.Mark().line + 1);
}

std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "'" + node.Scalar() + "'";
}

// `key`'s value, or what the profile it is based on holds (`inherited`, 0 when none).
double figure(const YAML::Node& node, const std::string& file, const char* key, double inherited, Bounds bounds,
              bool required = true) {
  if (!node[key]) {
    if (inherited > 0 || !required) return inherited;
    throw InputError(fmt::format("{}: hardware profile has no '{}': add it (see data/hardware/h100-sxm.yaml)", file, key));
  }
  const YAML::Node value_node = node[key];
  double value = 0;
  try {
    if (!value_node.IsScalar()) throw YAML::Exception(value_node.Mark(), "not a scalar");
    value = value_node.as<double>();
  } catch (const YAML::Exception&) {
    throw InputError(fmt::format("{}: '{}' must be a number, got {}", line_of(file, value_node), key,
                                 describe(value_node)));
  }
  const bool above_low = bounds.low_open ? value > bounds.low : value >= bounds.low;
  if (!std::isfinite(value) || !above_low || value > bounds.high)
    throw InputError(fmt::format("{}: '{}' is {}; it must be a finite number {} {} and at most {}{}{}",
                                 line_of(file, value_node), key, value_node.Scalar(),
                                 bounds.low_open ? "above" : "of at least", bounds.low, bounds.high,
                                 *bounds.unit ? " " : "", bounds.unit));
  return value;
}

bool flag(const YAML::Node& node, const std::string& file, const char* key, bool inherited) {
  if (!node[key]) return inherited;
  try {
    return node[key].as<bool>();
  } catch (const YAML::Exception&) {
    throw InputError(fmt::format("{}:{}: '{}' must be true or false", file, node[key].Mark().line + 1, key));
  }
}

std::string text(const YAML::Node& node, const std::string& file, const char* key, const std::string& inherited) {
  if (!node[key]) return inherited;
  const YAML::Node value = node[key];
  if (!value.IsScalar())
    throw InputError(fmt::format("{}: '{}' must be a string, got {}", line_of(file, value), key, describe(value)));
  return value.Scalar();
}

// A field the loader does not read is a typo (memory_gb for memory_gib) whose value would be
// silently replaced by the base profile's or refused as missing.
void check_known_fields(const YAML::Node& node, const std::string& file) {
  static const std::vector<std::string> kFields = {
      "name", "description", "sources", "based_on", "peak_tflops_fp32", "peak_tflops_bf16", "peak_tflops_fp8",
      "memory_gib", "memory_gbs", "intra_node_gbs", "inter_node_gbs", "runtime_gib", "allocator_overhead",
      "gemm_efficiency", "attention_efficiency", "expert_efficiency", "link_efficiency", "fp8_gemm_efficiency",
      "communication_overlaps_compute", "collective_latency_ms"};
  for (const auto& entry : node) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : describe(entry.first);
    if (std::find(kFields.begin(), kFields.end(), key) != kFields.end()) continue;
    const auto meant = config::closest_choice(key, kFields);
    throw InputError(fmt::format("{}: unknown field '{}'{}", line_of(file, entry.first), key,
                                 meant ? fmt::format(" (did you mean {}?)", *meant)
                                       : " (the fields are those of data/hardware/h100-sxm.yaml)"));
  }
}

std::filesystem::path profile_path(const std::string& name_or_file) {
  std::filesystem::path path = name_or_file;
  if (path.extension() != ".yaml" && path.extension() != ".yml") path = profile_folder() / (name_or_file + ".yaml");
  if (!std::filesystem::is_regular_file(path)) {
    std::string known;
    for (const auto& name : hardware_profile_names()) known += (known.empty() ? "" : ", ") + name;
    throw InputError(fmt::format("--hardware {}: no such profile or file; the profiles are {} (or give a YAML file "
                                 "with the fields of data/hardware/h100-sxm.yaml)",
                                 name_or_file, known));
  }
  return path;
}

// `chain`: the files this one is the base of, outermost first, so that a loop of based_on is
// named rather than followed for ever.
HardwareProfile load_profile(const std::string& name_or_file, std::vector<std::string>& chain) {
  const std::filesystem::path path = profile_path(name_or_file);
  const std::string file = path.string();
  YAML::Node node;
  try {
    node = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: {}", file, e.what()));
  }
  if (!node.IsMap())
    throw InputError(fmt::format("{}: a hardware profile is a mapping of fields (name:, sources:, peak_tflops_bf16:, "
                                 "... as in data/hardware/h100-sxm.yaml), got {}",
                                 line_of(file, node), describe(node)));
  check_known_fields(node, file);
  // A variant of a device (another power limit, other memory) names the profile it is based on
  // and lists only what differs; the rest, the fitted efficiencies among them, comes from there.
  HardwareProfile p;
  const std::string base = text(node, file, "based_on", "");
  if (!base.empty()) {
    chain.push_back(file);
    const std::string base_file = std::filesystem::weakly_canonical(profile_path(base)).string();
    for (size_t i = 0; i < chain.size(); ++i) {
      if (std::filesystem::weakly_canonical(chain[i]).string() != base_file) continue;
      std::string loop;
      for (size_t j = i; j < chain.size(); ++j) loop += chain[j] + " -> ";
      throw InputError(fmt::format("{}: 'based_on: {}' makes a loop of profiles: {}{}; base one of them on a profile "
                                   "that lists every field",
                                   line_of(file, node["based_on"]), base, loop, profile_path(base).string()));
    }
    p = load_profile(base, chain);
    chain.pop_back();
    p.sources.clear();
  }
  p.name = text(node, file, "name", path.stem().string());
  p.description = text(node, file, "description", p.description);
  if (node["sources"]) {
    const YAML::Node sources = node["sources"];
    if (!sources.IsSequence())
      throw InputError(fmt::format("{}: 'sources' must be a list of strings, got {}", line_of(file, sources),
                                   describe(sources)));
    for (const auto& source : sources) {
      if (!source.IsScalar())
        throw InputError(fmt::format("{}: 'sources' holds {}; each source is a string", line_of(file, source),
                                     describe(source)));
      p.sources.push_back(source.Scalar());
    }
  }
  if (p.sources.empty())
    throw InputError(fmt::format("{}: hardware profile names no 'sources': list where each figure comes from", file));
  p.peak_tflops_fp32 = figure(node, file, "peak_tflops_fp32", p.peak_tflops_fp32, kTflops);
  p.peak_tflops_bf16 = figure(node, file, "peak_tflops_bf16", p.peak_tflops_bf16, kTflops);
  p.peak_tflops_fp8 = figure(node, file, "peak_tflops_fp8", p.peak_tflops_fp8, kTflops, false);
  p.memory_gib = figure(node, file, "memory_gib", p.memory_gib, kGib);
  p.memory_gbs = figure(node, file, "memory_gbs", p.memory_gbs, kGbs);
  p.intra_node_gbs = figure(node, file, "intra_node_gbs", p.intra_node_gbs, kGbs);
  p.inter_node_gbs = figure(node, file, "inter_node_gbs", p.inter_node_gbs, kGbs);
  p.runtime_gib = figure(node, file, "runtime_gib", p.runtime_gib, kGib);
  p.allocator_overhead = figure(node, file, "allocator_overhead", p.allocator_overhead, kOverhead, false);
  p.gemm_efficiency = figure(node, file, "gemm_efficiency", p.gemm_efficiency, kFraction);
  p.attention_efficiency = figure(node, file, "attention_efficiency", p.attention_efficiency, kFraction);
  p.expert_efficiency = figure(node, file, "expert_efficiency", p.expert_efficiency, kFraction);
  p.link_efficiency = figure(node, file, "link_efficiency", p.link_efficiency, kFraction);
  p.fp8_gemm_efficiency = figure(node, file, "fp8_gemm_efficiency", p.fp8_gemm_efficiency, kFraction, false);
  p.communication_overlaps_compute =
      flag(node, file, "communication_overlaps_compute", p.communication_overlaps_compute);
  p.collective_latency_ms = figure(node, file, "collective_latency_ms", p.collective_latency_ms, kLatencyMs, false);
  if (p.runtime_gib >= p.memory_gib)
    throw InputError(fmt::format("{}: runtime_gib {} leaves nothing of memory_gib {} for the model: it must be less",
                                 file, p.runtime_gib, p.memory_gib));
  return p;
}

}  // namespace

std::vector<std::string> hardware_profile_names() {
  std::vector<std::string> names;
  if (std::filesystem::is_directory(profile_folder()))
    for (const auto& entry : std::filesystem::directory_iterator(profile_folder()))
      if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

HardwareProfile load_hardware_profile(const std::string& name_or_file) {
  std::vector<std::string> chain;
  return load_profile(name_or_file, chain);
}

}  // namespace xtrain::plan
