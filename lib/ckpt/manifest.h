// Checkpoint manifests. manifest.json, written into a checkpoint folder last, just before the
// folder is renamed into place, lists every other file's size and XXH3-64 checksum, and for a
// safetensors file the checksum of its header and of each tensor's bytes, so that corruption is
// reported by file and tensor. Verification memory-maps each file and reads every byte once; a
// mismatch is located by hashing the file's pieces again. Its cost is returned for reporting.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::ckpt {

constexpr const char* kManifestFile = "manifest.json";

struct ManifestCheck {
  enum class Status { verified, no_manifest, failed };
  Status status = Status::failed;
  std::vector<std::string> problems;  // "model.safetensors: tensor 'x' does not match its checksum"
  uint64_t bytes = 0;                 // read to verify
  double seconds = 0;

  bool usable() const { return status != Status::failed; }
  // "verified 12.5 MiB in 0.01 s", "no manifest", or the problems joined by "; ".
  std::string summary() const;
};

// Hashes every regular file in dir except the manifest, then writes and fsyncs manifest.json.
void write_manifest(const std::string& dir);

// Checks every file the manifest lists. A folder without manifest.json is no_manifest (written
// before xtrain kept manifests); a folder that does not exist, or an unreadable manifest, failed.
ManifestCheck verify_manifest(const std::string& dir);

}  // namespace xtrain::ckpt
