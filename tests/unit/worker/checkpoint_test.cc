// Checkpoints of an executor's model stages on disk: what is saved comes back
// bit-exactly and training continues as if it had never stopped; incomplete
// or foreign checkpoints are refused; completeness comes from the files
// alone; only what the last two complete steps supersede is pruned, also by
// two ranks at once; a replaced attempt can neither write nor prune; a
// claim tells ranks that share the directory from ranks that do not; no
// link leads a save or prune out of the root; each model stage has one
// writer. Loading under another partition:
// tests/integration/worker/standalone_process_test.cc; resuming jobs:
// tests/integration/daemon_test.cc and checkpoint_chaos_test.cc.
#include "worker/runtime/checkpoint.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/directory.h"
#include "schedule/generator.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"
#include "tests/unit/worker/test_models.h"
#include "worker/runtime/checkpoint_writer.h"
#include "worker/runtime/program_executor.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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
    TaskSpec spec;
    spec.model = config;
    spec.partition = Partition::Even(config.num_layers, 1).value();
    spec.micro_batch_size = 2;
    spec.optimizer.kind = kind;
    spec.optimizer.lr = 1e-2;
    spec.optimizer.momentum = 0.9;
    absl::StatusOr<std::unique_ptr<ProgramExecutor>> executor =
        ProgramExecutor::Create(schedule::RankScheduleOf(schedule_, 0), spec,
                                *data_, nullptr);
    EXPECT_TRUE(executor.ok()) << executor.status();
    return *std::move(executor);
  }

  std::unique_ptr<ProgramExecutor> Executor(OptimizerKind kind) {
    return Executor(kind, config_);
  }

  // The job's directory "ck" under the test's root, for `attempt`.
  CheckpointDir Checkpoints(int64_t attempt = 0) const {
    absl::StatusOr<CheckpointDir> checkpoints =
        CheckpointDir::Open(Root(), "ck", attempt, /*create=*/true);
    EXPECT_TRUE(checkpoints.ok()) << checkpoints.status();
    return *std::move(checkpoints);
  }
  Directory Root() const { return Directory::OpenRoot(dir_.path()).value(); }

  std::string StepPath(int64_t step) const {
    return absl::StrCat(dir_.path(), "/ck/step-", step);
  }
  std::string StagePath(int64_t step, LayerRange blocks) const {
    return absl::StrCat(StepPath(step), "/blocks-", blocks.begin, "-",
                        blocks.end, ".pt");
  }
  // Which of steps [1, last] have a directory.
  std::vector<bool> StepsPresent(int64_t last) const {
    std::vector<bool> present;
    for (int64_t step = 1; step <= last; ++step) {
      present.push_back(std::filesystem::exists(StepPath(step)));
    }
    return present;
  }

  const ModelConfig config_;
  const int64_t layers_ = config_.num_layers;
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
    const CheckpointDir checkpoints =
        *CheckpointDir::Open(Root(), kind == OptimizerKind::kAdamW ? "a" : "s",
                             0, /*create=*/true);
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
  const CheckpointDir checkpoints = Checkpoints();
  auto executor = Executor(OptimizerKind::kAdamW);
  ASSERT_TRUE(executor->RunStep(0).ok());
  ASSERT_TRUE(checkpoints.Save(*executor, 1, {0}).ok());
  EXPECT_TRUE(checkpoints.CheckComplete(1, layers_).ok());
  const std::string whole = StagePath(1, {0, layers_});

  // Step 2: only the first block of a two-stage partition was written.
  std::filesystem::create_directories(StepPath(2));
  std::filesystem::copy_file(whole, StagePath(2, {0, 1}));
  const absl::Status partial = checkpoints.CheckComplete(2, layers_);
  EXPECT_EQ(partial.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(partial.message(), HasSubstr("no file holds block 1"));
  EXPECT_THAT(partial.message(), HasSubstr("'ck/step-2'"));
  EXPECT_THAT(partial.message(), Not(HasSubstr(dir_.path())));
  EXPECT_EQ(checkpoints.Load(*executor, 2).code(),
            absl::StatusCode::kFailedPrecondition);
  // Step 1 plus a file of another partition: blocks held twice.
  std::filesystem::copy_file(whole, StagePath(1, {1, 2}));
  EXPECT_THAT(checkpoints.CheckComplete(1, layers_).message(),
              HasSubstr("two files hold block 1"));
  std::filesystem::remove(StagePath(1, {1, 2}));
  // A stage file still being written (killed mid-write) does not count, nor
  // does a link where a file belongs.
  std::filesystem::create_directories(StepPath(3));
  std::filesystem::copy_file(whole, StagePath(3, {0, layers_}) + ".tmp-1234");
  EXPECT_FALSE(checkpoints.CheckComplete(3, layers_).ok());
  std::filesystem::create_directories(StepPath(5));
  std::filesystem::create_symlink(whole, StagePath(5, {0, layers_}));
  EXPECT_FALSE(checkpoints.CheckComplete(5, layers_).ok());
  EXPECT_FALSE(checkpoints.CheckComplete(4, layers_).ok());
  EXPECT_EQ(checkpoints.LatestComplete(layers_), 1);
  EXPECT_EQ(CheckpointDir::Open(Root(), "none", 0, true)->LatestComplete(layers_),
            std::nullopt);
}

// The data loss of a restart: the coordinator believed step 2 was the
// latest checkpoint while the tasks had written steps 6 and 8 and pruned
// step 2; the new attempt deleted what lay past step 2 and had nothing left.
// Completeness now comes from the files: the latest complete step is found
// whatever anyone remembers, and nothing is pruned until two newer steps are
// complete.
TEST_F(CheckpointTest, TheLatestCompleteStepIsFoundOnDiskAndKeptUntilTwoNewerAre) {
  const CheckpointDir checkpoints = Checkpoints();
  auto executor = Executor(OptimizerKind::kSgd);
  for (int64_t step : {6, 8}) {
    ASSERT_TRUE(checkpoints.Save(*executor, step, {0}).ok());
    ASSERT_TRUE(checkpoints.Prune(layers_).ok());
  }
  // Step 10 is being written (one of two stages so far).
  std::filesystem::create_directories(StepPath(10));
  std::filesystem::copy_file(StagePath(8, {0, layers_}),
                             StagePath(10, {0, 1}));
  EXPECT_EQ(checkpoints.LatestComplete(layers_), 8);
  ASSERT_TRUE(checkpoints.Prune(layers_).ok());
  EXPECT_EQ(checkpoints.Steps(), (std::vector<int64_t>{6, 8, 10}));
  EXPECT_TRUE(checkpoints.Load(*executor, 8).ok());
}

TEST_F(CheckpointTest, PruningKeepsTheLastTwoCompleteStepsAndWhatIsNewer) {
  const CheckpointDir checkpoints = Checkpoints();
  auto executor = Executor(OptimizerKind::kSgd);
  for (int64_t step : {1, 3, 4, 5}) {
    ASSERT_TRUE(checkpoints.Save(*executor, step, {0}).ok());
  }
  // Step 2: a stage of an attempt that failed before completing it; step 6:
  // the next one, still being written.
  for (int64_t step : {2, 6}) {
    std::filesystem::create_directories(StepPath(step));
    std::filesystem::copy_file(StagePath(1, {0, layers_}),
                               StagePath(step, {0, 1}));
  }
  ASSERT_TRUE(checkpoints.Prune(layers_).ok());
  EXPECT_EQ(StepsPresent(6),
            (std::vector<bool>{false, false, false, true, true, true}));
  EXPECT_TRUE(checkpoints.Load(*executor, 4).ok());
  EXPECT_TRUE(checkpoints.Load(*executor, 5).ok());
}

// A stage whose optimizer state G ranks shard is saved in G part files:
// the step is complete once every part is there, and not while parts of
// two shardings of the same blocks are.
TEST_F(CheckpointTest, AShardedStageIsCompleteWithEveryPartOfOneSharding) {
  const CheckpointDir checkpoints = Checkpoints();
  auto executor = Executor(OptimizerKind::kSgd);
  ASSERT_TRUE(checkpoints.Save(*executor, 1, {0}).ok());
  const std::string whole = StagePath(1, {0, layers_});
  const auto part = [&](int64_t step, int member, int members) {
    return absl::StrCat(StepPath(step), "/blocks-0-", layers_, ".part-", member,
                        "-of-", members, ".pt");
  };
  std::filesystem::create_directories(StepPath(2));
  std::filesystem::copy_file(whole, part(2, 0, 2));
  const absl::Status one_part = checkpoints.CheckComplete(2, layers_);
  EXPECT_EQ(one_part.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(one_part.message(),
              HasSubstr(absl::StrCat("blocks [0, ", layers_,
                                     ") have 1 of their 2 parts")));
  std::filesystem::copy_file(whole, part(2, 1, 2));
  EXPECT_TRUE(checkpoints.CheckComplete(2, layers_).ok());
  std::filesystem::copy_file(whole, part(2, 3, 4));
  EXPECT_THAT(checkpoints.CheckComplete(2, layers_).message(),
              HasSubstr("in parts of two shardings"));
  // Saving the stage whole replaces every part of another sharding.
  ASSERT_TRUE(checkpoints.Save(*executor, 2, {0}).ok());
  EXPECT_TRUE(checkpoints.CheckComplete(2, layers_).ok());
  for (const auto& [member, members] :
       {std::pair{0, 2}, std::pair{1, 2}, std::pair{3, 4}}) {
    EXPECT_FALSE(std::filesystem::exists(part(2, member, members)));
  }
  EXPECT_EQ(checkpoints.LatestComplete(layers_), 2);
}

TEST_F(CheckpointTest, SavingReplacesAnotherPartitionsFilesOfTheSameBlocks) {
  // An attempt that ran two stages left half of step 2; this one holds the
  // whole model: its file would otherwise hold blocks a stale file holds.
  const CheckpointDir checkpoints = Checkpoints();
  auto executor = Executor(OptimizerKind::kSgd);
  ASSERT_TRUE(checkpoints.Save(*executor, 1, {0}).ok());
  std::filesystem::create_directories(StepPath(2));
  std::filesystem::copy_file(StagePath(1, {0, layers_}), StagePath(2, {0, 1}));
  std::filesystem::copy_file(StagePath(1, {0, layers_}),
                             StagePath(2, {1, layers_}));
  ASSERT_TRUE(checkpoints.Save(*executor, 2, {0}).ok());
  EXPECT_TRUE(checkpoints.CheckComplete(2, layers_).ok());
  EXPECT_FALSE(std::filesystem::exists(StagePath(2, {0, 1})));
  EXPECT_FALSE(std::filesystem::exists(StagePath(2, {1, layers_})));
  EXPECT_TRUE(checkpoints.Load(*executor, 2).ok());
}

// A copy of `state`, which stays as it is while the executor trains on.
StageState Copied(const StageState& state) {
  const auto copy = [](const at::Tensor& t) {
    return t.defined() ? t.clone() : t;
  };
  StageState copied;
  for (const auto& [name, parameter] : state.parameters) {
    copied.parameters.emplace_back(name, copy(parameter));
  }
  copied.optimizer.steps = state.optimizer.steps;
  for (const at::Tensor& moment : state.optimizer.first_moments) {
    copied.optimizer.first_moments.push_back(copy(moment));
  }
  for (const at::Tensor& moment : state.optimizer.second_moments) {
    copied.optimizer.second_moments.push_back(copy(moment));
  }
  return copied;
}

// What a rank writes in the background is its stages as the step left
// them, though it trains on while the write goes on: the views share the
// executor's tensors, whose next update waits until they are read.
TEST_F(CheckpointTest, ABackgroundWriteHoldsTheStepsStateWhileTrainingGoesOn) {
  const CheckpointDir checkpoints = Checkpoints();
  auto executor = Executor(OptimizerKind::kAdamW);
  ASSERT_TRUE(executor->RunStep(0).ok());
  const StageState after_step_1 = Copied(*executor->ExportStage(0));
  {
    CheckpointWriter writer(&checkpoints, layers_, /*rank=*/0);
    EXPECT_EQ(writer.durable_step(), 0);
    absl::StatusOr<std::shared_future<void>> read =
        writer.Submit(1, *StageViews(*executor, {0}));
    ASSERT_TRUE(read.ok()) << read.status();
    executor->DeferUpdatesUntil(*read);
    ASSERT_TRUE(executor->RunStep(1).ok());  // Changes the live tensors.
    ASSERT_TRUE(writer.Flush().ok());
    EXPECT_EQ(writer.durable_step(), 1);
    EXPECT_TRUE(writer.Check().ok());
  }
  ASSERT_FALSE(SameState(after_step_1, *executor->ExportStage(0)));
  auto resumed = Executor(OptimizerKind::kAdamW);
  ASSERT_TRUE(checkpoints.Load(*resumed, 1).ok());
  EXPECT_TRUE(SameState(after_step_1, *resumed->ExportStage(0)));
}

// A write that fails (here: a later attempt claimed the directory) is
// reported by the next call, and nothing counts as written.
TEST_F(CheckpointTest,
       ABackgroundWritesErrorIsReportedAndNothingCountsAsWritten) {
  const CheckpointDir first = Checkpoints(1);
  ASSERT_TRUE(first.Claim().ok());
  ASSERT_TRUE(Checkpoints(2).Claim().ok());
  auto executor = Executor(OptimizerKind::kSgd);
  CheckpointWriter writer(&first, layers_, /*rank=*/0);
  ASSERT_TRUE(writer.Submit(2, *StageViews(*executor, {0})).ok());
  // Check does not wait: it sees the error once the write has ended.
  absl::Status failed = absl::OkStatus();
  EXPECT_TRUE(chimera::testing::WaitUntil(
      [&] { return !(failed = writer.Check()).ok(); }, absl::Seconds(30)));
  EXPECT_EQ(failed.code(), absl::StatusCode::kAborted) << failed;
  EXPECT_TRUE(writer.Flush().ok()) << "the error was reported once";
  EXPECT_EQ(writer.durable_step(), 0);
  EXPECT_FALSE(std::filesystem::exists(StepPath(2)));
}

// attempt 1's tasks kept training after the coordinator restarted the job
// as attempt 2. Once attempt 2 has claimed the directory, attempt 1 writes
// and deletes nothing.
TEST_F(CheckpointTest, AReplacedAttemptCanNeitherWriteNorPruneAfterTheNewOneClaims) {
  const CheckpointDir first = Checkpoints(1);
  const CheckpointDir second = Checkpoints(2);
  auto executor = Executor(OptimizerKind::kSgd);
  ASSERT_TRUE(first.Claim().ok());
  for (int64_t step : {2, 4, 6}) {
    ASSERT_TRUE(first.Save(*executor, step, {0}).ok());
  }

  ASSERT_TRUE(second.Claim().ok());
  const absl::Status save = first.Save(*executor, 8, {0});
  EXPECT_EQ(save.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(save.message(), HasSubstr("attempt 2 of this job has replaced attempt 1"));
  EXPECT_FALSE(std::filesystem::exists(StepPath(8)));
  EXPECT_EQ(first.Prune(layers_).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(first.RemoveAllSteps().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(first.Claim().status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(StepsPresent(6),
            (std::vector<bool>{false, true, false, true, false, true}));

  // The new attempt itself goes on as usual, as do later claims by itself.
  EXPECT_EQ(second.LatestComplete(layers_), 6);
  ASSERT_TRUE(second.Claim().ok());
  EXPECT_TRUE(second.Save(*executor, 8, {0}).ok());
  EXPECT_TRUE(second.Prune(layers_).ok());
  EXPECT_EQ(second.Steps(), (std::vector<int64_t>{6, 8}));
}

TEST_F(CheckpointTest, AClaimIsSeenOnlyWhereTheDirectoryIsShared) {
  const CheckpointDir rank0 = Checkpoints(3);
  absl::StatusOr<std::string> claim = rank0.Claim();
  ASSERT_TRUE(claim.ok()) << claim.status();
  // A rank on the same file system sees the claim.
  EXPECT_TRUE(Checkpoints(3).CheckClaim(*claim).ok());

  // A rank whose root is another directory with the same path in it (its
  // own, unshared volume, maybe with an earlier claim) does not.
  const chimera::testing::TempDir elsewhere;
  const Directory other_root = Directory::OpenRoot(elsewhere.path()).value();
  const CheckpointDir unshared =
      *CheckpointDir::Open(other_root, "ck", 3, /*create=*/true);
  const absl::Status unclaimed = unshared.CheckClaim(*claim);
  EXPECT_EQ(unclaimed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(unclaimed.message(), HasSubstr("--checkpoint-root"));
  ASSERT_TRUE(unshared.Claim().ok());
  EXPECT_EQ(unshared.CheckClaim(*claim).code(),
            absl::StatusCode::kFailedPrecondition);

  // Once a later attempt claims the shared one, the claim is superseded.
  ASSERT_TRUE(Checkpoints(4).Claim().ok());
  EXPECT_EQ(Checkpoints(3).CheckClaim(*claim).code(),
            absl::StatusCode::kAborted);
}

TEST_F(CheckpointTest, RanksPruningTheSameStepsAtOnceBothSucceed) {
  // Every rank prunes after each checkpoint, so two may delete the same
  // files at the same moment.
  const CheckpointDir checkpoints = Checkpoints();
  auto executor = Executor(OptimizerKind::kSgd);
  ASSERT_TRUE(checkpoints.Save(*executor, 5, {0}).ok());
  ASSERT_TRUE(checkpoints.Save(*executor, 6, {0}).ok());
  for (int round = 0; round < 10; ++round) {
    for (int64_t step = 1; step <= 4; ++step) {
      std::filesystem::create_directories(StepPath(step));
      for (int file = 0; file < 50; ++file) {
        std::ofstream(StagePath(step, {file, file + 1})) << "x";
      }
    }
    absl::Status first;
    absl::Status second;
    std::thread other([&] { second = checkpoints.Prune(layers_); });
    first = checkpoints.Prune(layers_);
    other.join();
    ASSERT_TRUE(first.ok()) << "round " << round << ": " << first;
    ASSERT_TRUE(second.ok()) << "round " << round << ": " << second;
    ASSERT_EQ(checkpoints.Steps(), (std::vector<int64_t>{5, 6}))
        << "round " << round;
  }
}

TEST_F(CheckpointTest, ADirectorySwappedForALinkOutOfTheRootReceivesNothing) {
  const chimera::testing::TempDir outside;
  const CheckpointDir checkpoints = Checkpoints();
  auto executor = Executor(OptimizerKind::kSgd);
  ASSERT_TRUE(checkpoints.Save(*executor, 1, {0}).ok());
  // After the job started, its directory is moved aside and a link to a
  // directory outside the root takes its name.
  std::filesystem::rename(dir_.path() + "/ck", dir_.path() + "/moved");
  std::filesystem::create_directory_symlink(outside.path(), dir_.path() + "/ck");
  std::filesystem::create_directories(outside.path() + "/step-0");
  for (int64_t step : {2, 3, 4}) {
    ASSERT_TRUE(checkpoints.Save(*executor, step, {0}).ok());
    ASSERT_TRUE(checkpoints.Prune(layers_).ok());
  }
  EXPECT_TRUE(std::filesystem::exists(outside.path() + "/step-0"))
      << "a prune reached outside the root";
  EXPECT_FALSE(std::filesystem::exists(outside.path() + "/step-4"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/moved/step-4"));
  // Opened afresh by its name, the link is refused.
  EXPECT_EQ(CheckpointDir::Open(Root(), "ck", 0, true).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(CheckpointTest, CheckpointOfAnotherModelIsRefusedNamingTheFile) {
  const CheckpointDir checkpoints = Checkpoints();
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
              HasSubstr(absl::StrCat("'ck/step-1/blocks-0-", layers_, ".pt'")));
  EXPECT_THAT(loaded.message(), HasSubstr("[40, 16]"));
  for (size_t i = 0; i < copies.size(); ++i) {
    EXPECT_TRUE(at::equal(copies[i], before.parameters[i].second))
        << before.parameters[i].first;
  }
}

TEST_F(CheckpointTest, UnreadableFileIsInvalidArgumentNamingIt) {
  const CheckpointDir checkpoints = Checkpoints();
  std::filesystem::create_directories(StepPath(1));
  std::ofstream(StagePath(1, {0, layers_})) << "not a checkpoint";
  auto executor = Executor(OptimizerKind::kSgd);
  const absl::Status loaded = checkpoints.Load(*executor, 1);
  EXPECT_EQ(loaded.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.message(),
              HasSubstr(absl::StrCat("'ck/step-1/blocks-0-", layers_, ".pt'")));
}

// Chimera D = 4: model stage s sits on ranks s and 3 - s.
schedule::ScheduleOutline ChimeraD4() {
  schedule::ScheduleParams params;
  params.scheme = schedule::Scheme::kChimera;
  params.depth = 4;
  params.micro_batches = 4;
  return schedule::OutlineOf(schedule::GenerateSchedule(params).value());
}

TEST(StagesWrittenByTest, EachModelStageHasOneWriterTheLowestRankHoldingIt) {
  const schedule::ScheduleOutline chimera = ChimeraD4();
  EXPECT_EQ(StagesWrittenBy(chimera, 0, schedule::Sharding::kNone),
            (std::vector<int>{0, 3}));
  EXPECT_EQ(StagesWrittenBy(chimera, 1, schedule::Sharding::kNone),
            (std::vector<int>{1, 2}));
  EXPECT_TRUE(StagesWrittenBy(chimera, 2, schedule::Sharding::kNone).empty());
  EXPECT_TRUE(StagesWrittenBy(chimera, 3, schedule::Sharding::kNone).empty());
}

TEST(StagesWrittenByTest, WithShardingEveryHolderWritesItsPart) {
  const schedule::ScheduleOutline chimera = ChimeraD4();
  EXPECT_EQ(StagesWrittenBy(chimera, 0, schedule::Sharding::kOptimizer),
            (std::vector<int>{0, 3}));
  EXPECT_EQ(StagesWrittenBy(chimera, 2, schedule::Sharding::kOptimizer),
            (std::vector<int>{1, 2}));
  EXPECT_EQ(StagesWrittenBy(chimera, 3, schedule::Sharding::kOptimizer),
            (std::vector<int>{0, 3}));
}

}  // namespace
}  // namespace chimera::worker
