// Checkpoint manifests. manifest.json, written into a checkpoint folder last, just before the
// folder is renamed into place, lists every other file's size and XXH3-64 checksum, and for a
// safetensors file the checksum of its header and of each tensor's bytes, so that corruption is
// reported by file and tensor. Verification memory-maps each file and reads every byte once; a
// mismatch is located by hashing the file's pieces again. Its cost is returned for reporting.
// The manifest lists trainer_state.json, so an edited trainer state is found; the manifest
// carries the checksum of its own listing ("manifest_xxh3"), so an edited manifest is found too.
// Deleting the manifest does not turn verification off: a folder holding xtrain's own files
// (trainer_state.json, optimizer.safetensors, shard-*.safetensors) always had one, so without it
// the folder is damaged; only a plain Hugging Face folder may be read unverified.
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
  bool finite_checked = false;        // every floating-point value was also found finite (finite_check.h)

  bool usable() const { return status != Status::failed; }
  // "verified 12.5 MiB in 0.01 s" (", every value finite" when finite_checked), "no manifest: a
  // plain Hugging Face folder ...", or the problems joined by "; ".
  std::string summary() const;
};

// Hashes every regular file in dir except the manifest, then writes and fsyncs manifest.json.
void write_manifest(const std::string& dir);

// Checks every file the manifest lists, the manifest's own checksum, and that every safetensors
// file and trainer_state.json in the folder is listed. A folder without manifest.json is
// no_manifest when it is a plain Hugging Face folder, and failed when it holds xtrain's training
// files; a folder that does not exist, or an unreadable manifest, failed.
ManifestCheck verify_manifest(const std::string& dir);

}  // namespace xtrain::ckpt
