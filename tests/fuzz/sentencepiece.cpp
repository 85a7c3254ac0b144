// SentencePiece .model files, arbitrary bytes, through the module xtrain loads; a model that
// loads encodes and decodes any text.
#include "fuzz_input.h"
#include "text/sentencepiece_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xtrain::fuzz::fuzz_tokenizer_file("tokenizer.model", data, size, [](const std::string& path) {
    return std::make_unique<xtrain::text::SentencePieceTokenizer>(path);
  });
  return 0;
}
