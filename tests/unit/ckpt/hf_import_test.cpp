// Folders that transformers itself wrote (save_pretrained, weights split over several files with
// model.safetensors.index.json, experts stored apart) load into xtrain, which then computes
// transformers' logits.
#include <filesystem>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/folder_weights.h"
#include "ckpt/hf_folder.h"
#include "ckpt/safetensors.h"
#include "model/model_builder.h"
#include "model/small_llama.h"
#include "scratch_dir.h"
#include "tensor_compare.h"
#include "util/input_error.h"
#include "util/durable_file.h"

using namespace xtrain;
namespace fs = std::filesystem;

TEST_CASE("a sharded save_pretrained folder of each family loads and computes transformers' logits", "[ckpt][hf]") {
  const std::string family = GENERATE("llama", "qwen2", "qwen3", "qwen3_moe", "mixtral");
  INFO("family = " << family);
  testing::ScratchDir scratch;
  const auto dir = scratch.path() / "model";
  const auto tokens_path = (scratch.path() / "tokens.safetensors").string();
  const auto logits_path = (scratch.path() / "logits.safetensors").string();
  torch::manual_seed(2);
  const auto tokens = torch::randint(0, 97, {2, 12}, torch::kInt64);
  ckpt::save_safetensors(tokens_path, {{"input_ids", tokens}});
  const std::string command =
      fmt::format("{} {}/tools/reference/hf_random_model.py --family {} --out {} --tokens {} --logits {} 2>/dev/null",
                  XTRAIN_PYTHON, XTRAIN_SOURCE_DIR, family, dir.string(), tokens_path, logits_path);
  REQUIRE(std::system(command.c_str()) == 0);
  REQUIRE(fs::exists(dir / "model.safetensors.index.json"));
  REQUIRE_FALSE(fs::exists(dir / "model.safetensors"));
  int64_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.path().extension() == ".safetensors";
  CHECK(files >= 3);
  if (family == "qwen3_moe" || family == "mixtral") {  // experts stored apart, as transformers writes them
    const auto index = util::read_file((dir / "model.safetensors.index.json").string());
    CHECK(index.find(family == "mixtral" ? "block_sparse_moe.experts.3.w2.weight" : "mlp.experts.3.down_proj.weight") !=
          std::string::npos);
  }

  auto model = ckpt::load_hf_folder(dir.string());
  CHECK(model->config().family == family);
  torch::NoGradGuard no_grad;
  const auto expected = ckpt::load_safetensors(logits_path).tensors.at("logits");
  const double error = testing::max_relative_error(testing::logits(*model, tokens), expected);
  CHECK(error < 1e-5);
}

TEST_CASE("a damaged weight index is an input error naming the file and the tensor", "[ckpt][hf]") {
  testing::ScratchDir scratch;
  const auto dir = scratch.path().string();
  util::write_file_durable(dir + "/bad.json", R"({"weight_map": {"model.norm.weight": "../elsewhere.safetensors"}})");
  CHECK_THROWS_WITH(ckpt::read_weight_map(dir + "/bad.json"),
                    dir + "/bad.json: tensor 'model.norm.weight' maps to \"../elsewhere.safetensors\", not a file name "
                          "in the folder");
  util::write_file_durable(dir + "/none.json", R"({"metadata": {}})");
  CHECK_THROWS_WITH(ckpt::read_weight_map(dir + "/none.json"),
                    dir + "/none.json: no \"weight_map\" object (tensor name -> file)");
  ckpt::save_safetensors(dir + "/a.safetensors", {{"model.norm.weight", torch::ones({4})}});
  util::write_file_durable(dir + "/model.safetensors.index.json",
                           R"({"weight_map": {"lm_head.weight": "a.safetensors"}})");
  const auto model = model::declare_model(testing::SmallLlama{}.config());
  CHECK_THROWS_WITH(ckpt::folder_weights(dir, *model),
                    dir + "/a.safetensors: tensor 'lm_head.weight' is not in a.safetensors, where " + dir +
                        "/model.safetensors.index.json puts it");
}
