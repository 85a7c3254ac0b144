#include <algorithm>
#include <set>

#include "data/prompt_dataset.h"
#include "text/byte_tokenizer.h"
#include "util/input_error.h"

#include <catch2/catch.hpp>
#include "scratch_dir.h"

using namespace xtrain;

namespace {

data::PromptReadOptions room(int64_t seq_len, int64_t max_new_tokens, std::string needed_by = "") {
  data::PromptReadOptions options;
  options.seq_len = seq_len;
  options.max_new_tokens = max_new_tokens;
  options.answer_needed_by = std::move(needed_by);
  return options;
}

}  // namespace

TEST_CASE("prompt records: plain and conversational prompts, answers as text", "[data][grpo]") {
  testing::ScratchDir dir;
  const auto file = dir.write("prompts.jsonl",
                              "{\"prompt\": \"2+3=\", \"answer\": \"5\"}\n"
                              "\n"
                              "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
                              "\"content\": \"6*7?\"}], \"answer\": 42}\n"
                              "{\"prompt\": \"no answer\", \"other\": 1}\n");
  const text::ByteTokenizer bytes;
  const auto records = data::read_prompts(file, bytes, room(128, 16));
  REQUIRE(records.size() == 3);
  CHECK(records[0].prompt == bytes.encode("2+3="));
  CHECK(records[0].prompt_json == "\"2+3=\"");
  CHECK(records[0].answer == "5");
  CHECK(records[0].line == 1);
  // TRL's apply_chat_template(add_generation_prompt=True) with a chatml template.
  CHECK(records[1].prompt_text ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n6*7?<|im_end|>\n<|im_start|>assistant\n");
  CHECK(bytes.decode(records[1].prompt) == records[1].prompt_text);
  CHECK(records[1].answer == "42");  // a number keeps its JSON text
  CHECK(records[1].has_answer);
  CHECK(records[1].line == 3);
  CHECK_FALSE(records[2].has_answer);
}

TEST_CASE("prompt records: each epoch reads every prompt once, in a seeded order", "[data][grpo]") {
  testing::ScratchDir dir;
  std::string lines;
  for (int i = 0; i < 7; ++i) lines += "{\"prompt\": \"p" + std::to_string(i) + "\"}\n";
  const auto file = dir.write("prompts.jsonl", lines);
  const text::ByteTokenizer bytes;
  const data::PromptDataset shuffled(data::read_prompts(file, bytes, room(64, 8)), 3, true);
  const data::PromptDataset again(data::read_prompts(file, bytes, room(64, 8)), 3, true);
  std::vector<int64_t> first;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::set<int64_t> seen;
    for (int64_t i = 0; i < 7; ++i) {
      seen.insert(shuffled.at(epoch * 7 + i).line);
      CHECK(shuffled.at(epoch * 7 + i).line == again.at(epoch * 7 + i).line);
      if (epoch == 0) first.push_back(shuffled.at(i).line);
    }
    CHECK(seen.size() == 7);
  }
  CHECK_FALSE(std::is_sorted(first.begin(), first.end()));  // seed 3 moves them
}

TEST_CASE("prompt records: bad records name the file, the line and the fix", "[data][grpo]") {
  testing::ScratchDir dir;
  const text::ByteTokenizer bytes;
  auto refused = [&](const std::string& record, const data::PromptReadOptions& options) {
    const auto file = dir.write("bad.jsonl", "{\"prompt\": \"a\", \"answer\": \"1\"}\n" + record + "\n");
    try {
      data::read_prompts(file, bytes, options);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto dir_path = dir.path().string();
  CHECK(refused("{\"question\": \"a\"}", room(16, 4)) ==
        dir_path + "/bad.jsonl:2: the record has no \"prompt\": each line of a prompt file is {\"prompt\": \"...\", "
                   "\"answer\": \"...\"}, or the same with \"prompt\" a list of {\"role\", \"content\"} messages "
                   "(docs/post-training.md)");
  CHECK_THAT(refused("{\"prompt\": \"a\",}", room(16, 4)), Catch::StartsWith(dir_path + "/bad.jsonl:2: invalid JSON"));
  CHECK_THAT(refused("{\"prompt\": \"\"}", room(16, 4)), Catch::Contains("bad.jsonl:2: \"prompt\" is empty"));
  CHECK_THAT(refused("{\"prompt\": 7}", room(16, 4)),
             Catch::Contains("bad.jsonl:2: \"prompt\" is number, not a string or a list of messages"));
  CHECK_THAT(refused("{\"prompt\": [{\"role\": \"user\"}]}", room(16, 4)),
             Catch::Contains("bad.jsonl:2: \"prompt\" has a message that is not {\"role\": \"...\", \"content\""));
  CHECK_THAT(refused("{\"prompt\": \"a\", \"answer\": [1]}", room(16, 4)),
             Catch::Contains("bad.jsonl:2: \"answer\" is array, not a string or a number"));
  CHECK(refused("{\"prompt\": \"a\"}", room(16, 4, "grpo.rewards number_match")) ==
        dir_path + "/bad.jsonl:2: the record has no \"answer\", and grpo.rewards number_match compares each "
                   "completion to it: add \"answer\" to every record, or take that reward out");
  CHECK(refused("{\"prompt\": \"abcdefghijklm\"}", room(16, 4)) ==
        dir_path + "/bad.jsonl:2: the prompt is 13 tokens, and data.seq_len 16 less grpo.max_new_tokens 4 leaves 12 "
                   "for it: raise data.seq_len to at least 17, lower grpo.max_new_tokens, or shorten the prompt");
  CHECK(refused("{\"prompt\": \"abcdefghijkl\"}", room(16, 4)).empty());  // 12 tokens fit exactly
}
