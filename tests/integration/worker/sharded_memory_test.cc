// Optimizer-state sharding saves what it should, as measured: each worker's
// tracked memory between steps (weights, gradients and optimizer state, see
// memory_balance_test.cc) drops by (1 - 1/G) of its AdamW state, two moments
// per weight, in gradient groups of G = 2 (Chimera, W = 1) and 4 (W = 2).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "schedule/generator.h"
#include "tests/support/temp_dir.h"
#include "worker/harness/pipeline_job.h"

namespace chimera::worker {
namespace {

using harness::MakePipelineJob;
using harness::MeasurePipeline;
using harness::PipelineJob;
using harness::PipelineMeasurements;

constexpr absl::Duration kCaseDeadline = absl::Seconds(120);
constexpr absl::Duration kOpTimeout = absl::Seconds(30);
constexpr int kSteps = 2;

ModelConfig SmallGpt() {
  ModelConfig config;
  config.num_layers = 8;
  config.hidden_size = 64;
  config.ffn_size = 128;
  config.num_heads = 4;
  config.vocab_size = 64;
  config.seq_length = 16;
  config.dtype = at::kFloat;
  return config;
}

// Each rank's last step of Chimera D = 4 at `width`.
std::vector<StepMetrics> LastSteps(int width, Sharding sharding) {
  schedule::ScheduleParams params;
  params.scheme = schedule::Scheme::kChimera;
  params.depth = 4;
  params.micro_batches = 4;
  params.width = width;
  absl::StatusOr<schedule::Schedule> generated =
      schedule::GenerateSchedule(params);
  EXPECT_TRUE(generated.ok()) << generated.status();
  if (!generated.ok()) return {};
  PipelineJob job =
      MakePipelineJob(*std::move(generated), SmallGpt(),
                      /*micro_batch_size=*/2, /*seed=*/5, kOpTimeout);
  job.spec.optimizer = {.kind = OptimizerKind::kAdamW};
  job.spec.sharding = sharding;
  job.spec.max_steps = kSteps;
  const chimera::testing::TempDir scratch;
  const absl::StatusOr<PipelineMeasurements> measured =
      MeasurePipeline(std::move(job), scratch.path(), kCaseDeadline);
  EXPECT_TRUE(measured.ok()) << measured.status();
  if (!measured.ok()) return {};
  std::vector<StepMetrics> last;
  for (const std::vector<StepMetrics>& steps : measured->ranks) {
    last.push_back(steps.back());
  }
  return last;
}

class ShardedMemoryTest : public ::testing::TestWithParam<int> {};

TEST_P(ShardedMemoryTest, TheOptimizerStateOfEachWorkerDropsByTheGroupSize) {
  const int width = GetParam();
  const int members = 2 * width;  // the replicas of a Chimera stage
  const std::vector<StepMetrics> whole = LastSteps(width, Sharding::kNone);
  const std::vector<StepMetrics> sharded =
      LastSteps(width, Sharding::kOptimizer);
  ASSERT_EQ(whole.size(), sharded.size());
  ASSERT_FALSE(whole.empty());
  for (size_t rank = 0; rank < whole.size(); ++rank) {
    const double state = static_cast<double>(whole[rank].optimizer_bytes);
    ASSERT_EQ(state, 2.0 * static_cast<double>(whole[rank].weights_bytes));
    const double expected_drop = state * (1.0 - 1.0 / members);
    const double measured_drop = static_cast<double>(
        whole[rank].memory_current_bytes - sharded[rank].memory_current_bytes);
    EXPECT_NEAR(measured_drop, expected_drop, 0.1 * expected_drop)
        << "rank " << rank << ": " << whole[rank].memory_current_bytes
        << " bytes unsharded, " << sharded[rank].memory_current_bytes
        << " sharded over " << members;
    EXPECT_NEAR(static_cast<double>(sharded[rank].optimizer_bytes),
                state / members, 0.1 * state / members)
        << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(ChimeraWidths, ShardedMemoryTest,
                         ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "W" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace chimera::worker
