#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "config/option_registry.h"
#include "config/recipe_loader.h"
#include "config/recipe_problems.h"
#include "config/recipe_rule.h"
#include "scratch_dir.h"

using namespace xtrain::config;

using xtrain::testing::problems;

TEST_CASE("a minimal recipe resolves every default", "[config]") {
  auto recipe = load_recipe_text("name: tiny\n", "r.yaml");
  CHECK(recipe.run.dir == "runs/tiny");
  CHECK(recipe.model.num_kv_heads == recipe.model.num_heads);
  CHECK(recipe.model.vocab_size == 257);  // the byte tokenizer's
  CHECK(recipe.model.max_seq_len == recipe.data.seq_len);
  CHECK(recipe.model.intermediate_size == 704);  // 8/3 * 256 rounded up to 64
  CHECK(recipe.optim.betas == std::vector<double>{0.9, 0.95});
}

TEST_CASE("unknown keys name file:line:col and suggest the likely key", "[config]") {
  CHECK(problems("name: x\nmodel:\n  hiden_size: 64\n") ==
        std::vector<std::string>{"r.yaml:3:3: model.hiden_size: unknown key (did you mean model.hidden_size?)"});
  CHECK(problems("name: x\nmodle:\n  hidden_size: 64\n") ==
        std::vector<std::string>{"r.yaml:2:1: modle: unknown key (did you mean model?)"});
  CHECK(problems("name: x\ntrain:\n  lr: 0.1\n") ==
        std::vector<std::string>{"r.yaml:3:3: train.lr: unknown key (did you mean optim.lr?)"});
}

TEST_CASE("keys spelled as transformers, Megatron or torchtitan spell them get the xtrain key", "[config]") {
  CHECK(problems("name: x\noptim:\n  learning_rate: 0.1\n") ==
        std::vector<std::string>{"r.yaml:3:3: optim.learning_rate: unknown key (did you mean optim.lr?)"});
  CHECK(problems("name: x\nmodel:\n  num_hidden_layers: 4\n") ==
        std::vector<std::string>{"r.yaml:3:3: model.num_hidden_layers: unknown key (did you mean model.num_layers?)"});
  CHECK(problems("name: x\ntrain:\n  bf16: true\n") ==
        std::vector<std::string>{"r.yaml:3:3: train.bf16: unknown key (did you mean train.dtype: bf16?)"});
  CHECK(problems("name: x\n", {"output_dir=/tmp/run"}) ==
        std::vector<std::string>{"--set output_dir=/tmp/run: output_dir: unknown key (did you mean run.dir?)"});
  CHECK(problems("name: x\n", {"parallel.tensor_model_parallel_size=2"}) ==
        std::vector<std::string>{"--set parallel.tensor_model_parallel_size=2: parallel.tensor_model_parallel_size: "
                                 "unknown key (did you mean parallel.tp?)"});
  CHECK(problems("name: x\ntrain:\n  gradient_accumulation_steps: 4\n") ==
        std::vector<std::string>{"r.yaml:3:3: train.gradient_accumulation_steps: unknown key (set "
                                 "train.global_batch_size instead: accumulation steps = global batch / "
                                 "(train.micro_batch_size x data-parallel ranks))"});
}

TEST_CASE("wrong types and ranges point at the value", "[config]") {
  CHECK(problems("name: x\ntrain:\n  steps: many\n") ==
        std::vector<std::string>{"r.yaml:3:10: train.steps: expected an integer, got 'many'"});
  CHECK(problems("name: x\noptim:\n  lr: -1\n") ==
        std::vector<std::string>{"r.yaml:3:7: optim.lr: must be > 0, got -1"});
  CHECK(problems("name: x\noptim:\n  betas: [0.9]\n") ==
        std::vector<std::string>{"r.yaml:3:10: optim.betas: expected two values [beta1, beta2], got 1"});
  CHECK(problems("name: x\ntrain:\n  dtype: fp8\n") ==
        std::vector<std::string>{"r.yaml:3:10: train.dtype: must be one of fp32, bf16, fp16, got 'fp8'"});
  CHECK(problems("name: x\ntrain:\n  dtype: bfloat16\n") ==
        std::vector<std::string>{
            "r.yaml:3:10: train.dtype: must be one of fp32, bf16, fp16, got 'bfloat16' (did you mean bf16?)"});
  CHECK(problems("name: x\nmodel:\n  tie_embeddings: 1\n") ==
        std::vector<std::string>{"r.yaml:3:19: model.tie_embeddings: expected true or false, got '1'"});
  // Found by tests/fuzz/recipe.cpp: a width this large overflowed the derived intermediate size.
  CHECK(problems("name: x\nmodel:\n  hidden_size: 2049638230412172290\n") ==
        std::vector<std::string>{
            "r.yaml:3:16: model.hidden_size: must be between 1 and 1048576, got 2049638230412172290"});
}

TEST_CASE("inconsistent values are reported, all at once", "[config]") {
  auto lines = problems(
      "name: x\nmodel:\n  hidden_size: 100\n  num_heads: 3\ntrain:\n  global_batch_size: 10\n  micro_batch_size: 4\n");
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "r.yaml:4:3: model.num_heads: 3 heads do not divide hidden_size 100 (hidden_size must be a multiple of num_heads)");
  CHECK(lines[1] == "r.yaml:6:3: train.global_batch_size: 10 is not a multiple of train.micro_batch_size 4 "
                    "(global batch = micro batch x accumulation steps x data-parallel ranks)");
  CHECK(problems("name: x\nmodel:\n  num_heads: 4\n  num_kv_heads: 3\n") ==
        std::vector<std::string>{"r.yaml:4:3: model.num_kv_heads: 3 kv heads do not divide num_heads 4 "
                                 "(each kv head serves a whole group of query heads)"});
}

TEST_CASE("a recipe that fixes the data-parallel ranks has its batch geometry checked where it is written", "[config]") {
  CHECK(problems("name: x\nparallel:\n  fsdp: 2\ntrain:\n  global_batch_size: 16\n  micro_batch_size: 16\n") ==
        std::vector<std::string>{
            "r.yaml:5:3: train.global_batch_size: 16 must be a multiple of train.micro_batch_size (16) x data-parallel "
            "ranks (2) = 32; the global batch does not depend on the number of ranks: set train.micro_batch_size to "
            "8, or train.global_batch_size to 32"});
  // fsdp -1 (the ranks left over): only the trainer knows them.
  CHECK(problems("name: x\ntrain:\n  global_batch_size: 16\n  micro_batch_size: 16\n").empty());
}

TEST_CASE("overrides given with --set are checked and named", "[config]") {
  CHECK(problems("name: x\n", {"train.steps=abc"}) ==
        std::vector<std::string>{"--set train.steps=abc: train.steps: expected an integer, got 'abc'"});
  CHECK(problems("name: x\n", {"optim.lrr=1"}) ==
        std::vector<std::string>{"--set optim.lrr=1: optim.lrr: unknown key (did you mean optim.lr?)"});
  CHECK(problems("name: x\n", {"steps"}) ==
        std::vector<std::string>{"--set steps: expected key.path=value, e.g. --set train.steps=100"});
  LoadOptions options;
  options.overrides = {"optim.betas=[0.8, 0.99]", "model.hidden_size=128"};
  auto recipe = load_recipe_text("name: x\n", "r.yaml", options);
  CHECK(recipe.optim.betas == std::vector<double>{0.8, 0.99});
  CHECK(recipe.model.hidden_size == 128);
}

TEST_CASE("missing files, missing name and YAML syntax errors", "[config]") {
  CHECK(problems("name: x\ndata:\n  train: /nonexistent/corpus.txt\n") ==
        std::vector<std::string>{"r.yaml:3:3: data.train: file not found: /nonexistent/corpus.txt"});
  CHECK(problems("model:\n  hidden_size: 64\n") ==
        std::vector<std::string>{"r.yaml:1:1: name: required key missing (add `name: ...` to the recipe)"});
  auto syntax = problems("name: x\nmodel:\n  hidden_size: [64\n");
  REQUIRE(syntax.size() == 1);
  CHECK(syntax[0].rfind("r.yaml:", 0) == 0);
  CHECK(syntax[0].find("invalid YAML") != std::string::npos);
}

TEST_CASE("a dumped recipe reloads to the same recipe", "[config]") {
  LoadOptions options;
  options.overrides = {"optim.lr=0.000123456789", "model.rope_theta=500000", "name='a b: c'"};
  auto recipe = load_recipe_text("name: x\n", "r.yaml", options);
  auto dumped = dump_recipe(recipe);
  auto reloaded = load_recipe_text(dumped, "dump.yaml");
  CHECK(dump_recipe(reloaded) == dumped);
  CHECK(reloaded.optim.lr == recipe.optim.lr);
  CHECK(reloaded.name == "a b: c");
}

// scripts/recipe-reference.sh rewrites the table from `xtrain options`.
TEST_CASE("the recipe reference is generated from the registry", "[config]") {
  const std::string path = std::string(XTRAIN_SOURCE_DIR) + "/docs/recipes.md";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string doc = buffer.str();
  const std::string begin = "<!-- recipe-reference:begin (xtrain options) -->\n";
  const std::string end = "<!-- recipe-reference:end -->";
  auto first = doc.find(begin);
  auto last = doc.find(end);
  REQUIRE(first != std::string::npos);
  REQUIRE(last != std::string::npos);
  REQUIRE(first < last);
  INFO(path << " is stale: run scripts/recipe-reference.sh");
  CHECK(doc.substr(first + begin.size(), last - first - begin.size()) == options_markdown());
}

namespace recipe_init_from_test {

// A Hugging Face folder's config.json: a small Qwen3-MoE (top 2 of 4 experts) with these fields.
std::string write_folder(const xtrain::testing::ScratchDir& scratch, const std::string& extra_fields) {
  scratch.write("model/config.json",
                R"({"model_type": "qwen3_moe", "vocab_size": 300, "hidden_size": 32, "intermediate_size": 48,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                    "max_position_embeddings": 512, "num_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 16)" + extra_fields + "}");
  return (scratch.path() / "model").string();
}

}  // namespace recipe_init_from_test

TEST_CASE("model.init_from refuses a config.json with dropout unless the recipe says model.dropout: 0", "[config]") {
  xtrain::testing::ScratchDir scratch;
  const auto dir = recipe_init_from_test::write_folder(scratch, R"(, "attention_dropout": 0.1)");
  const std::string recipe = "name: x\nmodel:\n  init_from: hf:" + dir + "\n";
  CHECK(problems(recipe) ==
        std::vector<std::string>{"r.yaml:3:3: model.init_from: " + dir +
                                 "/config.json: attention_dropout 0.1, but xtrain computes no dropout; add "
                                 "`model.dropout: 0` to the recipe to fine-tune without dropout (the export keeps "
                                 "the config's values)"});
  CHECK(problems(recipe + "  dropout: 0\n").empty());
  CHECK(problems(recipe, {"model.dropout=0"}).empty());
  CHECK(problems(recipe, {"model.dropout=0.1"}) ==
        std::vector<std::string>{"--set model.dropout=0.1: model.dropout: 0.1: model.family qwen3_moe computes no "
                                 "dropout (only bert, vit, t5 do); set model.dropout: 0"});
  // Mixtral's router jitter is noise of the same kind.
  const auto jitter = recipe_init_from_test::write_folder(scratch, R"(, "router_jitter_noise": 0.01)");
  CHECK(problems(recipe) == std::vector<std::string>{"r.yaml:3:3: model.init_from: " + jitter +
                                                     "/config.json: router_jitter_noise 0.01, but xtrain computes no "
                                                     "dropout (nor router jitter); add `model.dropout: 0` to the "
                                                     "recipe to fine-tune without dropout (the export keeps the "
                                                     "config's values)"});
}

TEST_CASE("model.init_from takes a BERT folder's dropout unless the recipe sets model.dropout", "[config]") {
  xtrain::testing::ScratchDir scratch;
  auto folder = [&](const std::string& dropout) {
    scratch.write("bert/config.json", R"({"model_type": "bert", "vocab_size": 300, "hidden_size": 32,
                                          "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
                                          "max_position_embeddings": 64, "type_vocab_size": 2, "pad_token_id": 0)" +
                                             dropout + "}");
    return "name: x\nmodel:\n  init_from: hf:" + (scratch.path() / "bert").string() +
           "\ndata:\n  objective: mlm\n  seq_len: 64\n";
  };
  const auto same = folder(R"(, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1)");
  CHECK(load_recipe_text(same, "r.yaml").model.dropout == 0.1);
  CHECK(load_recipe_text(same, "r.yaml", {{"model.dropout=0.05"}}).model.dropout == 0.05);
  const auto differ = folder(R"(, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.0)");
  CHECK(problems(differ) ==
        std::vector<std::string>{"r.yaml:3:3: model.init_from: " + (scratch.path() / "bert").string() +
                                 "/config.json: hidden_dropout_prob 0.1, but xtrain's bert applies one dropout "
                                 "probability to the attention probabilities and the hidden states; set "
                                 "model.dropout in the recipe"});
  CHECK(problems(differ, {"model.dropout=0.1"}).empty());
}

TEST_CASE("model.init_from takes a T5 folder's dropout_rate unless the recipe sets model.dropout", "[config]") {
  xtrain::testing::ScratchDir scratch;
  scratch.write("t5/config.json", R"({"model_type": "t5", "vocab_size": 320, "d_model": 32, "d_kv": 8, "d_ff": 64,
                                      "num_layers": 2, "num_heads": 4, "dropout_rate": 0.1})");
  const std::string recipe = "name: x\nmodel:\n  init_from: hf:" + (scratch.path() / "t5").string() +
                             "\ndata:\n  tokenizer: byte\n  objective: span_corruption\n  seq_len: 64\n";
  CHECK(load_recipe_text(recipe, "r.yaml").model.dropout == 0.1);
  CHECK(load_recipe_text(recipe, "r.yaml", {{"model.dropout=0"}}).model.dropout == 0);
}

TEST_CASE("model.init_from takes a T5 folder's feed-forward, decoder depth and buckets", "[config]") {
  xtrain::testing::ScratchDir scratch;
  scratch.write("t5/config.json", R"({"model_type": "t5", "vocab_size": 320, "d_model": 32, "d_kv": 8, "d_ff": 64,
                                      "num_layers": 2, "num_decoder_layers": 3, "num_heads": 4,
                                      "relative_attention_num_buckets": 8, "relative_attention_max_distance": 20,
                                      "feed_forward_proj": "gated-gelu", "tie_word_embeddings": false})");
  const std::string dir = (scratch.path() / "t5").string();
  const std::string recipe =
      "name: x\nmodel:\n  init_from: hf:" + dir + "\ndata:\n  tokenizer: byte\n  objective: span_corruption\n";
  const auto ed = load_recipe_text(recipe, "r.yaml").model.encoder_decoder;
  CHECK(ed.gated_gelu);
  CHECK(ed.decoder_layers == 3);
  CHECK(ed.relative_buckets == 8);
  CHECK(ed.relative_max_distance == 20);
  CHECK(problems(recipe, {"model.num_decoder_layers=5"}) ==
        std::vector<std::string>{"--set model.num_decoder_layers=5: model.num_decoder_layers: 5, but " + dir +
                                 "/config.json says 3; leave it out of the recipe (model.init_from takes the model's "
                                 "shape from config.json)"});
}

TEST_CASE("model.init_from takes the router's coefficient from config.json unless the recipe sets one", "[config]") {
  xtrain::testing::ScratchDir scratch;
  const auto dir = recipe_init_from_test::write_folder(scratch, R"(, "router_aux_loss_coef": 0.001)");
  const std::string recipe = "name: x\nmodel:\n  init_from: hf:" + dir + "\n";
  // transformers' loss is top k times xtrain's: xtrain's coefficient is 2 x 0.001.
  CHECK(load_recipe_text(recipe, "r.yaml").model.router_aux_loss_coef == 0.002);
  CHECK(load_recipe_text(recipe + "  router_aux_loss_coef: 0.05\n", "r.yaml").model.router_aux_loss_coef == 0.05);
}

TEST_CASE("a layout or objective the family does not support names the family, the key and the fix", "[config]") {
  const auto has = [](const std::vector<std::string>& lines, const std::string& line) {
    INFO(Catch::Detail::stringify(lines));
    CHECK(std::find(lines.begin(), lines.end(), line) != lines.end());
  };
  const std::string bert = "name: x\nmodel:\n  family: bert\n  tie_embeddings: true\ndata:\n  objective: mlm\n";
  const std::string vit = "name: x\nmodel:\n  family: vit\n  hidden_size: 64\ndata:\n  seq_len: 64\n";
  has(problems(vit + "parallel:\n  tp: 2\n"),
      "r.yaml:8:3: parallel.tp: 2: model.family vit is not split by tensor parallelism: leave it at 1 (use FSDP)");
  has(problems(vit + "parallel:\n  pp: 2\n"),
      "r.yaml:8:3: parallel.pp: 2: model.family vit is not split into pipeline stages: leave it at 1 (use FSDP)");
  has(problems(bert + "parallel:\n  tp: 2\n  sequence_parallel: true\n"),
      "r.yaml:9:3: parallel.sequence_parallel: true: model.family bert splits over parallel.tp without sequence "
      "parallelism; set it false");
  has(problems("name: x\nmodel:\n  family: bert\n  tie_embeddings: true\n"),
      "r.yaml:3:3: model.family: bert is an encoder trained on masked tokens: set data.objective mlm");
  has(problems("name: x\ndata:\n  objective: mlm\n"),
      "r.yaml:3:3: data.objective: mlm trains an encoder, and model.family llama is a decoder: set model.family "
      "bert, or data.objective clm");
}

TEST_CASE("each file of config/rules is one feature of the rule table, and the table has no other", "[config]") {
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(XTRAIN_SOURCE_DIR) + "/lib/config/rules"))
    if (entry.path().extension() == ".cpp" && entry.path().stem() != "rules") files.insert(entry.path().stem());
  std::set<std::string> features;
  for (const auto& rule : recipe_rules()) {
    CHECK(rule.check != nullptr);
    CHECK(features.insert(rule.feature).second);
  }
  CHECK(features == files);
}

TEST_CASE("a feature's rule refuses the key where the recipe set it, or the file for a default", "[config]") {
  const std::string recipe =
      "name: x\nmodel:\n  family: llama\n  hidden_size: 64\n  num_layers: 2\n  num_heads: 4\n"
      "data:\n  train: builtin:demo\n  tokenizer: byte\n  seq_len: 30\n"
      "train:\n  steps: 1\n  global_batch_size: 2\n  micro_batch_size: 2\n";
  CHECK(problems(recipe, {"parallel.cp=2"}) ==
        std::vector<std::string>{"--set parallel.cp=2: parallel.cp: 2 cuts each sequence into 2 x cp = 4 chunks "
                                 "(head-tail), which does not divide data.seq_len 30: make data.seq_len a multiple of "
                                 "4"});
  CHECK(problems(recipe + "optim:\n  name: onebit_adam\n") ==
        std::vector<std::string>{"r.yaml: parallel.dp: 1: optim.name onebit_adam compresses the momentum exchanged "
                                 "between data-parallel replicas, and there is one. Pure FSDP's reduce-scatter "
                                 "already moves each gradient element once and its optimizer state is sharded, so "
                                 "there is nothing to replace: use parallel.dp above 1 (DDP, or HSDP with "
                                 "parallel.fsdp)"});
}
