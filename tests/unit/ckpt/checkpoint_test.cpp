#include <torch/torch.h>

#include <filesystem>

#include "ckpt/checkpoint.h"
#include "scratch_dir.h"
#include "util/durable_file.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>

namespace fs = std::filesystem;
using namespace xtrain;

namespace {
ckpt::CheckpointContents small_contents_for(int64_t step) {
  ckpt::CheckpointContents contents;
  contents.model = {{"w", torch::full({2}, static_cast<float>(step))}};
  contents.model_config = {{"model_type", "llama"}};
  contents.optimizer = {{"step", torch::tensor(step)}};
  contents.trainer_state = {{"step", step}};
  contents.recipe_yaml = "name: t\n";
  return contents;
}
}  // namespace

TEST_CASE("checkpoints are complete folders; latest moves last; only `keep` remain", "[ckpt]") {
  testing::ScratchDir scratch;
  ckpt::CheckpointStore store(scratch.path().string(), 2);
  CHECK_FALSE(store.latest());
  for (int64_t step : {10, 20, 30}) store.save(step, small_contents_for(step));
  REQUIRE(store.latest());
  CHECK(*store.latest() == store.dir() + "/step-30");
  CHECK(fs::read_symlink(store.dir() + "/latest") == "step-30");
  CHECK_FALSE(fs::exists(store.dir() + "/step-10"));
  CHECK(fs::exists(store.dir() + "/step-20"));

  auto loaded = ckpt::load_checkpoint(*store.latest());
  CHECK(torch::equal(loaded.model.at("w"), torch::full({2}, 30.0f)));
  CHECK(loaded.trainer_state.at("step") == 30);
  CHECK(loaded.recipe_yaml == "name: t\n");
  for (const auto& entry : fs::directory_iterator(store.dir()))
    CHECK(entry.path().filename().string().rfind(".tmp", 0) != 0);
}

TEST_CASE("re-saving a step replaces it, and stale temp folders are removed", "[ckpt]") {
  testing::ScratchDir scratch;
  ckpt::CheckpointStore store(scratch.path().string(), 3);
  store.save(5, small_contents_for(5));
  auto second = small_contents_for(5);
  second.recipe_yaml = "name: again\n";
  store.save(5, second);
  CHECK(ckpt::load_checkpoint(*store.latest()).recipe_yaml == "name: again\n");
  fs::create_directories(store.dir() + "/.tmp-step-9-123");
  store.remove_stale_temp_folders();
  CHECK_FALSE(fs::exists(store.dir() + "/.tmp-step-9-123"));
  CHECK(fs::exists(store.dir() + "/step-5/model.safetensors"));
}

TEST_CASE("a checkpoint with a missing file is reported by name", "[ckpt]") {
  testing::ScratchDir scratch;
  ckpt::CheckpointStore store(scratch.path().string(), 1);
  const std::string dir = store.save(1, small_contents_for(1));
  fs::remove(dir + "/optimizer.safetensors");
  CHECK_THROWS_WITH(ckpt::load_checkpoint(dir), Catch::Contains(dir + "/optimizer.safetensors"));
}
