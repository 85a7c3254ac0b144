// Where the mesh's groups fall on the nodes (parallel/placement.h), for the layouts of two nodes of
// two ranks: tp and HSDP's shards inside a node, fsdp over all ranks and HSDP's replicas across,
// and the warning for tensor- or expert-parallel groups that cross nodes.
#include <catch2/catch.hpp>

#include "parallel/placement.h"

using namespace xtrain::parallel;

TEST_CASE("placement: tp and HSDP's shard groups stay inside a node, fsdp and dp cross", "[parallel][placement]") {
  const ParallelDegrees tp2_fsdp2{1, 2, 2, 1, 1};
  CHECK(describe_placement(tp2_fsdp2, 4, 2) ==
        "placement on 2 nodes x 2 ranks: fsdp 2: across nodes (2 groups; ranks 0,2 on nodes 0,1); "
        "tp 2: within a node (2 groups; ranks 0,1 on node 0)");
  CHECK_FALSE(placement_warning(tp2_fsdp2, 4, 2));

  const auto hsdp = group_spans({2, 2, 1, 1, 1}, 4, 2);
  REQUIRE(hsdp.size() == 2);
  CHECK((hsdp[0].dimension == Dim::dp && hsdp[0].crossing == 2 && hsdp[0].first_ranks == std::vector<int64_t>{0, 2}));
  CHECK((hsdp[1].dimension == Dim::fsdp && hsdp[1].crossing == 0 && hsdp[1].first_ranks == std::vector<int64_t>{0, 1}));

  const auto fsdp4 = group_spans({1, 4, 1, 1, 1}, 4, 2);
  REQUIRE(fsdp4.size() == 1);
  CHECK((fsdp4[0].groups == 1 && fsdp4[0].crossing == 1 && fsdp4[0].first_nodes == std::vector<int64_t>{0, 1}));
}

TEST_CASE("placement: tensor- and expert-parallel groups that cross nodes are warned of", "[parallel][placement]") {
  CHECK(placement_warning({1, 1, 4, 1, 1}, 4, 2).value_or("") ==
        "parallel.tp 4 crosses nodes (2 ranks a node): every layer's collectives of that group go over the network. "
        "Keep them inside a node with a degree that divides the ranks a node holds, and let fsdp, dp or pp span the "
        "nodes");
  CHECK_FALSE(placement_warning({1, 1, 4, 1, 1}, 4, 4));  // one node: nothing crosses

  // Experts fold into the data ranks: ep 2 of FSDP 4 is ranks 0,1 and 2,3, each on one node.
  const auto ep2 = group_spans({1, 4, 1, 1, 2}, 4, 2);
  REQUIRE(ep2.back().dimension == Dim::ep);
  CHECK((ep2.back().groups == 2 && ep2.back().crossing == 0));
  CHECK_FALSE(placement_warning({1, 4, 1, 1, 2}, 4, 2));
  CHECK_THAT(placement_warning({1, 4, 1, 1, 4}, 4, 2).value_or(""), Catch::StartsWith("parallel.ep 4 crosses nodes"));
}
