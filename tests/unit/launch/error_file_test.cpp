#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "launch/error_file.h"
#include "scratch_dir.h"
#include "util/durable_file.h"
#include "util/input_error.h"

using namespace xtrain::launch;
using xtrain::testing::ScratchDir;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// Sets TORCHELASTIC_ERROR_FILE for one test.
struct ErrorFileVariable {
  explicit ErrorFileVariable(const std::string& path) { ::setenv("TORCHELASTIC_ERROR_FILE", path.c_str(), 1); }
  ~ErrorFileVariable() { ::unsetenv("TORCHELASTIC_ERROR_FILE"); }
};

// Sends this process's stderr (file descriptor 2) to a file while it lives.
class StderrToFile {
 public:
  explicit StderrToFile(const std::string& path) : saved_(::dup(2)) {
    std::fflush(stderr);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrToFile() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
  }
  StderrToFile(const StderrToFile&) = delete;
  StderrToFile& operator=(const StderrToFile&) = delete;

 private:
  int saved_;
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
  const std::string path = (dir.path() / "missing" / "error.json").string();
  ErrorFileVariable variable(path);
  const std::string captured = (dir.path() / "stderr.txt").string();
  {
    StderrToFile redirect(captured);
    CHECK_NOTHROW(record_error_if_requested(error_record("E", "x")));
  }
  CHECK_THAT(xtrain::util::read_file(captured),
             StartsWith("warning: cannot write the error file (TORCHELASTIC_ERROR_FILE): ") && Contains(path));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "missing"));
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
