// Runs one function per rank, each on its own thread, for tests of communicating code over
// parallel::make_thread_comms (or a c10d backend per thread). Returns each rank's exception message
// ("" when it returned normally), so a test can check what every rank saw.
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace xtrain::testing {

inline std::vector<std::string> run_ranks(int64_t ranks, const std::function<void(int64_t rank)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace xtrain::testing
