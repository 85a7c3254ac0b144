// Checkpoint manifests, arbitrary manifest.json beside a real safetensors file: verification
// never throws, reports a verdict, and lists a problem whenever it does not verify.
#include <cstring>

#include "ckpt/manifest.h"
#include "ckpt/safetensors_header.h"
#include "fuzz_input.h"

namespace {

// A two-tensor safetensors file, as xtrain writes them, in the scratch folder.
std::string write_model() {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})";
  std::string bytes(xtrain::ckpt::kSafetensorsLengthBytes, '\0');
  const uint64_t length = header.size();
  std::memcpy(bytes.data(), &length, sizeof(length));
  bytes += header;
  bytes += std::string("\x00\x00\x80\x3f\x00\x00\x00\x40\x01\x02\x03\x04", 12);
  xtrain::fuzz::write_input("model.safetensors", bytes);
  return xtrain::fuzz::scratch_dir();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xtrain;
  static const std::string dir = write_model();
  fuzz::write_input(ckpt::kManifestFile, fuzz::as_text(data, size));
  const ckpt::ManifestCheck check = ckpt::verify_manifest(dir);
  fuzz::require(check.status != ckpt::ManifestCheck::Status::no_manifest, "a manifest is there");
  fuzz::require(check.usable() == check.problems.empty(), "a problem is listed exactly when it fails");
  (void)check.summary();
  return 0;
}
