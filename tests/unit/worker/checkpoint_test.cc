// Checkpoints of an executor's model stages on disk: what is saved comes back
// bit-exactly and training continues as if it had never stopped; incomplete
// or foreign checkpoints are refused; old and abandoned steps are removed,
// also by two ranks at once;
// each model stage has one writer. Loading under another partition:
// tests/integration/worker/standalone_process_test.cc.
#include "worker/runtime/checkpoint.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "schedule/generator.h"
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
    data.sample_length = SampleLength(config_);
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

TEST_F(CheckpointTest,
       SavedStageLoadsBitExactlyAndTrainingContinuesIdentically) {
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kSgd}) {
    SCOPED_TRACE(kind == OptimizerKind::kAdamW ? "adamw" : "sgd");
    const CheckpointDir checkpoints(
        dir_.path() + (kind == OptimizerKind::kAdamW ? "/a" : "/s"));
    auto trained = Executor(kind);
    for (int64_t step = 0; step < 2; ++step)
      ASSERT_TRUE(trained->RunStep(step).ok());
    ASSERT_TRUE(checkpoints.Save(*trained, 2, {0}).ok());

    auto resumed = Executor(kind);
    ASSERT_FALSE(SameState(*trained->ExportStage(0), *resumed->ExportStage(0)));
    const absl::Status loaded = checkpoints.Load(*resumed, 2);
    ASSERT_TRUE(loaded.ok()) << loaded;
    const StageState state = *resumed->ExportStage(0);
    EXPECT_TRUE(SameState(*trained->ExportStage(0), state));
    EXPECT_EQ(state.optimizer.steps, 2);
    EXPECT_TRUE(state.optimizer.first_moments[0].defined());
    EXPECT_EQ(state.optimizer.second_moments[0].defined(),
              kind == OptimizerKind::kAdamW);

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
  const int64_t layers = config_.num_layers;
  auto executor = Executor(OptimizerKind::kAdamW);
  ASSERT_TRUE(executor->RunStep(0).ok());
  ASSERT_TRUE(checkpoints.Save(*executor, 1, {0}).ok());
  EXPECT_TRUE(checkpoints.CheckComplete(1, layers).ok());
  const std::string whole = checkpoints.StagePath(1, {0, layers});

  // Step 2: only the first block of a two-stage partition was written.
  std::filesystem::create_directories(checkpoints.StepPath(2));
  std::filesystem::copy_file(whole, checkpoints.StagePath(2, {0, 1}));
  const absl::Status partial = checkpoints.CheckComplete(2, layers);
  EXPECT_EQ(partial.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(partial.message(), HasSubstr("no file holds block 1"));
  EXPECT_EQ(checkpoints.Load(*executor, 2).code(),
            absl::StatusCode::kFailedPrecondition);
  // Step 1 plus a file of another partition: blocks held twice.
  std::filesystem::copy_file(whole, checkpoints.StagePath(1, {1, 2}));
  EXPECT_THAT(checkpoints.CheckComplete(1, layers).message(),
              HasSubstr("two files hold block 1"));
  std::filesystem::remove(checkpoints.StagePath(1, {1, 2}));
  // A stage file still being written (killed mid-write) does not count.
  std::filesystem::create_directories(checkpoints.StepPath(3));
  std::filesystem::copy_file(
      whole, checkpoints.StagePath(3, {0, layers}) + ".tmp-1234");
  EXPECT_FALSE(checkpoints.CheckComplete(3, layers).ok());
  EXPECT_FALSE(checkpoints.CheckComplete(4, layers).ok());
  EXPECT_EQ(checkpoints.LatestComplete(layers), 1);
  EXPECT_EQ(CheckpointDir(dir_.path() + "/none").LatestComplete(layers),
            std::nullopt);
}

TEST_F(CheckpointTest, OldAndAbandonedStepsAreRemoved) {
  const CheckpointDir checkpoints(dir_.path());
  auto executor = Executor(OptimizerKind::kSgd);
  for (int64_t step = 1; step <= 4; ++step) {
    ASSERT_TRUE(checkpoints.Save(*executor, step, {0}).ok());
  }
  const auto remaining = [&] {
    std::vector<bool> exists;
    for (int64_t step = 1; step <= 4; ++step) {
      exists.push_back(std::filesystem::exists(checkpoints.StepPath(step)));
    }
    return exists;
  };
  ASSERT_TRUE(checkpoints.RemoveStepsBefore(3).ok());
  EXPECT_EQ(remaining(), (std::vector<bool>{false, false, true, true}));
  ASSERT_TRUE(checkpoints.RemoveStepsAfter(3).ok());
  EXPECT_EQ(remaining(), (std::vector<bool>{false, false, true, false}));
  EXPECT_TRUE(checkpoints.Load(*executor, 3).ok());
}

// The data loss a coordinator restart caused: attempt 1's tasks kept
// training after the coordinator restarted the job as attempt 2 from step 4,
// wrote step 8 and pruned step 4, and attempt 2 then had nothing to resume
// from. Once attempt 2 has claimed the directory, attempt 1 writes and
// deletes nothing, and step 4 stays loadable.
TEST_F(CheckpointTest, AReplacedAttemptCanNeitherWriteNorPruneAfterTheNewOneClaims) {
  const CheckpointDir first(dir_.path(), 1);
  const CheckpointDir second(dir_.path(), 2);
  auto executor = Executor(OptimizerKind::kSgd);
  ASSERT_TRUE(first.Claim().ok());
  ASSERT_TRUE(first.Save(*executor, 2, {0}).ok());
  ASSERT_TRUE(first.Save(*executor, 4, {0}).ok());

  ASSERT_TRUE(second.Claim().ok());
  const absl::Status save = first.Save(*executor, 6, {0});
  EXPECT_EQ(save.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(save.message(), HasSubstr("attempt 2 of this job has replaced attempt 1"));
  EXPECT_FALSE(std::filesystem::exists(first.StepPath(6)));
  EXPECT_EQ(first.RemoveStepsBefore(6).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(first.RemoveStepsAfter(0).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(first.Claim().code(), absl::StatusCode::kAborted);

  EXPECT_TRUE(second.Load(*executor, 4).ok());
  EXPECT_TRUE(second.Load(*executor, 2).ok());
  // The new attempt itself goes on as usual, as do later claims by itself.
  ASSERT_TRUE(second.Claim().ok());
  EXPECT_TRUE(second.Save(*executor, 6, {0}).ok());
  EXPECT_TRUE(second.RemoveStepsBefore(4).ok());
  EXPECT_FALSE(std::filesystem::exists(second.StepPath(2)));
}

TEST_F(CheckpointTest, RanksPruningTheSameStepsAtOnceBothSucceed) {
  // Every rank of a job prunes the shared directory before its rendezvous,
  // so two may delete the same files at the same moment.
  const CheckpointDir checkpoints(dir_.path());
  for (int round = 0; round < 10; ++round) {
    for (int64_t step = 1; step <= 4; ++step) {
      const std::string path = checkpoints.StepPath(step);
      std::filesystem::create_directories(path);
      for (int file = 0; file < 50; ++file) {
        std::ofstream(
            absl::StrCat(path, "/blocks-", file, "-", file + 1, ".pt"))
            << "x";
      }
    }
    absl::Status first;
    absl::Status second;
    std::thread other([&] { second = checkpoints.RemoveStepsAfter(0); });
    first = checkpoints.RemoveStepsAfter(0);
    other.join();
    ASSERT_TRUE(first.ok()) << "round " << round << ": " << first;
    ASSERT_TRUE(second.ok()) << "round " << round << ": " << second;
    for (int64_t step = 1; step <= 4; ++step) {
      ASSERT_FALSE(std::filesystem::exists(checkpoints.StepPath(step)))
          << "round " << round << " step " << step;
    }
  }
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
  for (const auto& [name, parameter] : before.parameters)
    copies.push_back(parameter.clone());
  const absl::Status loaded = checkpoints.Load(*executor, 1);
  EXPECT_EQ(loaded.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.message(),
              HasSubstr(checkpoints.StagePath(1, {0, config_.num_layers})));
  EXPECT_THAT(loaded.message(), HasSubstr("[40, 16]"));
  for (size_t i = 0; i < copies.size(); ++i) {
    EXPECT_TRUE(at::equal(copies[i], before.parameters[i].second))
        << before.parameters[i].first;
  }
}

TEST_F(CheckpointTest, UnreadableFileIsInvalidArgumentNamingIt) {
  const CheckpointDir checkpoints(dir_.path());
  std::filesystem::create_directories(checkpoints.StepPath(1));
  const std::string path = checkpoints.StagePath(1, {0, config_.num_layers});
  dir_.WriteFile(path.substr(dir_.path().size() + 1), "not a checkpoint");
  auto executor = Executor(OptimizerKind::kSgd);
  const absl::Status loaded = checkpoints.Load(*executor, 1);
  EXPECT_EQ(loaded.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.message(), HasSubstr(path));
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
