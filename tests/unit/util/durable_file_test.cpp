#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "scratch_dir.h"
#include "util/durable_file.h"
#include "util/input_error.h"

using xtrain::InputError;
using xtrain::testing::ScratchDir;
namespace fs = std::filesystem;
namespace util = xtrain::util;

namespace {

// Every entry in a directory, to check that no temporary file is left behind.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("write_file_durable writes and truncates", "[util]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "f.bin").string();
  const std::string binary("a\0b\xff", 4);
  util::write_file_durable(path, binary);
  CHECK(util::read_file(path) == binary);
  util::write_file_durable(path, "x");
  CHECK(util::read_file(path) == "x");
  util::write_file_durable(path, "");
  CHECK(util::read_file(path).empty());
}

TEST_CASE("read_file reads files larger than its buffer", "[util]") {
  ScratchDir dir;
  std::string big(300000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  const std::string path = dir.write("big.bin", big);
  CHECK(util::read_file(path) == big);
}

TEST_CASE("replace_file_atomic replaces contents and leaves no temporary file", "[util]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "state.json").string();
  util::replace_file_atomic(path, "first");
  CHECK(util::read_file(path) == "first");
  util::replace_file_atomic(path, "second");
  CHECK(util::read_file(path) == "second");
  CHECK(listing(dir.path()) == std::vector<std::string>{"state.json"});
}

TEST_CASE("replace_file_atomic in the working directory", "[util]") {
  // A bare file name has no parent in its path; the directory to fsync is ".".
  ScratchDir dir;
  const fs::path previous = fs::current_path();
  fs::current_path(dir.path());
  CHECK_NOTHROW(util::replace_file_atomic("bare.txt", "x"));
  fs::current_path(previous);
  CHECK(util::read_file((dir.path() / "bare.txt").string()) == "x");
}

TEST_CASE("replace_symlink_atomic creates and re-points a link", "[util]") {
  ScratchDir dir;
  const fs::path link = dir.path() / "latest";
  fs::create_directory(dir.path() / "step-1");
  fs::create_directory(dir.path() / "step-2");
  dir.write("step-1/id", "1");
  dir.write("step-2/id", "2");

  util::replace_symlink_atomic("step-1", link.string());
  CHECK(fs::read_symlink(link) == "step-1");
  CHECK(util::read_file((link / "id").string()) == "1");

  util::replace_symlink_atomic("step-2", link.string());
  CHECK(fs::read_symlink(link) == "step-2");
  CHECK(util::read_file((link / "id").string()) == "2");
  CHECK(listing(dir.path()) == std::vector<std::string>{"latest", "step-1", "step-2"});
}

TEST_CASE("replace_symlink_atomic recovers from a stale temporary link", "[util]") {
  // A crash between creating the temporary link and renaming it leaves latest.tmp behind.
  ScratchDir dir;
  const fs::path link = dir.path() / "latest";
  fs::create_symlink("old", dir.path() / "latest.tmp");
  util::replace_symlink_atomic("new", link.string());
  CHECK(fs::read_symlink(link) == "new");
  CHECK_FALSE(fs::is_symlink(dir.path() / "latest.tmp"));
}

TEST_CASE("read_file of a missing file is an InputError naming it", "[util]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "missing.txt").string();
  CHECK_THROWS_AS(util::read_file(path), InputError);
  CHECK_THROWS_WITH(util::read_file(path), "cannot read " + path + ": No such file or directory");
  CHECK_THROWS_WITH(util::read_file(dir.path().string()),
                    "cannot read " + dir.path().string() + ": Is a directory");
}

TEST_CASE("environment failures are runtime errors, not InputErrors", "[util]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "no-such-dir" / "f").string();
  const auto is_runtime_failure = [](const auto& write) {
    try {
      write();
    } catch (const InputError&) {
      return false;
    } catch (const std::runtime_error& error) {
      return std::string(error.what()).find("No such file or directory") != std::string::npos;
    }
    return false;
  };
  CHECK(is_runtime_failure([&] { util::write_file_durable(path, "x"); }));
  CHECK(is_runtime_failure([&] { util::replace_file_atomic(path, "x"); }));
  CHECK(is_runtime_failure([&] { util::fsync_path(path); }));
  CHECK(is_runtime_failure([&] { util::replace_symlink_atomic("t", path); }));
  CHECK_THROWS_WITH(util::write_file_durable(path, "x"),
                    "cannot create " + path + ": No such file or directory");
}

TEST_CASE("fsync_path accepts files and directories and leaves them as they were", "[util]") {
  ScratchDir dir;
  const std::string file = dir.write("f", "contents");
  CHECK_NOTHROW(util::fsync_path(file));
  CHECK_NOTHROW(util::fsync_path(dir.path().string()));
  // Opened to sync, not to write: nothing truncated, nothing created beside.
  CHECK(util::read_file(file) == "contents");
  CHECK(listing(dir.path()) == std::vector<std::string>{"f"});
}
