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
      "communication_overlaps_compute", "collective_latency_ms", "attention_kernels", "attention_kernel",
      "fp8_gemm_tflops", "grouped_gemm_half_tokens", "matmul_tflops_bf16", "fp8_linear_speedups", "fp8_linear"};
  for (const auto& entry : node) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : describe(entry.first);
    if (std::find(kFields.begin(), kFields.end(), key) != kFields.end()) continue;
    const auto meant = config::closest_choice(key, kFields);
    throw InputError(fmt::format("{}: unknown field '{}'{}", line_of(file, entry.first), key,
                                 meant ? fmt::format(" (did you mean {}?)", *meant)
                                       : " (the fields are those of data/hardware/h100-sxm.yaml)"));
  }
}

// A list of numbers within `bounds`, rising strictly where `rising`.
std::vector<double> numbers(const YAML::Node& node, const std::string& file, const std::string& key, Bounds bounds,
                            bool rising) {
  if (!node.IsSequence() || node.size() == 0)
    throw InputError(fmt::format("{}: '{}' must be a list of numbers, got {}", line_of(file, node), key, describe(node)));
  std::vector<double> values;
  for (const auto& item : node) {
    double value = 0;
    try {
      value = item.as<double>();
    } catch (const YAML::Exception&) {
      throw InputError(fmt::format("{}: '{}' holds {}; it must be numbers", line_of(file, item), key, describe(item)));
    }
    if (!std::isfinite(value) || value < bounds.low || value > bounds.high || (rising && !values.empty() && value <= values.back()))
      throw InputError(fmt::format("{}: '{}' holds {}; it must be {}numbers from {} to {}", line_of(file, item), key,
                                   item.Scalar(), rising ? "rising " : "", bounds.low, bounds.high));
    values.push_back(value);
  }
  return values;
}

constexpr Bounds kDimension{1, 1e9, false, ""};

// attention_kernels: {NAME: {head_dims: [..], seq_lens: [..], tflops: [[a row a head dim], ..]}, ..}
std::map<std::string, AttentionRateTable> attention_tables(const YAML::Node& node, const std::string& file) {
  if (!node.IsMap())
    throw InputError(fmt::format("{}: 'attention_kernels' must map kernel names to tables, got {}", line_of(file, node),
                                 describe(node)));
  std::map<std::string, AttentionRateTable> tables;
  for (const auto& entry : node) {
    const std::string name = entry.first.Scalar(), key = "attention_kernels." + name;
    const YAML::Node table = entry.second;
    if (!table.IsMap() || !table["head_dims"] || !table["seq_lens"] || !table["tflops"] || !table["tflops"].IsSequence())
      throw InputError(fmt::format("{}: '{}' needs head_dims, seq_lens and tflops (a row a head dim)", line_of(file, table), key));
    AttentionRateTable t;
    t.head_dims = numbers(table["head_dims"], file, key + ".head_dims", kDimension, true);
    t.seq_lens = numbers(table["seq_lens"], file, key + ".seq_lens", kDimension, true);
    for (const auto& row : table["tflops"]) t.tflops.push_back(numbers(row, file, key + ".tflops", kTflops, false));
    bool shaped = t.tflops.size() == t.head_dims.size();
    for (const auto& row : t.tflops) shaped = shaped && row.size() == t.seq_lens.size();
    if (!shaped)
      throw InputError(fmt::format("{}: '{}.tflops' must hold a row of {} figures for each of the {} head_dims",
                                   line_of(file, table["tflops"]), key, t.seq_lens.size(), t.head_dims.size()));
    tables[name] = t;
  }
  return tables;
}

constexpr Bounds kSpeedup{1e-3, 1e3, false, ""};

// fp8_linear_speedups: {NAME: {size: [..], speedup: [..]}, ..}
std::map<std::string, LinearSpeedupTable> speedup_tables(const YAML::Node& node, const std::string& file) {
  if (!node.IsMap())
    throw InputError(fmt::format("{}: 'fp8_linear_speedups' must map implementations to tables, got {}",
                                 line_of(file, node), describe(node)));
  std::map<std::string, LinearSpeedupTable> tables;
  for (const auto& entry : node) {
    const std::string key = "fp8_linear_speedups." + entry.first.Scalar();
    const YAML::Node table = entry.second;
    if (!table.IsMap() || !table["size"] || !table["speedup"])
      throw InputError(fmt::format("{}: '{}' needs size and speedup lists", line_of(file, table), key));
    LinearSpeedupTable t{numbers(table["size"], file, key + ".size", kDimension, true),
                         numbers(table["speedup"], file, key + ".speedup", kSpeedup, false)};
    if (t.size.size() != t.speedup.size())
      throw InputError(fmt::format("{}: '{}' needs as many speedups as sizes", line_of(file, table), key));
    tables[entry.first.Scalar()] = t;
  }
  return tables;
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

// The published kernel rates: the profile's own, or its base's scaled by the ratio of their peaks
// (a power limit lowers the clock every kernel runs at).
void read_kernel_rates(const YAML::Node& node, const std::string& file, std::pair<double, double> base_peaks,
                       HardwareProfile& p) {
  if (node["attention_kernels"]) {
    p.attention_kernels = attention_tables(node["attention_kernels"], file);
  } else if (base_peaks.first > 0) {
    for (auto& [name, table] : p.attention_kernels)
      for (auto& row : table.tflops)
        for (auto& rate : row) rate *= p.peak_tflops_bf16 / base_peaks.first;
  }
  p.attention_kernel = text(node, file, "attention_kernel", p.attention_kernel);
  if (!p.attention_kernel.empty() && !p.attention_kernels.count(p.attention_kernel))
    throw InputError(fmt::format("{}: 'attention_kernel: {}' names no table of attention_kernels", line_of(file, node["attention_kernel"]),
                                 p.attention_kernel));
  if (!p.attention_kernels.empty() && p.attention_kernel.empty())
    throw InputError(fmt::format("{}: 'attention_kernels' given without 'attention_kernel': name the one the engine runs", file));
  if (node["fp8_gemm_tflops"]) {
    const YAML::Node table = node["fp8_gemm_tflops"];
    if (!table.IsMap() || !table["k"] || !table["tflops"])
      throw InputError(fmt::format("{}: 'fp8_gemm_tflops' needs k and tflops lists", line_of(file, table)));
    p.fp8_gemm_tflops.k = numbers(table["k"], file, "fp8_gemm_tflops.k", kDimension, true);
    p.fp8_gemm_tflops.tflops = numbers(table["tflops"], file, "fp8_gemm_tflops.tflops", kTflops, false);
    if (p.fp8_gemm_tflops.k.size() != p.fp8_gemm_tflops.tflops.size())
      throw InputError(fmt::format("{}: 'fp8_gemm_tflops' needs as many tflops as k", line_of(file, table)));
  } else if (base_peaks.second > 0 && p.peak_tflops_fp8 > 0) {
    for (auto& rate : p.fp8_gemm_tflops.tflops) rate *= p.peak_tflops_fp8 / base_peaks.second;
  }
  p.grouped_gemm_half_tokens =
      figure(node, file, "grouped_gemm_half_tokens", p.grouped_gemm_half_tokens, Bounds{0, 1e7, false, "tokens"}, false);
  // A maximum achievable rate falls with the clock as the peak does; a speedup is a ratio and stays.
  if (node["matmul_tflops_bf16"])
    p.matmul_tflops_bf16 = figure(node, file, "matmul_tflops_bf16", 0, kTflops);
  else if (base_peaks.first > 0)
    p.matmul_tflops_bf16 *= p.peak_tflops_bf16 / base_peaks.first;
  if (p.matmul_tflops_bf16 > p.peak_tflops_bf16)
    throw InputError(fmt::format("{}: matmul_tflops_bf16 {} is above peak_tflops_bf16 {}: a matmul reaches at most the peak",
                                 file, p.matmul_tflops_bf16, p.peak_tflops_bf16));
  if (node["fp8_linear_speedups"]) p.fp8_linear_speedups = speedup_tables(node["fp8_linear_speedups"], file);
  p.fp8_linear = text(node, file, "fp8_linear", p.fp8_linear);
  if (!p.fp8_linear.empty() && !p.fp8_linear_speedups.count(p.fp8_linear))
    throw InputError(fmt::format("{}: 'fp8_linear: {}' names no table of fp8_linear_speedups", line_of(file, node["fp8_linear"]),
                                 p.fp8_linear));
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
  const std::pair<double, double> base_peaks{p.peak_tflops_bf16, p.peak_tflops_fp8};
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
  read_kernel_rates(node, file, base_peaks, p);
  if (p.runtime_gib >= p.memory_gib)
    throw InputError(fmt::format("{}: runtime_gib {} leaves nothing of memory_gib {} for the model: it must be less",
                                 file, p.runtime_gib, p.memory_gib));
  return p;
}

}  // namespace

namespace {

// The index i of the segment [xs[i], xs[i + 1]] holding x, and where x lies along it in logs,
// clamped to the table's ends.
std::pair<size_t, double> log_position(const std::vector<double>& xs, double x) {
  if (xs.size() < 2 || x <= xs.front()) return {0, 0};
  if (x >= xs.back()) return {xs.size() - 2, 1};
  size_t i = 0;
  while (x > xs[i + 1]) ++i;
  return {i, std::log(x / xs[i]) / std::log(xs[i + 1] / xs[i])};
}

double along(const std::vector<double>& ys, std::pair<size_t, double> at) {
  if (ys.size() < 2) return ys.empty() ? 0 : ys.front();
  return ys[at.first] + (ys[at.first + 1] - ys[at.first]) * at.second;
}

}  // namespace

double AttentionRateTable::rate(double head_dim, double seq_len) const {
  const auto at_seq = log_position(seq_lens, seq_len);
  std::vector<double> by_head;
  for (const auto& row : tflops) by_head.push_back(along(row, at_seq));
  return along(by_head, log_position(head_dims, head_dim));
}

double GemmRateTable::rate(double k_dim) const { return along(tflops, log_position(k, k_dim)); }

double LinearSpeedupTable::at(double gemm_size) const { return along(speedup, log_position(size, gemm_size)); }

double HardwareProfile::gemm_base_tflops(bool fp32) const {
  if (fp32) return peak_tflops_fp32;
  return matmul_tflops_bf16 > 0 ? matmul_tflops_bf16 : peak_tflops_bf16;
}

const LinearSpeedupTable* HardwareProfile::fp8_linear_table() const {
  const auto found = fp8_linear_speedups.find(fp8_linear);
  return found == fp8_linear_speedups.end() ? nullptr : &found->second;
}

const AttentionRateTable* HardwareProfile::attention_table(const std::string& kernel) const {
  const auto found = attention_kernels.find(kernel.empty() ? attention_kernel : kernel);
  return found == attention_kernels.end() ? nullptr : &found->second;
}

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
