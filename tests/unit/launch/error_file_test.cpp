#include <catch2/catch.hpp>

#include <cstdlib>
#include <ctime>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "launch/error_file.h"
#include "scratch_dir.h"
#include "util/durable_file.h"
#include "util/input_error.h"

using namespace xtrain::launch;
using xtrain::testing::ScratchDir;

namespace {

// Sets TORCHELASTIC_ERROR_FILE for one test.
struct ErrorFileVariable {
  explicit ErrorFileVariable(const std::string& path) { ::setenv("TORCHELASTIC_ERROR_FILE", path.c_str(), 1); }
  ~ErrorFileVariable() { ::unsetenv("TORCHELASTIC_ERROR_FILE"); }
};

}  // namespace

TEST_CASE("launch error file: torchelastic's layout", "[launch]") {
  const auto json = nlohmann::json::parse(error_file_json({"InputError: bad", "bad", 1700000000}));
  CHECK(json["message"]["message"] == "InputError: bad");
  CHECK(json["message"]["extraInfo"]["py_callstack"] == "bad");
  CHECK(json["message"]["extraInfo"]["timestamp"] == "1700000000");  // a string, as torchelastic writes it
}

TEST_CASE("launch error file: an exception's type and message, written where the launcher asks", "[launch]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "rank_1.error.json").string();
  ErrorFileVariable variable(path);
  const auto before = static_cast<int64_t>(std::time(nullptr));
  record_error_if_requested(error_record(xtrain::InputError("recipe.yaml: no such file")));
  const auto record = read_error_file(path);
  REQUIRE(record);
  CHECK(record->message == "InputError: recipe.yaml: no such file");
  CHECK(record->callstack == "recipe.yaml: no such file");
  CHECK(record->timestamp >= before);

  record_error_if_requested(error_record(std::runtime_error("later")));  // replaced, as torchelastic does
  CHECK(read_error_file(path)->message == "std::runtime_error: later");
}

TEST_CASE("launch error file: a missing folder is a warning, not a crash", "[launch]") {
  ScratchDir dir;
  ErrorFileVariable variable((dir.path() / "missing" / "error.json").string());
  CHECK_NOTHROW(record_error_if_requested(error_record("E", "x")));
}

TEST_CASE("launch error file: reading other layouts and garbage", "[launch]") {
  ScratchDir dir;
  CHECK_FALSE(read_error_file((dir.path() / "absent.json").string()));
  CHECK_FALSE(read_error_file(dir.write("garbage.json", "{not json")));
  CHECK_FALSE(read_error_file(dir.write("other.json", R"({"something": 1})")));
  const auto legacy = read_error_file(dir.write("legacy.json", R"({"message": "old style", "timestamp": 12})"));
  REQUIRE(legacy);
  CHECK(legacy->message == "old style");
  CHECK(legacy->timestamp == 12);
}
