#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "scratch_dir.h"
#include "util/file_lock.h"
#include "util/input_error.h"

using xtrain::InputError;
using xtrain::testing::ScratchDir;
using xtrain::util::FileLock;

TEST_CASE("file lock: one holder at a time, released with its object", "[util][data_cache]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "key.lock").string();
  {
    FileLock held = FileLock::acquire(path);
    // flock locks belong to an open file, so a second open in the same process is refused too.
    CHECK_FALSE(FileLock::try_acquire(path).has_value());
    FileLock moved = std::move(held);
    CHECK_FALSE(FileLock::try_acquire(path).has_value());
  }
  CHECK(FileLock::try_acquire(path).has_value());
  CHECK(std::filesystem::exists(path));  // the lock file stays for the next holder
}

TEST_CASE("file lock: a waiter gets the lock once the holder lets go", "[util][data_cache]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "key.lock").string();
  std::atomic<bool> released{false};
  std::atomic<bool> waiter_saw_release{false};
  auto held = std::make_unique<FileLock>(FileLock::acquire(path));
  std::thread waiter([&] {
    FileLock lock = FileLock::acquire(path);
    waiter_saw_release = released.load();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  released = true;
  held.reset();
  waiter.join();
  CHECK(waiter_saw_release);
}

TEST_CASE("file lock: a lock file that cannot be created is an input error naming it", "[util][data_cache]") {
  ScratchDir dir;
  const std::string file = dir.write("plain", "x");
  CHECK_THROWS_AS(FileLock::acquire(file + "/key.lock"), InputError);
  CHECK_THROWS_WITH(FileLock::try_acquire(file + "/key.lock"), Catch::Contains(file + "/key.lock"));
}
