#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "scratch_dir.h"
#include "train/metrics_log.h"
#include "util/durable_file.h"

using namespace xtrain;

TEST_CASE("metrics records keep key order and round-trip doubles exactly", "[train]") {
  const double loss = 2.0 / 3.0;
  nlohmann::ordered_json record = {{"step", 7}, {"loss", loss}, {"lr", 1e-4}};
  const std::string line = train::to_json_line(record);
  CHECK(line.rfind("{\"step\":7,\"loss\":", 0) == 0);
  auto parsed = nlohmann::json::parse(line);
  CHECK(parsed["loss"].get<double>() == loss);  // bit-exact, not approximately
  CHECK(parsed["lr"].get<double>() == 1e-4);
}

TEST_CASE("non-finite numbers are written as null, keeping every line valid JSON", "[train]") {
  nlohmann::ordered_json record = {{"step", 3}, {"grad_norm", std::nan("")}, {"x", INFINITY}};
  const std::string line = train::to_json_line(record);
  CHECK(line == "{\"step\":3,\"grad_norm\":null,\"x\":null}");
  CHECK(nlohmann::json::parse(line)["grad_norm"].is_null());
}

TEST_CASE("resuming drops records written after the checkpoint, and a torn last line", "[train]") {
  testing::ScratchDir scratch;
  const std::string path = scratch.write("metrics.jsonl",
                                         "{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"loss\":2.5}\n"
                                         "{\"step\":3,\"loss\":2.0}\n{\"step\":4,\"lo");
  {
    train::MetricsLog log(path, 2);
    log.write({{"step", 3}, {"loss", 1.5}});
  }
  CHECK(util::read_file(path) == "{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"loss\":2.5}\n{\"step\":3,\"loss\":1.5}\n");
  {
    train::MetricsLog fresh(path, 0);
  }
  CHECK(util::read_file(path).empty());
}
