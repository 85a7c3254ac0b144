// The all-to-all case every Comm is tested on: 3 ranks, rank s sending kSends[s][r] rows of two
// columns to rank r, with zero splits (rank 1 sends only to rank 2 and receives only from it;
// rank 2 sends nothing to itself). Row i of rank r's input holds 10 r + i.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "parallel/comm.h"

namespace xtrain::testing {

struct UnevenAllToAll {
  static constexpr int64_t kRanks = 3;
  const std::vector<std::vector<int64_t>> sends = {{2, 0, 1}, {0, 0, 3}, {1, 2, 0}};

  // Rank r's part: what it receives.
  torch::Tensor run(parallel::Comm& comm, int64_t r) const {
    std::vector<int64_t> out_splits;
    int64_t in_rows = 0, out_rows = 0;
    for (int64_t s = 0; s < kRanks; ++s) {
      out_splits.push_back(sends[s][r]);
      in_rows += sends[r][s];
      out_rows += sends[s][r];
    }
    auto in = (torch::arange(in_rows, torch::kFloat32) + 10 * r).unsqueeze(1).expand({in_rows, 2}).contiguous();
    auto out = torch::full({out_rows, 2}, -1.f);
    comm.all_to_all(out, in, out_splits, sends[r]).wait();
    return out;
  }

  // What rank r must receive: from each rank in turn, the rows it sent to r.
  static torch::Tensor expected(int64_t r) {
    const std::vector<std::vector<float>> rows = {{0, 1, 20}, {21, 22}, {2, 10, 11, 12}};
    const auto& v = rows[static_cast<size_t>(r)];
    return torch::tensor(v).unsqueeze(1).expand({static_cast<int64_t>(v.size()), 2});
  }
};

}  // namespace xtrain::testing
