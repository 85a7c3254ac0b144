#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/manifest.h"
#include "ckpt/safetensors.h"
#include "scratch_dir.h"
#include "util/input_error.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>

namespace fs = std::filesystem;
using namespace xtrain;

namespace {

// A weights file or trainer state the manifest does not list.
const std::string kUnlisted = ": not in the manifest (added after it was written, or the manifest was edited)";

ckpt::CheckpointContents contents_for(int64_t step) {
  ckpt::CheckpointContents contents;
  contents.model = {{"a", torch::arange(64, torch::kFloat32) * step}, {"b", torch::ones({4, 4}) * step}};
  contents.model_config = {{"model_type", "llama"}};
  contents.optimizer = {{"step", torch::tensor(step)}};
  contents.trainer_state = {{"step", step}};
  contents.recipe_yaml = "name: t\n";
  return contents;
}

// Inverts the byte at offset: the size stays, the contents change.
void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(static_cast<std::streamoff>(offset));
  char byte = 0;
  file.read(&byte, 1);
  file.seekp(static_cast<std::streamoff>(offset));
  byte = static_cast<char>(~byte);
  file.write(&byte, 1);
}

uint64_t offset_in_tensor(const std::string& path, const std::string& name) {
  for (const auto& span : ckpt::read_safetensors_layout(path).tensors)
    if (span.name == name) return span.begin + (span.end - span.begin) / 2;
  FAIL("no tensor " << name);
  return 0;
}

}  // namespace

TEST_CASE("a committed checkpoint carries a manifest that verifies", "[ckpt][manifest]") {
  testing::ScratchDir scratch;
  ckpt::CheckpointStore store(scratch.path().string(), 3);
  const auto dir = store.save(1, contents_for(1));
  REQUIRE(fs::exists(dir + "/manifest.json"));
  const auto check = ckpt::verify_manifest(dir);
  CHECK(check.status == ckpt::ManifestCheck::Status::verified);
  CHECK(check.problems.empty());
  uint64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename() != "manifest.json") bytes += fs::file_size(entry.path());
  CHECK(check.bytes == bytes);
}

TEST_CASE("a flipped byte is reported by file and tensor; the size does not change", "[ckpt][manifest]") {
  testing::ScratchDir scratch;
  const auto dir = ckpt::CheckpointStore(scratch.path().string(), 3).save(1, contents_for(1));
  const auto model = dir + "/model.safetensors";
  const auto size = fs::file_size(model);
  flip_byte(model, offset_in_tensor(model, "b"));
  REQUIRE(fs::file_size(model) == size);
  const auto check = ckpt::verify_manifest(dir);
  CHECK(check.status == ckpt::ManifestCheck::Status::failed);
  REQUIRE(check.problems.size() == 1);
  CHECK(check.problems[0] == "model.safetensors: tensor 'b' does not match its checksum");
}

TEST_CASE("a damaged header, a truncated file and a missing file are each named", "[ckpt][manifest]") {
  testing::ScratchDir scratch;
  const auto dir = ckpt::CheckpointStore(scratch.path().string(), 3).save(1, contents_for(1));
  flip_byte(dir + "/model.safetensors", 20);  // inside the JSON header
  fs::resize_file(dir + "/optimizer.safetensors", fs::file_size(dir + "/optimizer.safetensors") - 1);
  fs::remove(dir + "/recipe.yaml");
  const auto check = ckpt::verify_manifest(dir);
  REQUIRE(check.problems.size() == 3);
  CHECK(check.problems[0].rfind("model.safetensors: the header ", 0) == 0);
  CHECK(check.problems[1] == fmt::format("optimizer.safetensors: {} bytes, the manifest says {} (truncated or overwritten)",
                                         fs::file_size(dir + "/optimizer.safetensors"),
                                         fs::file_size(dir + "/optimizer.safetensors") + 1));
  CHECK(check.problems[2] == "recipe.yaml: missing (the manifest lists it)");
}

TEST_CASE("a manifest that names a path outside its folder is damaged, and nothing there is read", "[ckpt][manifest]") {
  testing::ScratchDir scratch;
  const auto dir = ckpt::CheckpointStore(scratch.path().string(), 3).save(1, contents_for(1));
  std::ofstream(scratch.path() / "outside.txt") << "x";
  std::ofstream(dir + "/manifest.json")
      << R"({"format": 1, "files": {"../../outside.txt": {"size": 1, "xxh3": "0"}, "sub/x": {}}})";
  const auto check = ckpt::verify_manifest(dir);
  CHECK(check.status == ckpt::ManifestCheck::Status::failed);
  CHECK(check.bytes == 0);
  CHECK(check.problems == std::vector<std::string>{
                              "../../outside.txt: not a file name of the checkpoint folder (the manifest is damaged)",
                              "sub/x: not a file name of the checkpoint folder (the manifest is damaged)",
                              "model.safetensors" + kUnlisted, "optimizer.safetensors" + kUnlisted,
                              "trainer_state.json" + kUnlisted});
}

TEST_CASE("a manifest whose numbers are out of range or of the wrong kind is damaged", "[ckpt][manifest]") {
  // Found by tests/fuzz/manifest.cpp: a format of 8.9e28 was converted to int (undefined).
  testing::ScratchDir scratch;
  const auto dir = ckpt::CheckpointStore(scratch.path().string(), 3).save(1, contents_for(1));
  std::ofstream(dir + "/manifest.json") << R"({"format": 88888888888888888888888888888, "files": {}})";
  CHECK(ckpt::verify_manifest(dir).problems ==
        std::vector<std::string>{"manifest.json: unreadable: unknown manifest format 8.88888888888889e+28"});
  std::ofstream(dir + "/manifest.json") << R"({"format": 1, "files": {"recipe.yaml": {"size": -3}}})";
  CHECK(ckpt::verify_manifest(dir).problems ==
        std::vector<std::string>{"recipe.yaml: the manifest gives no size for it (the manifest is damaged)",
                                 "model.safetensors" + kUnlisted, "optimizer.safetensors" + kUnlisted,
                                 "trainer_state.json" + kUnlisted});
}

TEST_CASE("only a plain Hugging Face folder may lack a manifest", "[ckpt][manifest]") {
  testing::ScratchDir scratch;
  const auto dir = ckpt::CheckpointStore(scratch.path().string(), 3).save(1, contents_for(1));
  fs::remove(dir + "/manifest.json");
  // A training checkpoint always had one: without it, it is damaged, and says why.
  const auto damaged = ckpt::verify_manifest(dir);
  CHECK(damaged.status == ckpt::ManifestCheck::Status::failed);
  CHECK(damaged.problems == std::vector<std::string>{
                                "manifest.json: missing, but the folder holds optimizer.safetensors, "
                                "trainer_state.json: every checkpoint xtrain writes has a manifest, so it was deleted "
                                "or lost and nothing in the folder can be verified"});
  CHECK_THROWS_AS(ckpt::verify_checkpoint(dir), InputError);
  // model.safetensors and config.json alone: a Hugging Face folder, read unverified.
  fs::remove(dir + "/trainer_state.json");
  fs::remove(dir + "/optimizer.safetensors");
  const auto check = ckpt::verify_manifest(dir);
  CHECK(check.status == ckpt::ManifestCheck::Status::no_manifest);
  CHECK(check.usable());
  CHECK(ckpt::verify_checkpoint(dir).summary() ==
        "no manifest: a plain Hugging Face folder (no trainer_state.json, optimizer or shard files), loaded "
        "unverified");
}

TEST_CASE("an edited manifest is found by its own checksum", "[ckpt][manifest]") {
  testing::ScratchDir scratch;
  const auto dir = ckpt::CheckpointStore(scratch.path().string(), 3).save(1, contents_for(1));
  auto manifest = nlohmann::json::parse(std::ifstream(dir + "/manifest.json"));
  REQUIRE(manifest.at("format") == 2);
  // Re-indented, the listing unchanged: still verifies.
  std::ofstream(dir + "/manifest.json") << manifest.dump(4);
  CHECK(ckpt::verify_manifest(dir).status == ckpt::ManifestCheck::Status::verified);
  manifest["files"]["recipe.yaml"]["xxh3"] = "0000000000000000";
  std::ofstream(dir + "/manifest.json") << manifest.dump(1);
  const auto check = ckpt::verify_manifest(dir);
  REQUIRE(check.problems.size() == 2);
  CHECK(check.problems[0] ==
        "manifest.json: its listing does not match its own checksum (manifest_xxh3): the manifest was edited after "
        "it was written");
  CHECK(check.problems[1] == "recipe.yaml: the contents do not match the checksum");
}

TEST_CASE("a checkpoint with a non-finite value gives way to the one before", "[ckpt][manifest]") {
  testing::ScratchDir scratch;
  ckpt::CheckpointStore store(scratch.path().string(), 5);
  store.save(1, contents_for(1));
  auto bad = contents_for(2);
  bad.optimizer["exp_avg.a"] = torch::full({3}, std::numeric_limits<float>::infinity());
  bad.model["b"][1][2] = std::numeric_limits<float>::quiet_NaN();
  const auto step2 = store.save(2, bad);
  CHECK(ckpt::verify_manifest(step2).status == ckpt::ManifestCheck::Status::verified);  // the checksums match
  const auto check = ckpt::check_resumable(step2);
  CHECK(check.problems == std::vector<std::string>{"model.safetensors: tensor 'b' has 1 NaN and 0 infinite values of 16",
                                                   "optimizer.safetensors: tensor 'exp_avg.a' has 0 NaN and 3 infinite "
                                                   "values of 3"});
  auto choice = store.newest_intact(/*strict=*/false);
  REQUIRE(choice);
  CHECK(choice->dir == store.dir() + "/step-1");
  CHECK(choice->check.finite_checked);
  CHECK_THROWS_WITH(store.newest_intact(/*strict=*/true),
                    Catch::Matchers::StartsWith(step2 + " failed verification (" + ckpt::kResumableChecks + "): " +
                                                check.problems[0]));
  CHECK_THROWS_AS(ckpt::verify_resumable(step2), InputError);
}

TEST_CASE("a damaged latest gives way to the newest checkpoint that verifies", "[ckpt][manifest]") {
  testing::ScratchDir scratch;
  ckpt::CheckpointStore store(scratch.path().string(), 5);
  for (int64_t step : {1, 2, 3}) store.save(step, contents_for(step));
  const auto step3 = store.dir() + "/step-3", step2 = store.dir() + "/step-2";
  flip_byte(step3 + "/model.safetensors", offset_in_tensor(step3 + "/model.safetensors", "a"));

  auto choice = store.newest_intact(/*strict=*/false);
  REQUIRE(choice);
  CHECK(choice->dir == step2);
  REQUIRE(choice->skipped.size() == 1);
  CHECK(choice->skipped[0] == step3 + ": model.safetensors: tensor 'a' does not match its checksum");

  CHECK_THROWS_MATCHES(store.newest_intact(/*strict=*/true), InputError,
                       Catch::Matchers::Message(step3 + " failed verification (" + ckpt::kResumableChecks +
                                                "): model.safetensors: tensor 'a' does not "
                                                        "match its checksum; checkpoint.resume is strict, so the run "
                                                        "stops: set checkpoint.resume: auto to continue from the "
                                                        "newest intact checkpoint"));
  CHECK_THROWS_AS(ckpt::verify_checkpoint(step3), InputError);
}

TEST_CASE("a latest that is a dangling link or a loop falls back like a damaged one", "[ckpt][manifest]") {
  testing::ScratchDir scratch;
  ckpt::CheckpointStore store(scratch.path().string(), 5);
  store.save(1, contents_for(1));
  fs::remove(store.dir() + "/latest");
  fs::create_symlink("latest", store.dir() + "/latest");  // a loop
  auto choice = store.newest_intact(false);
  REQUIRE(choice);
  CHECK(choice->dir == store.dir() + "/step-1");
  CHECK(choice->skipped.size() == 1);
}

TEST_CASE("checkpoints that all fail verification stop the run instead of starting over", "[ckpt][manifest]") {
  testing::ScratchDir scratch;
  ckpt::CheckpointStore store(scratch.path().string(), 5);
  store.save(1, contents_for(1));
  fs::remove(store.dir() + "/step-1/config.json");
  CHECK_THROWS_MATCHES(store.newest_intact(false), InputError,
                       Catch::Matchers::Message("no intact checkpoint in " + store.dir() + ": " + store.dir() +
                                                "/step-1: config.json: missing (the manifest lists it); set "
                                                "checkpoint.resume: never to start over"));
  ckpt::CheckpointStore empty((scratch.path() / "other").string(), 5);
  CHECK_FALSE(empty.newest_intact(true));
}
