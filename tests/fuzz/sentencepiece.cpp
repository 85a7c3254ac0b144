// SentencePiece .model files, arbitrary bytes, through the module xtrain loads; a model that
// loads encodes and decodes any text.
#include "data/sentencepiece_tokenizer.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xtrain::fuzz::fuzz_tokenizer_file("tokenizer.model", data, size, [](const std::string& path) {
    return std::make_unique<xtrain::data::SentencePieceTokenizer>(path);
  });
  return 0;
}
