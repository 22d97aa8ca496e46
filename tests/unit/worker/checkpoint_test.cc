// Checkpoints of an executor's model stages on disk: what is saved comes back
// bit-exactly and training continues as if it had never stopped; incomplete
// or foreign checkpoints are refused; each model stage has one writer.
#include "worker/runtime/checkpoint.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "coordinator/schedule/generator.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/worker/test_models.h"
#include "worker/runtime/program_executor.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;

// GPipe on one worker: the whole model is model stage 0.
schedule::Schedule OneWorker() {
  schedule::ScheduleParams params;
  params.scheme = schedule::Scheme::kGpipe;
  params.depth = 1;
  params.micro_batches = 2;
  return schedule::GenerateSchedule(params).value();
}

class CheckpointTest : public ::testing::Test {
 protected:
  CheckpointTest() : config_(testing::TinyConfig(ModelFamily::kGpt)) {
    DataSourceOptions data;
    data.vocab_size = config_.vocab_size;
    data.sample_length = config_.seq_length + 1;
    data_ = DataSource::Open(data).value();
  }

  std::unique_ptr<ProgramExecutor> Executor(OptimizerKind kind,
                                            const ModelConfig& config) {
    ExecutorOptions options;
    options.model = config;
    options.partition = {{0, config.num_layers}};
    options.micro_batch_size = 2;
    options.optimizer.kind = kind;
    options.optimizer.lr = 1e-2;
    options.optimizer.momentum = 0.9;
    absl::StatusOr<std::unique_ptr<ProgramExecutor>> executor =
        ProgramExecutor::Create(schedule_, 0, options, *data_, nullptr);
    EXPECT_TRUE(executor.ok()) << executor.status();
    return *std::move(executor);
  }

  std::unique_ptr<ProgramExecutor> Executor(OptimizerKind kind) {
    return Executor(kind, config_);
  }

  const ModelConfig config_;
  const schedule::Schedule schedule_ = OneWorker();
  std::unique_ptr<DataSource> data_;
  chimera::testing::TempDir dir_;
};

// Whether two states hold the same names, bits and optimizer steps.
bool SameState(const StageState& a, const StageState& b) {
  if (a.parameters.size() != b.parameters.size() ||
      a.optimizer.steps != b.optimizer.steps) {
    return false;
  }
  const auto same = [](const at::Tensor& x, const at::Tensor& y) {
    return x.defined() == y.defined() && (!x.defined() || at::equal(x, y));
  };
  for (size_t i = 0; i < a.parameters.size(); ++i) {
    if (a.parameters[i].first != b.parameters[i].first ||
        !same(a.parameters[i].second, b.parameters[i].second) ||
        !same(a.optimizer.first_moments[i], b.optimizer.first_moments[i]) ||
        !same(a.optimizer.second_moments[i], b.optimizer.second_moments[i])) {
      return false;
    }
  }
  return true;
}

TEST_F(CheckpointTest, SavedStageLoadsBitExactlyAndTrainingContinuesIdentically) {
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kSgd}) {
    SCOPED_TRACE(kind == OptimizerKind::kAdamW ? "adamw" : "sgd");
    const CheckpointDir checkpoints(dir_.path() + (kind == OptimizerKind::kAdamW ? "/a" : "/s"));
    auto trained = Executor(kind);
    for (int64_t step = 0; step < 2; ++step) ASSERT_TRUE(trained->RunStep(step).ok());
    ASSERT_TRUE(checkpoints.Save(*trained, 2, {0}).ok());

    auto resumed = Executor(kind);
    ASSERT_FALSE(SameState(*trained->ExportStage(0), *resumed->ExportStage(0)));
    const absl::Status loaded = checkpoints.Load(*resumed, 2, 1);
    ASSERT_TRUE(loaded.ok()) << loaded;
    const StageState state = *resumed->ExportStage(0);
    EXPECT_TRUE(SameState(*trained->ExportStage(0), state));
    EXPECT_EQ(state.optimizer.steps, 2);
    EXPECT_TRUE(state.optimizer.first_moments[0].defined());
    EXPECT_EQ(state.optimizer.second_moments[0].defined(), kind == OptimizerKind::kAdamW);

    // The next step is the same computation on both: the same loss and the
    // same parameters, to the bit.
    const StepMetrics next = *trained->RunStep(2);
    const StepMetrics after_restart = *resumed->RunStep(2);
    EXPECT_EQ(next.loss, after_restart.loss);
    EXPECT_TRUE(SameState(*trained->ExportStage(0), *resumed->ExportStage(0)));
  }
}

TEST_F(CheckpointTest, IncompleteStepIsNotCompleteAndIsNotLoaded) {
  const CheckpointDir checkpoints(dir_.path());
  auto executor = Executor(OptimizerKind::kAdamW);
  ASSERT_TRUE(executor->RunStep(0).ok());
  ASSERT_TRUE(checkpoints.Save(*executor, 1, {0}).ok());
  EXPECT_TRUE(checkpoints.IsComplete(1, 1));
  // A model of two stages of which only stage 0 was written.
  EXPECT_FALSE(checkpoints.IsComplete(1, 2));
  const absl::Status partial = checkpoints.Load(*executor, 1, 2);
  EXPECT_EQ(partial.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(partial.message(), HasSubstr(checkpoints.StagePath(1, 1)));
  // A stage file still being written (killed mid-write) does not count.
  std::filesystem::create_directories(checkpoints.StepPath(2));
  std::filesystem::copy_file(checkpoints.StagePath(1, 0),
                             checkpoints.StagePath(2, 0) + ".tmp-1234");
  EXPECT_FALSE(checkpoints.IsComplete(2, 1));
  EXPECT_EQ(checkpoints.Load(*executor, 2, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(checkpoints.IsComplete(3, 1));
}

TEST_F(CheckpointTest, CheckpointOfAnotherModelIsRefusedNamingTheFile) {
  const CheckpointDir checkpoints(dir_.path());
  ModelConfig wider = config_;
  wider.ffn_size = 48;
  auto other = Executor(OptimizerKind::kAdamW, wider);
  ASSERT_TRUE(checkpoints.Save(*other, 1, {0}).ok());
  auto executor = Executor(OptimizerKind::kAdamW);
  const StageState before = *executor->ExportStage(0);
  std::vector<at::Tensor> copies;
  for (const auto& [name, parameter] : before.parameters) copies.push_back(parameter.clone());
  const absl::Status loaded = checkpoints.Load(*executor, 1, 1);
  EXPECT_EQ(loaded.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.message(), HasSubstr(checkpoints.StagePath(1, 0)));
  EXPECT_THAT(loaded.message(), HasSubstr("[40, 16]"));
  for (size_t i = 0; i < copies.size(); ++i) {
    EXPECT_TRUE(at::equal(copies[i], before.parameters[i].second)) << before.parameters[i].first;
  }
}

TEST_F(CheckpointTest, UnreadableFileIsInvalidArgumentNamingIt) {
  const CheckpointDir checkpoints(dir_.path());
  std::filesystem::create_directories(checkpoints.StepPath(1));
  dir_.WriteFile("step-1/stage-0.pt", "not a checkpoint");
  auto executor = Executor(OptimizerKind::kSgd);
  const absl::Status loaded = checkpoints.Load(*executor, 1, 1);
  EXPECT_EQ(loaded.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.message(), HasSubstr(checkpoints.StagePath(1, 0)));
}

TEST(StagesWrittenByTest, EachModelStageHasOneWriterTheLowestRankHoldingIt) {
  // Chimera D = 4: model stage s sits on ranks s and 3 - s.
  schedule::ScheduleParams params;
  params.scheme = schedule::Scheme::kChimera;
  params.depth = 4;
  params.micro_batches = 4;
  const schedule::Schedule chimera = schedule::GenerateSchedule(params).value();
  EXPECT_EQ(StagesWrittenBy(chimera, 0), (std::vector<int>{0, 3}));
  EXPECT_EQ(StagesWrittenBy(chimera, 1), (std::vector<int>{1, 2}));
  EXPECT_TRUE(StagesWrittenBy(chimera, 2).empty());
  EXPECT_TRUE(StagesWrittenBy(chimera, 3).empty());
}

}  // namespace
}  // namespace chimera::worker
