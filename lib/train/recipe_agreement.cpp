#include "train/recipe_agreement.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#include "config/option_registry.h"
#include "data/sources/indexed_dataset_format.h"
#include "data/sources/source_list.h"
#include "data/sources/text_source.h"
#include "parallel/comm.h"
#include "util/build_info.h"
#include "util/input_error.h"

namespace xtrain::train {
namespace {
namespace agreement {

namespace fs = std::filesystem;

// No key is left out of the comparison, not even those that look like one process's business:
// every key changes what is trained (model, optim, data, train, precision, run.seed), where the
// job's shared files go (run.dir, checkpoint, metrics), or how the ranks act together (dist,
// parallel, the steps that evaluate, log, checkpoint or stop: a rank that does so at other steps
// waits in collectives the others never start). The rest (train.threads, train.device,
// data.prefetch, data.cache_dir) change no result, but the checkpoint's recipe.yaml records
// rank 0's values only, and what differs between nodes has its place outside the recipe: an
// OMP_NUM_THREADS on the node overrides train.threads, and a node-local cache folder can have the
// same path on every node.

std::string build_text() {
  std::string cuda = XTRAIN_CUDA_VERSION;
  return fmt::format("{} ({} build, LibTorch {}{})", XTRAIN_VERSION, XTRAIN_BUILD_TYPE, TORCH_VERSION,
                     cuda.empty() ? "" : ", CUDA " + cuda);
}

// The bytes a source reads, or "not found": a rank whose relative path leads to other files
// (another working folder, another copy of the data) shows a different size.
std::string source_size(const std::string& source) {
  std::error_code error;
  if (data::is_megatron_source(source)) {
    const std::string prefix = data::megatron_prefix(source);
    const auto index = fs::file_size(data::index_path(prefix), error);
    if (error) return "not found";
    const auto tokens = fs::file_size(data::data_path(prefix), error);
    if (error) return "not found";
    return fmt::format("{} + {} bytes", index, tokens);
  }
  const auto status = fs::status(source, error);
  if (error || !fs::exists(status)) return "not found";
  if (fs::is_regular_file(status)) return fmt::format("{} bytes", fs::file_size(source, error));
  if (!fs::is_directory(status)) return "not a file";
  uintmax_t bytes = 0, files = 0;
  for (fs::directory_iterator entry(source, error), end; !error && entry != end; entry.increment(error))
    if (entry->is_regular_file(error)) {
      bytes += entry->file_size(error);
      ++files;
    }
  return fmt::format("{} bytes in {} files", bytes, files);
}

void add_source_sizes(const std::string& key, const std::string& spec, Fingerprint& lines) {
  if (spec.empty()) return;
  for (const auto& source : data::parse_source_list(spec))
    if (source.path.rfind("builtin:", 0) != 0)  // in the binary, which the "xtrain" line covers
      lines.push_back({key + " source " + source.path, source_size(source.path)});
}

std::vector<uint8_t> to_bytes(const std::string& text) { return {text.begin(), text.end()}; }
std::string from_bytes(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

// key NUL value NUL ...: neither holds a NUL.
std::string encode_fingerprint(const Fingerprint& fingerprint) {
  std::string text;
  for (const auto& line : fingerprint) text += line.key + '\0' + line.value + '\0';
  return text;
}

Fingerprint decode_fingerprint(const std::string& text) {
  Fingerprint fingerprint;
  size_t at = 0;
  while (at < text.size()) {
    const size_t key_end = text.find('\0', at);
    const size_t value_end = key_end == std::string::npos ? std::string::npos : text.find('\0', key_end + 1);
    if (value_end == std::string::npos) break;
    fingerprint.push_back({text.substr(at, key_end - at), text.substr(key_end + 1, value_end - key_end - 1)});
    at = value_end + 1;
  }
  return fingerprint;
}

// "rank 1", "ranks 1, 3", "ranks 1, 2, 3, 4, 5, 6, 7, 8 and 4 more".
std::string rank_list(const std::vector<int64_t>& ranks) {
  constexpr size_t kShown = 8;
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  const size_t shown = std::min(ranks.size(), kShown);
  std::string text = fmt::format("ranks {}", fmt::join(ranks.begin(), ranks.begin() + static_cast<std::ptrdiff_t>(shown), ", "));
  if (ranks.size() > shown) text += fmt::format(" and {} more", ranks.size() - shown);
  return text;
}

struct KeyDifference {
  std::string key, theirs, reference;
};

// The keys whose values differ, in the order `theirs` lists them, then those only the reference has.
std::vector<KeyDifference> differing_keys(const Fingerprint& reference, const Fingerprint& theirs) {
  constexpr const char* kAbsent = "(no such key)";
  std::map<std::string, std::string> reference_values, their_values;
  for (const auto& line : reference) reference_values.emplace(line.key, line.value);
  std::vector<KeyDifference> differences;
  for (const auto& line : theirs) {
    their_values.emplace(line.key, line.value);
    const auto found = reference_values.find(line.key);
    if (found == reference_values.end()) differences.push_back({line.key, line.value, kAbsent});
    else if (found->second != line.value) differences.push_back({line.key, line.value, found->second});
  }
  for (const auto& line : reference)
    if (!their_values.count(line.key)) differences.push_back({line.key, kAbsent, line.value});
  return differences;
}

std::string what_to_do(const std::string& key) {
  if (key == "xtrain") return "start every rank with the same xtrain build";
  if (key.find(" source ") != std::string::npos) return "give every rank the same data files";
  return "start every rank with the same recipe and --set options";
}

// " (and 1 more key: run.seed)", or "" when one key differs.
std::string more_keys(const std::vector<KeyDifference>& differences) {
  constexpr size_t kNamed = 5;
  if (differences.size() < 2) return "";
  std::vector<std::string> names;
  for (size_t i = 1; i < differences.size() && names.size() < kNamed; ++i) names.push_back(differences[i].key);
  const size_t more = differences.size() - 1;
  return fmt::format(" (and {} more key{}: {}{})", more, more == 1 ? "" : "s", fmt::join(names, ", "),
                     more > names.size() ? ", ..." : "");
}

}  // namespace agreement
}  // namespace

Fingerprint rank_fingerprint(const config::Recipe& recipe) {
  Fingerprint lines{{"xtrain", agreement::build_text()}};
  for (const auto& option : config::OptionRegistry::instance().options())
    lines.push_back({option.path, option.render(recipe)});
  agreement::add_source_sizes("data.train", recipe.data.train, lines);
  agreement::add_source_sizes("data.eval", recipe.data.eval, lines);
  return lines;
}

std::string fingerprint_digest(const Fingerprint& fingerprint) {
  // FNV-1a, 64 bits: stable across builds and machines, unlike std::hash.
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const unsigned char c : agreement::encode_fingerprint(fingerprint)) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return fmt::format("{:016x}", hash);
}

std::string disagreement(const std::vector<Fingerprint>& fingerprints) {
  std::vector<int64_t> differing;
  for (size_t r = 1; r < fingerprints.size(); ++r)
    if (fingerprints[r] != fingerprints[0]) differing.push_back(static_cast<int64_t>(r));
  if (differing.empty()) return "";
  const auto& first = fingerprints[static_cast<size_t>(differing[0])];
  std::vector<int64_t> alike, others;
  for (const int64_t r : differing) (fingerprints[static_cast<size_t>(r)] == first ? alike : others).push_back(r);
  const auto differences = agreement::differing_keys(fingerprints[0], first);
  const auto& key = differences.at(0);
  std::string message =
      fmt::format("recipe mismatch: {} {} {}: {}, rank 0 has {}: {}{}", agreement::rank_list(alike),
                  alike.size() == 1 ? "has" : "have", key.key, key.theirs, key.key, key.reference,
                  agreement::more_keys(differences));
  if (!others.empty())
    message += fmt::format("; {} {} from rank 0 as well", agreement::rank_list(others),
                           others.size() == 1 ? "differs" : "differ");
  return message + "; " + agreement::what_to_do(key.key);
}

namespace {
namespace agreement {

std::string first_line_of(const std::string& text) { return text.substr(0, text.find('\n')); }

// Rank 0: every rank's digest, and the fingerprint of each rank whose digest differs from its own.
std::string compare_on_rank_zero(c10d::Store& store, const std::string& prefix, int64_t size, const Fingerprint& mine,
                                 std::chrono::milliseconds timeout) {
  std::vector<std::string> digest_keys;
  for (int64_t r = 0; r < size; ++r) digest_keys.push_back(prefix + "digest/" + std::to_string(r));
  try {
    store.wait(digest_keys, timeout);
  } catch (const std::exception& e) {
    std::vector<int64_t> missing;
    for (int64_t r = 0; r < size; ++r)
      if (!store.check({digest_keys[static_cast<size_t>(r)]})) missing.push_back(r);
    parallel::collective_failed(fmt::format(
        "{} sent no recipe fingerprint within dist.timeout_s={} of joining the job: {}; its own output names the cause",
        missing.empty() ? std::string("a rank") : rank_list(missing), static_cast<double>(timeout.count()) / 1000,
        first_line_of(e.what())));
  }
  const auto digests = store.multiGet(digest_keys);
  const std::string own = fingerprint_digest(mine);
  std::vector<Fingerprint> fingerprints(static_cast<size_t>(size), mine);
  std::map<std::string, Fingerprint> fetched;  // by digest: each different fingerprint read once
  for (int64_t r = 1; r < size; ++r) {
    const std::string digest = from_bytes(digests[static_cast<size_t>(r)]);
    if (digest == own) continue;
    if (!fetched.count(digest))
      fetched[digest] = decode_fingerprint(from_bytes(store.get(prefix + "lines/" + std::to_string(r))));
    fingerprints[static_cast<size_t>(r)] = fetched[digest];
  }
  return disagreement(fingerprints);
}

// Rank 0 hosts the store: it leaves only once the others have read the verdict, or after a
// few seconds (a rank that has died meanwhile reads nothing).
void wait_for_readers(c10d::Store& store, const std::string& key, int64_t readers) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (store.add(key, 0) < readers && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace agreement
}  // namespace

std::string exchange_fingerprints(c10d::Store& store, const std::string& prefix, int64_t rank, int64_t size,
                                  const Fingerprint& mine, std::chrono::milliseconds timeout) {
  using namespace agreement;
  const std::string verdict_key = prefix + "verdict", read_key = prefix + "read";
  std::string verdict;
  try {
    // The lines before the digest: whoever sees a rank's digest can read its lines.
    store.set(prefix + "lines/" + std::to_string(rank), to_bytes(encode_fingerprint(mine)));
    store.set(prefix + "digest/" + std::to_string(rank), to_bytes(fingerprint_digest(mine)));
    if (rank == 0) {
      verdict = compare_on_rank_zero(store, prefix, size, mine, timeout);
      store.set(verdict_key, to_bytes("=" + verdict));  // never an empty value
      if (!verdict.empty()) wait_for_readers(store, read_key, size - 1);
    } else {
      store.wait({verdict_key}, timeout);
      verdict = from_bytes(store.get(verdict_key)).substr(1);
      if (!verdict.empty()) store.add(read_key, 1);
    }
  } catch (const parallel::CommError&) {
    throw;
  } catch (const std::exception& e) {
    parallel::collective_failed(fmt::format(
        "rank {} could not compare its recipe with rank 0's within dist.timeout_s={}: {}; another rank has died or "
        "stalled, its own output names the cause",
        rank, static_cast<double>(timeout.count()) / 1000, first_line_of(e.what())));
  }
  return verdict;
}

void check_ranks_agree(const config::Recipe& recipe, const parallel::ProcessGroups& groups,
                       const parallel::World& world) {
  if (!world.distributed()) return;
  // Attempts of a restarted job share the store: keys are per attempt, as the join's are.
  const std::string prefix = fmt::format("xtrain/attempt_{}/recipe/", world.restart_count);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(recipe.dist.timeout_s * 1000));
  const std::string message =
      exchange_fingerprints(*groups.store(), prefix, world.rank, world.size, rank_fingerprint(recipe), timeout);
  if (!message.empty()) throw InputError(message);
}

}  // namespace xtrain::train
