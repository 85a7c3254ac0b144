#include "data/cache_entry.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "util/durable_file.h"
#include "util/file_digest.h"
#include "util/input_error.h"

namespace xtrain::data {
namespace {

namespace fs = std::filesystem;

// The digest covers the manifest without its own digest field, dumped canonically (sorted keys).
std::string listing_digest(nlohmann::json manifest) {
  manifest.erase("manifest_xxh3");
  return util::xxh3_hex(manifest.dump());
}

std::optional<std::string> check_files(const std::string& dir, const nlohmann::json& files, bool checksums) {
  std::set<std::string> listed;
  for (const auto& [name, file] : files.items()) {
    listed.insert(name);
    const fs::path path = fs::path(dir) / name;
    std::error_code error;
    const auto size = fs::file_size(path, error);
    if (error) return fmt::format("{}: missing ({})", name, error.message());
    const auto expected_size = file.at("size").get<uint64_t>();
    if (size != expected_size) return fmt::format("{}: {} bytes, the manifest says {}", name, size, expected_size);
    if (!checksums) continue;
    const std::string digest = util::file_xxh3(path.string());
    const auto expected = file.at("xxh3").get<std::string>();
    if (digest != expected)
      return fmt::format("{}: checksum mismatch (xxh3 {}, the manifest says {})", name, digest, expected);
  }
  for (const auto& item : fs::directory_iterator(dir)) {
    const std::string name = item.path().filename().string();
    if (name != kEntryManifest && !listed.count(name)) return fmt::format("{}: not in the manifest", name);
  }
  return std::nullopt;
}

}  // namespace

void write_entry_manifest(const std::string& dir, nlohmann::json info) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& item : fs::directory_iterator(dir)) {
    if (!item.is_regular_file() || item.path().filename() == kEntryManifest) continue;
    uint64_t size = 0;
    const std::string digest = util::file_xxh3(item.path().string(), &size);
    files[item.path().filename().string()] = {{"size", size}, {"xxh3", digest}};
  }
  info["files"] = files;
  info["manifest_xxh3"] = listing_digest(info);
  util::write_file_durable((fs::path(dir) / kEntryManifest).string(), info.dump(1) + "\n");
}

nlohmann::json read_entry_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kEntryManifest).string();
  const std::string text = util::read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not a data cache manifest: " + e.what());
  }
}

std::optional<std::string> check_entry(const std::string& dir, const std::string& key, bool checksums) {
  try {
    const nlohmann::json manifest = read_entry_manifest(dir);
    if (manifest.value("manifest_xxh3", "") != listing_digest(manifest))
      return std::string(kEntryManifest) + ": its own checksum does not match (edited or damaged)";
    if (manifest.value("key", "") != key)
      return fmt::format("{}: made for key {}, not {}", kEntryManifest, manifest.value("key", "?"), key);
    return check_files(dir, manifest.at("files"), checksums);
  } catch (const InputError& e) {
    return std::string(e.what());
  } catch (const nlohmann::json::exception& e) {
    return fmt::format("{}: {}", kEntryManifest, e.what());
  } catch (const fs::filesystem_error& e) {
    return std::string(e.what());
  }
}

}  // namespace xtrain::data
