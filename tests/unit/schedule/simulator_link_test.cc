// The simulator's hooks for placement-aware costs: a p2p time per rank pair
// and allreduce times per model stage.
#include "gtest/gtest.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using testing::MustGenerate;
using testing::Params;

TEST(SimulatorLinkTest, P2pTimeHookPricesEachHopByItsRanks) {
  Schedule s = MustGenerate(Params(Scheme::kGpipe, 4, 1));
  CostModel costs;
  costs.activation_bytes = 10;
  // Ranks 1 and 2 sit on different nodes: that hop costs 5, the others 1.
  costs.p2p_time = [](int from, int to, double bytes) {
    EXPECT_EQ(bytes, 10);
    return (from == 1 && to == 2) || (from == 2 && to == 1) ? 5.0 : 1.0;
  };
  absl::StatusOr<SimulationResult> r = Simulate(s, costs);
  ASSERT_TRUE(r.ok()) << r.status();
  // 4 forwards + 4 backwards + 4 cheap hops + 2 expensive ones.
  EXPECT_NEAR(r->makespan, 4 * 1 + 4 * 2 + 4 * 1 + 2 * 5, 1e-9);
}

TEST(SimulatorLinkTest, StageAllreduceOverrideIsExposedAtTheEnd) {
  ScheduleParams params = Params(Scheme::kOneFOneB, 2, 2);
  params.width = 2;
  Schedule s = MustGenerate(params);
  CostModel costs;
  absl::StatusOr<SimulationResult> base = Simulate(s, costs);
  ASSERT_TRUE(base.ok()) << base.status();
  costs.stage_allreduce = {0.0, 7.0};
  absl::StatusOr<SimulationResult> slow = Simulate(s, costs);
  ASSERT_TRUE(slow.ok()) << slow.status();
  // Stage 1's 7-second allreduce starts after its last backward and outlasts
  // stage 0's final backward (2 seconds) by 5; the stage-1 worker has
  // nothing left to overlap it with and waits all 7.
  EXPECT_NEAR(slow->makespan, base->makespan + 5, 1e-9);
  EXPECT_NEAR(slow->exposed_allreduce, 7, 1e-9);
}

}  // namespace
}  // namespace chimera::schedule
