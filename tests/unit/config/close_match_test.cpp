#include "config/close_match.h"

#include <catch2/catch.hpp>

using namespace xtrain;

TEST_CASE("a mistyped value is matched to the choice it stands for", "[config]") {
  const std::vector<std::string> dtypes{"fp32", "bf16", "fp16"};
  CHECK(config::closest_choice("bfloat16", dtypes) == "bf16");
  CHECK(config::closest_choice("half", dtypes) == "fp16");
  CHECK(config::closest_choice("BF16", dtypes) == "bf16");
  CHECK_FALSE(config::closest_choice("fp8", dtypes));
  const std::vector<std::string> families{"llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "bert", "llava"};
  CHECK(config::closest_choice("qwen3-moe", families) == "qwen3_moe");
  CHECK(config::closest_choice("Mixtral", families) == "mixtral");
  CHECK(config::closest_choice("lama", families) == "llama");
  CHECK_FALSE(config::closest_choice("gpt2", families));
  // A dtype name is no hint where the choices are not dtypes.
  CHECK_FALSE(config::closest_choice("bfloat16", {"cosine", "linear", "constant"}));
}

TEST_CASE("edit distance counts single-byte edits", "[config]") {
  CHECK(config::edit_distance("hiden_size", "hidden_size") == 1);
  CHECK(config::edit_distance("", "abc") == 3);
  CHECK(config::edit_distance("kitten", "sitting") == 3);
}
