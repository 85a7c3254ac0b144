// The Hugging Face tokenizer.json loader (BPE and WordPiece) on arbitrary files; a tokenizer
// that loads encodes and decodes any text (fuzz_input.h: exercise_tokenizer).
#include "fuzz_input.h"
#include "text/hf_tokenizer_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xtrain::fuzz::fuzz_tokenizer_file("tokenizer.json", data, size,
                                    [](const std::string& path) { return xtrain::text::make_hf_tokenizer(path); });
  return 0;
}
