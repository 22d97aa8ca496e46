#include "planner/plan_params.h"

#include "gtest/gtest.h"
#include "jobspec/job_file.h"

namespace chimera::planner {
namespace {

std::string Example(const std::string& name) {
  return std::string(CHIMERA_SOURCE_DIR) + "/examples/" + name;
}

TEST(PlanParamsTest, JobWithFixedParallelismHasAPlanWithAnEvenPartition) {
  absl::StatusOr<chimera::v1::TrainJob> job =
      jobspec::LoadJobFile(Example("chimera.yaml"), {.check_data_files = false});
  ASSERT_TRUE(job.ok()) << job.status();
  std::optional<chimera::v1::Plan> plan = FixedPlan(*job);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->scheme(), "chimera");
  EXPECT_EQ(plan->depth(), 4);
  EXPECT_EQ(plan->width(), 1);
  EXPECT_EQ(plan->micro_batches(), 4);
  EXPECT_EQ(plan->micro_batch_size(), 2);
  ASSERT_EQ(plan->partition_size(), 4);
  EXPECT_EQ(plan->partition(3).first_layer(), 6);
  EXPECT_EQ(plan->partition(3).num_layers(), 2);
}

TEST(PlanParamsTest, JobLeavingParallelismOpenHasNoFixedPlan) {
  absl::StatusOr<chimera::v1::TrainJob> job =
      jobspec::LoadJobFile(Example("bert-auto.yaml"), {.check_data_files = false});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(FixedPlan(*job).has_value());
}

}  // namespace
}  // namespace chimera::planner
