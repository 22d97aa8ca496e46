#include "planner/placement.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/planner/test_jobs.h"

namespace chimera::planner {
namespace {

using ::testing::HasSubstr;

std::vector<DeviceSlot> Place(int nodes, int per_node, int width, int depth,
                              bool bidirectional, PlacementPolicy policy) {
  absl::StatusOr<std::vector<DeviceSlot>> slots =
      PlaceRanks(testing::TestCluster(nodes, per_node).spec(), width, depth,
                 bidirectional, policy);
  EXPECT_TRUE(slots.ok()) << slots.status();
  return slots.ok() ? *slots : std::vector<DeviceSlot>{};
}

TEST(PlacementTest, EveryRankGetsADistinctDevice) {
  for (PlacementPolicy policy : kAllPlacementPolicies) {
    std::vector<DeviceSlot> slots = Place(4, 8, 4, 8, true, policy);
    ASSERT_EQ(slots.size(), 32u);
    std::set<std::pair<int, int>> used;
    for (const DeviceSlot& slot : slots) used.insert({slot.node, slot.device});
    EXPECT_EQ(used.size(), 32u) << PlacementPolicyName(policy);
  }
}

TEST(PlacementTest, FreshFirstKeepsAPositionsReplicasOnOneNode) {
  std::vector<DeviceSlot> slots = Place(2, 4, 2, 4, false, PlacementPolicy::kFreshFirst);
  for (int position = 0; position < 4; ++position) {
    EXPECT_EQ(slots[position].node, slots[4 + position].node) << position;
  }
}

TEST(PlacementTest, ScatterFirstSpreadsAPositionsReplicas) {
  std::vector<DeviceSlot> slots = Place(2, 4, 2, 4, false, PlacementPolicy::kScatterFirst);
  EXPECT_NE(slots[0].node, slots[4].node);
}

TEST(PlacementTest, AppendFirstFillsAPartlyUsedNodeBeforeAFreshOne) {
  // Nodes of 3: position 0 takes 2 devices of node 0; position 1's pair then
  // takes node 0's last device under append-first, a fresh node under
  // fresh-first.
  std::vector<DeviceSlot> append = Place(2, 3, 2, 2, false, PlacementPolicy::kAppendFirst);
  std::vector<DeviceSlot> fresh = Place(2, 3, 2, 2, false, PlacementPolicy::kFreshFirst);
  EXPECT_EQ(append[1].node, 0);
  EXPECT_EQ(fresh[1].node, 1);
  EXPECT_EQ(fresh[3].node, 1);
}

TEST(PlacementTest, ReplicasTogetherPutsBothDirectionsOfAStageOnOneNode) {
  // Chimera W=2 D=4: stage s lives on positions s and 3-s of both replicas.
  std::vector<DeviceSlot> slots =
      Place(4, 8, 2, 4, true, PlacementPolicy::kReplicasTogether);
  for (int position = 0; position < 2; ++position) {
    const int node = slots[position].node;
    EXPECT_EQ(slots[3 - position].node, node);
    EXPECT_EQ(slots[4 + position].node, node);
    EXPECT_EQ(slots[4 + 3 - position].node, node);
  }
}

TEST(PlacementTest, TooFewDevicesIsAFailedPrecondition) {
  absl::StatusOr<std::vector<DeviceSlot>> slots = PlaceRanks(
      testing::TestCluster(1, 4).spec(), 2, 4, false, PlacementPolicy::kFreshFirst);
  EXPECT_EQ(slots.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(slots.status().message(), HasSubstr("2 x 4 = 8 workers"));
}

}  // namespace
}  // namespace chimera::planner
