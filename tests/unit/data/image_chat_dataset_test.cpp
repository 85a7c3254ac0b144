// Image chat data: placeholders expand to the image's feature count and carry no loss, images
// are read relative to the JSONL file in placeholder order, and bad records are named by file and
// line before any sample is read (or skipped and counted).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include <torch/torch.h>

#include "data/image_chat_dataset.h"
#include "data/micro_batch.h"
#include "data/pixel_tensor.h"
#include "image/image_decode.h"
#include "image/image_reference.h"
#include "scratch_dir.h"
#include "text/byte_tokenizer.h"
#include "util/input_error.h"

using namespace xtrain;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kImageId = 257;
constexpr int64_t kImageTokens = 4;

data::ImageChatOptions image_chat_options(int64_t seq_len) {
  data::ImageChatOptions o;
  o.seq_len = seq_len;
  o.shuffle = false;
  o.placeholder = {"<image>", kImageId, kImageTokens};
  o.processor.shortest_edge = o.processor.crop_height = o.processor.crop_width = 16;
  return o;
}

std::string record(const std::string& user, const std::string& answer, const std::vector<std::string>& images) {
  std::string list;
  for (const auto& image : images) list += (list.empty() ? "\"" : ", \"") + image + "\"";
  return "{\"messages\": [{\"role\": \"user\", \"content\": \"" + user + "\"}, {\"role\": \"assistant\", "
         "\"content\": \"" + answer + "\"}], \"images\": [" + list + "]}\n";
}

// Two generated images copied beside the JSONL, so that the records name them relatively.
std::vector<std::string> copy_images(const testing::ScratchDir& dir) {
  const auto& reference = testing::image_reference().images;
  std::filesystem::create_directories(dir.path() / "img");
  std::vector<std::string> names;
  for (size_t i = 0; i < 2; ++i) {
    const auto name = "img/" + testing::file_name(reference[i * 7]);
    std::filesystem::copy_file(reference[i * 7], dir.path() / name);
    names.push_back(name);
  }
  return names;
}

}  // namespace

TEST_CASE("image chat: placeholders expand to image tokens without loss, pixels follow their order", "[image]") {
  testing::ScratchDir dir;
  const auto images = copy_images(dir);
  const auto file = dir.write("chat.jsonl", record("<image> and <image>: same?", "no", {images[1], images[0]}) +
                                                "\n" + record("<image>\\nWhat?", "a cat", {images[0]}));
  const text::ByteTokenizer bytes;
  const data::ImageChatDataset dataset(file, bytes, image_chat_options(96));
  REQUIRE(dataset.num_samples() == 2);
  CHECK(dataset.num_images() == 3);

  const auto tokens = dataset.batch(0, 1)[0];
  const auto targets = dataset.targets(0, 1)[0];
  const auto is_image = tokens.eq(kImageId);
  CHECK(is_image.sum().item<int64_t>() == 2 * kImageTokens);
  // No image token is ever a target, and the answer "no" plus the end of turn are.
  CHECK(targets.eq(kImageId).sum().item<int64_t>() == 0);
  const auto counted = targets.ne(data::kIgnoreIndex);
  std::string trained;
  for (int64_t i = 0; i < counted.size(0); ++i)
    if (counted[i].item<bool>()) trained += static_cast<char>(targets[i].item<int64_t>());
  CHECK(trained == "no<|im_end|>");
  // Padding after the record's EOS: another piece, and no target.
  const auto starts = dataset.document_starts(0);
  REQUIRE(starts.size() == 1);
  CHECK(tokens[starts[0] - 1].item<int64_t>() == bytes.eos_id());

  const auto pixels = dataset.pixel_values(0);
  REQUIRE(pixels.sizes() == torch::IntArrayRef({2, 3, 16, 16}));
  const auto& processor = image_chat_options(96).processor;
  const auto first =
      data::pixel_tensor(image::preprocess(image::decode_image_file((dir.path() / images[1]).string()), processor));
  CHECK(torch::equal(pixels[0], first));

  // A micro batch carries its rows' images in row order; vision tokens add to the cost.
  const auto batch = data::make_micro_batch(dataset, {1, 0}, /*pack=*/true);
  REQUIRE(batch.pixel_values.size(0) == 3);
  CHECK(torch::equal(batch.pixel_values[1], first));
  CHECK(data::attention_cost(dataset, 0, true) > data::attention_cost(dataset, 1, true));
}

TEST_CASE("image chat: bad records are named by file and line, or skipped and counted", "[image]") {
  testing::ScratchDir dir;
  const auto images = copy_images(dir);
  const text::ByteTokenizer bytes;
  SECTION("a placeholder without its image") {
    const auto file = dir.write("chat.jsonl", record("<image> <image>", "x", {images[0]}));
    CHECK_THROWS_WITH(data::ImageChatDataset(file, bytes, image_chat_options(96)),
                      Contains("chat.jsonl:1: 2 \"<image>\" placeholders in the messages but 1 image in \"images\""));
  }
  SECTION("images past the sequence length") {
    // "<|im_start|>user\n" (17 bytes) and "a long question first " (22) come first: the image's
    // 4 tokens are tokens 40 to 43.
    const auto file = dir.write("chat.jsonl", record("a long question first <image>", "x", {images[0]}));
    CHECK_THROWS_WITH(data::ImageChatDataset(file, bytes, image_chat_options(24)),
                      Contains("chat.jsonl:1: the record's image tokens end at token 43, past data.seq_len 24: "
                               "raise data.seq_len to at least 43"));
  }
  SECTION("a truncated image") {
    const auto bytes_of = dir.write("img/cut.png", "\x89PNG\r\n\x1a\n");
    const auto file = dir.write("chat.jsonl", record("<image>", "x", {images[0]}) + record("<image>", "y", {"img/cut.png"}));
    CHECK_THROWS_WITH(data::ImageChatDataset(file, bytes, image_chat_options(96)),
                      Contains("chat.jsonl:2: image 1 of 1: " + bytes_of) &&
                          Contains("set data.skip_bad_images: true"));
    auto skipping = image_chat_options(96);
    skipping.skip_bad_images = true;
    const data::ImageChatDataset dataset(file, bytes, skipping);
    CHECK(dataset.num_samples() == 1);
    CHECK(dataset.skipped_records() == 1);
    CHECK_THAT(dataset.notes(), Contains("skipped 1 record with bad images"));
  }
}
