#include "ckpt/manifest.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ckpt/safetensors_header.h"
#include "util/durable_file.h"
#include "util/input_error.h"
#include "util/mapped_file.h"

namespace fs = std::filesystem;

namespace xtrain::ckpt {
namespace {

// Format 2 added manifest_xxh3; format 1 manifests (older xtrain) are read without it.
constexpr int kFormat = 2;
constexpr const char* kSelfChecksum = "manifest_xxh3";

std::string checksum(const uint8_t* data, uint64_t size) {
  return fmt::format("{:016x}", static_cast<uint64_t>(XXH3_64bits(data, size)));
}

bool is_safetensors(const std::string& file) { return fs::path(file).extension() == ".safetensors"; }

// The checksum of the listing, over its canonical form (sorted keys, no spaces), so that the
// manifest's layout may change but not one of its sizes, checksums or names.
std::string listing_checksum(const nlohmann::json& files) {
  const std::string canonical = files.dump();
  return checksum(reinterpret_cast<const uint8_t*>(canonical.data()), canonical.size());
}

// Files only xtrain's training checkpoints hold: a folder with one of them had a manifest.
std::vector<std::string> training_files(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const auto file = entry.path().filename().string();
    if (file == "trainer_state.json" || file == "optimizer.safetensors" ||
        (file.rfind("shard-", 0) == 0 && is_safetensors(file)))
      found.push_back(file);
  }
  std::sort(found.begin(), found.end());
  return found;
}

// A weights file or trainer state beside the manifest but not in it would be read unverified.
void find_unlisted(const std::string& dir, const nlohmann::json& files, std::vector<std::string>& problems) {
  std::vector<std::string> unlisted;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const auto file = entry.path().filename().string();
    if ((file == "trainer_state.json" || is_safetensors(file)) && !files.contains(file)) unlisted.push_back(file);
  }
  std::sort(unlisted.begin(), unlisted.end());
  for (const auto& file : unlisted)
    problems.push_back(fmt::format("{}: not in the manifest (added after it was written, or the manifest was edited)",
                                   file));
}

nlohmann::ordered_json describe_file(const std::string& dir, const std::string& file) {
  const std::string path = dir + "/" + file;
  const util::MappedFile mapped(path);
  nlohmann::ordered_json entry = {{"size", mapped.size()}, {"xxh3", checksum(mapped.data(), mapped.size())}};
  if (is_safetensors(file)) {
    const auto layout = read_safetensors_layout(path);
    entry["header_xxh3"] = checksum(mapped.data(), layout.data_start);
    nlohmann::ordered_json tensors = nlohmann::ordered_json::object();
    for (const auto& span : layout.tensors)
      tensors[span.name] = checksum(mapped.data() + span.begin, span.end - span.begin);
    entry["tensors"] = std::move(tensors);
  }
  return entry;
}

// The whole-file checksum failed: name the pieces that changed.
void locate_damage(const std::string& file, const util::MappedFile& mapped, const nlohmann::json& entry,
                   std::vector<std::string>& problems) {
  const size_t before = problems.size();
  if (entry.contains("tensors")) {
    try {
      const auto layout = read_safetensors_layout(mapped.path());
      if (checksum(mapped.data(), layout.data_start) != entry.value("header_xxh3", ""))
        problems.push_back(fmt::format("{}: the header does not match its checksum", file));
      const auto& expected = entry.at("tensors");
      for (const auto& span : layout.tensors) {
        auto it = expected.find(span.name);
        if (it == expected.end())
          problems.push_back(fmt::format("{}: tensor '{}' is not in the manifest", file, span.name));
        else if (checksum(mapped.data() + span.begin, span.end - span.begin) != it->get<std::string>())
          problems.push_back(fmt::format("{}: tensor '{}' does not match its checksum", file, span.name));
      }
    } catch (const InputError& e) {
      problems.push_back(fmt::format("{}: the header is damaged: {}", file, e.what()));
    }
  }
  if (problems.size() == before) problems.push_back(fmt::format("{}: the contents do not match the checksum", file));
}

}  // namespace

std::string ManifestCheck::summary() const {
  switch (status) {
    case Status::verified:
      return fmt::format("verified {:.1f} MiB in {:.2f} s{}", static_cast<double>(bytes) / (1 << 20), seconds,
                         finite_checked ? ", every value finite" : "");
    case Status::no_manifest:
      return "no manifest: a plain Hugging Face folder (no trainer_state.json, optimizer or shard files), loaded "
             "unverified";
    case Status::failed:
      break;
  }
  return fmt::format("{}", fmt::join(problems, "; "));
}

void write_manifest(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().filename() != kManifestFile)
      files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  nlohmann::ordered_json listed = nlohmann::ordered_json::object();
  for (const auto& file : files) listed[file] = describe_file(dir, file);
  const std::string self = listing_checksum(nlohmann::json::parse(listed.dump()));
  const nlohmann::ordered_json manifest = {
      {"format", kFormat}, {"checksum", "xxh3-64"}, {kSelfChecksum, self}, {"files", listed}};
  util::write_file_durable(dir + "/" + kManifestFile, manifest.dump(1) + "\n");
}

ManifestCheck verify_manifest(const std::string& dir) {
  const auto started = std::chrono::steady_clock::now();
  ManifestCheck check;
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    check.problems.push_back(fmt::format("{}: not a checkpoint folder ({})", dir,
                                         error ? error.message() : "missing or not a folder"));
    return check;
  }
  const std::string manifest_path = dir + "/" + kManifestFile;
  if (!fs::exists(manifest_path, error) && !fs::is_symlink(manifest_path, error)) {
    const auto own = training_files(dir);
    if (own.empty()) {
      check.status = ManifestCheck::Status::no_manifest;
      return check;
    }
    check.problems.push_back(fmt::format(
        "{}: missing, but the folder holds {}: every checkpoint xtrain writes has a manifest, so it was deleted or "
        "lost and nothing in the folder can be verified",
        kManifestFile, fmt::join(own, ", ")));
    return check;
  }
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(util::read_file(manifest_path));
    const auto format = manifest.find("format");
    if (format == manifest.end() || !format->is_number_integer() ||
        (format->get<int64_t>() != kFormat && format->get<int64_t>() != 1) || !manifest.at("files").is_object())
      throw std::runtime_error(
          fmt::format("unknown manifest format {}", format == manifest.end() ? "(none)" : format->dump()));
  } catch (const std::exception& e) {
    check.problems.push_back(fmt::format("{}: unreadable: {}", kManifestFile, e.what()));
    return check;
  }
  if (manifest.at("format").get<int64_t>() >= 2) {
    const auto self = manifest.find(kSelfChecksum);
    if (self == manifest.end() || !self->is_string() || self->get<std::string>() != listing_checksum(manifest.at("files")))
      check.problems.push_back(fmt::format("{}: its listing does not match its own checksum ({}): the manifest was "
                                           "edited after it was written",
                                           kManifestFile, kSelfChecksum));
  }
  for (const auto& [file, entry] : manifest.at("files").items()) {
    // A checkpoint is a flat folder: a listed path that leaves it is damage, not a file to read.
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos) {
      check.problems.push_back(fmt::format("{}: not a file name of the checkpoint folder (the manifest is damaged)", file));
      continue;
    }
    const std::string path = dir + "/" + file;
    if (!fs::is_regular_file(path, error)) {
      check.problems.push_back(fmt::format("{}: missing (the manifest lists it)", file));
      continue;
    }
    try {
      const util::MappedFile mapped(path);
      const auto size = entry.find("size");
      if (size == entry.end() || !size->is_number_unsigned()) {
        check.problems.push_back(fmt::format("{}: the manifest gives no size for it (the manifest is damaged)", file));
        continue;
      }
      const uint64_t expected_size = size->get<uint64_t>();
      check.bytes += mapped.size();
      if (mapped.size() != expected_size) {
        check.problems.push_back(
            fmt::format("{}: {} bytes, the manifest says {} (truncated or overwritten)", file, mapped.size(),
                        expected_size));
        continue;
      }
      if (checksum(mapped.data(), mapped.size()) != entry.value("xxh3", ""))
        locate_damage(file, mapped, entry, check.problems);
    } catch (const std::exception& e) {
      check.problems.push_back(fmt::format("{}: unreadable: {}", file, e.what()));
    }
  }
  find_unlisted(dir, manifest.at("files"), check.problems);
  check.status = check.problems.empty() ? ManifestCheck::Status::verified : ManifestCheck::Status::failed;
  check.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return check;
}

}  // namespace xtrain::ckpt
