// The JSONL chat reader on arbitrary lines, each record that parses rendered with the chatml
// template as the data pipeline does; the rendered text holds every message's content.
#include "data/sources/jsonl_record.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xtrain;
  static const text::ChatTemplate chatml = text::ChatTemplate::parse("chatml");
  const std::string_view text = fuzz::as_text(data, size);
  size_t line_number = 0;
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    fuzz::expect_only_input_errors([&] {
      const auto document = data::parse_jsonl_record(line, "fuzz.jsonl:" + std::to_string(line_number) + ": ");
      if (!document || !document->is_conversation) return;
      std::string rendered;
      for (const auto& segment : chatml.render(document->messages)) rendered += segment.text;
      for (const auto& message : document->messages)
        fuzz::require(rendered.find(message.content) != std::string::npos, "every content is rendered");
    });
  }
  return 0;
}
