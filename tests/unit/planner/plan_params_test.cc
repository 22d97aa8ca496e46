#include "coordinator/planner/plan_params.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_file.h"

namespace chimera::planner {
namespace {

using ::testing::HasSubstr;

std::string Example(const std::string& name) {
  return std::string(CHIMERA_SOURCE_DIR) + "/examples/" + name;
}

TEST(PlanParamsTest, EverySchemeRoundTripsThroughAPlan) {
  for (auto scheme : {schedule::Scheme::kGpipe, schedule::Scheme::kOneFOneB,
                      schedule::Scheme::kGems, schedule::Scheme::kChimera,
                      schedule::Scheme::kMixPipe, schedule::Scheme::kInterleaved,
                      schedule::Scheme::kBreadthFirst}) {
    schedule::ScheduleParams p;
    p.scheme = scheme;
    p.depth = 4;
    p.width = 2;
    p.micro_batches = 8;
    p.pipelines = 4;
    p.concat = schedule::Concat::kBackwardHalving;
    p.policy = schedule::WarmupPolicy::kPb;
    p.mixpipe_k = 2;
    p.mixpipe_gamma = 1;
    p.chunks = 2;
    p.recompute = true;
    chimera::v1::Plan plan;
    SetScheduleParams(p, 3, &plan);
    EXPECT_EQ(plan.micro_batch_size(), 3);
    absl::StatusOr<schedule::ScheduleParams> back = ScheduleParamsOf(plan);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->scheme, p.scheme);
    EXPECT_EQ(back->depth, 4);
    EXPECT_EQ(back->width, 2);
    EXPECT_EQ(back->micro_batches, 8);
    EXPECT_TRUE(back->recompute);
    if (scheme == schedule::Scheme::kChimera) {
      EXPECT_EQ(back->pipelines, 4);
      EXPECT_EQ(back->concat, schedule::Concat::kBackwardHalving);
    }
    if (scheme == schedule::Scheme::kMixPipe) {
      EXPECT_EQ(back->mixpipe_gamma, 1);
    }
    if (scheme == schedule::Scheme::kInterleaved) {
      EXPECT_EQ(back->chunks, 2);
    }
  }
}

TEST(PlanParamsTest, UnknownSchemeInAPlanNamesTheField) {
  chimera::v1::Plan plan;
  plan.set_scheme("zigzag");
  EXPECT_THAT(ScheduleParamsOf(plan).status().message(), HasSubstr("plan.scheme: 'zigzag'"));
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
