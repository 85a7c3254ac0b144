// The tiktoken rank file loader on arbitrary files, with the gpt2 encoding's regex and
// special token; a tokenizer that loads encodes and decodes any text.
#include "data/tiktoken_tokenizer.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xtrain::fuzz::fuzz_tokenizer_file("ranks.tiktoken", data, size, [](const std::string& path) {
    return std::make_unique<xtrain::data::TiktokenTokenizer>(path, "gpt2");
  });
  return 0;
}
