// The safetensors header reader on arbitrary files: what it accepts describes byte spans that
// lie inside the file, after the header, and match each tensor's dtype and shape.
#include <filesystem>

#include "ckpt/safetensors_header.h"
#include "fuzz_input.h"
#include "util/posix_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xtrain;
  const std::string path = fuzz::write_input("model.safetensors", fuzz::as_text(data, size));
  fuzz::expect_only_input_errors([&] {
    util::InputFile file(path);
    const ckpt::SafetensorsHeader header = ckpt::read_safetensors_header(file, path);
    fuzz::require(header.data_start >= ckpt::kSafetensorsLengthBytes && header.data_start <= size,
                  "the data section starts inside the file");
    for (const auto& entry : header.entries) {
      fuzz::require(entry.begin <= entry.end && entry.end <= size - header.data_start,
                    "every span lies inside the data section");
      uint64_t bytes = ckpt::safetensors_dtype_size(entry.dtype);
      for (const int64_t dim : entry.shape) bytes *= static_cast<uint64_t>(dim);
      fuzz::require(bytes == entry.end - entry.begin, "the span matches dtype and shape");
    }
    const ckpt::SafetensorsLayout layout = ckpt::read_safetensors_layout(path);
    fuzz::require(layout.tensors.size() == header.entries.size(), "layout and header agree");
  });
  return 0;
}
