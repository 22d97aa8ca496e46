// A job's launch: every rank's program generated at the full width with the
// layers it holds, a schedule the validator refuses named with the
// validator's words, ranks placed on their workers' nodes and devices, and
// each rank's start.
#include "coordinator/job_launcher.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/params_proto.h"
#include "schedule/rank_schedule.h"
#include "tests/unit/coordinator/lost_backward.h"

namespace chimera::coordinator {
namespace {

using ::testing::HasSubstr;

// 1F1B at W = 2, D = 2, N = 4 over 8 layers, split 3 + 5.
chimera::v1::Plan TwoByTwoPlan() {
  chimera::v1::Plan plan;
  plan.set_scheme("1f1b");
  plan.set_policy("pa");
  plan.set_width(2);
  plan.set_depth(2);
  plan.set_micro_batches(4);
  auto* first = plan.add_partition();
  first->set_first_layer(0);
  first->set_num_layers(3);
  auto* second = plan.add_partition();
  second->set_first_layer(3);
  second->set_num_layers(5);
  return plan;
}

TEST(JobLauncherTest, EveryRankOfEveryReplicaGetsItsProgramWithItsLayers) {
  absl::StatusOr<Launch> launch = PrepareLaunch(TwoByTwoPlan());
  ASSERT_TRUE(launch.ok()) << launch.status();
  ASSERT_EQ(launch->programs.size(), 4u);
  for (int rank = 0; rank < 4; ++rank) {
    const chimera::v1::WorkerProgram& program = launch->programs[rank];
    EXPECT_EQ(program.rank(), rank);
    ASSERT_EQ(program.stages_size(), 1) << rank;
    const bool last_stage = rank % 2 == 1;
    EXPECT_EQ(program.stages(0).first_layer(), last_stage ? 3 : 0) << rank;
    EXPECT_EQ(program.stages(0).num_layers(), last_stage ? 5 : 3) << rank;
    EXPECT_GT(program.instructions_size(), 0) << rank;
  }
  EXPECT_EQ(launch->plan.scheme(), "1f1b");
  // What every rank is told of the others: each one's stages, and the digest
  // of the schedule validated here.
  const chimera::v1::ScheduleOutline& outline = launch->outline;
  ASSERT_EQ(outline.ranks_size(), 4);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(outline.ranks(rank).stages(0).stage(), rank % 2) << rank;
  }
  EXPECT_EQ(outline.width(), 2);
  EXPECT_EQ(outline.depth(), 2);
  EXPECT_EQ(outline.max_parts(), 1);
  absl::StatusOr<schedule::Schedule> generated = schedule::GenerateSchedule(
      schedule::ScheduleParamsOf(TwoByTwoPlan()).value());
  ASSERT_TRUE(generated.ok()) << generated.status();
  EXPECT_EQ(outline.digest(), schedule::ScheduleDigest(*generated));
}

TEST(JobLauncherTest, EachRankIsStartedWithItsRankProgramOutlineAndTimeout) {
  const WorkerRegistry registry{HeartbeatPolicy{}};
  LaunchOptions options;
  options.collective_timeout = absl::Seconds(7);
  const JobLauncher launcher(&registry, options);
  absl::StatusOr<Launch> launch = PrepareLaunch(TwoByTwoPlan());
  ASSERT_TRUE(launch.ok()) << launch.status();
  const chimera::v1::ScheduleOutline outline = launch->outline;
  chimera::v1::Job job;
  job.set_id("job-1");
  job.mutable_manifest()->mutable_metadata()->set_name("job");
  *job.mutable_plan() = launch->plan;
  job.mutable_status()->set_checkpoint_step(6);
  const std::vector<chimera::v1::Assignment> starts =
      launcher.StartsFor(job, /*attempt=*/3, *std::move(launch));
  ASSERT_EQ(starts.size(), 4u);
  for (int rank = 0; rank < 4; ++rank) {
    const chimera::v1::StartTask& start = starts[rank].start();
    EXPECT_EQ(start.job_id(), "job-1");
    EXPECT_EQ(start.attempt(), 3);
    EXPECT_EQ(start.start_step(), 6);
    EXPECT_EQ(start.rank(), rank);
    EXPECT_EQ(start.program().rank(), rank);
    EXPECT_EQ(start.outline().SerializeAsString(), outline.SerializeAsString());
    EXPECT_EQ(start.plan().scheme(), "1f1b");
    EXPECT_EQ(start.manifest().metadata().name(), "job");
    EXPECT_EQ(start.rendezvous().timeout_ms(), 7000);
    EXPECT_TRUE(start.rendezvous().store_address().empty())
        << "told once rank 0 reports it";
  }
}

TEST(JobLauncherTest, AScheduleTheValidatorRefusesIsAnInternalErrorInItsWords) {
  absl::StatusOr<Launch> launch = PrepareLaunch(TwoByTwoPlan(), LosesABackwardOf(3));
  EXPECT_EQ(launch.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(launch.status().message(),
              HasSubstr("the 1f1b schedule for W=2 D=2 N=4 is invalid: "));
  EXPECT_THAT(launch.status().message(), HasSubstr("rank 3"));
  EXPECT_THAT(launch.status().message(), HasSubstr("misses backward"));
}

TEST(JobLauncherTest, AGeneratorsOwnErrorIsPassedOn) {
  const auto refuses = [](const schedule::ScheduleParams&)
      -> absl::StatusOr<schedule::Schedule> {
    return absl::InvalidArgumentError("depth: must be even");
  };
  EXPECT_EQ(PrepareLaunch(TwoByTwoPlan(), refuses).status(),
            absl::InvalidArgumentError("depth: must be even"));
}

chimera::v1::WorkerInfo Worker(const std::string& node, int gpu_index) {
  chimera::v1::WorkerInfo worker;
  worker.set_node(node);
  worker.add_devices()->set_kind("cpu");
  if (gpu_index >= 0) {
    chimera::v1::Device* gpu = worker.add_devices();
    gpu->set_kind("gpu");
    gpu->set_index(gpu_index);
  }
  return worker;
}

TEST(JobLauncherTest, RanksArePlacedOnNodesInOrderOfAppearanceAndTheirWorkersGpus) {
  chimera::v1::Plan plan = TwoByTwoPlan();
  plan.add_placement()->set_rank(7);  // a previous attempt's, replaced
  PlaceOnWorkers({Worker("b", 1), Worker("a", 0), Worker("b", 3), Worker("c", -1)},
                 "gpu", &plan);
  ASSERT_EQ(plan.placement_size(), 4);
  const int nodes[] = {0, 1, 0, 2};
  const int devices[] = {1, 0, 3, 0};
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(plan.placement(rank).rank(), rank);
    EXPECT_EQ(plan.placement(rank).node(), nodes[rank]) << rank;
    EXPECT_EQ(plan.placement(rank).device(), devices[rank]) << rank;
  }
}

}  // namespace
}  // namespace chimera::coordinator
