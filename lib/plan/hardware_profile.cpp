#include "plan/hardware_profile.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "util/build_info.h"
#include "util/input_error.h"

namespace xtrain::plan {
namespace {

std::filesystem::path profile_folder() { return std::filesystem::path(XTRAIN_SOURCE_DIR) / "data" / "hardware"; }

// `key`'s value, or what the profile it is based on holds (`inherited`, 0 when none).
double positive(const YAML::Node& node, const std::string& file, const char* key, double inherited,
                bool required = true) {
  if (!node[key]) {
    if (inherited > 0 || !required) return inherited;
    throw InputError(fmt::format("{}: hardware profile has no '{}': add it (see data/hardware/h100-sxm.yaml)", file, key));
  }
  double value = 0;
  try {
    value = node[key].as<double>();
  } catch (const YAML::Exception&) {
    throw InputError(fmt::format("{}:{}: '{}' must be a number", file, node[key].Mark().line + 1, key));
  }
  if (value <= 0 || (value > 1 && std::string(key).find("efficiency") != std::string::npos))
    throw InputError(fmt::format("{}:{}: '{}' is {}; it must be above 0{}", file, node[key].Mark().line + 1, key, value,
                                 std::string(key).find("efficiency") != std::string::npos ? " and at most 1" : ""));
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
  std::filesystem::path path = name_or_file;
  if (path.extension() != ".yaml" && path.extension() != ".yml") path = profile_folder() / (name_or_file + ".yaml");
  if (!std::filesystem::is_regular_file(path)) {
    std::string known;
    for (const auto& name : hardware_profile_names()) known += (known.empty() ? "" : ", ") + name;
    throw InputError(fmt::format("--hardware {}: no such profile or file; the profiles are {} (or give a YAML file "
                                 "with the fields of data/hardware/h100-sxm.yaml)",
                                 name_or_file, known));
  }
  const std::string file = path.string();
  YAML::Node node;
  try {
    node = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: {}", file, e.what()));
  }
  // A variant of a device (another power limit, other memory) names the profile it is based on
  // and lists only what differs; the rest, the fitted efficiencies among them, comes from there.
  HardwareProfile p;
  if (node["based_on"]) {
    const auto base = node["based_on"].as<std::string>();
    if (base == path.stem().string())
      throw InputError(fmt::format("{}: 'based_on: {}' names the profile itself", file, base));
    p = load_hardware_profile(base);
    p.sources.clear();
  }
  p.name = node["name"] ? node["name"].as<std::string>() : path.stem().string();
  p.description = node["description"] ? node["description"].as<std::string>() : p.description;
  if (node["sources"])
    for (const auto& source : node["sources"]) p.sources.push_back(source.as<std::string>());
  if (p.sources.empty())
    throw InputError(fmt::format("{}: hardware profile names no 'sources': list where each figure comes from", file));
  p.peak_tflops_fp32 = positive(node, file, "peak_tflops_fp32", p.peak_tflops_fp32);
  p.peak_tflops_bf16 = positive(node, file, "peak_tflops_bf16", p.peak_tflops_bf16);
  p.peak_tflops_fp8 = positive(node, file, "peak_tflops_fp8", p.peak_tflops_fp8, false);
  p.memory_gib = positive(node, file, "memory_gib", p.memory_gib);
  p.memory_gbs = positive(node, file, "memory_gbs", p.memory_gbs);
  p.intra_node_gbs = positive(node, file, "intra_node_gbs", p.intra_node_gbs);
  p.inter_node_gbs = positive(node, file, "inter_node_gbs", p.inter_node_gbs);
  p.runtime_gib = positive(node, file, "runtime_gib", p.runtime_gib);
  p.allocator_overhead = positive(node, file, "allocator_overhead", p.allocator_overhead, false);
  p.gemm_efficiency = positive(node, file, "gemm_efficiency", p.gemm_efficiency);
  p.attention_efficiency = positive(node, file, "attention_efficiency", p.attention_efficiency);
  p.expert_efficiency = positive(node, file, "expert_efficiency", p.expert_efficiency);
  p.link_efficiency = positive(node, file, "link_efficiency", p.link_efficiency);
  p.fp8_gemm_efficiency = positive(node, file, "fp8_gemm_efficiency", p.fp8_gemm_efficiency, false);
  p.communication_overlaps_compute =
      flag(node, file, "communication_overlaps_compute", p.communication_overlaps_compute);
  p.collective_latency_ms = positive(node, file, "collective_latency_ms", p.collective_latency_ms, false);
  return p;
}

}  // namespace xtrain::plan
