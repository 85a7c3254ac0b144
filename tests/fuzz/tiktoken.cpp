// The tiktoken rank file loader on arbitrary files, with the gpt2 encoding's regex and
// special token; a tokenizer that loads encodes and decodes any text.
#include "fuzz_input.h"
#include "text/tiktoken_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xtrain::fuzz::fuzz_tokenizer_file("ranks.tiktoken", data, size, [](const std::string& path) {
    return std::make_unique<xtrain::text::TiktokenTokenizer>(path, "gpt2");
  });
  return 0;
}
