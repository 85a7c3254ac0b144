#include "data/tokenizer.h"

#include "data/byte_tokenizer.h"
#include "util/input_error.h"

namespace xtrain::data {

std::optional<std::string> check_tokenizer_spec(const std::string& spec) {
  if (spec == "byte") return std::nullopt;
  return "unknown tokenizer '" + spec + "' (expected: byte)";
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) {
  if (auto problem = check_tokenizer_spec(spec)) throw InputError(*problem);
  return std::make_unique<ByteTokenizer>();
}

}  // namespace xtrain::data
