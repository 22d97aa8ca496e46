#include "worker/model/partition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;

TEST(PartitionTest, ContiguousRangesCoveringTheModelMakeAPartition) {
  const absl::StatusOr<Partition> partition =
      Partition::Of({{0, 3}, {3, 4}, {4, 8}}, 8);
  ASSERT_TRUE(partition.ok()) << partition.status();
  EXPECT_EQ(partition->stage_count(), 3);
  EXPECT_EQ(partition->num_layers(), 8);
  EXPECT_EQ(partition->stage(1).begin, 3);
  EXPECT_EQ(partition->stage(1).end, 4);
}

TEST(PartitionTest, EachFaultIsRefusedNamingTheRangeOrTheEnd) {
  const struct {
    std::vector<LayerRange> stages;
    std::string why;
  } cases[] = {
      {{{0, 1}, {2, 4}},
       "partition[1] is blocks [2, 4); it must start at block 1 and hold at "
       "least one block"},
      {{{0, 2}, {2, 2}, {2, 4}},
       "partition[1] is blocks [2, 2); it must start at block 2"},
      {{{1, 4}}, "partition[0] is blocks [1, 4); it must start at block 0"},
      {{{0, 2}, {2, 3}}, "partition ends at block 3; the model has 4 blocks"},
      {{}, "partition ends at block 0; the model has 4 blocks"},
  };
  for (const auto& c : cases) {
    const absl::StatusOr<Partition> partition = Partition::Of(c.stages, 4);
    EXPECT_EQ(partition.status().code(), absl::StatusCode::kInvalidArgument)
        << c.why;
    EXPECT_THAT(partition.status().message(), HasSubstr(c.why));
  }
}

TEST(PartitionTest, AnEvenSplitGivesEveryStageItsShareOfTheBlocks) {
  const Partition partition = Partition::Even(10, 4).value();
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const LayerRange& range : partition.stages()) {
    ranges.emplace_back(range.begin, range.end);
  }
  EXPECT_EQ(ranges, (std::vector<std::pair<int64_t, int64_t>>{
                        {0, 2}, {2, 5}, {5, 7}, {7, 10}}));
  EXPECT_EQ(Partition::Even(3, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Partition::Even(3, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace chimera::worker
