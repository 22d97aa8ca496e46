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
      jobspec::LoadJobFile(Example("chimera.yaml"), chimera::jobspec::SpecOnly());
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
      jobspec::LoadJobFile(Example("bert-auto.yaml"), chimera::jobspec::SpecOnly());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(FixedPlan(*job).has_value());
}

TEST(PlanParamsTest, WorkersLeftOpenAreAsManyAsAFixedPipelineAndDataAllow) {
  chimera::v1::TrainJob job;
  auto* parallelism = job.mutable_spec()->mutable_parallelism();
  EXPECT_EQ(MinimumWorkers(job), 1);
  EXPECT_EQ(WorkersToUse(job, 7), 7);
  EXPECT_EQ(WorkersToUse(job, 0), 0);
  parallelism->set_pipeline(4);
  EXPECT_EQ(MinimumWorkers(job), 4);
  EXPECT_EQ(WorkersToUse(job, 11), 8);
  EXPECT_EQ(WorkersToUse(job, 3), 0);
  parallelism->set_data(2);
  EXPECT_EQ(MinimumWorkers(job), 8);
  EXPECT_EQ(WorkersToUse(job, 20), 8);
  EXPECT_EQ(WorkersToUse(job, 7), 0);
}

TEST(PlanParamsTest, WorkersTheJobNamesAreAllItUses) {
  chimera::v1::TrainJob job;
  job.mutable_spec()->mutable_resources()->set_workers(6);
  EXPECT_EQ(MinimumWorkers(job), 6);
  EXPECT_EQ(WorkersToUse(job, 10), 6);
  EXPECT_EQ(WorkersToUse(job, 5), 0);
}

TEST(PlanParamsTest,
     AShrunkJobLeavesItsParallelismToThePlannerAndKeepsItsBatch) {
  absl::StatusOr<chimera::v1::TrainJob> job = jobspec::LoadJobFile(
      Example("chimera.yaml"), chimera::jobspec::SpecOnly());
  ASSERT_TRUE(job.ok()) << job.status();
  job->mutable_spec()->mutable_resources()->set_min_workers(2);
  const chimera::v1::TrainJob shrunk = ShrunkJob(*job, 3);
  EXPECT_EQ(shrunk.spec().resources().workers(), 3);
  EXPECT_EQ(shrunk.spec().resources().min_workers(), 0);
  EXPECT_FALSE(shrunk.spec().has_parallelism());
  EXPECT_FALSE(FixedPlan(shrunk).has_value());
  EXPECT_EQ(shrunk.spec().training().SerializeAsString(),
            job->spec().training().SerializeAsString());
  EXPECT_EQ(shrunk.spec().model().SerializeAsString(),
            job->spec().model().SerializeAsString());
}

}  // namespace
}  // namespace chimera::planner
