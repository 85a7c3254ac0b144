// The Hugging Face tokenizer.json loader on arbitrary files; a tokenizer that loads encodes
// and decodes any text (fuzz_input.h: exercise_tokenizer).
#include "data/hf_bpe_tokenizer.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xtrain::fuzz::fuzz_tokenizer_file("tokenizer.json", data, size, [](const std::string& path) {
    return std::make_unique<xtrain::data::HfBpeTokenizer>(path);
  });
  return 0;
}
