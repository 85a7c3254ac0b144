// Ranks compare their recipes at start-up (train/recipe_agreement.h): the fingerprint, the
// message that names the ranks and the first differing key, and the exchange over a store, with
// ranks as threads.
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "config/option_registry.h"
#include "scratch_dir.h"
#include "train/recipe_agreement.h"

using namespace xtrain;
using train::Fingerprint;

namespace {

config::Recipe agreement_test_recipe() { return config::OptionRegistry::instance().defaults(); }

// Each rank's fingerprint exchanged by a thread of its own; returns what each rank found.
std::vector<std::string> exchange_as_threads(const std::vector<Fingerprint>& fingerprints) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::string> found(fingerprints.size());
  std::vector<std::thread> ranks;
  for (size_t r = 0; r < fingerprints.size(); ++r)
    ranks.emplace_back([&, r] {
      found[r] = train::exchange_fingerprints(*store, "test/", static_cast<int64_t>(r),
                                              static_cast<int64_t>(fingerprints.size()), fingerprints[r],
                                              std::chrono::seconds(10));
    });
  for (auto& rank : ranks) rank.join();
  return found;
}

}  // namespace

TEST_CASE("a fingerprint holds the build, every recipe key as validate renders it, and the data's size",
          "[recipe_agreement]") {
  testing::ScratchDir dir;
  const std::string file = dir.write("train.txt", "twelve bytes");
  auto recipe = agreement_test_recipe();
  recipe.data.train = file;
  const auto lines = train::rank_fingerprint(recipe);
  REQUIRE(lines.front().key == "xtrain");
  auto value_of = [&lines](const std::string& key) {
    for (const auto& line : lines)
      if (line.key == key) return line.value;
    return std::string("(none)");
  };
  CHECK(value_of("optim.lr") == config::OptionRegistry::instance().find("optim.lr")->render(recipe));
  CHECK(value_of("data.train source " + file) == "12 bytes");
  CHECK(lines.size() == config::OptionRegistry::instance().options().size() + 2);
  CHECK(train::fingerprint_digest(lines) == train::fingerprint_digest(train::rank_fingerprint(recipe)));
  std::ofstream(file, std::ios::app) << "!";
  CHECK(train::fingerprint_digest(lines) != train::fingerprint_digest(train::rank_fingerprint(recipe)));
}

TEST_CASE("the message names the ranks, the first differing key with both values and the others",
          "[recipe_agreement]") {
  const Fingerprint base{{"xtrain", "0.1.0"}, {"optim.lr", "0.001"}, {"run.seed", "0"}};
  Fingerprint other = base;
  other[1].value = "0.01";
  other[2].value = "8";
  CHECK(train::disagreement({base, base}).empty());
  CHECK(train::disagreement({base, other}) ==
        "recipe mismatch: rank 1 has optim.lr: 0.01, rank 0 has optim.lr: 0.001 (and 1 more key: run.seed); start "
        "every rank with the same recipe and --set options");
  Fingerprint third = base;
  third[0].value = "0.2.0";
  CHECK(train::disagreement({base, base, other, other, third}) ==
        "recipe mismatch: ranks 2, 3 have optim.lr: 0.01, rank 0 has optim.lr: 0.001 (and 1 more key: run.seed); "
        "rank 4 differs from rank 0 as well; start every rank with the same recipe and --set options");
  CHECK(train::disagreement({base, third}) ==
        "recipe mismatch: rank 1 has xtrain: 0.2.0, rank 0 has xtrain: 0.1.0; start every rank with the same xtrain "
        "build");
  Fingerprint data = base;
  data.push_back({"data.train source web.txt", "10 bytes"});
  Fingerprint other_data = base;
  other_data.push_back({"data.train source web.txt", "11 bytes"});
  CHECK(train::disagreement({data, other_data}) ==
        "recipe mismatch: rank 1 has data.train source web.txt: 11 bytes, rank 0 has data.train source web.txt: 10 "
        "bytes; give every rank the same data files");
}

TEST_CASE("ranks exchange fingerprints and every rank finds rank 0's verdict", "[recipe_agreement]") {
  const Fingerprint base{{"xtrain", "0.1.0"}, {"optim.lr", "0.001"}};
  Fingerprint other = base;
  other[1].value = "0.01";
  for (const auto& found : exchange_as_threads({base, base, base})) CHECK(found.empty());
  const auto found = exchange_as_threads({base, base, other});
  const std::string expected =
      "recipe mismatch: rank 2 has optim.lr: 0.01, rank 0 has optim.lr: 0.001; start every rank with the same recipe "
      "and --set options";
  for (const auto& message : found) CHECK(message == expected);
}
